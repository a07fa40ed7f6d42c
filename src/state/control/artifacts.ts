// How the artifact catalogue changes: pure functions from the record a name has (if any), a
// command and the leader's stamp to the new record or a refusal, as power-jobs.ts is for power
// jobs. The catalogue holds names and digests only; the bytes live in each node's content
// store (src/artifacts/), so a put is a few hundred bytes in the log whatever the file's size.
//
//   artifact.put     name -> (sha256, bytes). A new name is version 1. The same digest again is
//                    a no-op (an upload retried on another node after a lost answer must not
//                    bump the version); another digest replaces the record as version n+1.
//                    expectVersion makes a replace conditional, as for templates.
//   artifact.delete  drops the name; the content stays in stores until collected.
import type { ControlCommand, ControlErrorCode } from './commands.js';
import type { Artifact } from '../../model/records.js';
import { artifactBytesMax } from '../../model/limits.js';
import { artifactNameProblem } from '../../model/artifact-name.js';
import { sha256Problem } from './validate.js';

type Command<T extends ControlCommand['type']> = Extract<ControlCommand, { readonly type: T }>;

export type ArtifactTransition =
  | { readonly kind: 'changed'; readonly artifact: Artifact }
  | { readonly kind: 'unchanged'; readonly artifact: Artifact }
  | { readonly kind: 'refused'; readonly code: ControlErrorCode; readonly message: string };

/** The rules of a put that depend on the command alone; the E_INVALID message, or undefined. */
export function artifactPutProblem(command: Command<'artifact.put'>): string | undefined {
  return (
    artifactNameProblem(command.name) ??
    sha256Problem(command.sha256) ??
    (Number.isSafeInteger(command.bytes) && command.bytes >= 0 && command.bytes <= artifactBytesMax
      ? undefined
      : `bytes: must be 0-${artifactBytesMax}, got ${command.bytes}`)
  );
}

/** A put of `command` over `existing` (the record the name has now, if any). */
export function putArtifact(
  existing: Artifact | undefined,
  command: Command<'artifact.put'>,
  nowMs: number,
): ArtifactTransition {
  const problem = artifactPutProblem(command);
  if (problem !== undefined) return { kind: 'refused', code: 'E_INVALID', message: problem };
  const sha256 = command.sha256.toLowerCase();
  const expect = command.expectVersion;
  if (expect !== undefined) {
    if (expect === 0 && existing !== undefined && existing.sha256 !== sha256) {
      return {
        kind: 'refused',
        code: 'E_EXISTS',
        message: `artifact "${command.name}" already exists (version ${existing.version}, sha256 ${existing.sha256})`,
      };
    }
    if (expect > 0 && existing === undefined) {
      return { kind: 'refused', code: 'E_NOT_FOUND', message: `artifact "${command.name}" does not exist` };
    }
    if (expect > 0 && existing !== undefined && existing.version !== expect) {
      return {
        kind: 'refused',
        code: 'E_VERSION',
        message: `artifact "${command.name}" is at version ${existing.version}, not ${expect}; list it again`,
      };
    }
  }
  if (existing !== undefined && existing.sha256 === sha256) {
    if (existing.bytes !== command.bytes) {
      // The same digest with another size: one of the two uploads was measured wrong.
      return {
        kind: 'refused',
        code: 'E_INVALID',
        message: `bytes: artifact "${command.name}" has sha256 ${sha256} with ${existing.bytes} bytes, not ${command.bytes}`,
      };
    }
    return { kind: 'unchanged', artifact: existing };
  }
  return {
    kind: 'changed',
    artifact: Object.freeze({
      name: command.name,
      sha256,
      bytes: command.bytes,
      createdMs: existing?.createdMs ?? nowMs,
      updatedMs: nowMs,
      version: (existing?.version ?? 0) + 1,
    }),
  };
}

/** A stored record's problem (for a snapshot being restored), or undefined. */
export function artifactRecordProblem(artifact: Artifact): string | undefined {
  const problem =
    artifactNameProblem(artifact.name) ??
    (/^[0-9a-f]{64}$/.test(artifact.sha256)
      ? undefined
      : 'sha256: must be 64 lower-case hexadecimal digits') ??
    (artifact.bytes <= artifactBytesMax ? undefined : `bytes: over the limit of ${artifactBytesMax}`) ??
    (artifact.version >= 1 ? undefined : 'version: must be at least 1');
  return problem === undefined ? undefined : `artifact ${JSON.stringify(artifact.name)}: ${problem}`;
}

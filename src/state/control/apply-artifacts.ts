// Artifacts at apply (docs/decisions/0017-replicated-artifacts.md): a catalog entry registered,
// replaced or deleted by name; the entry's own rules are artifacts.ts.
import { artifactsMax } from '../../model/limits.js';
import { putArtifact as put } from './artifacts.js';
import { deleted, failure, unreachable, type Command } from './apply-outcome.js';
import type { ControlResult } from './commands.js';
import type { ControlTables } from './control-tables.js';

export function putArtifact(
  t: ControlTables,
  command: Command<'artifact.put'>,
  nowMs: number,
): ControlResult {
  const existing = t.artifacts.get(command.name);
  const transition = put(existing, command, nowMs);
  switch (transition.kind) {
    case 'refused':
      return failure(transition.code, transition.message);
    case 'unchanged':
      return { type: 'artifact', artifact: transition.artifact };
    case 'changed':
      break;
    default:
      return unreachable(transition);
  }
  if (existing === undefined && t.artifacts.size >= artifactsMax) {
    return failure(
      'E_CONFLICT',
      `the state holds the maximum of ${artifactsMax} artifacts; delete some first (slipway artifact delete NAME)`,
    );
  }
  t.artifacts.set(transition.artifact.name, transition.artifact);
  t.changed.artifacts.push(transition.artifact.name);
  return { type: 'artifact', artifact: transition.artifact };
}

export function deleteArtifact(t: ControlTables, name: string): ControlResult {
  if (!t.artifacts.delete(name)) {
    return failure('E_NOT_FOUND', `artifact "${name}" does not exist`);
  }
  t.changed.artifacts.push(name);
  return deleted;
}

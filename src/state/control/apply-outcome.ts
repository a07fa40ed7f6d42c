// The results the appliers (apply-*.ts) give back, and the refusals they share.
import { errorMessageBytesMax } from '../../model/limits.js';
import { headUtf8 } from '../../platform/utf8-text.js';
import type { ControlCommand, ControlErrorCode, ControlResult } from './commands.js';

/** The command of this type, as the appliers take it. */
export type Command<T extends ControlCommand['type']> = Extract<ControlCommand, { readonly type: T }>;

export type Refusal = Extract<ControlResult, { readonly type: 'error' }>;

/** A refusal; its message is cut to what the result may carry. */
export function failure(code: ControlErrorCode, message: string): Refusal {
  return { type: 'error', code, message: headUtf8(message, errorMessageBytesMax) };
}

export const deleted: ControlResult = Object.freeze({ type: 'deleted' });
export const recorded: ControlResult = Object.freeze({ type: 'recorded' });

/** The expectVersion rule shared by hardware and templates. */
export function versionRefusal(
  kind: 'hardware' | 'template',
  name: string,
  version: number | undefined,
  expectVersion: number | undefined,
): ControlResult | undefined {
  if (expectVersion === undefined) return undefined;
  if (expectVersion === 0) {
    return version === undefined
      ? undefined
      : failure('E_EXISTS', `${kind} "${name}" already exists (version ${version})`);
  }
  if (version === undefined) return failure('E_NOT_FOUND', `${kind} "${name}" does not exist`);
  if (version !== expectVersion) {
    return failure(
      'E_VERSION',
      `${kind} "${name}" is at version ${version}, not ${expectVersion}; read it again`,
    );
  }
  return undefined;
}

export function unreachable(x: never): never {
  throw new Error(`unreachable: ${JSON.stringify(x)}`);
}

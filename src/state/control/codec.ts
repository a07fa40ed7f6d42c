// Control commands and results as JSON text, in the one canonical form the readers produce.
// The store's binary framing (src/state/store-command.ts) carries this text; a decoder accepts only
// the canonical text, so each command has exactly one encoding, as the rest of the codec does.
import type { ControlCommand, ControlResult } from './commands.js';
import { readControlCommand, readControlResult } from './command-schema.js';
import { ShapeError, type Reader } from './shape.js';

/** The canonical JSON of a command. Throws ShapeError naming the field that is wrong. */
export function encodeControlCommand(command: ControlCommand): string {
  return JSON.stringify(readControlCommand(command, ''));
}

/** Parses and checks a command's JSON. Throws ShapeError; never anything else on bad text. */
export function decodeControlCommand(text: string): ControlCommand {
  return decodeCanonical(text, readControlCommand);
}

export function encodeControlResult(result: ControlResult): string {
  return JSON.stringify(readControlResult(result, ''));
}

export function decodeControlResult(text: string): ControlResult {
  return decodeCanonical(text, readControlResult);
}

function decodeCanonical<T>(text: string, read: Reader<T>): T {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new ShapeError('', `not JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  const value = read(parsed, '');
  if (JSON.stringify(value) !== text) {
    throw new ShapeError('', 'not in canonical form (fields in schema order, map keys sorted, no spaces)');
  }
  return value;
}

// SHA-256 for the state machine. Hashing is a pure function of its input, so applying an entry
// that hashes gives every node the same state; the rest of node:crypto (random bytes, keys) stays
// out of src/state, which is why this is the one file that imports it.
// eslint-disable-next-line no-restricted-imports -- createHash only: deterministic, no I/O
import { createHash } from 'node:crypto';

/** SHA-256 of the UTF-8 text, as 64 lower-case hex digits. */
export function sha256HexOf(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

// Measuring and cutting text in UTF-8 bytes, at code point boundaries. The replicated state
// stores what workers report cut to a budget, so the cut is part of the state: it depends only
// on the string. Pure: no node:buffer.

const textEncoder = new TextEncoder();

// String.prototype.isWellFormed (Node 20 has it; es2023's lib does not declare it) answers in
// constant time for strings V8 stores one byte per character, which is nearly all of ours.
const nativeIsWellFormed = (String.prototype as { isWellFormed?: (this: string) => boolean }).isWellFormed;

/**
 * True when the string has no unpaired surrogate, so it survives a UTF-8 round trip unchanged.
 * In a `u` regex a proper pair is one code point, so \p{Cs} matches only lone halves.
 */
export function isWellFormed(s: string): boolean {
  return nativeIsWellFormed !== undefined ? nativeIsWellFormed.call(s) : !/\p{Cs}/u.test(s);
}

/** Strings longer than this are measured by the native encoder rather than by a loop. */
export const utf8LoopLengthMax = 32;
/** Strings longer than this are measured by the loop again, so the scratch stays small. */
const utf8ScratchLengthMax = 1 << 16;
/** Where long strings are encoded only to be measured; its contents are never read. */
let utf8Scratch = new Uint8Array(3 * 256);

/** The length of the string's UTF-8 encoding (a lone surrogate counts as U+FFFD, 3 bytes). */
export function utf8Length(s: string): number {
  if (s.length > utf8LoopLengthMax && s.length <= utf8ScratchLengthMax) {
    if (utf8Scratch.length < 3 * s.length) utf8Scratch = new Uint8Array(3 * s.length);
    return textEncoder.encodeInto(s, utf8Scratch).written;
  }
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

const ellipsis = '…'; // 3 bytes in UTF-8

/** The start of `s` in at most `bytesMax` bytes, ending in "…" when something was cut. */
export function headUtf8(s: string, bytesMax: number): string {
  if (s.length * 3 <= bytesMax || utf8Length(s) <= bytesMax) return s;
  let out = '';
  let bytes = 0;
  for (const ch of s) {
    const n = utf8Length(ch);
    if (bytes + n > bytesMax - 3) break;
    out += ch;
    bytes += n;
  }
  return out + ellipsis;
}

/** The end of `s` in at most `bytesMax` bytes, starting with "…" when something was cut. */
export function tailUtf8(s: string, bytesMax: number): string {
  if (s.length * 3 <= bytesMax || utf8Length(s) <= bytesMax) return s;
  const budget = bytesMax - 3;
  let bytes = 0;
  let start = s.length;
  // Walk back by code points: a low surrogate with its high half before it is one character.
  while (start > 0) {
    let width = 1;
    const c = s.charCodeAt(start - 1);
    if (c >= 0xdc00 && c <= 0xdfff && start >= 2) {
      const h = s.charCodeAt(start - 2);
      if (h >= 0xd800 && h <= 0xdbff) width = 2;
    }
    const n = utf8Length(s.slice(start - width, start));
    if (bytes + n > budget) break;
    bytes += n;
    start -= width;
  }
  return ellipsis + s.slice(start);
}

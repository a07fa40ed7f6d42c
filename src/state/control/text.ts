// Cutting text to a UTF-8 byte budget at code point boundaries. Apply stores what workers
// report, so the cut is part of the replicated state: it depends only on the string.
import { utf8Length } from '../binary.js';

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

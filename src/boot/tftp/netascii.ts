// netascii (RFC 764 as used by RFC 1350): the on-the-wire text form of a file served in
// "netascii" mode. Files on disk use Unix line ends, so LF goes out as CR LF and a bare CR as
// CR NUL. The server translates rather than refuses because tftp-hpa's client and many other
// command-line clients default to netascii mode.

const CR = 0x0d;
const LF = 0x0a;

/** Returns the netascii form of the content; the input is not modified. */
export function toNetascii(content: Uint8Array): Uint8Array {
  let extra = 0;
  for (const byte of content) if (byte === CR || byte === LF) extra += 1;
  if (extra === 0) return content;
  const out = new Uint8Array(content.length + extra);
  let offset = 0;
  for (const byte of content) {
    if (byte === LF) {
      out[offset++] = CR;
      out[offset++] = LF;
    } else if (byte === CR) {
      out[offset++] = CR;
      out[offset++] = 0;
    } else {
      out[offset++] = byte;
    }
  }
  return out;
}

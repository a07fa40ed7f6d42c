// CRC-32C (Castagnoli), the checksum guarding every record the raft log writes to disk and
// every state snapshot.
// Pure: tables are built once from the polynomial, no I/O. Slicing-by-8 (eight 256-entry
// tables) processes eight bytes per step, which matters because every entry of every batch
// is checksummed on the leader's write path and every entry is checked again on load.

/** The reflected Castagnoli polynomial (iSCSI, RFC 3720 §B.4). */
const castagnoliReflected = 0x82f63b78;

const tables = buildTables();

function buildTables(): Uint32Array {
  const t = new Uint32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ castagnoliReflected : c >>> 1;
    t[n] = c >>> 0;
  }
  // Table j advances a byte that sits j positions before the end of an 8-byte block.
  for (let n = 0; n < 256; n++) {
    let c = t[n]!;
    for (let j = 1; j < 8; j++) {
      c = t[c & 0xff]! ^ (c >>> 8);
      t[j * 256 + n] = c >>> 0;
    }
  }
  return t;
}

/**
 * Continues a CRC-32C over bytes[start, end). Pass the previous result as `crc` (0 to begin),
 * so that a record assembled from several pieces can be checksummed without copying.
 */
export function crc32cUpdate(crc: number, bytes: Uint8Array, start = 0, end = bytes.length): number {
  if (start < 0 || end > bytes.length || start > end) {
    throw new RangeError(`crc32c range [${start}, ${end}) is outside a ${bytes.length}-byte array`);
  }
  const t = tables;
  let c = ~crc >>> 0;
  let i = start;
  for (const stop = end - 8; i <= stop; i += 8) {
    const lo = (c ^ (bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24))) >>> 0;
    c =
      t[7 * 256 + (lo & 0xff)]! ^
      t[6 * 256 + ((lo >>> 8) & 0xff)]! ^
      t[5 * 256 + ((lo >>> 16) & 0xff)]! ^
      t[4 * 256 + (lo >>> 24)]! ^
      t[3 * 256 + bytes[i + 4]!]! ^
      t[2 * 256 + bytes[i + 5]!]! ^
      t[256 + bytes[i + 6]!]! ^
      t[bytes[i + 7]!]!;
  }
  for (; i < end; i++) c = t[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

/** The CRC-32C of bytes[start, end) as an unsigned 32-bit integer. */
export function crc32c(bytes: Uint8Array, start = 0, end = bytes.length): number {
  return crc32cUpdate(0, bytes, start, end);
}

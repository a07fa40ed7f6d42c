// Conversions between DHCP wire bytes and the plain values the rest of Slipway uses:
// dotted-quad IPv4 addresses and byte-preserving (Latin-1) text. Pure; no Buffer, so the
// codec stays free of node:* imports.

export const ipv4Zero = '0.0.0.0';
export const ipv4Broadcast = '255.255.255.255';

const octet = '(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])';
const dottedQuad = new RegExp(`^${octet}\\.${octet}\\.${octet}\\.${octet}$`);

/** True for a canonical dotted quad ("10.0.0.1"; no leading zeros, no spaces). */
export function isIpv4(text: string): boolean {
  return dottedQuad.test(text);
}

/** The 4 bytes of a dotted quad, or undefined when `text` is not one. */
export function ipv4ToBytes(text: string): Uint8Array | undefined {
  if (!isIpv4(text)) return undefined;
  return Uint8Array.from(text.split('.').map(Number));
}

/** A dotted quad as an unsigned 32-bit number, or undefined when `text` is not one. */
export function ipv4ToNumber(text: string): number | undefined {
  const bytes = ipv4ToBytes(text);
  if (bytes === undefined) return undefined;
  return ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
}

export function ipv4FromNumber(n: number): string {
  return [24, 16, 8, 0].map((shift) => (n >>> shift) & 0xff).join('.');
}

/** The netmask of a prefix length (0-32) as a number. */
export function prefixMaskBits(prefix: number): number {
  return prefix <= 0 ? 0 : (0xffffffff << (32 - Math.min(prefix, 32))) >>> 0;
}

/** The dotted quad stored at `offset`; the caller guarantees 4 bytes are there. */
export function ipv4FromBytes(bytes: Uint8Array, offset: number): string {
  return `${bytes[offset]}.${bytes[offset + 1]}.${bytes[offset + 2]}.${bytes[offset + 3]}`;
}

/** Directed broadcast address of the subnet `ip`/`mask`, or undefined if either is not an address. */
export function subnetBroadcast(ip: string, mask: string): string | undefined {
  const a = ipv4ToBytes(ip);
  const m = ipv4ToBytes(mask);
  if (a === undefined || m === undefined) return undefined;
  return ipv4FromBytes(
    a.map((byte, i) => byte | (~m[i]! & 0xff)),
    0,
  );
}

/** True when `mask` is a contiguous run of ones followed by zeros (255.255.255.0, not 255.0.255.0). */
export function isContiguousMask(mask: string): boolean {
  const m = ipv4ToBytes(mask);
  if (m === undefined) return false;
  const value = ((m[0]! << 24) | (m[1]! << 16) | (m[2]! << 8) | m[3]!) >>> 0;
  const inverted = ~value >>> 0;
  return (inverted & (inverted + 1)) === 0;
}

/**
 * Bytes as text, one character per byte. DHCP text options are NVT ASCII in theory and
 * anything in practice; Latin-1 keeps every byte so a value can be echoed unchanged.
 */
export function latin1FromBytes(bytes: Uint8Array): string {
  let text = '';
  for (const byte of bytes) text += String.fromCharCode(byte);
  return text;
}

/** Text as bytes, one byte per character; undefined if a character is above U+00FF. */
export function latin1ToBytes(text: string): Uint8Array | undefined {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit > 0xff) return undefined;
    bytes[i] = unit;
  }
  return bytes;
}

/** Lowercase colon-separated hex ("52:54:00:12:34:56"). */
export function hexWithColons(bytes: Uint8Array): string {
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join(':');
}

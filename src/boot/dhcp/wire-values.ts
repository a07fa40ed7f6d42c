// Conversions between DHCP wire bytes and the plain values the rest of Slipway uses:
// dotted-quad IPv4 addresses (parsed by src/platform/addresses.ts) and byte-preserving (Latin-1)
// text. Pure; no Buffer, so the codec stays free of node:* imports.

import { parseIpv4 } from '../../platform/addresses.js';

export const ipv4Zero = '0.0.0.0';
export const ipv4Broadcast = '255.255.255.255';

/** The 4 bytes of a dotted quad, or undefined when `text` is not one. */
export function ipv4ToBytes(text: string): Uint8Array | undefined {
  const value = parseIpv4(text);
  if (value === undefined) return undefined;
  const bytes = new Uint8Array(4);
  writeIpv4(bytes, 0, value);
  return bytes;
}

/** Writes an address number as 4 bytes at `offset`. */
export function writeIpv4(bytes: Uint8Array, offset: number, value: number): void {
  bytes[offset] = value >>> 24;
  bytes[offset + 1] = (value >>> 16) & 0xff;
  bytes[offset + 2] = (value >>> 8) & 0xff;
  bytes[offset + 3] = value & 0xff;
}

/** A dotted quad as an unsigned 32-bit number, or undefined when `text` is not one. */
export function ipv4ToNumber(text: string): number | undefined {
  return parseIpv4(text);
}

export function ipv4FromNumber(n: number): string {
  return `${n >>> 24}.${(n >>> 16) & 0xff}.${(n >>> 8) & 0xff}.${n & 0xff}`;
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
  const a = parseIpv4(ip);
  const m = parseIpv4(mask);
  if (a === undefined || m === undefined) return undefined;
  return ipv4FromNumber((a | ~m) >>> 0);
}

/** True when `mask` is a contiguous run of ones followed by zeros (255.255.255.0, not 255.0.255.0). */
export function isContiguousMask(mask: string): boolean {
  const value = parseIpv4(mask);
  if (value === undefined) return false;
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

const hexPairs = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));

/** Lowercase colon-separated hex ("52:54:00:12:34:56"). */
export function hexWithColons(bytes: Uint8Array): string {
  let text = '';
  for (let i = 0; i < bytes.length; i++) text += (i === 0 ? '' : ':') + hexPairs[bytes[i]!]!;
  return text;
}

// A small pure reader and writer for the state machine's binary formats (commands, results,
// snapshots). No node:buffer: the state core stays free of Node APIs so it runs anywhere and
// stays deterministic. Integers are unsigned LEB128 varints limited to 2^53 - 1, because every
// counter here (indexes, revisions, milliseconds, sequence numbers) is a JS safe integer.

/** Input bytes that do not follow the format. The message names the field and the byte offset. */
export class DecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DecodeError';
  }
}

import { isWellFormed, utf8Length, utf8LoopLengthMax } from '../platform/utf8-text.js';

const textEncoder = new TextEncoder();
// fatal: invalid UTF-8 is an error, not U+FFFD; ignoreBOM: a leading U+FEFF is data, not a marker.
const textDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A varint never needs more than 8 bytes for a value below 2^53 (8 * 7 = 56 bits). */
const varintBytesMax = 8;

/** The encoded size of a length-prefixed string (BinaryWriter.string). */
export function stringBytes(s: string): number {
  const length = utf8Length(s);
  return uvarintBytes(length) + length;
}

/** The encoded size of `value` as a uvarint (1 to 8 bytes for a safe integer). */
export function uvarintBytes(value: number): number {
  let bytes = 1;
  for (let v = value; v >= 0x80; v = Math.floor(v / 0x80)) bytes++;
  return bytes;
}

export class BinaryWriter {
  #bytes: Uint8Array;
  #length = 0;

  /** `initialCapacityBytes`: give the exact size when it is known, so finish() need not copy. */
  constructor(initialCapacityBytes = 64) {
    this.#bytes = new Uint8Array(Math.max(1, initialCapacityBytes));
  }

  get length(): number {
    return this.#length;
  }

  u8(value: number): this {
    if (!Number.isInteger(value) || value < 0 || value > 0xff)
      throw new RangeError(`u8 out of range: ${value}`);
    this.#reserve(1);
    this.#bytes[this.#length++] = value;
    return this;
  }

  /** A fixed-width little-endian 32-bit unsigned integer (used for checksums). */
  u32(value: number): this {
    if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
      throw new RangeError(`u32 out of range: ${value}`);
    }
    this.#reserve(4);
    new DataView(this.#bytes.buffer, this.#bytes.byteOffset).setUint32(this.#length, value, true);
    this.#length += 4;
    return this;
  }

  uvarint(value: number): this {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`varint must be a non-negative safe integer, got ${value}`);
    }
    this.#reserve(varintBytesMax);
    let v = value;
    // Division rather than shifts: JS bitwise operators truncate to 32 bits.
    while (v >= 0x80) {
      this.#bytes[this.#length++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.#bytes[this.#length++] = v;
    return this;
  }

  /** Length-prefixed bytes. */
  bytes(value: Uint8Array): this {
    this.uvarint(value.length);
    return this.raw(value);
  }

  /** Length-prefixed UTF-8. The caller checks well-formedness; a lone surrogate would not round-trip. */
  string(value: string): this {
    if (!isWellFormed(value)) throw new RangeError('string contains an unpaired surrogate');
    const length = utf8Length(value);
    this.uvarint(length);
    this.#reserve(length);
    const bytes = this.#bytes;
    const at = this.#length;
    if (length === value.length && length <= utf8LoopLengthMax) {
      // Short ASCII (names, keys): copying the units beats a call into the encoder.
      for (let i = 0; i < length; i++) bytes[at + i] = value.charCodeAt(i);
    } else {
      textEncoder.encodeInto(value, bytes.subarray(at, at + length));
    }
    this.#length = at + length;
    return this;
  }

  /** Bytes without a length prefix. */
  raw(value: Uint8Array): this {
    this.#reserve(value.length);
    this.#bytes.set(value, this.#length);
    this.#length += value.length;
    return this;
  }

  /** A view of the bytes written so far (no copy); valid until the next write. */
  written(): Uint8Array {
    return this.#bytes.subarray(0, this.#length);
  }

  /**
   * The bytes written so far, as an array of exactly that length. A writer created with the
   * exact size hands over its own array without a copy; either way, do not write after this.
   */
  finish(): Uint8Array {
    if (this.#length === this.#bytes.length) return this.#bytes;
    return this.#bytes.slice(0, this.#length);
  }

  #reserve(extra: number): void {
    const needed = this.#length + extra;
    if (needed <= this.#bytes.length) return;
    let capacity = this.#bytes.length * 2;
    while (capacity < needed) capacity *= 2;
    const grown = new Uint8Array(capacity);
    grown.set(this.#bytes.subarray(0, this.#length));
    this.#bytes = grown;
  }
}

/** Reads the formats BinaryWriter writes. Every method throws DecodeError naming `what` on bad input. */
export class BinaryReader {
  readonly #bytes: Uint8Array;
  #offset = 0;

  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
  }

  get offset(): number {
    return this.#offset;
  }

  get remaining(): number {
    return this.#bytes.length - this.#offset;
  }

  u8(what: string): number {
    this.#need(1, what);
    return this.#bytes[this.#offset++]!;
  }

  u32(what: string): number {
    this.#need(4, what);
    const value = new DataView(this.#bytes.buffer, this.#bytes.byteOffset).getUint32(this.#offset, true);
    this.#offset += 4;
    return value;
  }

  uvarint(what: string): number {
    const start = this.#offset;
    let value = 0;
    let scale = 1;
    for (let i = 0; i < varintBytesMax; i++) {
      const b = this.u8(what);
      value += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) {
        // Canonical form only: exactly one encoding per value keeps snapshots byte-comparable.
        if (b === 0 && i > 0) throw this.#error(`${what}: overlong varint`, start);
        if (!Number.isSafeInteger(value)) throw this.#error(`${what}: varint exceeds 2^53 - 1`, start);
        return value;
      }
      scale *= 0x80;
    }
    throw this.#error(`${what}: varint longer than ${varintBytesMax} bytes`, start);
  }

  /** `count` bytes without a length prefix, as a view into the input (no copy). */
  raw(count: number, what: string): Uint8Array {
    this.#need(count, what);
    const value = this.#bytes.subarray(this.#offset, this.#offset + count);
    this.#offset += count;
    return value;
  }

  /** Length-prefixed bytes, copied so the result never aliases the input buffer. */
  bytes(what: string, lengthMax: number): Uint8Array {
    const start = this.#offset;
    const length = this.uvarint(`${what} length`);
    if (length > lengthMax)
      throw this.#error(`${what}: ${length} bytes exceeds the limit of ${lengthMax}`, start);
    this.#need(length, what);
    const value = this.#bytes.slice(this.#offset, this.#offset + length);
    this.#offset += length;
    return value;
  }

  /**
   * Length-prefixed bytes as a view into the input (no copy): for a caller that only decodes
   * them, where bytes() would copy megabytes for nothing.
   */
  bytesView(what: string, lengthMax: number): Uint8Array {
    const start = this.#offset;
    const length = this.uvarint(`${what} length`);
    if (length > lengthMax)
      throw this.#error(`${what}: ${length} bytes exceeds the limit of ${lengthMax}`, start);
    return this.raw(length, what);
  }

  string(what: string, lengthMaxBytes: number): string {
    const start = this.#offset;
    const length = this.uvarint(`${what} length`);
    if (length > lengthMaxBytes) {
      throw this.#error(`${what}: ${length} bytes exceeds the limit of ${lengthMaxBytes}`, start);
    }
    this.#need(length, what);
    const slice = this.#bytes.subarray(this.#offset, this.#offset + length);
    let value: string;
    try {
      value = textDecoder.decode(slice);
    } catch {
      throw this.#error(`${what}: invalid UTF-8`, start);
    }
    this.#offset += length;
    return value;
  }

  /** Throws unless every byte was consumed: trailing garbage means a different or corrupted format. */
  end(what: string): void {
    if (this.remaining !== 0)
      throw this.#error(`${what}: ${this.remaining} unexpected trailing bytes`, this.#offset);
  }

  #need(count: number, what: string): void {
    if (this.remaining < count) {
      throw this.#error(`${what}: truncated (needs ${count} bytes, ${this.remaining} left)`, this.#offset);
    }
  }

  #error(message: string, at: number): DecodeError {
    return new DecodeError(`${message} at byte ${at}`);
  }
}

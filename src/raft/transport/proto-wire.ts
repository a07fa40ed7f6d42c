// The protobuf wire primitives the raft codec writes and reads by hand: varints of safe
// integers, length-delimited bytes and strings, and skipping of unknown fields. The generated
// code does the same through a general-purpose writer (fork/join per submessage) and reader
// (uint64 through BigInt and back), which cost more than the consensus work itself per message.
import { Buffer } from 'node:buffer';

/** Bytes that are not well-formed protobuf; the message says where and why. */
export class ProtoWireError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProtoWireError';
  }
}

export const wireVarint = 0;
export const wireFixed64 = 1;
export const wireLengthDelimited = 2;
export const wireFixed32 = 5;

const twoPow32 = 0x1_0000_0000;
/** The high 32 bits of 2^53 - 1: a uint64 with larger high bits is not a safe integer. */
const safeHighMax = 0x1f_ffff;
const latin1Max = 0x7f;
// As the generated reader decodes: invalid UTF-8 becomes U+FFFD and a leading BOM is dropped.
const utf8Decoder = new TextDecoder();

/** The encoded size of a non-negative safe integer as a varint. */
export function varintBytes(value: number): number {
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x20_0000) return 3;
  if (value < 0x1000_0000) return 4;
  let bytes = 5;
  for (let v = Math.floor(value / 0x8_0000_0000); v > 0; v = Math.floor(v / 0x80)) bytes++;
  return bytes;
}

/** The size of a length-delimited field's payload with its length prefix (tag not included). */
export function delimitedBytes(payloadBytes: number): number {
  return varintBytes(payloadBytes) + payloadBytes;
}

/** The UTF-8 size of a string, as TextEncoder would encode it (lone surrogates as U+FFFD). */
export function stringBytes(value: string): number {
  // Node ids and addresses are ASCII: counting them by hand beats a native call.
  if (value.length <= 64) {
    let ascii = true;
    for (let i = 0; i < value.length; i++) {
      if (value.charCodeAt(i) > latin1Max) {
        ascii = false;
        break;
      }
    }
    if (ascii) return value.length;
  }
  return Buffer.byteLength(value, 'utf8');
}

/** Writes into a buffer sized in advance from the *Bytes functions above; never grows. */
export class ProtoWriter {
  readonly buffer: Buffer;
  #at = 0;

  constructor(bytes: number) {
    this.buffer = Buffer.allocUnsafe(bytes);
  }

  get written(): number {
    return this.#at;
  }

  /** A varint of a non-negative safe integer (tags included). */
  varint(value: number): this {
    const b = this.buffer;
    let at = this.#at;
    let v = value;
    // Division above 2^31: JS bitwise operators work on 32 bits.
    while (v > 0x7fff_ffff) {
      b[at++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    while (v > 0x7f) {
      b[at++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    b[at++] = v;
    this.#at = at;
    return this;
  }

  /** Length-prefixed bytes. */
  bytes(value: Uint8Array): this {
    this.varint(value.byteLength);
    this.buffer.set(value, this.#at);
    this.#at += value.byteLength;
    return this;
  }

  /** Length-prefixed UTF-8; `byteLength` is stringBytes(value). */
  string(value: string, byteLength: number): this {
    this.varint(byteLength);
    this.#at += this.buffer.write(value, this.#at, byteLength, 'utf8');
    return this;
  }
}

/** Reads protobuf fields from a byte range; every malformed input throws ProtoWireError. */
export class ProtoReader {
  readonly #bytes: Buffer;
  #at: number;
  /** The high 32 bits of the varint #varint() read last. */
  #high = 0;

  /** Reads bytes[start, end). */
  constructor(bytes: Uint8Array, start = 0, end = bytes.byteLength) {
    this.#bytes = Buffer.from(bytes.buffer, bytes.byteOffset, end);
    this.#at = start;
  }

  get offset(): number {
    return this.#at;
  }

  get end(): number {
    return this.#bytes.byteLength;
  }

  /** A varint of at most 10 bytes, as protobuf allows: returns the low 32 bits (unsigned) and
   *  leaves the high 32 bits in #high. */
  #varint(): number {
    const b = this.#bytes;
    const start = this.#at;
    let at = start;
    let lo = 0;
    let hi = 0;
    for (let shift = 0; ; shift += 7) {
      if (at >= b.length) throw new ProtoWireError(`truncated varint at byte ${start}`);
      if (at - start === 10) throw new ProtoWireError(`varint longer than 10 bytes at byte ${start}`);
      const byte = b[at++]!;
      const bits = byte & 0x7f;
      if (shift < 28) lo |= bits << shift;
      else if (shift === 28) {
        lo |= bits << 28;
        hi = bits >>> 4;
      } else hi |= bits << (shift - 32);
      if (byte < 0x80) break;
    }
    this.#at = at;
    this.#high = hi >>> 0;
    return lo >>> 0;
  }

  /** A uint64 field as a safe integer; larger values are refused, as the generated code does. */
  uint64(): number {
    const start = this.#at;
    const lo = this.#varint();
    const hi = this.#high;
    if (hi === 0) return lo;
    if (hi > safeHighMax) throw new ProtoWireError(`uint64 at byte ${start} exceeds 2^53 - 1`);
    return hi * twoPow32 + lo;
  }

  /** An int32 field (enums): the low 32 bits of the varint, signed. */
  int32(): number {
    return this.#varint() | 0;
  }

  bool(): boolean {
    const lo = this.#varint();
    return lo !== 0 || this.#high !== 0;
  }

  /** A tag or a length: the low 32 bits, unsigned. */
  uint32(): number {
    return this.#varint();
  }

  /** Reads a length prefix and returns where the payload ends; the payload starts at `offset`. */
  delimited(): number {
    const at = this.#at;
    const length = this.#varint();
    const end = this.#at + length;
    if (end > this.#bytes.byteLength) {
      throw new ProtoWireError(`length ${length} at byte ${at} runs past the end of the message`);
    }
    return end;
  }

  string(): string {
    const end = this.delimited();
    const start = this.#at;
    this.#at = end;
    const b = this.#bytes;
    for (let i = start; i < end; i++) {
      if (b[i]! > latin1Max) return utf8Decoder.decode(b.subarray(start, end));
    }
    return b.toString('latin1', start, end);
  }

  /** Moves past a bytes field; returns where its payload starts (it ends at `offset`). */
  skipBytes(): number {
    const end = this.delimited();
    const start = this.#at;
    this.#at = end;
    return start;
  }

  /** Copies input bytes [start, end) to target[targetStart...]. */
  copyTo(target: Uint8Array, targetStart: number, start: number, end: number): void {
    this.#bytes.copy(target, targetStart, start, end);
  }

  /** Skips a field this reader does not know (a newer peer's addition). Groups are refused. */
  skip(wireType: number): void {
    switch (wireType) {
      case wireVarint:
        this.#varint();
        return;
      case wireFixed64:
        this.#advance(8);
        return;
      case wireLengthDelimited:
        this.#at = this.delimited();
        return;
      case wireFixed32:
        this.#advance(4);
        return;
      default:
        throw new ProtoWireError(`unsupported wire type ${wireType} before byte ${this.#at}`);
    }
  }

  #advance(bytes: number): void {
    if (this.#at + bytes > this.#bytes.byteLength) {
      throw new ProtoWireError(`truncated fixed-width field at byte ${this.#at}`);
    }
    this.#at += bytes;
  }
}

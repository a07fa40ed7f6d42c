// The TFTP wire format: RFC 1350 packets plus the RFC 2347 option extension (OACK and
// options appended to requests). Pure: bytes in, typed packets out, and back.
//
// Strings on the wire are bytes, not text. They are mapped one byte to one UTF-16 code unit
// (latin1) so that decoding and encoding round-trip exactly; the driver decides how to
// interpret a filename's bytes.
import { BLOCK_SIZE_LIMIT } from './limits.js';

export const Opcode = { rrq: 1, wrq: 2, data: 3, ack: 4, error: 5, oack: 6 } as const;

/** RFC 1350 error codes, plus 8 from RFC 2347 (the client declines the negotiated options). */
export const TftpErrorCode = {
  notDefined: 0,
  fileNotFound: 1,
  accessViolation: 2,
  diskFull: 3,
  illegalOperation: 4,
  unknownTransferId: 5,
  fileExists: 6,
  noSuchUser: 7,
  optionsDeclined: 8,
} as const;
export type TftpErrorCode = (typeof TftpErrorCode)[keyof typeof TftpErrorCode];

export type TransferMode = 'netascii' | 'octet' | 'mail';

/** Option names in lower case (they are case-insensitive on the wire), in the order sent. */
export type TftpOptions = ReadonlyMap<string, string>;

/** Options whose values RFC 2348/2349/7440 define as decimal numbers; checked at decode. */
export const NUMERIC_OPTIONS: ReadonlySet<string> = new Set(['blksize', 'tsize', 'timeout', 'windowsize']);

export interface RequestPacket {
  readonly type: 'rrq' | 'wrq';
  readonly filename: string;
  readonly mode: TransferMode;
  readonly options: TftpOptions;
}

export interface DataPacket {
  readonly type: 'data';
  /** The block number as on the wire: 0..65535, wrapping after 65535. */
  readonly block: number;
  readonly data: Uint8Array;
}

export interface AckPacket {
  readonly type: 'ack';
  readonly block: number;
}

export interface ErrorPacket {
  readonly type: 'error';
  /** Usually a TftpErrorCode; any 16-bit value is accepted from peers. */
  readonly code: number;
  readonly message: string;
}

export interface OackPacket {
  readonly type: 'oack';
  readonly options: TftpOptions;
}

export type TftpPacket = RequestPacket | DataPacket | AckPacket | ErrorPacket | OackPacket;

export type DecodeFailureReason =
  | 'truncated'
  | 'unknownOpcode'
  | 'unterminatedString'
  | 'unknownMode'
  | 'oddOptionList'
  | 'emptyOptionName'
  | 'duplicateOption'
  | 'optionValueNotDecimal'
  | 'dataTooLong'
  | 'trailingBytes';

export interface DecodeFailure {
  readonly reason: DecodeFailureReason;
  /** Human-readable; suitable for the message of an ERROR 4 reply. */
  readonly message: string;
}

export type DecodeResult =
  { readonly ok: true; readonly packet: TftpPacket } | { readonly ok: false; readonly error: DecodeFailure };

const DECIMAL = /^[0-9]{1,15}$/; // 15 digits stay within Number.MAX_SAFE_INTEGER

function fail(reason: DecodeFailureReason, message: string): DecodeResult {
  return { ok: false, error: { reason, message } };
}

/** The opcode of a datagram, or null when it is too short to have one. Lets the driver never answer an ERROR. */
export function peekOpcode(bytes: Uint8Array): number | null {
  return bytes.length >= 2 ? (bytes[0]! << 8) | bytes[1]! : null;
}

/** Decodes one datagram. Never throws: malformed input yields a typed failure. */
export function decodePacket(bytes: Uint8Array): DecodeResult {
  const opcode = peekOpcode(bytes);
  if (opcode === null) return fail('truncated', `packet of ${bytes.length} bytes has no opcode`);
  switch (opcode) {
    case Opcode.rrq:
    case Opcode.wrq:
      return decodeRequest(bytes, opcode === Opcode.rrq ? 'rrq' : 'wrq');
    case Opcode.data:
      if (bytes.length < 4) return fail('truncated', 'DATA packet shorter than 4 bytes');
      if (bytes.length - 4 > BLOCK_SIZE_LIMIT) {
        return fail('dataTooLong', `DATA carries ${bytes.length - 4} bytes, more than ${BLOCK_SIZE_LIMIT}`);
      }
      return { ok: true, packet: { type: 'data', block: readUint16(bytes, 2), data: bytes.slice(4) } };
    case Opcode.ack:
      if (bytes.length < 4) return fail('truncated', 'ACK packet shorter than 4 bytes');
      if (bytes.length > 4)
        return fail('trailingBytes', `ACK packet has ${bytes.length - 4} bytes after the block`);
      return { ok: true, packet: { type: 'ack', block: readUint16(bytes, 2) } };
    case Opcode.error:
      return decodeError(bytes);
    case Opcode.oack: {
      const options = decodeOptions(bytes, 2);
      if (!options.ok) return options;
      return { ok: true, packet: { type: 'oack', options: options.options } };
    }
    default:
      return fail('unknownOpcode', `unknown opcode ${opcode}`);
  }
}

function decodeRequest(bytes: Uint8Array, type: 'rrq' | 'wrq'): DecodeResult {
  const filename = readString(bytes, 2);
  if (filename === null) return fail('unterminatedString', 'request filename is not NUL-terminated');
  const mode = readString(bytes, filename.next);
  if (mode === null) return fail('unterminatedString', 'request mode is not NUL-terminated');
  const modeName = mode.value.toLowerCase();
  if (modeName !== 'netascii' && modeName !== 'octet' && modeName !== 'mail') {
    return fail('unknownMode', `unknown transfer mode "${mode.value}"`);
  }
  const options = decodeOptions(bytes, mode.next);
  if (!options.ok) return options;
  return { ok: true, packet: { type, filename: filename.value, mode: modeName, options: options.options } };
}

function decodeError(bytes: Uint8Array): DecodeResult {
  if (bytes.length < 4) return fail('truncated', 'ERROR packet shorter than 4 bytes');
  const message = readString(bytes, 4);
  if (message === null) return fail('unterminatedString', 'ERROR message is not NUL-terminated');
  if (message.next !== bytes.length) {
    return fail('trailingBytes', `ERROR packet has ${bytes.length - message.next} bytes after the message`);
  }
  return { ok: true, packet: { type: 'error', code: readUint16(bytes, 2), message: message.value } };
}

type OptionsResult =
  { readonly ok: true; readonly options: TftpOptions } | Extract<DecodeResult, { ok: false }>;

function decodeOptions(bytes: Uint8Array, start: number): OptionsResult {
  const options = new Map<string, string>();
  let offset = start;
  while (offset < bytes.length) {
    // Some firmware pads requests with NULs; tolerate padding, but not an empty name followed by more.
    if (bytes[offset] === 0) {
      if (bytes.subarray(offset).every((b) => b === 0)) break;
      return { ok: false, error: { reason: 'emptyOptionName', message: 'empty option name' } };
    }
    const name = readString(bytes, offset);
    if (name === null)
      return {
        ok: false,
        error: { reason: 'unterminatedString', message: 'option name is not NUL-terminated' },
      };
    if (name.next === bytes.length) {
      return {
        ok: false,
        error: { reason: 'oddOptionList', message: `option "${name.value}" has no value` },
      };
    }
    const value = readString(bytes, name.next);
    if (value === null) {
      return {
        ok: false,
        error: {
          reason: 'unterminatedString',
          message: `value of option "${name.value}" is not NUL-terminated`,
        },
      };
    }
    const key = name.value.toLowerCase();
    if (options.has(key)) {
      return { ok: false, error: { reason: 'duplicateOption', message: `option "${key}" appears twice` } };
    }
    if (NUMERIC_OPTIONS.has(key) && !DECIMAL.test(value.value)) {
      return {
        ok: false,
        error: {
          reason: 'optionValueNotDecimal',
          message: `option "${key}" value "${value.value}" is not a decimal number`,
        },
      };
    }
    options.set(key, value.value);
    offset = value.next;
  }
  return { ok: true, options };
}

function readUint16(bytes: Uint8Array, offset: number): number {
  return (bytes[offset]! << 8) | bytes[offset + 1]!;
}

/** Reads a NUL-terminated string starting at offset; null when no NUL follows. */
function readString(bytes: Uint8Array, offset: number): { value: string; next: number } | null {
  const end = bytes.indexOf(0, offset);
  if (end < 0) return null;
  let value = '';
  for (let i = offset; i < end; i++) value += String.fromCharCode(bytes[i]!);
  return { value, next: end + 1 };
}

/** Encodes one packet. Throws a RangeError for values the wire cannot carry (a programmer error). */
export function encodePacket(packet: TftpPacket): Uint8Array {
  switch (packet.type) {
    case 'rrq':
    case 'wrq': {
      const strings = [packet.filename, packet.mode, ...flattenOptions(packet.options)];
      return withStrings(packet.type === 'rrq' ? Opcode.rrq : Opcode.wrq, strings);
    }
    case 'data': {
      checkUint16('block', packet.block);
      if (packet.data.length > BLOCK_SIZE_LIMIT)
        throw new RangeError(`DATA payload over ${BLOCK_SIZE_LIMIT} bytes`);
      const out = new Uint8Array(4 + packet.data.length);
      writeUint16(out, 0, Opcode.data);
      writeUint16(out, 2, packet.block);
      out.set(packet.data, 4);
      return out;
    }
    case 'ack': {
      checkUint16('block', packet.block);
      const out = new Uint8Array(4);
      writeUint16(out, 0, Opcode.ack);
      writeUint16(out, 2, packet.block);
      return out;
    }
    case 'error': {
      checkUint16('code', packet.code);
      const message = encodeStrings([packet.message]);
      const out = new Uint8Array(4 + message.length);
      writeUint16(out, 0, Opcode.error);
      writeUint16(out, 2, packet.code);
      out.set(message, 4);
      return out;
    }
    case 'oack':
      return withStrings(Opcode.oack, flattenOptions(packet.options));
    default: {
      const unknown: never = packet;
      throw new TypeError(`unknown packet ${JSON.stringify(unknown)}`);
    }
  }
}

function flattenOptions(options: TftpOptions): string[] {
  const out: string[] = [];
  for (const [name, value] of options) {
    if (name.length === 0) throw new RangeError('option names must not be empty');
    out.push(name, value);
  }
  return out;
}

function withStrings(opcode: number, strings: readonly string[]): Uint8Array {
  const body = encodeStrings(strings);
  const out = new Uint8Array(2 + body.length);
  writeUint16(out, 0, opcode);
  out.set(body, 2);
  return out;
}

function encodeStrings(strings: readonly string[]): Uint8Array {
  let length = 0;
  for (const s of strings) length += s.length + 1;
  const out = new Uint8Array(length);
  let offset = 0;
  for (const s of strings) {
    for (let i = 0; i < s.length; i++) {
      const code = s.charCodeAt(i);
      if (code === 0 || code > 0xff) {
        throw new RangeError(`TFTP strings carry bytes 1..255 only; got code ${code} in "${s}"`);
      }
      out[offset++] = code;
    }
    out[offset++] = 0;
  }
  return out;
}

function checkUint16(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 0 || value > 0xffff) {
    throw new RangeError(`${name} must be in 0..65535, got ${value}`);
  }
}

function writeUint16(out: Uint8Array, offset: number, value: number): void {
  out[offset] = value >>> 8;
  out[offset + 1] = value & 0xff;
}

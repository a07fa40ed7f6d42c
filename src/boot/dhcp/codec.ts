// DHCPv4 packet framing (RFC 2131 §2, RFC 2132 §2-3 and §9.3, RFC 3396): the fixed BOOTP
// header, the magic cookie, Pad/End, option overload into `file` and `sname`, and long options
// split into repeated instances. Pure: bytes in, a typed packet out, and back. Option values
// are typed by options.ts.
//
// Decoding is strict: anything that does not frame cleanly throws DhcpDecodeError naming the
// byte offset. Two tolerances, both unambiguous: the main options field may end without an End
// option when its last option runs exactly to the end of the datagram, and bytes after End are
// ignored (RFC 2131 allows Pad there; some stacks leave other garbage). Overloaded `file` and
// `sname` fields must contain End, as RFC 2131 §4.1 requires, because they are fixed size and a
// missing End there means the field was never really overloaded.

import { DhcpDecodeError, DhcpEncodeError } from './errors.js';
import {
  decodeOptions,
  encodeOptions,
  maxMessageSizeMin,
  optionCode,
  optionLabel,
  type DhcpOptions,
  type RawOption,
  type ReceivedOption,
} from './options.js';
import { hexWithColons, ipv4FromBytes, latin1FromBytes, latin1ToBytes, writeIpv4 } from './wire-values.js';
import { parseIpv4 } from '../../platform/addresses.js';

export type BootOp = 'request' | 'reply';

export interface DhcpPacket {
  readonly op: BootOp;
  /** Hardware address type; 1 is Ethernet. */
  readonly htype: number;
  readonly hlen: number;
  readonly hops: number;
  readonly xid: number;
  readonly secs: number;
  /** Bit 15 is the broadcast flag; the rest are reserved and copied as received. */
  readonly flags: number;
  readonly ciaddr: string;
  readonly yiaddr: string;
  readonly siaddr: string;
  readonly giaddr: string;
  /** Client hardware address; the first `hlen` bytes are meaningful. Decoded packets carry all 16. */
  readonly chaddr: Uint8Array;
  /** Server host name; empty when the field carried options (overload) or nothing. */
  readonly sname: string;
  /** Boot file name; empty when the field carried options (overload) or nothing. */
  readonly file: string;
  readonly options: DhcpOptions;
}

export interface EncodeLimits {
  /**
   * The largest IP datagram the receiver accepts, as option 57 counts it (IP and UDP headers
   * included). Defaults to 576, what every DHCP client must accept.
   */
  readonly maxMessageSize?: number;
}

export const broadcastFlag = 0x8000;

/** Larger than any DHCP packet a client or relay sends on an Ethernet segment; bigger is refused unread. */
export const messageBytesMax = 4096;

/** BOOTP (RFC 951) receivers expect at least a 64-byte vendor area: 236 + 64. */
export const messageBytesMin = 300;

const snameOffset = 44;
const snameBytes = 64;
const fileOffset = 108;
const fileBytes = 128;
const cookieOffset = 236;
const optionsOffset = 240;
const magicCookie = [99, 130, 83, 99] as const;
const ipUdpHeaderBytes = 28;
const maxMessageSizeMax = 65535;

const overloadFile = 1;
const overloadSname = 2;

type AreaName = 'options' | 'file' | 'sname';

export function hasBroadcastFlag(packet: DhcpPacket): boolean {
  return (packet.flags & broadcastFlag) !== 0;
}

/** The client's hardware address as "52:54:00:12:34:56" (its first `hlen` bytes). */
export function clientHardwareAddress(packet: DhcpPacket): string {
  return hexWithColons(packet.chaddr.subarray(0, Math.min(packet.hlen, 16)));
}

// ---------------------------------------------------------------------------------------------
// Decoding

/** Parses one DHCP message; throws DhcpDecodeError for anything malformed. */
export function decodeDhcpPacket(bytes: Uint8Array): DhcpPacket {
  if (bytes.length < optionsOffset) {
    throw new DhcpDecodeError(
      bytes.length,
      `truncated: ${bytes.length} bytes, but a DHCP message needs at least ${optionsOffset} (header and magic cookie)`,
    );
  }
  if (bytes.length > messageBytesMax) {
    throw new DhcpDecodeError(
      messageBytesMax,
      `${bytes.length} bytes is over the ${messageBytesMax}-byte limit`,
    );
  }
  const opByte = bytes[0]!;
  if (opByte !== 1 && opByte !== 2) {
    throw new DhcpDecodeError(0, `op is ${opByte}; only 1 (BOOTREQUEST) and 2 (BOOTREPLY) exist`);
  }
  const hlen = bytes[2]!;
  if (hlen > 16) throw new DhcpDecodeError(2, `hlen is ${hlen}; chaddr holds at most 16 bytes`);
  for (let i = 0; i < magicCookie.length; i++) {
    if (bytes[cookieOffset + i] !== magicCookie[i]) {
      throw new DhcpDecodeError(
        cookieOffset,
        `bad magic cookie ${Array.from(bytes.subarray(cookieOffset, optionsOffset)).join('.')}; expected 99.130.83.99`,
      );
    }
  }

  const found: ReceivedOption[] = [];
  readOptionArea(bytes, optionsOffset, bytes.length, 'options', found);
  const overload = takeOverload(found);
  // RFC 3396 §5: the aggregate buffer is the options field, then file, then sname.
  if ((overload & overloadFile) !== 0)
    readOptionArea(bytes, fileOffset, fileOffset + fileBytes, 'file', found);
  if ((overload & overloadSname) !== 0) {
    readOptionArea(bytes, snameOffset, snameOffset + snameBytes, 'sname', found);
  }

  return {
    op: opByte === 1 ? 'request' : 'reply',
    htype: bytes[1]!,
    hlen,
    hops: bytes[3]!,
    xid: readUint32(bytes, 4),
    secs: readUint16(bytes, 8),
    flags: readUint16(bytes, 10),
    ciaddr: ipv4FromBytes(bytes, 12),
    yiaddr: ipv4FromBytes(bytes, 16),
    siaddr: ipv4FromBytes(bytes, 20),
    giaddr: ipv4FromBytes(bytes, 24),
    chaddr: bytes.slice(28, 44),
    sname: (overload & overloadSname) !== 0 ? '' : fieldText(bytes, snameOffset, snameBytes),
    file: (overload & overloadFile) !== 0 ? '' : fieldText(bytes, fileOffset, fileBytes),
    options: decodeOptions(concatenateInstances(found)),
  };
}

function readOptionArea(
  bytes: Uint8Array,
  start: number,
  end: number,
  area: AreaName,
  out: ReceivedOption[],
): void {
  let i = start;
  while (i < end) {
    const code = bytes[i]!;
    if (code === optionCode.pad) {
      i += 1;
      continue;
    }
    if (code === optionCode.end) return;
    if (i + 1 >= end) {
      throw new DhcpDecodeError(i, `${optionLabel(code)} in the ${area} field has no length byte`);
    }
    const length = bytes[i + 1]!;
    if (i + 2 + length > end) {
      throw new DhcpDecodeError(
        i,
        `${optionLabel(code)} claims ${length} bytes but the ${area} field ends after ${end - i - 2}`,
      );
    }
    if (code === optionCode.overload && area !== 'options') {
      throw new DhcpDecodeError(i, `${optionLabel(code)} inside the overloaded ${area} field`);
    }
    out.push({ code, data: bytes.slice(i + 2, i + 2 + length), offset: i });
    i += 2 + length;
  }
  if (area !== 'options') throw new DhcpDecodeError(end, `the overloaded ${area} field has no End option`);
}

/** Removes option 52 from `found` and returns its value (0 when absent). */
function takeOverload(found: ReceivedOption[]): number {
  const instances = found.filter((option) => option.code === optionCode.overload);
  const [first, second] = instances;
  if (first === undefined) return 0;
  if (second !== undefined) {
    throw new DhcpDecodeError(second.offset, `${optionLabel(optionCode.overload)} appears more than once`);
  }
  if (first.data.length !== 1) {
    throw new DhcpDecodeError(
      first.offset,
      `${optionLabel(optionCode.overload)} must be 1 byte, got ${first.data.length}`,
    );
  }
  const value = first.data[0]!;
  if (value < 1 || value > 3) {
    throw new DhcpDecodeError(
      first.offset,
      `${optionLabel(optionCode.overload)} value ${value} is not 1, 2 or 3`,
    );
  }
  found.splice(found.indexOf(first), 1);
  return value;
}

/** RFC 3396 §6: repeated instances of a code are one option, concatenated in buffer order. */
function concatenateInstances(found: readonly ReceivedOption[]): readonly ReceivedOption[] {
  // Almost every packet has each code once; then there is nothing to join.
  const seen = new Uint8Array(256);
  let repeated = false;
  for (const option of found) {
    if (seen[option.code] === 1) repeated = true;
    seen[option.code] = 1;
  }
  if (!repeated) return found;
  const byCode = new Map<number, { offset: number; parts: Uint8Array[] }>();
  for (const option of found) {
    const entry = byCode.get(option.code);
    if (entry === undefined) byCode.set(option.code, { offset: option.offset, parts: [option.data] });
    else entry.parts.push(option.data);
  }
  return Array.from(byCode, ([code, { offset, parts }]) => ({ code, offset, data: concat(parts) }));
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

function fieldText(bytes: Uint8Array, offset: number, length: number): string {
  const field = bytes.subarray(offset, offset + length);
  const nul = field.indexOf(0);
  return latin1FromBytes(nul === -1 ? field : field.subarray(0, nul));
}

function readUint16(bytes: Uint8Array, offset: number): number {
  return (bytes[offset]! << 8) | bytes[offset + 1]!;
}

function readUint32(bytes: Uint8Array, offset: number): number {
  return (
    ((bytes[offset]! << 24) | (bytes[offset + 1]! << 16) | (bytes[offset + 2]! << 8) | bytes[offset + 3]!) >>>
    0
  );
}

// ---------------------------------------------------------------------------------------------
// Encoding

/**
 * Serialises `packet` so it fits `limits.maxMessageSize`. Options go in the options field;
 * if they do not fit, the empty `file` and then `sname` fields are overloaded (RFC 2131 §4.1).
 * Options over 255 bytes are split into consecutive instances (RFC 3396). The packet carries
 * no Pad except zeros after End to reach the 300-byte BOOTP minimum.
 * Throws DhcpEncodeError naming the field that is invalid, or saying that the options do not fit.
 */
export function encodeDhcpPacket(packet: DhcpPacket, limits: EncodeLimits = {}): Uint8Array {
  const maxMessageSize = limits.maxMessageSize ?? maxMessageSizeMin;
  if (
    !Number.isInteger(maxMessageSize) ||
    maxMessageSize < maxMessageSizeMin ||
    maxMessageSize > maxMessageSizeMax
  ) {
    throw new DhcpEncodeError(
      'maxMessageSize',
      `${maxMessageSize} is not an integer from ${maxMessageSizeMin} to ${maxMessageSizeMax}`,
    );
  }
  const mainBytes = maxMessageSize - ipUdpHeaderBytes - optionsOffset;
  const layout = optionsLayout(packet.options, mainBytes, packet.file === '', packet.sname === '');

  const [main = emptyArea, ...overloaded] = layout.areas;
  const overloadBytes = layout.overload === 0 ? 0 : 3;
  const mainLength = main.length + overloadBytes;
  const bytes = new Uint8Array(Math.max(optionsOffset + mainLength + 1, messageBytesMin));
  writeHeader(bytes, packet);
  bytes.set(magicCookie, cookieOffset);
  if (layout.overload === 0) bytes.set(main.bytes.subarray(0, main.length), optionsOffset);
  else writeWithOverloadOption(bytes, main, layout.overload);
  bytes[optionsOffset + mainLength] = optionCode.end;
  let next = 0;
  if ((layout.overload & overloadFile) !== 0)
    writeOverloadedField(bytes, fileOffset, overloaded[next++] ?? emptyArea);
  if ((layout.overload & overloadSname) !== 0)
    writeOverloadedField(bytes, snameOffset, overloaded[next++] ?? emptyArea);
  return bytes;
}

/**
 * The options' wire layout. A frozen options object cannot change, so its layout is kept (a
 * reservation's replies share one options object per lease and boot answer).
 */
function optionsLayout(
  options: DhcpOptions,
  mainBytes: number,
  fileFree: boolean,
  snameFree: boolean,
): Layout {
  if (!Object.isFrozen(options)) return chooseLayout(encodeOptions(options), mainBytes, fileFree, snameFree);
  let byLimits = layoutCache.get(options);
  if (byLimits === undefined) {
    byLimits = new Map();
    layoutCache.set(options, byLimits);
  }
  const key = mainBytes * 4 + (fileFree ? 2 : 0) + (snameFree ? 1 : 0);
  let layout = byLimits.get(key);
  if (layout === undefined) {
    layout = chooseLayout(encodeOptions(options), mainBytes, fileFree, snameFree);
    byLimits.set(key, layout);
  }
  return layout;
}

const layoutCache = new WeakMap<DhcpOptions, Map<number, Layout>>();

/** Options packed into one area (the options field, file or sname), End excluded. */
interface Area {
  readonly bytes: Uint8Array;
  length: number;
}

const emptyArea: Area = { bytes: new Uint8Array(0), length: 0 };

/** Writes `main` with option 52 after option 53, which some clients only look for in first place. */
function writeWithOverloadOption(bytes: Uint8Array, main: Area, overload: number): void {
  const keepFirst = main.bytes[0] === optionCode.messageType && main.length >= 3 ? 3 : 0;
  bytes.set(main.bytes.subarray(0, keepFirst), optionsOffset);
  bytes.set([optionCode.overload, 1, overload], optionsOffset + keepFirst);
  bytes.set(main.bytes.subarray(keepFirst, main.length), optionsOffset + keepFirst + 3);
}

function writeOverloadedField(bytes: Uint8Array, offset: number, content: Area): void {
  // The field is already zeroed; zeros after End are Pad (RFC 2131 §4.1).
  bytes.set(content.bytes.subarray(0, content.length), offset);
  bytes[offset + content.length] = optionCode.end;
}

interface Layout {
  readonly overload: number;
  readonly areas: readonly Area[];
}

function chooseLayout(
  options: readonly RawOption[],
  mainBytes: number,
  fileFree: boolean,
  snameFree: boolean,
): Layout {
  // Capacities exclude each area's End byte; overloading also costs 3 bytes for option 52.
  const plain = pack(options, [mainBytes - 1]);
  if (plain !== undefined) return { overload: 0, areas: plain };
  const overloadedMain = mainBytes - 1 - 3;
  const candidates: { overload: number; capacities: number[] }[] = [];
  if (fileFree) candidates.push({ overload: overloadFile, capacities: [overloadedMain, fileBytes - 1] });
  else if (snameFree)
    candidates.push({ overload: overloadSname, capacities: [overloadedMain, snameBytes - 1] });
  if (fileFree && snameFree) {
    candidates.push({
      overload: overloadFile | overloadSname,
      capacities: [overloadedMain, fileBytes - 1, snameBytes - 1],
    });
  }
  for (const { overload, capacities } of candidates) {
    const areas = pack(options, capacities);
    if (areas !== undefined) return { overload, areas };
  }
  const total = options.reduce((sum, option) => sum + 2 + option.data.length, 0);
  throw new DhcpEncodeError(
    'options',
    `${total} bytes of options do not fit a ${mainBytes + optionsOffset + ipUdpHeaderBytes}-byte message` +
      (fileFree || snameFree ? ' even with option overload' : ' and file/sname are in use'),
  );
}

/**
 * Places options in order into consecutive areas, never going back to an earlier area so
 * the aggregate order (and so RFC 3396 concatenation and "option 82 last") is kept. Options up
 * to 255 bytes stay whole; longer ones are split, possibly across areas, as RFC 3396 allows.
 * Returns undefined when the options do not fit.
 */
function pack(options: readonly RawOption[], capacities: readonly number[]): Area[] | undefined {
  const areas = capacities.map((capacity): Area => ({
    bytes: new Uint8Array(Math.max(capacity, 0)),
    length: 0,
  }));
  let current = 0;
  const room = (): number => capacities[current]! - areas[current]!.length;
  const put = (code: number, data: Uint8Array): void => {
    const area = areas[current]!;
    area.bytes[area.length] = code;
    area.bytes[area.length + 1] = data.length;
    area.bytes.set(data, area.length + 2);
    area.length += 2 + data.length;
  };
  for (const { code, data } of options) {
    if (data.length <= 255) {
      while (current < areas.length && room() < 2 + data.length) current++;
      if (current === areas.length) return undefined;
      put(code, data);
      continue;
    }
    let at = 0;
    while (at < data.length) {
      while (current < areas.length && room() < 3) current++;
      if (current === areas.length) return undefined;
      const chunk = Math.min(255, room() - 2, data.length - at);
      put(code, data.subarray(at, at + chunk));
      at += chunk;
    }
  }
  return areas;
}

/** Writes the fixed BOOTP header into the (zeroed) start of `bytes`. */
function writeHeader(bytes: Uint8Array, packet: DhcpPacket): void {
  bytes[0] = packet.op === 'request' ? 1 : 2;
  bytes[1] = headerUint('htype', packet.htype, 0xff);
  if (packet.hlen > 16) throw new DhcpEncodeError('hlen', `${packet.hlen} is over 16, the size of chaddr`);
  bytes[2] = headerUint('hlen', packet.hlen, 16);
  bytes[3] = headerUint('hops', packet.hops, 0xff);
  writeIpv4(bytes, 4, headerUint('xid', packet.xid, 0xffffffff));
  const secs = headerUint('secs', packet.secs, 0xffff);
  bytes[8] = secs >>> 8;
  bytes[9] = secs & 0xff;
  const flags = headerUint('flags', packet.flags, 0xffff);
  bytes[10] = flags >>> 8;
  bytes[11] = flags & 0xff;
  writeIpv4(bytes, 12, headerAddress('ciaddr', packet.ciaddr));
  writeIpv4(bytes, 16, headerAddress('yiaddr', packet.yiaddr));
  writeIpv4(bytes, 20, headerAddress('siaddr', packet.siaddr));
  writeIpv4(bytes, 24, headerAddress('giaddr', packet.giaddr));
  if (packet.chaddr.length > 16) {
    throw new DhcpEncodeError('chaddr', `${packet.chaddr.length} bytes is over the 16-byte field`);
  }
  bytes.set(packet.chaddr, 28);
  if (packet.sname !== '') bytes.set(headerText('sname', packet.sname, snameBytes), snameOffset);
  if (packet.file !== '') bytes.set(headerText('file', packet.file, fileBytes), fileOffset);
}

function headerUint(field: string, value: number, max: number): number {
  if (!Number.isInteger(value) || value < 0 || value > max) {
    throw new DhcpEncodeError(field, `${value} is not an integer from 0 to ${max}`);
  }
  return value;
}

function headerAddress(field: string, address: string): number {
  const value = parseIpv4(address);
  if (value === undefined) throw new DhcpEncodeError(field, `"${address}" is not a dotted-quad IPv4 address`);
  return value;
}

function headerText(field: string, text: string, fieldLength: number): Uint8Array {
  const bytes = latin1ToBytes(text);
  if (bytes === undefined) throw new DhcpEncodeError(field, `"${text}" has characters outside Latin-1`);
  // Keep room for the terminating NUL so receivers that read a C string stop in the field.
  if (bytes.length > fieldLength - 1) {
    throw new DhcpEncodeError(field, `${bytes.length} bytes is over the ${fieldLength - 1} the field holds`);
  }
  if (bytes.includes(0)) throw new DhcpEncodeError(field, 'must not contain NUL bytes');
  return bytes;
}

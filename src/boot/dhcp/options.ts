// The DHCP option catalogue: which options Slipway understands, their wire formats
// (RFC 2132, 3004, 3046, 4578, iPXE's 175) and the typed form the policy and reply code use.
// Framing (Pad, End, overload, RFC 3396 concatenation) is the codec's job; this file sees each
// option once, already concatenated. Options not in the catalogue are kept raw so they can be
// echoed or logged.

import { DhcpDecodeError, DhcpEncodeError } from './errors.js';
import { decodeSubOptions, relayAgentSubOptionCode, type SubOption } from './sub-options.js';
import { hexWithColons, ipv4FromBytes, ipv4ToBytes, latin1FromBytes, latin1ToBytes } from './wire-values.js';

export const optionCode = {
  pad: 0,
  subnetMask: 1,
  routers: 3,
  dnsServers: 6,
  hostname: 12,
  domainName: 15,
  broadcastAddress: 28,
  vendorSpecific: 43,
  requestedIp: 50,
  leaseTime: 51,
  overload: 52,
  messageType: 53,
  serverId: 54,
  parameterRequestList: 55,
  message: 56,
  maxMessageSize: 57,
  renewalTime: 58,
  rebindingTime: 59,
  vendorClass: 60,
  clientId: 61,
  tftpServerName: 66,
  bootfileName: 67,
  userClass: 77,
  relayAgentInfo: 82,
  clientArch: 93,
  clientNdi: 94,
  clientUuid: 97,
  ipxeEncapsulated: 175,
  end: 255,
} as const;

const optionNames: ReadonlyMap<number, string> = new Map([
  [0, 'pad'],
  [1, 'subnet mask'],
  [3, 'routers'],
  [6, 'DNS servers'],
  [12, 'hostname'],
  [15, 'domain name'],
  [28, 'broadcast address'],
  [43, 'vendor-specific information'],
  [50, 'requested IP address'],
  [51, 'lease time'],
  [52, 'option overload'],
  [53, 'message type'],
  [54, 'server identifier'],
  [55, 'parameter request list'],
  [56, 'message'],
  [57, 'maximum message size'],
  [58, 'renewal (T1) time'],
  [59, 'rebinding (T2) time'],
  [60, 'vendor class identifier'],
  [61, 'client identifier'],
  [66, 'TFTP server name'],
  [67, 'bootfile name'],
  [77, 'user class'],
  [82, 'relay agent information'],
  [93, 'client system architecture'],
  [94, 'client network device interface'],
  [97, 'client machine identifier'],
  [175, 'iPXE encapsulated options'],
  [255, 'end'],
]);

/** "option 51 (lease time)", or "option 200" for codes outside the catalogue. */
export function optionLabel(code: number): string {
  const name = optionNames.get(code);
  return name === undefined ? `option ${code}` : `option ${code} (${name})`;
}

export const messageTypeCode = {
  DISCOVER: 1,
  OFFER: 2,
  REQUEST: 3,
  DECLINE: 4,
  ACK: 5,
  NAK: 6,
  RELEASE: 7,
  INFORM: 8,
} as const;

export type DhcpMessageType = keyof typeof messageTypeCode;

const messageTypeByCode: ReadonlyMap<number, DhcpMessageType> = new Map(
  Object.entries(messageTypeCode).map(([name, code]) => [code, name as DhcpMessageType]),
);

/** RFC 2132 §9.10: no client may ask for less than a 576-byte IP datagram. */
export const maxMessageSizeMin = 576;

/** An option as it travels: a code and its (possibly concatenated) data. */
export interface RawOption {
  readonly code: number;
  readonly data: Uint8Array;
}

/** A received option with the packet offset of its first instance, for error messages. */
export interface ReceivedOption extends RawOption {
  readonly offset: number;
}

/**
 * Option 77. iPXE sends its class as bare text ("iPXE"); RFC 3004 clients send a list of
 * length-prefixed classes. `format` records which, so the value re-encodes byte for byte.
 */
export interface UserClass {
  readonly format: 'rfc3004' | 'plain';
  readonly classes: readonly string[];
}

/** Option 82, kept raw because RFC 3046 §2.2 requires servers to echo it unchanged. */
export interface RelayAgentInfo {
  readonly raw: Uint8Array;
  readonly subOptions: readonly SubOption[];
  readonly circuitId?: Uint8Array;
  readonly remoteId?: Uint8Array;
}

/** Option 94 (RFC 4578 §2.2): type 1 is UNDI, followed by the UNDI major and minor version. */
export interface ClientNdi {
  readonly type: number;
  readonly major: number;
  readonly minor: number;
}

/** Option 97 (RFC 4578 §2.3): a type octet (0 = GUID) and 16 bytes; `guid` is null for an empty option. */
export interface ClientUuid {
  readonly type: number;
  readonly guid: string | null;
}

/** Option 175: its presence marks an iPXE client; the sub-options carry iPXE's feature flags. */
export interface IpxeEncapsulated {
  readonly raw: Uint8Array;
  readonly subOptions: readonly SubOption[];
}

export interface DhcpOptions {
  readonly messageType?: DhcpMessageType;
  readonly subnetMask?: string;
  readonly routers?: readonly string[];
  readonly dnsServers?: readonly string[];
  readonly hostname?: string;
  readonly domainName?: string;
  readonly broadcastAddress?: string;
  /** Option 43, raw: its meaning depends on the vendor class; parse with decodeSubOptions. */
  readonly vendorSpecific?: Uint8Array;
  readonly requestedIp?: string;
  readonly leaseTimeS?: number;
  readonly serverId?: string;
  readonly parameterRequestList?: readonly number[];
  readonly maxMessageSize?: number;
  readonly renewalTimeS?: number;
  readonly rebindingTimeS?: number;
  readonly vendorClass?: string;
  readonly clientId?: Uint8Array;
  readonly tftpServerName?: string;
  readonly bootfileName?: string;
  readonly userClass?: UserClass;
  readonly relayAgentInfo?: RelayAgentInfo;
  readonly clientArch?: readonly number[];
  readonly clientNdi?: ClientNdi;
  readonly clientUuid?: ClientUuid;
  readonly ipxe?: IpxeEncapsulated;
  /** Every option outside the catalogue, in the order received. */
  readonly other?: readonly RawOption[];
}

type Writable<T> = { -readonly [K in keyof T]: T[K] };

// ---------------------------------------------------------------------------------------------
// Decoding

function bytesText(count: number): string {
  return count === 1 ? '1 byte' : `${count} bytes`;
}

class OptionReader {
  readonly code: number;
  readonly data: Uint8Array;
  readonly #offset: number;

  constructor(option: ReceivedOption) {
    this.code = option.code;
    this.data = option.data;
    this.#offset = option.offset;
  }

  fail(problem: string): never {
    throw new DhcpDecodeError(this.#offset, `${optionLabel(this.code)} ${problem}`);
  }

  exactly(length: number): Uint8Array {
    if (this.data.length !== length) this.fail(`must be ${bytesText(length)}, got ${this.data.length}`);
    return this.data;
  }

  atLeast(length: number): Uint8Array {
    if (this.data.length < length)
      this.fail(`must be at least ${bytesText(length)}, got ${this.data.length}`);
    return this.data;
  }

  address(): string {
    return ipv4FromBytes(this.exactly(4), 0);
  }

  addresses(): string[] {
    const data = this.atLeast(4);
    if (data.length % 4 !== 0) this.fail(`must be a multiple of 4 bytes, got ${data.length}`);
    const list: string[] = [];
    for (let i = 0; i < data.length; i += 4) list.push(ipv4FromBytes(data, i));
    return list;
  }

  uint16(): number {
    const data = this.exactly(2);
    return (data[0]! << 8) | data[1]!;
  }

  uint32(): number {
    const data = this.exactly(4);
    return ((data[0]! << 24) | (data[1]! << 16) | (data[2]! << 8) | data[3]!) >>> 0;
  }

  /** RFC 2132 §2: receivers must accept and drop trailing NULs some clients add. */
  text(): string {
    const data = this.atLeast(1);
    let end = data.length;
    while (end > 0 && data[end - 1] === 0) end--;
    if (end === 0) this.fail('holds only NUL bytes');
    return latin1FromBytes(data.subarray(0, end));
  }
}

function decodeMessageType(reader: OptionReader): DhcpMessageType {
  const value = reader.exactly(1)[0]!;
  const type = messageTypeByCode.get(value);
  if (type === undefined) reader.fail(`value ${value} is not a message type Slipway handles (1-8)`);
  return type;
}

/**
 * RFC 3004 §4 data is a list of (length >= 1, class) pairs that exactly fills the option.
 * Anything else is the bare-string form iPXE and many firmwares send.
 */
function decodeUserClass(reader: OptionReader): UserClass {
  const data = reader.atLeast(1);
  const classes: string[] = [];
  let i = 0;
  while (i < data.length) {
    const length = data[i]!;
    if (length === 0 || i + 1 + length > data.length) {
      return { format: 'plain', classes: [latin1FromBytes(data)] };
    }
    classes.push(latin1FromBytes(data.subarray(i + 1, i + 1 + length)));
    i += 1 + length;
  }
  return { format: 'rfc3004', classes };
}

function decodeRelayAgentInfo(option: ReceivedOption, reader: OptionReader): RelayAgentInfo {
  const raw = reader.atLeast(2);
  const subOptions = decodeSubOptions(raw, 'tlv', option.offset, optionLabel(option.code));
  const circuitId = subOptions.find((s) => s.code === relayAgentSubOptionCode.circuitId)?.data;
  const remoteId = subOptions.find((s) => s.code === relayAgentSubOptionCode.remoteId)?.data;
  return {
    raw,
    subOptions,
    ...(circuitId === undefined ? {} : { circuitId }),
    ...(remoteId === undefined ? {} : { remoteId }),
  };
}

function decodeClientArch(reader: OptionReader): number[] {
  const data = reader.atLeast(2);
  if (data.length % 2 !== 0) reader.fail(`must be a multiple of 2 bytes, got ${data.length}`);
  const arches: number[] = [];
  for (let i = 0; i < data.length; i += 2) arches.push((data[i]! << 8) | data[i + 1]!);
  return arches;
}

function decodeClientUuid(reader: OptionReader): ClientUuid {
  const data = reader.data;
  if (data.length === 0) return { type: 0, guid: null };
  if (data.length !== 17) reader.fail(`must be 0 or 17 bytes, got ${data.length}`);
  return { type: data[0]!, guid: formatGuid(data.subarray(1)) };
}

function formatGuid(bytes: Uint8Array): string {
  const hex = hexWithColons(bytes).replaceAll(':', '');
  return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join('-');
}

/**
 * Turns each (already concatenated) option into its typed form, rejecting options whose
 * length or content breaks their RFC. Throws DhcpDecodeError naming the option and offset.
 */
export function decodeOptions(options: readonly ReceivedOption[]): DhcpOptions {
  const out: Writable<DhcpOptions> = {};
  const other: RawOption[] = [];
  for (const option of options) {
    const reader = new OptionReader(option);
    if (decodeLeaseOption(reader, out) || decodeBootOption(option, reader, out)) continue;
    other.push({ code: option.code, data: option.data });
  }
  if (other.length > 0) out.other = other;
  return out;
}

/** The options of the address and its lease (RFC 2132) into `out`; false for any other option. */
function decodeLeaseOption(reader: OptionReader, out: Writable<DhcpOptions>): boolean {
  switch (reader.code) {
    case optionCode.subnetMask:
      out.subnetMask = reader.address();
      return true;
    case optionCode.routers:
      out.routers = reader.addresses();
      return true;
    case optionCode.dnsServers:
      out.dnsServers = reader.addresses();
      return true;
    case optionCode.hostname:
      out.hostname = reader.text();
      return true;
    case optionCode.domainName:
      out.domainName = reader.text();
      return true;
    case optionCode.broadcastAddress:
      out.broadcastAddress = reader.address();
      return true;
    case optionCode.vendorSpecific:
      out.vendorSpecific = reader.atLeast(1);
      return true;
    case optionCode.requestedIp:
      out.requestedIp = reader.address();
      return true;
    case optionCode.leaseTime:
      out.leaseTimeS = reader.uint32();
      return true;
    case optionCode.messageType:
      out.messageType = decodeMessageType(reader);
      return true;
    case optionCode.serverId:
      out.serverId = reader.address();
      return true;
    case optionCode.parameterRequestList:
      out.parameterRequestList = Array.from(reader.atLeast(1));
      return true;
    case optionCode.maxMessageSize: {
      const size = reader.uint16();
      if (size < maxMessageSizeMin)
        reader.fail(`value ${size} is below the legal minimum ${maxMessageSizeMin}`);
      out.maxMessageSize = size;
      return true;
    }
    case optionCode.renewalTime:
      out.renewalTimeS = reader.uint32();
      return true;
    case optionCode.rebindingTime:
      out.rebindingTimeS = reader.uint32();
      return true;
    default:
      return false;
  }
}

/**
 * The options that identify the client and its boot (RFC 2132, 3046, 4578, iPXE's) into `out`;
 * framing options are refused; false for any other option.
 */
function decodeBootOption(option: ReceivedOption, reader: OptionReader, out: Writable<DhcpOptions>): boolean {
  switch (option.code) {
    case optionCode.vendorClass:
      out.vendorClass = reader.text();
      return true;
    case optionCode.clientId:
      out.clientId = reader.atLeast(2);
      return true;
    case optionCode.tftpServerName:
      out.tftpServerName = reader.text();
      return true;
    case optionCode.bootfileName:
      out.bootfileName = reader.text();
      return true;
    case optionCode.userClass:
      out.userClass = decodeUserClass(reader);
      return true;
    case optionCode.relayAgentInfo:
      out.relayAgentInfo = decodeRelayAgentInfo(option, reader);
      return true;
    case optionCode.clientArch:
      out.clientArch = decodeClientArch(reader);
      return true;
    case optionCode.clientNdi: {
      const [type, major, minor] = reader.exactly(3);
      out.clientNdi = { type: type!, major: major!, minor: minor! };
      return true;
    }
    case optionCode.clientUuid:
      out.clientUuid = decodeClientUuid(reader);
      return true;
    case optionCode.ipxeEncapsulated: {
      const raw = option.data;
      out.ipxe = {
        raw,
        subOptions: decodeSubOptions(raw, 'dhcp', option.offset, optionLabel(option.code)),
      };
      return true;
    }
    case optionCode.pad:
    case optionCode.overload:
    case optionCode.end:
      // The codec consumes these; seeing one here means the caller skipped framing.
      reader.fail('is framing, not a value option');
      return true;
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Encoding

function fail(code: number, problem: string): never {
  throw new DhcpEncodeError(optionLabel(code), problem);
}

function addressBytes(code: number, address: string): Uint8Array {
  const bytes = ipv4ToBytes(address);
  if (bytes === undefined) fail(code, `"${address}" is not a dotted-quad IPv4 address`);
  return bytes;
}

function addressListBytes(code: number, addresses: readonly string[]): Uint8Array {
  if (addresses.length === 0) fail(code, 'needs at least one address');
  const bytes = new Uint8Array(addresses.length * 4);
  addresses.forEach((address, i) => bytes.set(addressBytes(code, address), i * 4));
  return bytes;
}

function uintBytes(code: number, value: number, width: 1 | 2 | 4): Uint8Array {
  if (!Number.isInteger(value) || value < 0 || value >= 2 ** (8 * width)) {
    fail(code, `${value} is not an unsigned ${8 * width}-bit integer`);
  }
  const bytes = new Uint8Array(width);
  for (let i = 0; i < width; i++) bytes[i] = Math.floor(value / 2 ** (8 * (width - 1 - i))) & 0xff;
  return bytes;
}

function textBytes(code: number, text: string): Uint8Array {
  if (text.length === 0) fail(code, 'must not be empty');
  const bytes = latin1ToBytes(text);
  if (bytes === undefined) fail(code, `"${text}" has characters outside Latin-1`);
  return bytes;
}

function atLeastBytes(code: number, data: Uint8Array, length: number): Uint8Array {
  if (data.length < length) fail(code, `must be at least ${length} bytes, got ${data.length}`);
  return data;
}

function userClassBytes(userClass: UserClass): Uint8Array {
  const code = optionCode.userClass;
  if (userClass.format === 'plain') {
    const [only, ...rest] = userClass.classes;
    if (only === undefined || rest.length > 0) fail(code, 'the plain form carries exactly one class');
    return textBytes(code, only);
  }
  if (userClass.classes.length === 0) fail(code, 'needs at least one class');
  const parts: number[] = [];
  for (const name of userClass.classes) {
    const bytes = textBytes(code, name);
    if (bytes.length > 255) fail(code, `class "${name.slice(0, 20)}..." is over 255 bytes`);
    parts.push(bytes.length, ...bytes);
  }
  return Uint8Array.from(parts);
}

function clientArchBytes(arches: readonly number[]): Uint8Array {
  if (arches.length === 0) fail(optionCode.clientArch, 'needs at least one architecture');
  const bytes = new Uint8Array(arches.length * 2);
  arches.forEach((arch, i) => bytes.set(uintBytes(optionCode.clientArch, arch, 2), i * 2));
  return bytes;
}

function clientUuidBytes(uuid: ClientUuid): Uint8Array {
  const code = optionCode.clientUuid;
  if (uuid.guid === null) return new Uint8Array(0);
  const hex = uuid.guid.replaceAll('-', '');
  if (!/^[0-9a-fA-F]{32}$/.test(hex)) fail(code, `"${uuid.guid}" is not a 16-byte GUID`);
  const bytes = new Uint8Array(17);
  bytes.set(uintBytes(code, uuid.type, 1), 0);
  for (let i = 0; i < 16; i++) bytes[i + 1] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}

/** Codes the codec writes itself while framing. */
const framingCodes: ReadonlySet<number> = new Set([optionCode.pad, optionCode.overload, optionCode.end]);

/** Codes whose value has a typed field; `other` must not carry them, so each has one source. */
const typedCodes: ReadonlySet<number> = new Set(
  Object.values(optionCode).filter((code) => code !== optionCode.message && !framingCodes.has(code)),
);

/**
 * The options of `options` as wire values, in the order they should be sent: message type
 * first (some PXE ROMs look only there), relay agent information last (RFC 3046 §2.2).
 * Throws DhcpEncodeError naming the first invalid value.
 */
export function encodeOptions(options: DhcpOptions): RawOption[] {
  const out: RawOption[] = [];
  const add = (code: number, data: Uint8Array | undefined): void => {
    if (data !== undefined) out.push({ code, data });
  };
  const o = options;
  const c = optionCode;
  add(c.messageType, o.messageType === undefined ? undefined : Uint8Array.of(messageTypeCode[o.messageType]));
  add(c.serverId, o.serverId === undefined ? undefined : addressBytes(c.serverId, o.serverId));
  add(c.leaseTime, o.leaseTimeS === undefined ? undefined : uintBytes(c.leaseTime, o.leaseTimeS, 4));
  add(c.renewalTime, o.renewalTimeS === undefined ? undefined : uintBytes(c.renewalTime, o.renewalTimeS, 4));
  add(
    c.rebindingTime,
    o.rebindingTimeS === undefined ? undefined : uintBytes(c.rebindingTime, o.rebindingTimeS, 4),
  );
  add(c.subnetMask, o.subnetMask === undefined ? undefined : addressBytes(c.subnetMask, o.subnetMask));
  add(
    c.broadcastAddress,
    o.broadcastAddress === undefined ? undefined : addressBytes(c.broadcastAddress, o.broadcastAddress),
  );
  add(c.routers, o.routers && addressListBytes(c.routers, o.routers));
  add(c.dnsServers, o.dnsServers && addressListBytes(c.dnsServers, o.dnsServers));
  add(c.hostname, o.hostname === undefined ? undefined : textBytes(c.hostname, o.hostname));
  add(c.domainName, o.domainName === undefined ? undefined : textBytes(c.domainName, o.domainName));
  add(c.requestedIp, o.requestedIp === undefined ? undefined : addressBytes(c.requestedIp, o.requestedIp));
  if (o.parameterRequestList !== undefined) {
    if (o.parameterRequestList.length === 0) fail(c.parameterRequestList, 'must list at least one code');
    const codes = o.parameterRequestList.map((code) => uintBytes(c.parameterRequestList, code, 1)[0]!);
    add(c.parameterRequestList, Uint8Array.from(codes));
  }
  if (o.maxMessageSize !== undefined && o.maxMessageSize < maxMessageSizeMin) {
    fail(c.maxMessageSize, `${o.maxMessageSize} is below the legal minimum ${maxMessageSizeMin}`);
  }
  add(
    c.maxMessageSize,
    o.maxMessageSize === undefined ? undefined : uintBytes(c.maxMessageSize, o.maxMessageSize, 2),
  );
  add(c.vendorClass, o.vendorClass === undefined ? undefined : textBytes(c.vendorClass, o.vendorClass));
  add(c.clientId, o.clientId && atLeastBytes(c.clientId, o.clientId, 2));
  add(
    c.tftpServerName,
    o.tftpServerName === undefined ? undefined : textBytes(c.tftpServerName, o.tftpServerName),
  );
  add(c.bootfileName, o.bootfileName === undefined ? undefined : textBytes(c.bootfileName, o.bootfileName));
  add(c.vendorSpecific, o.vendorSpecific && atLeastBytes(c.vendorSpecific, o.vendorSpecific, 1));
  add(c.userClass, o.userClass && userClassBytes(o.userClass));
  add(c.clientArch, o.clientArch && clientArchBytes(o.clientArch));
  if (o.clientNdi !== undefined) {
    const { type, major, minor } = o.clientNdi;
    const bytes = [type, major, minor].map((value) => uintBytes(c.clientNdi, value, 1)[0]!);
    add(c.clientNdi, Uint8Array.from(bytes));
  }
  add(c.clientUuid, o.clientUuid && clientUuidBytes(o.clientUuid));
  add(c.ipxeEncapsulated, o.ipxe?.raw);
  for (const extra of o.other ?? []) {
    if (!Number.isInteger(extra.code) || extra.code < 0 || extra.code > 255) {
      fail(extra.code, 'is not an option code (1-254)');
    }
    if (framingCodes.has(extra.code)) fail(extra.code, 'is framing, which the codec writes itself');
    if (typedCodes.has(extra.code)) fail(extra.code, 'has a typed field; set that instead of `other`');
    add(extra.code, extra.data);
  }
  add(c.relayAgentInfo, o.relayAgentInfo && atLeastBytes(c.relayAgentInfo, o.relayAgentInfo.raw, 2));
  return out;
}

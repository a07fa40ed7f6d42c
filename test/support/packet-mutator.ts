// Mutated boot-protocol datagrams for fuzz tests. Valid DHCP and TFTP seeds are written byte by
// byte here (not with the codecs under test, so a codec bug cannot hide in its own seeds), and
// each mutation breaks one named thing: a length, a terminator, an opcode, an overload pointer.
// A generic byte layer (truncation, flips, garbage tails) can be stacked on top.
//
// Everything is a pure function of a Prng, so a datagram is reproduced from its seed and label;
// the label names the mutations applied, for reports.
import type { Prng } from '../../src/platform/prng.js';

/** A datagram and the mutations that made it, e.g. "overload/file-loop+flip". */
export interface Mutant {
  readonly bytes: Uint8Array;
  readonly mutation: string;
}

const latin1 = (text: string): Uint8Array => Uint8Array.from(text, (char) => char.charCodeAt(0) & 0xff);

function randomBytes(random: Prng, length: number, min = 0, max = 255): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = random.range(min, max);
  return out;
}

function concatBytes(parts: readonly ArrayLike<number>[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The byte layer, shared by both protocols

/** Lengths where parsers change their mind: header edges, option starts, one byte either side. */
function truncationPoint(random: Prng, length: number, edges: readonly number[]): number {
  const inside = edges.filter((edge) => edge < length);
  if (inside.length > 0 && random.chance(0.6)) return random.pick(inside);
  return random.int(Math.max(length, 1));
}

function truncate(random: Prng, bytes: Uint8Array, edges: readonly number[]): Uint8Array {
  return bytes.slice(0, truncationPoint(random, bytes.length, edges));
}

function flip(random: Prng, bytes: Uint8Array): Uint8Array {
  const out = Uint8Array.from(bytes);
  if (out.length === 0) return out;
  const count = random.range(1, 8);
  for (let i = 0; i < count; i++) out[random.int(out.length)] = random.pick([0, 0xff, random.int(256)]);
  return out;
}

function garbageTail(random: Prng, bytes: Uint8Array, sizes: readonly number[]): Uint8Array {
  const target = random.chance(0.3) ? random.pick(sizes) : bytes.length + random.range(1, 600);
  return concatBytes([bytes, randomBytes(random, Math.max(0, target - bytes.length))]);
}

function splice(random: Prng, bytes: Uint8Array): Uint8Array {
  if (bytes.length < 4) return flip(random, bytes);
  const from = random.int(bytes.length - 1);
  const length = random.range(1, Math.min(64, bytes.length - from));
  const to = random.int(bytes.length);
  return concatBytes([bytes.subarray(0, to), bytes.subarray(from, from + length), bytes.subarray(to)]);
}

type ByteMutation = (random: Prng, bytes: Uint8Array) => Uint8Array;

function byteLayer(edges: readonly number[], sizes: readonly number[]): Record<string, ByteMutation> {
  return {
    truncate: (random, bytes) => truncate(random, bytes, edges),
    flip,
    'garbage-tail': (random, bytes) => garbageTail(random, bytes, sizes),
    splice,
  };
}

function pickEntry<T>(random: Prng, table: Readonly<Record<string, T>>): [string, T] {
  return random.pick(Object.entries(table));
}

// ---------------------------------------------------------------------------------------------
// DHCP

/** One option as written on the wire; `length` overrides the length byte (to lie about it). */
export interface DhcpOptionBytes {
  readonly code: number;
  readonly data: Uint8Array;
  readonly length?: number;
}

export interface DhcpSeedSpec {
  readonly label: string;
  readonly mac: readonly number[];
  readonly xid: number;
  readonly ciaddr?: readonly number[];
  readonly giaddr?: readonly number[];
  readonly hops?: number;
  readonly flags?: number;
  readonly options: readonly DhcpOptionBytes[];
}

/** A valid client request: the 236-byte BOOTP header and its options in order (End is added). */
export interface DhcpSeed {
  readonly label: string;
  readonly header: Uint8Array;
  readonly options: readonly DhcpOptionBytes[];
}

export const dhcpOffsets = {
  op: 0,
  htype: 1,
  hlen: 2,
  hops: 3,
  xid: 4,
  secs: 8,
  flags: 10,
  ciaddr: 12,
  giaddr: 24,
  chaddr: 28,
  sname: 44,
  file: 108,
  cookie: 236,
  options: 240,
} as const;

const snameBytes = 64;
const fileBytes = 128;
const magicCookie = [99, 130, 83, 99] as const;
const dhcpEnd = 255;
const dhcpPad = 0;

/** An option from text (Latin-1) or bytes. */
export function dhcpOption(code: number, data: string | ArrayLike<number>): DhcpOptionBytes {
  return { code, data: typeof data === 'string' ? latin1(data) : Uint8Array.from(data) };
}

export function dhcpSeed(spec: DhcpSeedSpec): DhcpSeed {
  const header = new Uint8Array(dhcpOffsets.cookie);
  header[dhcpOffsets.op] = 1;
  header[dhcpOffsets.htype] = 1;
  header[dhcpOffsets.hlen] = 6;
  header[dhcpOffsets.hops] = spec.hops ?? 0;
  writeUint32(header, dhcpOffsets.xid, spec.xid);
  writeUint16(header, dhcpOffsets.flags, spec.flags ?? 0);
  header.set(spec.ciaddr ?? [0, 0, 0, 0], dhcpOffsets.ciaddr);
  header.set(spec.giaddr ?? [0, 0, 0, 0], dhcpOffsets.giaddr);
  header.set(spec.mac, dhcpOffsets.chaddr);
  return { label: spec.label, header, options: spec.options };
}

/** The working form of one DHCP datagram while structural mutations edit it. */
interface DhcpDraft {
  readonly header: Uint8Array;
  readonly cookie: number[];
  options: DhcpOptionBytes[];
  end: boolean;
  /** Pad to the 300-byte BOOTP minimum after End, as real clients do. */
  padTo300: boolean;
  /** Raw bytes after the options (and End, if any). */
  tail: number[];
}

function draftOf(seed: DhcpSeed): DhcpDraft {
  return {
    header: Uint8Array.from(seed.header),
    cookie: [...magicCookie],
    options: [...seed.options],
    end: true,
    padTo300: true,
    tail: [],
  };
}

function optionWire(option: DhcpOptionBytes): number[] {
  return [option.code, option.length ?? option.data.length, ...option.data];
}

function serializeDraft(draft: DhcpDraft): Uint8Array {
  const body: number[] = [];
  for (const option of draft.options) {
    // Pad and End are single bytes; anything else is code, length, data.
    if (option.code === dhcpPad || option.code === dhcpEnd) body.push(option.code);
    else body.push(...optionWire(option));
  }
  if (draft.end) body.push(dhcpEnd);
  body.push(...draft.tail);
  const bytes = concatBytes([draft.header, draft.cookie, body]);
  if (!draft.end || !draft.padTo300 || bytes.length >= 300) return bytes;
  return concatBytes([bytes, new Uint8Array(300 - bytes.length)]);
}

/** A field of `size` bytes holding the given options and End, zero-padded. */
function overloadField(size: number, options: readonly DhcpOptionBytes[], end = true): Uint8Array {
  const field = new Uint8Array(size);
  const wire = options.flatMap(optionWire);
  field.set(wire.slice(0, size));
  if (end && wire.length < size) field[wire.length] = dhcpEnd;
  return field;
}

/** Splits `data` into RFC 3396 instances of at most 255 bytes. */
function instances(code: number, data: Uint8Array): DhcpOptionBytes[] {
  const out: DhcpOptionBytes[] = [];
  for (let at = 0; at < data.length || out.length === 0; at += 255) {
    out.push({ code, data: data.slice(at, at + 255) });
  }
  return out;
}

const catalogued = [
  1, 3, 6, 12, 15, 28, 43, 50, 51, 53, 54, 55, 57, 58, 59, 60, 61, 66, 67, 77, 82, 93, 94, 97, 175,
];

function insertAt<T>(random: Prng, list: T[], item: T): void {
  list.splice(random.int(list.length + 1), 0, item);
}

function replaceOption(draft: DhcpDraft, code: number, ...replacements: DhcpOptionBytes[]): void {
  const at = draft.options.findIndex((option) => option.code === code);
  draft.options = draft.options.filter((option) => option.code !== code);
  draft.options.splice(at === -1 ? draft.options.length : at, 0, ...replacements);
}

type DhcpStructural = (random: Prng, draft: DhcpDraft, context: DhcpMutationContext) => string;

/** What mutations may borrow from the test's world: addresses and MACs that mean something. */
export interface DhcpMutationContext {
  readonly macs: readonly (readonly number[])[];
  readonly addresses: readonly (readonly number[])[];
}

const overloadVariants: Readonly<Record<string, (random: Prng, draft: DhcpDraft) => void>> = {
  'bad-value': (random, draft) => draft.options.push(dhcpOption(52, [random.pick([0, 4, 7, 255])])),
  'bad-length': (random, draft) => draft.options.push(dhcpOption(52, random.pick([[], [1, 2], [3, 3, 3]]))),
  twice: (random, draft) => draft.options.push(dhcpOption(52, [1]), dhcpOption(52, [random.range(1, 3)])),
  'file-garbage': (random, draft) => {
    draft.options.push(dhcpOption(52, [1]));
    draft.header.set(randomBytes(random, fileBytes, 1, 254), dhcpOffsets.file);
  },
  'sname-garbage': (random, draft) => {
    draft.options.push(dhcpOption(52, [2]));
    draft.header.set(randomBytes(random, snameBytes, 1, 254), dhcpOffsets.sname);
  },
  'both-garbage': (random, draft) => {
    draft.options.push(dhcpOption(52, [3]));
    draft.header.set(randomBytes(random, fileBytes), dhcpOffsets.file);
    draft.header.set(randomBytes(random, snameBytes), dhcpOffsets.sname);
  },
  // Option 52 inside the field it overloads: a parser that follows it would loop forever.
  'file-loop': (random, draft) => {
    draft.options.push(dhcpOption(52, [random.pick([1, 3])]));
    draft.header.set(overloadField(fileBytes, [dhcpOption(52, [1])]), dhcpOffsets.file);
    draft.header.set(overloadField(snameBytes, [dhcpOption(52, [3])]), dhcpOffsets.sname);
  },
  'sname-loop': (random, draft) => {
    draft.options.push(dhcpOption(52, [random.pick([2, 3])]));
    draft.header.set(overloadField(fileBytes, [dhcpOption(12, 'x')]), dhcpOffsets.file);
    draft.header.set(overloadField(snameBytes, [dhcpOption(52, [2])]), dhcpOffsets.sname);
  },
  'file-past-end': (random, draft) => {
    draft.options.push(dhcpOption(52, [1]));
    const field = overloadField(fileBytes, [dhcpOption(60, 'PXEClient')], false);
    field[11] = 77;
    field[12] = random.range(116, 255); // runs past the 128-byte field
    draft.header.set(field, dhcpOffsets.file);
  },
  'file-conflicting-53': (random, draft) => {
    draft.options.push(dhcpOption(52, [1]));
    draft.header.set(overloadField(fileBytes, [dhcpOption(53, [random.range(1, 8)])]), dhcpOffsets.file);
  },
  // A valid overload: the relay agent information continues in `file` (RFC 3396).
  'file-continuation': (random, draft) => {
    draft.options.push(dhcpOption(52, [1]));
    const part = [1, 4, ...randomBytes(random, 4)];
    draft.options.push(dhcpOption(82, part));
    draft.header.set(overloadField(fileBytes, [dhcpOption(82, [2, 2, 0xbe, 0xef])]), dhcpOffsets.file);
  },
};

const fieldVariants: Readonly<Record<string, DhcpStructural>> = {
  'requested-ip': (random, draft, context) => {
    const value = random.chance(0.5)
      ? random.pick(context.addresses)
      : random.pick([[0, 0, 0, 0], [...randomBytes(random, 4)], [10], [1, 2, 3, 4, 5]]);
    replaceOption(draft, 50, dhcpOption(50, value));
    return 'requested-ip';
  },
  'server-id': (random, draft, context) => {
    const value = random.pick([[...randomBytes(random, 4)], [127, 0, 0, 1], [], ...context.addresses]);
    replaceOption(draft, 54, dhcpOption(54, value));
    return 'server-id';
  },
  'max-message-size': (random, draft) => {
    const size = random.pick([0, 1, 575, 576, 577, 1500, 9000, 65535]);
    const data = random.pick([[size >>> 8, size & 0xff], [size & 0xff], [0, size >>> 8, size & 0xff]]);
    replaceOption(draft, 57, dhcpOption(57, data));
    return 'max-message-size';
  },
  'client-arch': (random, draft) => {
    const data = random.pick([[], [0], [0, 7, 0], [0, 1], [0, 10], [0xff, 0xff], [0, 99, 0, 7], [0, 19]]);
    replaceOption(draft, 93, dhcpOption(93, data));
    return 'client-arch';
  },
  'client-uuid': (random, draft) => {
    replaceOption(draft, 97, dhcpOption(97, randomBytes(random, random.pick([1, 16, 17, 18, 40]))));
    return 'client-uuid';
  },
  'client-ndi': (random, draft) => {
    replaceOption(draft, 94, dhcpOption(94, randomBytes(random, random.pick([0, 2, 3, 4]))));
    return 'client-ndi';
  },
  'vendor-class': (random, draft) => {
    const text = random.pick([
      '',
      '\0\0\0',
      'PXEClient',
      'HTTPClient:Arch:00000',
      'HTTPClient',
      'PXEClient\0',
    ]);
    replaceOption(draft, 60, dhcpOption(60, text));
    return 'vendor-class';
  },
  'user-class': (random, draft) => {
    const data = random.pick([[4, 105, 80, 88, 69], [0, 4, 105], [9, 105, 80], [...latin1('iPXE')], []]);
    replaceOption(draft, 77, dhcpOption(77, data));
    return 'user-class';
  },
  'ipxe-175': (random, draft) => {
    replaceOption(draft, 175, dhcpOption(175, random.pick([[1], [1, 5, 1], [177, 1, 1, 255], []])));
    return 'ipxe-175';
  },
  'text-options': (random, draft) => {
    const code = random.pick([12, 15, 66, 67]);
    replaceOption(draft, code, dhcpOption(code, random.pick(['\0', '', '\0\0x', 'host\0'])));
    return 'text-options';
  },
  'fixed-lengths': (random, draft) => {
    const code = random.pick([1, 3, 6, 28, 51, 58, 59, 61]);
    replaceOption(draft, code, dhcpOption(code, randomBytes(random, random.pick([0, 1, 3, 5, 7]))));
    return `fixed-lengths-${code}`;
  },
  'prl-empty': (_random, draft) => {
    replaceOption(draft, 55, dhcpOption(55, []));
    return 'prl-empty';
  },
};

const dhcpStructural: Readonly<Record<string, DhcpStructural>> = {
  op: (random, draft) => {
    draft.header[dhcpOffsets.op] = random.pick([0, 2, 3, 4, 255]);
    return 'op';
  },
  htype: (random, draft) => {
    draft.header[dhcpOffsets.htype] = random.pick([0, 2, 6, 32, 255]);
    return 'htype';
  },
  hlen: (random, draft) => {
    draft.header[dhcpOffsets.hlen] = random.pick([0, 1, 5, 7, 8, 16, 17, 64, 255]);
    return 'hlen';
  },
  'magic-cookie': (random, draft) => {
    if (random.chance(0.3)) draft.cookie.fill(0);
    else draft.cookie[random.int(4)] = random.pick([0, 98, 100, 255]);
    return 'magic-cookie';
  },
  'length-past-end': (random, draft) => {
    const data = randomBytes(random, random.range(0, 8));
    const option = { code: random.pick(catalogued), data, length: data.length + random.range(1, 200) };
    if (random.chance(0.5)) {
      draft.options.push(option);
      draft.end = false;
      return 'length-past-end/datagram';
    }
    // In the middle: the lie swallows End and the padding, or claims more than is left.
    insertAt(random, draft.options, { ...option, length: 255 });
    return 'length-past-end/middle';
  },
  'end-option': (random, draft) => {
    const variant = random.pick(['missing', 'lone-code', 'garbage-after']);
    // 'missing' is tolerated: the last option then runs exactly to the end of the datagram.
    draft.end = variant === 'garbage-after';
    if (variant === 'lone-code') draft.tail = [random.pick(catalogued)];
    if (variant === 'garbage-after') {
      draft.padTo300 = false;
      draft.tail = [...randomBytes(random, random.range(1, 40))];
    }
    return `end-option/${variant}`;
  },
  'overlong-option': (random, draft) => {
    const code = random.pick([12, 15, 43, 50, 53, 55, 57, 60, 61, 77, 93, 97, 175, 200]);
    const total = random.pick([255, 256, 510, 1000, 1800, 3800]);
    replaceOption(draft, code, ...instances(code, randomBytes(random, total)));
    return `overlong-option/${code}`;
  },
  overload: (random, draft) => {
    const [name, apply] = pickEntry(random, overloadVariants);
    apply(random, draft);
    return `overload/${name}`;
  },
  'message-type': (random, draft) => {
    const variant = random.pick(['duplicate', 'conflict', 'empty', 'long', 'value', 'absent', 'last']);
    const type = draft.options.find((option) => option.code === 53);
    switch (variant) {
      case 'duplicate':
        draft.options.push(dhcpOption(53, type?.data ?? [1]));
        break;
      case 'conflict':
        draft.options.push(dhcpOption(53, [random.pick([1, 3, 7, 8])]));
        break;
      case 'empty':
        replaceOption(draft, 53, dhcpOption(53, []));
        break;
      case 'long':
        replaceOption(draft, 53, dhcpOption(53, [1, 3]));
        break;
      case 'value':
        replaceOption(draft, 53, dhcpOption(53, [random.pick([0, 2, 5, 6, 9, 255])]));
        break;
      case 'absent':
        draft.options = draft.options.filter((option) => option.code !== 53);
        break;
      default:
        draft.options = [
          ...draft.options.filter((option) => option.code !== 53),
          type ?? dhcpOption(53, [1]),
        ];
    }
    return `message-type/${variant}`;
  },
  'huge-relay-info': (random, draft) => {
    const subOptions: number[] = [];
    const target = random.pick([254, 256, 600, 1200, 2500]);
    while (subOptions.length < target) {
      const length = random.range(0, 255);
      subOptions.push(random.range(1, 10), length, ...randomBytes(random, length));
    }
    const data = Uint8Array.from(subOptions.slice(0, target));
    // Sometimes cut mid sub-option, so the TLV list itself is malformed.
    const valid = random.chance(0.5);
    replaceOption(draft, 82, ...instances(82, valid ? Uint8Array.from(subOptions) : data));
    return `huge-relay-info/${valid ? 'tlv' : 'cut'}`;
  },
  relayed: (random, draft) => {
    draft.header[dhcpOffsets.hops] = random.pick([1, 2, 16, 255]);
    writeUint16(draft.header, dhcpOffsets.flags, random.pick([0, 0x8000, 0xffff]));
    const circuit = randomBytes(random, random.range(1, 20));
    replaceOption(draft, 82, dhcpOption(82, [1, circuit.length, ...circuit, 2, 2, 0xca, 0xfe]));
    return 'relayed';
  },
  field: (random, draft, context) => {
    const [, apply] = pickEntry(random, fieldVariants);
    return `field/${apply(random, draft, context)}`;
  },
  chaddr: (random, draft, context) => {
    const mac = random.pick([
      ...context.macs,
      [...randomBytes(random, 6)],
      [0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
      [0, 0, 0, 0, 0, 0],
    ]);
    draft.header.set(mac, dhcpOffsets.chaddr);
    if (random.chance(0.3)) draft.header.set(randomBytes(random, 10), dhcpOffsets.chaddr + 6);
    return 'chaddr';
  },
  'random-options': (random, draft) => {
    const count = random.range(1, 20);
    for (let i = 0; i < count; i++) {
      insertAt(
        random,
        draft.options,
        dhcpOption(random.range(1, 254), randomBytes(random, random.range(0, 40))),
      );
    }
    return 'random-options';
  },
  'pad-storm': (random, draft) => {
    const count = random.pick([1, 10, 100, 3800, 4000]);
    const at = random.int(draft.options.length + 1);
    draft.options.splice(at, 0, ...Array.from({ length: count }, () => dhcpOption(dhcpPad, [])));
    return `pad-storm/${count}`;
  },
};

const dhcpEdges = [0, 1, 2, 4, 27, 28, 44, 108, 235, 236, 239, 240, 241, 242, 243, 299];
const dhcpBytesLayer = byteLayer(dhcpEdges, [4095, 4096, 4097, 5000]);

/** One mutated datagram from `seed`: a structural mutation, a byte mutation, or both. */
export function mutateDhcp(random: Prng, seed: DhcpSeed, context: DhcpMutationContext): Mutant {
  const draft = draftOf(seed);
  const names: string[] = [];
  if (random.chance(0.85)) {
    const [, apply] = pickEntry(random, dhcpStructural);
    names.push(apply(random, draft, context));
  }
  let bytes = serializeDraft(draft);
  if (names.length === 0 || random.chance(0.2)) {
    const [name, apply] = pickEntry(random, dhcpBytesLayer);
    bytes = apply(random, bytes);
    names.push(name);
  }
  return { bytes, mutation: `${seed.label}:${names.join('+')}` };
}

/** A seed as sent unmutated. */
export function dhcpSeedBytes(seed: DhcpSeed): Uint8Array {
  return serializeDraft(draftOf(seed));
}

// ---------------------------------------------------------------------------------------------
// TFTP

export interface TftpRequestSeed {
  readonly label: string;
  /** 1 (RRQ) or 2 (WRQ). */
  readonly opcode: number;
  readonly filename: string;
  readonly mode: string;
  readonly options: readonly (readonly [string, string])[];
}

/** A request as strings; `nul[i]` false drops the terminator after string i. */
interface TftpDraft {
  opcode: number;
  strings: string[];
  nul: boolean[];
}

function tftpDraftOf(seed: TftpRequestSeed): TftpDraft {
  const strings = [seed.filename, seed.mode, ...seed.options.flat()];
  return { opcode: seed.opcode, strings, nul: strings.map(() => true) };
}

function serializeTftp(draft: TftpDraft): Uint8Array {
  const parts: ArrayLike<number>[] = [[draft.opcode >>> 8, draft.opcode & 0xff]];
  draft.strings.forEach((text, i) => {
    parts.push(latin1(text));
    if (draft.nul[i] ?? true) parts.push([0]);
  });
  return concatBytes(parts);
}

export function tftpRequestBytes(seed: TftpRequestSeed): Uint8Array {
  return serializeTftp(tftpDraftOf(seed));
}

function longName(random: Prng, length: number): string {
  const unit = random.pick(['a', '../', '/', 'sub/', '%', '\u00e9', '\\..']);
  if (random.chance(0.3)) return String.fromCharCode(...randomBytes(random, Math.min(length, 8000), 1, 255));
  return unit.repeat(Math.ceil(length / unit.length)).slice(0, length);
}

/** Filenames that try to leave the root; the server must refuse each or stay inside. */
const escapingFilenames = [
  '../outside/secret.bin',
  'sub/../../outside/secret.bin',
  '..\\outside\\secret.bin',
  '/../outside/secret.bin',
  'escape',
  'sub/./../escape',
  '....//outside/secret.bin',
  '%2e%2e/outside/secret.bin',
  'ipxe.efi\\..\\..\\outside\\secret.bin',
  '.',
  '',
  'sub',
  'sub/',
  '/',
  '\\',
] as const;

const optionVariants: Readonly<Record<string, (random: Prng) => string[]>> = {
  'blksize-range': (random) => [
    'blksize',
    random.pick(['0', '7', '8', '65464', '65465', '99999', '999999999999999']),
  ],
  'windowsize-range': (random) => ['windowsize', random.pick(['0', '1', '65535', '65536'])],
  'timeout-range': (random) => ['timeout', random.pick(['0', '256', '1000000'])],
  'tsize-garbage': (random) => [
    'tsize',
    random.pick(['garbage', '', '-1', '0x10', '18446744073709551616', '1234567890123456', ' 0']),
  ],
  duplicate: (random) => {
    const name = random.pick(['blksize', 'tsize', 'windowsize', 'timeout']);
    return [name, '512', random.chance(0.5) ? name.toUpperCase() : name, '1024'];
  },
  'unknown-huge': (random) => [longName(random, 300), longName(random, 600)],
  many: (random) => Array.from({ length: 200 }, (_, i) => [`x${i}`, String(random.int(1000))]).flat(),
};

type TftpStructural = (random: Prng, draft: TftpDraft) => string;

const tftpStructural: Readonly<Record<string, TftpStructural>> = {
  opcode: (random, draft) => {
    draft.opcode = random.pick([0, 2, 3, 4, 5, 6, 7, 8, 255, 256, 0x0101, 0xffff]);
    return `opcode/${draft.opcode}`;
  },
  'missing-nul': (random, draft) => {
    const variant = random.pick(['filename', 'mode', 'last', 'all']);
    if (variant === 'all') draft.nul.fill(false);
    else if (variant === 'last') draft.nul[draft.nul.length - 1] = false;
    else draft.nul[variant === 'filename' ? 0 : 1] = false;
    return `missing-nul/${variant}`;
  },
  'overlong-filename': (random, draft) => {
    const length = random.chance(0.02) ? 60_000 : random.pick([256, 512, 1024, 1400, 4000, 8000]);
    draft.strings[0] = longName(random, length);
    return `overlong-filename/${length}`;
  },
  traversal: (random, draft) => {
    draft.strings[0] = random.pick(escapingFilenames);
    return 'traversal';
  },
  'bad-mode': (random, draft) => {
    const modes = ['', 'octe', 'octets', 'binary', 'ascii', 'OCTET', 'NetAscii', 'mail', 'octet '];
    draft.strings[1] = random.chance(0.2) ? longName(random, random.range(1, 200)) : random.pick(modes);
    return 'bad-mode';
  },
  option: (random, draft) => {
    const [name, make] = pickEntry(random, optionVariants);
    const added = make(random);
    draft.strings.push(...added);
    draft.nul.push(...added.map(() => true));
    return `option/${name}`;
  },
  'odd-options': (random, draft) => {
    const variant = random.pick(['no-value', 'empty-name', 'value-no-nul', 'nul-padding']);
    if (variant === 'no-value') {
      draft.strings.push('blksize');
      draft.nul.push(true);
    } else if (variant === 'empty-name') {
      draft.strings.push('', 'tsize', '0');
      draft.nul.push(true, true, true);
    } else if (variant === 'value-no-nul') {
      draft.strings.push('tsize', '0');
      draft.nul.push(true, false);
    } else {
      // Padding with NULs is tolerated; firmware does it.
      draft.strings.push('\0'.repeat(random.range(1, 30)));
      draft.nul.push(false);
    }
    return `odd-options/${variant}`;
  },
  'stray-type': (random, draft) => {
    const type = random.pick(['ack', 'data', 'error', 'oack']);
    if (type === 'ack') {
      draft.opcode = 4;
      draft.strings = [String.fromCharCode(random.int(256), random.int(256))];
      draft.nul = [false];
    } else if (type === 'data') {
      draft.opcode = 3;
      draft.strings = [String.fromCharCode(0, 1, ...randomBytes(random, random.range(0, 600)))];
      draft.nul = [false];
    } else if (type === 'error') {
      draft.opcode = 5;
      draft.strings = [String.fromCharCode(0, random.range(0, 8)) + 'oops'];
      draft.nul = [random.chance(0.8)];
    } else {
      draft.opcode = 6;
      draft.strings = ['blksize', '1468'];
      draft.nul = [true, true];
    }
    return `stray-type/${type}`;
  },
};

const tftpBytesLayer = byteLayer([0, 1, 2, 3, 4, 5, 9, 10], [516, 1472, 9000]);

/** One mutated datagram for the TFTP listener, from a request seed. */
export function mutateTftpRequest(random: Prng, seed: TftpRequestSeed): Mutant {
  const draft = tftpDraftOf(seed);
  const names: string[] = [];
  if (random.chance(0.85)) {
    const [, apply] = pickEntry(random, tftpStructural);
    names.push(apply(random, draft));
  }
  let bytes = serializeTftp(draft);
  if (names.length === 0 || random.chance(0.15)) {
    const [name, apply] = pickEntry(random, tftpBytesLayer);
    bytes = apply(random, bytes);
    names.push(name);
  }
  return { bytes, mutation: `${seed.label}:${names.join('+')}` };
}

const transferPackets: Readonly<Record<string, (random: Prng) => ArrayLike<number>>> = {
  'ack-wrong-block': (random) => {
    const block = random.pick([0, 1, 2, 3, 100, 65535, random.int(65536)]);
    return [0, 4, block >>> 8, block & 0xff];
  },
  'ack-truncated': (random) => random.pick([[], [0], [0, 4], [0, 4, 0]]),
  'ack-trailing': (random) => [0, 4, 0, 1, ...randomBytes(random, random.range(1, 8))],
  'data-to-server': (random) => {
    const block = random.int(65536);
    return [0, 3, block >>> 8, block & 0xff, ...randomBytes(random, random.pick([0, 1, 512, 1468]))];
  },
  error: (random) => {
    const code = random.pick([0, 1, 4, 5, 8, 9, 0xffff]);
    return [0, 5, code >>> 8, code & 0xff, ...latin1('fuzz'), ...(random.chance(0.8) ? [0] : [])];
  },
  'request-on-transfer-port': (random) => [
    0,
    random.pick([1, 2]),
    ...latin1('ipxe.efi'),
    0,
    ...latin1('octet'),
    0,
  ],
  oack: () => [0, 6, ...latin1('blksize'), 0, ...latin1('512'), 0],
  'unknown-opcode': (random) => [random.int(256), random.pick([0, 7, 9, 200]), ...randomBytes(random, 4)],
};

/** One datagram for a transfer's port (the server's TID): wrong blocks, stray types, garbage. */
export function mutateTftpTransferPacket(random: Prng): Mutant {
  const [name, make] = pickEntry(random, transferPackets);
  return { bytes: Uint8Array.from(make(random)), mutation: `transfer:${name}` };
}

// ---------------------------------------------------------------------------------------------

function writeUint16(out: Uint8Array, offset: number, value: number): void {
  out[offset] = (value >>> 8) & 0xff;
  out[offset + 1] = value & 0xff;
}

function writeUint32(out: Uint8Array, offset: number, value: number): void {
  writeUint16(out, offset, value >>> 16);
  writeUint16(out, offset + 2, value & 0xffff);
}

/** Overwrites bytes at `offset` with `value` where the datagram is long enough to hold them. */
export function pinBytes(bytes: Uint8Array, offset: number, value: readonly number[]): void {
  value.forEach((byte, i) => {
    if (offset + i < bytes.length) bytes[offset + i] = byte;
  });
}

export function uint32Bytes(value: number): number[] {
  return [(value >>> 24) & 0xff, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff];
}

// Goal: bad input changes nothing (invariant 7) and no answer contradicts committed state
// (invariant 5) at the boot services' real sockets. 60,000 mutated DHCP and 40,000 mutated TFTP
// datagrams (truncations, wrong lengths, overlong options, overload loops, wrong opcodes, stray
// packets on transfer ports) must not crash either server, must not make the DHCP server hand
// out an address or boot file the inventory does not say, must not make the TFTP server send a
// file from outside its root or write anything, and must leave both answering valid requests
// exactly as before.
// Method: both servers run in-process on 127.0.0.1 with ephemeral ports: DHCP in reservation
// mode over a static inventory (two machines with allowPXE off, one without a reservation),
// TFTP over a temporary root next to a secret file it must never serve. Datagrams come from
// valid seeds written byte by byte (test/support/packet-mutator.ts) and a seeded PRNG; every
// datagram derives its own stream from the run seed and its index, so one datagram can be
// regenerated alone. The seed is printed and can be set with BOOT_FUZZ_SEED. Datagrams go out
// in batches of 64 with a barrier after each (the DHCP received counter, an always-answered
// TFTP probe), so the kernel buffer is not simply overflowed; what the servers counted is then
// reconciled with what the codecs say each datagram was.
// Loopback only: every DHCP datagram carries giaddr 127.0.0.1, so every reply goes to the
// test's relay socket (un-relayed answers are broadcast, which this test must not send), and
// its xid is its index, so each reply names the datagram that caused it.
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import {
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  readlink,
  realpath,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { decodeDhcpPacket, type DhcpPacket } from '../../src/boot/dhcp/codec.js';
import { startDhcpServer, type DhcpServer, type DhcpReplyEvent } from '../../src/boot/dhcp/server.js';
import { staticInventory } from '../../src/boot/inventory.js';
import { Opcode, TftpErrorCode, decodePacket, peekOpcode } from '../../src/boot/tftp/packet.js';
import { startTftpServer, type TftpServer, type TftpServerHooks } from '../../src/boot/tftp/server.js';
import { Prng } from '../../src/platform/prng.js';
import { hardwareRecord, type HardwareSpec } from '../support/netns.js';
import {
  dhcpOffsets,
  dhcpOption,
  dhcpSeed,
  dhcpSeedBytes,
  mutateDhcp,
  mutateTftpRequest,
  mutateTftpTransferPacket,
  pinBytes,
  tftpRequestBytes,
  uint32Bytes,
  type DhcpMutationContext,
  type DhcpOptionBytes,
  type DhcpSeed,
  type Mutant,
  type TftpRequestSeed,
} from '../support/packet-mutator.js';

const host = '127.0.0.1';
const hostBytes = [127, 0, 0, 1];
const seed = parseSeed(process.env['BOOT_FUZZ_SEED']);
const reproduce = `BOOT_FUZZ_SEED=${seed} node --import tsx --test test/integration/boot-fuzz.test.ts`;

const dhcpDatagrams = 60_000;
const tftpDatagrams = 40_000;
const batchSize = 64;
/**
 * Each storm must finish within this; a slower run fails rather than eating the CI budget. The
 * suite runs QEMU machines (TCG, a core each) beside this file, so the bound leaves room for
 * a storm that gets half a core.
 */
const stormBudgetMs = 75_000;
const barrierMs = 2_000;
/** Probes sent per TFTP barrier before the listener counts as silent. */
const barrierTries = 3;
const waitMs = 5_000;
/** Share of datagrams the servers must have read; the rest may be lost in the kernel. */
const processedShareMin = 0.98;

function parseSeed(text: string | undefined): number {
  if (text === undefined) return randomInt(2 ** 31);
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0)
    throw new Error(`BOOT_FUZZ_SEED "${text}" is not an integer`);
  return value;
}

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');
const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** Waits for a condition, checking on every turn of the event loop, up to a deadline. */
async function until(done: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (let turn = 0; !done(); turn++) {
    if (performance.now() > deadline) return false;
    // Spin through the loop while answers are due at once; back off to 1 ms turns after that.
    await new Promise<void>((resolve) => (turn < 200 ? setImmediate(resolve) : setTimeout(resolve, 1)));
  }
  return true;
}

/** A loopback UDP socket that either hands each datagram to a tap or queues it for next(). */
class Peer {
  readonly #socket = dgram.createSocket('udp4');
  readonly #queue: { bytes: Buffer; port: number }[] = [];

  private constructor(tap: ((bytes: Buffer, port: number) => void) | undefined) {
    this.#socket.on('message', (bytes, from) => {
      if (tap === undefined) this.#queue.push({ bytes, port: from.port });
      else tap(bytes, from.port);
    });
  }

  static async open(tap?: (bytes: Buffer, port: number) => void): Promise<Peer> {
    const peer = new Peer(tap);
    await new Promise<void>((resolve) => peer.#socket.bind(0, host, resolve));
    return peer;
  }

  get port(): number {
    return this.#socket.address().port;
  }

  /** Resolves once the kernel has the datagram; errors (a too-large datagram) are ignored. */
  send(bytes: Uint8Array, port: number): Promise<void> {
    return new Promise((resolve) => this.#socket.send(bytes, port, host, () => resolve()));
  }

  async next(timeoutMs = waitMs): Promise<{ bytes: Buffer; port: number }> {
    if (!(await until(() => this.#queue.length > 0, timeoutMs))) {
      throw new Error(`no datagram on port ${this.port} within ${timeoutMs} ms`);
    }
    const first = this.#queue.shift();
    if (first === undefined) throw new Error('unreachable: the queue was not empty');
    return first;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.#socket.close(resolve));
  }
}

// ---- The committed state: the inventory the DHCP server answers from -------------------------

const httpBaseUrl = 'http://127.0.0.1:8080';
const machineSpecs: readonly HardwareSpec[] = [
  { id: 'bios', mac: '52:54:00:f0:00:01', ip: '10.20.0.11/24', gateway: '10.20.0.1', dns: ['10.20.0.2'] },
  {
    id: 'uefi',
    mac: '52:54:00:f0:00:02',
    ip: '10.20.0.12/24',
    uefi: true,
    leaseTimeS: 600,
    hostname: 'uefi',
  },
  { id: 'locked', mac: '52:54:00:f0:00:03', ip: '10.20.0.13/24', allowPXE: false },
  { id: 'locked-too', mac: '52:54:00:f0:00:04', ip: '10.30.1.14/16', gateway: '10.30.0.1', allowPXE: false },
  { id: 'unreserved', mac: '52:54:00:f0:00:05' },
];
const unknownMac = '52:54:00:f0:00:99';
const hardware = machineSpecs.map(hardwareRecord);
const hardwareAsCommitted = structuredClone(hardware);

/** What the inventory says, restated here so the checks do not lean on the server's own code. */
interface Expected {
  readonly ip: string;
  readonly mask: string;
  readonly leaseTimeS: number;
  readonly gateway: string | undefined;
  readonly allowPXE: boolean;
  readonly bootfiles: ReadonlySet<string>;
}

const prefixMask = (prefix: number): string =>
  uint32Bytes(prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0).join('.');

const expectedByMac = new Map<string, Expected>(
  machineSpecs.flatMap((spec): [string, Expected][] => {
    if (spec.ip === undefined) return [];
    const [ip = '', prefix = '24'] = spec.ip.split('/');
    const binaries = ['undionly.kpxe', 'ipxe.efi', 'snp.efi'];
    const bootfiles = new Set([
      ...binaries,
      ...binaries.map((name) => `${httpBaseUrl}/binaries/${name}`),
      `${httpBaseUrl}/ipxe/${spec.mac}`,
    ]);
    return [
      [
        spec.mac,
        {
          ip,
          mask: prefixMask(Number(prefix)),
          leaseTimeS: spec.leaseTimeS ?? 3600,
          gateway: spec.gateway,
          allowPXE: spec.allowPXE ?? true,
          bootfiles,
        },
      ],
    ];
  }),
);

const macBytes = (mac: string): number[] => mac.split(':').map((byte) => parseInt(byte, 16));
const ipBytes = (ip: string): number[] => ip.split('.').map(Number);

/** Reasons `reply` contradicts the inventory, judged from the reply alone (as on the wire). */
function replyProblems(reply: DhcpPacket): string[] {
  const problems: string[] = [];
  const mac = hex(reply.chaddr.subarray(0, 6)).replace(/(..)(?!$)/g, '$1:');
  const expected = expectedByMac.get(mac);
  if (reply.op !== 'reply' || reply.htype !== 1 || reply.hlen !== 6)
    problems.push('not an Ethernet BOOTREPLY');
  if (expected === undefined) return [...problems, `a reply for ${mac}, which has no reservation`];
  if (reply.options.serverId !== host) problems.push(`server identifier ${reply.options.serverId}`);
  const type = reply.options.messageType;
  const bootfile = reply.options.bootfileName ?? reply.file;
  if (type === 'NAK') {
    if (reply.yiaddr !== '0.0.0.0') problems.push(`NAK with yiaddr ${reply.yiaddr}`);
    if (bootfile !== '') problems.push('NAK with a boot file');
    return problems;
  }
  if (type !== 'OFFER' && type !== 'ACK') return [...problems, `reply of type ${type}`];
  if (reply.yiaddr !== expected.ip && !(type === 'ACK' && reply.yiaddr === '0.0.0.0')) {
    problems.push(`yiaddr ${reply.yiaddr}, but ${expected.ip} is reserved for ${mac}`);
  }
  if (reply.options.subnetMask !== expected.mask) problems.push(`subnet mask ${reply.options.subnetMask}`);
  if (reply.yiaddr !== '0.0.0.0' && reply.options.leaseTimeS !== expected.leaseTimeS) {
    problems.push(`lease time ${reply.options.leaseTimeS}`);
  }
  if (expected.gateway !== undefined && reply.options.routers?.[0] !== expected.gateway) {
    problems.push(`routers ${reply.options.routers?.join(',')}`);
  }
  if (!expected.allowPXE) {
    const boot = bootfile !== '' || reply.siaddr !== '0.0.0.0' || reply.options.vendorSpecific !== undefined;
    if (boot) problems.push(`boot information (${bootfile}) for ${mac}, whose allowPXE is off`);
  } else if (bootfile !== '') {
    if (!expected.bootfiles.has(bootfile)) problems.push(`boot file ${bootfile}`);
    if (reply.siaddr !== host) problems.push(`next server ${reply.siaddr}`);
  }
  return problems;
}

/** Reasons a reply event contradicts the request that caused it. */
function exchangeProblems(event: DhcpReplyEvent, relayPort: number): string[] {
  const { request, reply, to } = event;
  const problems = replyProblems(reply);
  if (reply.xid !== request.xid) problems.push(`xid ${reply.xid} answers ${request.xid}`);
  if (to.address !== host || to.port !== relayPort || event.via !== 'relay') {
    problems.push(`sent to ${to.address}:${to.port} via ${event.via}`);
  }
  const expected = expectedByMac.get(hex(request.chaddr.subarray(0, 6)).replace(/(..)(?!$)/g, '$1:'));
  const asked = request.options.messageType;
  const type = reply.options.messageType;
  const fits =
    (asked === 'DISCOVER' && type === 'OFFER') ||
    (asked === 'REQUEST' && (type === 'ACK' || type === 'NAK')) ||
    (asked === 'INFORM' && type === 'ACK' && reply.yiaddr === '0.0.0.0');
  if (!fits) problems.push(`${type} in answer to ${asked ?? 'a BOOTP request'}`);
  if (asked === 'REQUEST' && expected !== undefined) {
    const wanted = request.options.requestedIp ?? request.ciaddr;
    if ((type === 'ACK') !== (wanted === expected.ip)) problems.push(`${type} for requested ${wanted}`);
  }
  return problems;
}

// ---- DHCP seeds -------------------------------------------------------------------------------

const pxeBios = 'PXEClient:Arch:00000:UNDI:002001';
const uuid = [0, ...Array.from({ length: 16 }, (_, i) => i * 17)];

function dhcpSeedsFor(mac: string, reserved: string): DhcpSeed[] {
  const m = macBytes(mac);
  const ip = ipBytes(reserved);
  const base = { mac: m, xid: 0, giaddr: hostBytes };
  const o = dhcpOption;
  const seeds: [string, Partial<{ ciaddr: number[]; hops: number }>, DhcpOptionBytes[]][] = [
    [
      'pxe-bios-discover',
      {},
      [
        o(53, [1]),
        o(57, [5, 192]),
        o(93, [0, 0]),
        o(94, [1, 2, 1]),
        o(97, uuid),
        o(55, [1, 3, 6, 43, 60, 66, 67]),
        o(60, pxeBios),
      ],
    ],
    [
      'pxe-uefi-discover',
      {},
      [o(53, [1]), o(93, [0, 7]), o(61, [1, ...m]), o(60, 'PXEClient:Arch:00007:UNDI:003016')],
    ],
    [
      'ipxe-discover',
      {},
      [o(53, [1]), o(77, 'iPXE'), o(175, [177, 1, 1, 19, 1, 1]), o(93, [0, 0]), o(60, pxeBios)],
    ],
    ['http-boot-discover', {}, [o(53, [1]), o(93, [0, 16]), o(60, 'HTTPClient:Arch:00016:UNDI:003001')]],
    [
      'request-selecting',
      {},
      [o(53, [3]), o(50, ip), o(54, hostBytes), o(61, [1, ...m]), o(60, pxeBios), o(93, [0, 0])],
    ],
    ['request-renewing', { ciaddr: ip }, [o(53, [3]), o(55, [1, 3, 6])]],
    ['inform', { ciaddr: ip }, [o(53, [8]), o(55, [1, 3, 6])]],
    ['release', { ciaddr: ip }, [o(53, [7]), o(54, hostBytes)]],
    ['decline', {}, [o(53, [4]), o(50, ip), o(54, hostBytes)]],
    [
      'relayed-discover',
      { hops: 1 },
      [o(53, [1]), o(60, pxeBios), o(93, [0, 0]), o(82, [1, 4, 101, 116, 104, 48, 2, 6, ...m])],
    ],
    ['bootp', {}, [o(55, [1, 3, 6])]],
    [
      'udhcpc-discover',
      {},
      [
        o(53, [1]),
        o(61, [1, ...m]),
        o(12, 'host'),
        o(60, 'udhcp 1.36.1'),
        o(57, [2, 64]),
        o(55, [1, 3, 6, 12, 15, 28, 42]),
      ],
    ],
  ];
  return seeds.map(([label, fields, options]) =>
    dhcpSeed({ ...base, ...fields, label: `${mac}/${label}`, options }),
  );
}

const dhcpSeeds = [
  ...machineSpecs.map((spec) => dhcpSeedsFor(spec.mac, spec.ip?.split('/')[0] ?? '10.20.0.99')),
  dhcpSeedsFor(unknownMac, '10.20.0.11'),
].flat();

const dhcpContext: DhcpMutationContext = {
  macs: [...machineSpecs.map((spec) => macBytes(spec.mac)), macBytes(unknownMac)],
  addresses: [...expectedByMac.values()].map((expected) => ipBytes(expected.ip)),
};

/** Datagram `index` of the DHCP storm: a function of the run seed and the index alone. */
function dhcpDatagram(index: number): Mutant {
  const random = Prng.derive(seed, `dhcp/${index}`);
  const origin = random.pick(dhcpSeeds);
  const mutant = random.chance(0.05)
    ? { bytes: dhcpSeedBytes(origin), mutation: `${origin.label}:unmutated` }
    : mutateDhcp(random, origin, dhcpContext);
  const bytes = Uint8Array.from(mutant.bytes);
  // Replies name their datagram by xid and go to the relay socket (see the file comment).
  pinBytes(bytes, dhcpOffsets.xid, uint32Bytes(index));
  pinBytes(bytes, dhcpOffsets.giaddr, hostBytes);
  return { bytes, mutation: mutant.mutation };
}

/** What the DHCP server reports when the echoed options make a reply larger than it may send. */
const oversizedReply = /DhcpEncodeError: .*options do not fit/;

function decodesAsDhcp(bytes: Uint8Array): boolean {
  try {
    decodeDhcpPacket(bytes);
    return true;
  } catch {
    return false;
  }
}

/** Valid requests asked before and after the storm; xids above the storm's range. */
function probeRequest(mac: string, label: string, xid: number): Uint8Array {
  const origin = dhcpSeeds.find((candidate) => candidate.label === `${mac}/${label}`);
  assert.ok(origin !== undefined, `no seed ${mac}/${label}`);
  const bytes = dhcpSeedBytes(origin);
  pinBytes(bytes, dhcpOffsets.xid, uint32Bytes(xid));
  return bytes;
}

const probeXidMin = 0xf000_0000;
const probes = [
  { mac: '52:54:00:f0:00:01', label: 'pxe-bios-discover' },
  { mac: '52:54:00:f0:00:02', label: 'request-selecting' },
  { mac: '52:54:00:f0:00:03', label: 'pxe-uefi-discover' },
  { mac: '52:54:00:f0:00:04', label: 'relayed-discover' },
] as const;

// ---- The TFTP root, and a secret beside it ---------------------------------------------------

let baseDir: string;
let rootDir: string;
const secret = `SLIPWAY-FUZZ-SECRET-${randomBytes(8).toString('hex')}`;
const rootFiles: Record<string, Uint8Array> = {
  'ipxe.efi': randomBytes(100_000),
  'undionly.kpxe': randomBytes(3_000),
  'menu.txt': Buffer.from('line 1\nline 2\r\n'),
  'sub/exact.bin': randomBytes(1468 * 2),
};

/** Sizes a transfer may announce: each file as is, or translated to netascii (LF -> CR LF, CR -> CR NUL). */
const servableSizes = new Set(
  Object.values(rootFiles).flatMap((content) => {
    const growth = content.reduce((sum, byte) => sum + (byte === 10 || byte === 13 ? 1 : 0), 0);
    return [content.length, content.length + growth];
  }),
);

const tftpSeeds: TftpRequestSeed[] = [
  ...[
    'ipxe.efi',
    'undionly.kpxe',
    'menu.txt',
    'sub/exact.bin',
    '/ipxe.efi',
    'missing.efi',
    'escape',
    '../outside/secret.bin',
  ].flatMap((filename) =>
    ['octet', 'netascii'].flatMap((mode) =>
      [
        [],
        [['blksize', '1468']],
        [['tsize', '0']],
        [
          ['blksize', '1468'],
          ['windowsize', '8'],
          ['tsize', '0'],
        ],
        [
          ['timeout', '1'],
          ['blksize', '512'],
        ],
      ].map((options) => ({
        label: `rrq ${filename} ${mode}`,
        opcode: Opcode.rrq,
        filename,
        mode,
        options: options as [string, string][],
      })),
    ),
  ),
  { label: 'wrq upload.bin', opcode: Opcode.wrq, filename: 'upload.bin', mode: 'octet', options: [] },
  {
    label: 'wrq ipxe.efi',
    opcode: Opcode.wrq,
    filename: 'ipxe.efi',
    mode: 'octet',
    options: [['tsize', '3']],
  },
];

/** Every file and link under `dir`, with its size, time and content hash: proof nothing was written. */
async function snapshot(dir: string): Promise<string[]> {
  const entries: string[] = [];
  for (const name of (await readdir(dir, { recursive: true })).sort()) {
    const full = path.join(dir, name);
    const info = await lstat(full);
    const what = info.isSymbolicLink()
      ? `link ${await readlink(full)}`
      : info.isFile()
        ? `file ${sha256(await readFile(full))}`
        : 'dir';
    entries.push(`${name} ${what} ${info.size} ${info.mtimeMs}`);
  }
  return entries;
}

// ---- Servers and what they reported -------------------------------------------------------------

let dhcp: DhcpServer;
let tftp: TftpServer;
let relay: Peer;
const dhcpReplyProblems: string[] = [];
const dhcpWireProblems: string[] = [];
const dhcpErrors: unknown[] = [];
const dhcpRepliesByType = new Map<string, number>();
const dhcpRepliedXids = new Set<number>();
const dhcpIgnoredXids = new Set<number>();
/** Storm datagrams the codec accepts: each must end as a reply or a counted, logged refusal. */
const dhcpDecodable: number[] = [];
let dhcpWireReplies = 0;
const probeReplies = new Map<number, DhcpPacket>();

const tftpEvents = {
  started: [] as { filename: string; bytes: number }[],
  ended: 0,
  refused: { malformed: 0, writes: 0, noTransfer: 0, notRrq: 0, requests: 0, other: [] as string[] },
  errors: [] as unknown[],
};
let tftpSnapshotBefore: string[];
/** ERROR 5 heard from a transfer port (a wrong TID answered): must stay 0. */
let tftpStrayAnswers = 0;

/** Fuzz sockets' ports, so hook events can be told apart from the probes'. */
const fuzzPorts = new Set<number>();
/** Per fuzz socket port: the server's transfer port (TID) it last heard DATA or OACK from. */
const liveTransfer = new Map<number, number>();
const transferOwner = new Map<number, number>();
const endedTransfers = new Set<number>();
const tftpProblems: string[] = [];
/** Every socket the TFTP storm opened; closed after the servers. */
const tftpPeers: Peer[] = [];

const tftpHooks: TftpServerHooks = {
  onTransferStart: (event) => tftpEvents.started.push({ filename: event.filename, bytes: event.bytes }),
  onTransferEnd: (event) => {
    tftpEvents.ended += 1;
    // Every TID this client was using is closing now; never send to it again.
    for (const [tid, owner] of transferOwner) {
      if (owner === event.client.port) endedTransfers.add(tid);
    }
    liveTransfer.delete(event.client.port);
  },
  onRequestRefused: (event) => {
    if (!fuzzPorts.has(event.client.port)) return;
    const refused = tftpEvents.refused;
    if (event.message.startsWith('malformed request')) refused.malformed += 1;
    else if (event.code === TftpErrorCode.accessViolation && event.message.includes('read-only'))
      refused.writes += 1;
    else if (event.code === TftpErrorCode.unknownTransferId) refused.noTransfer += 1;
    else if (event.message.includes('expected RRQ')) refused.notRrq += 1;
    else if (/not found|access violation|not a regular file|busy|mail mode/.test(event.message))
      refused.requests += 1;
    else refused.other.push(`${event.code} ${event.message.slice(0, 80)}`);
  },
  onError: (error) => tftpEvents.errors.push(error),
};

/**
 * What a fuzz socket hears: nothing from the secret, DATA only from transfer ports, and no ERROR 5
 * from one (a wrong TID gets no answer: src/boot/tftp/session.ts).
 */
function onFuzzDatagram(ownPort: number, bytes: Buffer, from: number): void {
  const decoded = decodePacket(bytes);
  if (!decoded.ok) {
    tftpProblems.push(`server sent a malformed datagram to ${ownPort}: ${decoded.error.message}`);
    return;
  }
  const packet = decoded.packet;
  if (packet.type === 'error' && packet.code === TftpErrorCode.unknownTransferId && from !== tftp.port) {
    tftpStrayAnswers += 1;
    tftpProblems.push(`transfer port ${from} answered ${ownPort} with ERROR 5`);
  }
  if (packet.type !== 'data' && packet.type !== 'oack') return;
  if (from === tftp.port) tftpProblems.push(`the listener sent ${packet.type}`);
  if (packet.type === 'data' && Buffer.from(packet.data).includes(secret.slice(0, 20))) {
    tftpProblems.push(`DATA ${packet.block} carries the secret outside the root`);
  }
  if (packet.type === 'oack') {
    const tsize = packet.options.get('tsize');
    if (tsize !== undefined && !servableSizes.has(Number(tsize))) tftpProblems.push(`OACK tsize ${tsize}`);
  }
  if (from !== tftp.port && !endedTransfers.has(from)) {
    liveTransfer.set(ownPort, from);
    transferOwner.set(from, ownPort);
  }
}

before(async () => {
  process.stdout.write(`boot fuzz seed ${seed}; reproduce with ${reproduce}\n`);
  baseDir = await mkdtemp(path.join(tmpdir(), 'slipway-boot-fuzz-'));
  rootDir = path.join(baseDir, 'root');
  await mkdir(path.join(rootDir, 'sub'), { recursive: true });
  await mkdir(path.join(baseDir, 'outside'));
  await writeFile(path.join(baseDir, 'outside', 'secret.bin'), secret);
  for (const [name, content] of Object.entries(rootFiles)) await writeFile(path.join(rootDir, name), content);
  await symlink('../outside/secret.bin', path.join(rootDir, 'escape'));
  tftpSnapshotBefore = await snapshot(baseDir);

  relay = await Peer.open((bytes) => {
    let reply: DhcpPacket;
    try {
      reply = decodeDhcpPacket(bytes);
    } catch (error) {
      dhcpWireProblems.push(`undecodable reply ${hex(bytes)}: ${String(error)}`);
      return;
    }
    if (reply.xid >= probeXidMin) {
      probeReplies.set(reply.xid, reply);
      return;
    }
    dhcpWireReplies += 1;
    for (const problem of replyProblems(reply)) dhcpWireProblems.push(`xid ${reply.xid}: ${problem}`);
  });
  dhcp = await startDhcpServer({
    inventory: staticInventory(hardware),
    serverAddress: host,
    httpBaseUrl,
    mode: 'reservation',
    shouldAnswer: () => true,
    address: host,
    port: 0,
    relayPort: relay.port,
    logger: pino({ level: 'silent' }),
    hooks: {
      onReply: (event) => {
        const type = event.reply.options.messageType ?? 'none';
        dhcpRepliesByType.set(type, (dhcpRepliesByType.get(type) ?? 0) + 1);
        const storm = event.request.xid < probeXidMin;
        if (storm) dhcpRepliedXids.add(event.request.xid);
        for (const problem of exchangeProblems(event, relay.port)) {
          dhcpReplyProblems.push(`${storm ? 'datagram' : 'probe'} ${event.request.xid}: ${problem}`);
        }
      },
      onIgnore: (event) => dhcpIgnoredXids.add(event.request.xid),
      onError: (error) => dhcpErrors.push(error),
    },
  });
  tftp = await startTftpServer({ host, port: 0, root: rootDir, hooks: tftpHooks });
});

after(async () => {
  // Servers first: closing ends their transfers, so nothing is sent to a closed client port.
  await Promise.all([dhcp?.close(), tftp?.close()]);
  await Promise.all([relay, ...tftpPeers].map((peer) => peer?.close()));
  if (baseDir !== undefined) await rm(baseDir, { recursive: true, force: true });
});

/** Sends the probes and returns their replies by xid. */
async function askProbes(xidBase: number): Promise<DhcpPacket[]> {
  const replies: DhcpPacket[] = [];
  for (const [i, probe] of probes.entries()) {
    const xid = xidBase + i;
    await relay.send(probeRequest(probe.mac, probe.label, xid), dhcp.port);
    assert.ok(
      await until(() => probeReplies.has(xid), waitMs),
      `no answer to the ${probe.label} of ${probe.mac}`,
    );
    const reply = probeReplies.get(xid);
    assert.ok(reply !== undefined);
    replies.push({ ...reply, xid: 0 });
  }
  return replies;
}

function describeDatagram(index: number): string {
  const { bytes, mutation } = dhcpDatagram(index);
  return `datagram ${index} (${mutation}): ${hex(bytes)}`;
}

// ---- TFTP storm helpers -------------------------------------------------------------------------

const fuzzSocketsCount = 16;

interface TftpDatagram {
  readonly bytes: Uint8Array;
  readonly mutation: string;
  readonly from: Peer;
  /** The transfer port it goes to; undefined: the listener. */
  readonly tid: number | undefined;
  readonly stray: boolean;
}

/**
 * Datagram `index` of the TFTP storm. Listener datagrams are a function of the seed and the
 * index; which transfer a transfer-port datagram hits depends on which are live at the time.
 */
function tftpDatagram(index: number, fuzzers: readonly Peer[]): TftpDatagram {
  const random = Prng.derive(seed, `tftp/${index}`);
  const from = random.pick(fuzzers);
  if (random.chance(0.2)) {
    const mutant = mutateTftpTransferPacket(random);
    const live = [...liveTransfer].filter(([, tid]) => !endedTransfers.has(tid));
    if (live.length === 0) return { ...mutant, from, tid: undefined, stray: false };
    const [ownerPort, tid] = random.pick(live);
    const owner = fuzzers.find((peer) => peer.port === ownerPort) ?? from;
    // From another socket it is a packet with a wrong TID, which must not disturb the transfer.
    const stray = random.chance(0.2) && from !== owner;
    return { ...mutant, from: stray ? from : owner, tid, stray };
  }
  const origin = random.pick(tftpSeeds);
  const mutant = random.chance(0.05)
    ? { bytes: tftpRequestBytes(origin), mutation: `${origin.label}:unmutated` }
    : mutateTftpRequest(random, origin);
  return { ...mutant, from, tid: undefined, stray: false };
}

/** What the listener must do with `bytes`, by the packet codec: one refusal of a kind, or silence. */
function classifyForListener(
  bytes: Uint8Array,
  expected: Record<'malformed' | 'writes' | 'noTransfer' | 'notRrq' | 'requests' | 'silent', number>,
): void {
  const decoded = decodePacket(bytes);
  if (!decoded.ok) {
    // ERRORs are never answered, even malformed ones: two confused peers would ping-pong.
    if (peekOpcode(bytes) === Opcode.error) expected.silent += 1;
    else expected.malformed += 1;
    return;
  }
  switch (decoded.packet.type) {
    case 'rrq':
      expected.requests += 1;
      return;
    case 'wrq':
      expected.writes += 1;
      return;
    case 'data':
    case 'ack':
      expected.noTransfer += 1;
      return;
    case 'oack':
      expected.notRrq += 1;
      return;
    case 'error':
      expected.silent += 1;
      return;
    default: {
      const unknown: never = decoded.packet;
      throw new Error(`unknown packet ${JSON.stringify(unknown)}`);
    }
  }
}

/** Reads a file the RFC 1350 way (one ACK per block) with a fresh socket. */
async function download(
  filename: string,
  options: readonly (readonly [string, string])[],
): Promise<Uint8Array> {
  const peer = await Peer.open();
  const ack = (block: number): Uint8Array => Uint8Array.of(0, Opcode.ack, block >>> 8, block & 0xff);
  try {
    await peer.send(
      tftpRequestBytes({ label: 'download', opcode: Opcode.rrq, filename, mode: 'octet', options }),
      tftp.port,
    );
    const blocks: Uint8Array[] = [];
    let blockSize = 512;
    for (;;) {
      const { bytes, port } = await peer.next();
      const decoded = decodePacket(bytes);
      assert.ok(decoded.ok, `the server sent a malformed datagram: ${hex(bytes)}`);
      const packet = decoded.packet;
      if (packet.type === 'oack') {
        blockSize = Number(packet.options.get('blksize') ?? blockSize);
        await peer.send(ack(0), port);
        continue;
      }
      assert.equal(packet.type, 'data', `expected DATA, got ${JSON.stringify(packet)}`);
      if (packet.type !== 'data') continue;
      if (packet.block === blocks.length + 1) blocks.push(packet.data);
      await peer.send(ack(packet.block), port);
      if (packet.block === blocks.length && packet.data.length < blockSize) return Buffer.concat(blocks);
    }
  } finally {
    await peer.close();
  }
}

describe('boot services under a storm of malformed datagrams', { timeout: 240_000 }, () => {
  let probeRepliesBefore: DhcpPacket[];

  it(`DHCP: ${dhcpDatagrams} mutated datagrams; every reply agrees with the inventory`, async (t) => {
    t.diagnostic(`seed ${seed}`);
    probeRepliesBefore = await askProbes(probeXidMin);
    const c = dhcp.counters;
    const before = { ...c };
    const counts = { malformed: 0, lost: 0 };
    const startedMs = performance.now();
    for (let first = 0; first < dhcpDatagrams; first += batchSize) {
      const elapsedMs = performance.now() - startedMs;
      assert.ok(elapsedMs < stormBudgetMs, `DHCP storm over ${stormBudgetMs} ms at ${first}; ${reproduce}`);
      const sends: Promise<void>[] = [];
      const last = Math.min(first + batchSize, dhcpDatagrams);
      for (let index = first; index < last; index++) {
        const { bytes } = dhcpDatagram(index);
        if (decodesAsDhcp(bytes)) dhcpDecodable.push(index);
        else counts.malformed += 1;
        sends.push(relay.send(bytes, dhcp.port));
      }
      await Promise.all(sends);
      const read = (): number => c.received - before.received;
      if (!(await until(() => read() + counts.lost >= last, barrierMs))) counts.lost = last - read();
    }
    const settled = (): boolean =>
      c.received === c.replied + c.ignored + c.malformed + c.failed + c.overloaded + c.standby;
    assert.ok(await until(settled, waitMs), `counters never added up: ${JSON.stringify(c)}`);
    const replied = c.replied - before.replied;
    assert.ok(
      await until(() => dhcpWireReplies >= replied, waitMs),
      `${dhcpWireReplies} of ${replied} arrived`,
    );
    t.diagnostic(`DHCP counters ${JSON.stringify(c)}; replies ${JSON.stringify([...dhcpRepliesByType])}`);
    t.diagnostic(`DHCP storm took ${Math.round(performance.now() - startedMs)} ms, lost ${counts.lost}`);

    const firstBad = dhcpReplyProblems.map((problem) => /^datagram (\d+)/.exec(problem)?.[1]).find(Boolean);
    const culprit = firstBad === undefined ? '' : describeDatagram(Number(firstBad));
    assert.deepEqual(
      dhcpReplyProblems.slice(0, 10),
      [],
      `replies contradict the inventory; ${culprit}; ${reproduce}`,
    );
    assert.deepEqual(dhcpWireProblems.slice(0, 10), [], `replies on the wire are wrong; ${reproduce}`);
    assert.deepEqual(hardware, hardwareAsCommitted, 'the inventory objects were mutated');
    // Replies too large to encode are judged by their own test below; nothing else may fail.
    const unexpected = dhcpErrors.map(String).filter((error) => !oversizedReply.test(error));
    assert.deepEqual(unexpected.slice(0, 10), [], `the DHCP server reported errors; ${reproduce}`);
    // Accounting: every datagram read was counted once, and malformed is exactly the ones the
    // codec refuses, give or take what the kernel dropped.
    const received = c.received - before.received;
    assert.ok(received >= dhcpDatagrams * processedShareMin, `only ${received} of ${dhcpDatagrams} read`);
    assert.ok(received <= dhcpDatagrams);
    assert.equal(c.standby + c.overloaded, 0, 'batches of 64 never fill the 1024 answer slots');
    const malformed = c.malformed - before.malformed;
    const slack = dhcpDatagrams - received;
    assert.ok(
      malformed <= counts.malformed && malformed >= counts.malformed - slack,
      `${malformed} counted malformed, the codec refuses ${counts.malformed}; ${reproduce}`,
    );
    assert.ok(
      counts.malformed > dhcpDatagrams / 4,
      `only ${counts.malformed} malformed: the mutator is too gentle`,
    );
    assert.ok(
      counts.malformed < dhcpDatagrams * 0.9,
      `${counts.malformed} malformed: too few reach the answer code`,
    );
    assert.equal(dhcpWireReplies, replied, 'each counted reply reached the relay socket');
    assert.equal(dhcpRepliedXids.size, replied, 'one reply per datagram at most');
    // The storm reached the interesting answers, so the checks above had something to check.
    for (const type of ['OFFER', 'ACK', 'NAK'])
      assert.ok((dhcpRepliesByType.get(type) ?? 0) > 0, `no ${type}`);
  });

  it('DHCP: a request whose reply cannot fit is refused as bad input, not counted as a server failure', async () => {
    // Options a server must echo (82 relay agent information, 61 client identifier) can be
    // larger than any reply may be. Such a request cannot be answered; that is the sender's
    // doing, so it belongs with the refusals, not in `failed` and onError ("failed on our
    // side"), through which any client could flood the error log.
    // The smallest case first: a DISCOVER for a known machine whose relay agent information
    // (two 255-byte sub-options, three RFC 3396 instances) is larger than a 576-byte reply.
    const before = { ...dhcp.counters };
    const errorsBefore = dhcpErrors.length;
    const agentInfo = [1, 255, ...Array<number>(255).fill(0x61), 2, 255, ...Array<number>(255).fill(0x62)];
    const oversized = dhcpSeed({
      label: 'oversized-echo',
      mac: macBytes('52:54:00:f0:00:01'),
      xid: probeXidMin + 0x200,
      giaddr: hostBytes,
      options: [
        dhcpOption(53, [1]),
        dhcpOption(60, pxeBios),
        dhcpOption(82, agentInfo.slice(0, 255)),
        dhcpOption(82, agentInfo.slice(255, 510)),
        dhcpOption(82, agentInfo.slice(510)),
      ],
    });
    const bytes = dhcpSeedBytes(oversized);
    await relay.send(bytes, dhcp.port);
    const c = dhcp.counters;
    const done = (): boolean =>
      c.replied + c.ignored + c.malformed + c.failed >
      before.replied + before.ignored + before.malformed + before.failed;
    assert.ok(await until(done, waitMs), 'the oversized request was never dealt with');
    const reproducer = `reproduce: send ${hex(bytes)} to the DHCP port`;
    assert.equal(c.replied, before.replied, 'no reply can hold the echo');
    assert.equal(c.failed, before.failed, `counted as a server failure; ${reproducer}`);
    assert.equal(dhcpErrors.length, errorsBefore, `reported through onError: ${String(dhcpErrors.at(-1))}`);

    // The storm: every datagram the codec accepted was answered or refused, none "failed".
    const failedXids = dhcpDecodable.filter((xid) => !dhcpRepliedXids.has(xid) && !dhcpIgnoredXids.has(xid));
    const smallest = failedXids
      .map((xid) => ({ xid, length: dhcpDatagram(xid).bytes.length }))
      .sort((a, b) => a.length - b.length)[0];
    const example = smallest === undefined ? '' : describeDatagram(smallest.xid);
    assert.deepEqual(
      failedXids.slice(0, 10),
      [],
      `storm datagrams counted as failed, e.g. ${example}; ${reproduce}`,
    );
  });

  it('DHCP: answers valid requests after the storm exactly as before it', async () => {
    const repliesAfter = await askProbes(probeXidMin + 0x100);
    assert.deepEqual(repliesAfter, probeRepliesBefore);
    const [offer] = repliesAfter;
    assert.equal(offer?.options.messageType, 'OFFER');
    assert.equal(offer?.yiaddr, '10.20.0.11', 'the reserved address of bios');
    assert.equal(offer?.file, 'undionly.kpxe');
    const locked = repliesAfter[2];
    assert.equal(locked?.yiaddr, '10.20.0.13');
    assert.equal(locked?.file, '', 'no boot file for a machine whose allowPXE is off');
    for (const reply of repliesAfter) assert.deepEqual(replyProblems(reply), []);
  });

  it(`TFTP: ${tftpDatagrams} mutated datagrams; nothing outside the root is served, nothing is written`, async (t) => {
    const expected = { malformed: 0, writes: 0, noTransfer: 0, notRrq: 0, requests: 0, silent: 0 };
    const sent = { listener: 0, transfer: 0, strays: 0 };
    const fuzzers = await Promise.all(
      Array.from({ length: fuzzSocketsCount }, async () => {
        const owner = { port: 0 };
        const peer = await Peer.open((bytes, from) => onFuzzDatagram(owner.port, bytes, from));
        owner.port = peer.port;
        fuzzPorts.add(peer.port);
        tftpPeers.push(peer);
        return peer;
      }),
    );
    // The barrier: an ACK to the listener always earns an ERROR 5, and the listener reads in
    // order, so once it is answered every datagram of the batch before it has been read.
    const barrier = { sent: 0, answered: 0, missed: 0 };
    const probe = await Peer.open(() => (barrier.answered += 1));
    tftpPeers.push(probe);
    const startedMs = performance.now();
    for (let first = 0; first < tftpDatagrams; first += batchSize) {
      const elapsedMs = performance.now() - startedMs;
      assert.ok(elapsedMs < stormBudgetMs, `TFTP storm over ${stormBudgetMs} ms at ${first}; ${reproduce}`);
      const sends: Promise<void>[] = [];
      for (let index = first; index < Math.min(first + batchSize, tftpDatagrams); index++) {
        const datagram = tftpDatagram(index, fuzzers);
        if (datagram.tid === undefined) {
          classifyForListener(datagram.bytes, expected);
          sent.listener += 1;
        } else {
          sent.transfer += 1;
          if (datagram.stray) sent.strays += 1;
        }
        sends.push(datagram.from.send(datagram.bytes, datagram.tid ?? tftp.port));
      }
      await Promise.all(sends);
      barrier.sent += 1;
      // A probe can itself be dropped when a loaded machine overflows the socket buffer: send
      // it again a few times; only a listener that never answers counts as a miss.
      const want = barrier.answered + 1;
      let answered = false;
      for (let attempt = 0; attempt < barrierTries && !answered; attempt++) {
        await probe.send(Uint8Array.of(0, Opcode.ack, 0, 0), tftp.port);
        answered = await until(() => barrier.answered >= want, barrierMs);
      }
      if (!answered) barrier.missed += 1;
    }
    t.diagnostic(
      `TFTP storm took ${Math.round(performance.now() - startedMs)} ms; sent ${JSON.stringify(sent)}`,
    );
    t.diagnostic(`expected refusals ${JSON.stringify(expected)}; seen ${JSON.stringify(tftpEvents.refused)}`);
    t.diagnostic(
      `transfers started ${tftpEvents.started.length}, ended ${tftpEvents.ended}, ERROR 5 from transfer ports ${tftpStrayAnswers}`,
    );

    assert.deepEqual(tftpProblems.slice(0, 10), [], `the TFTP server misbehaved; ${reproduce}`);
    assert.deepEqual(tftpEvents.errors.map(String), [], `the TFTP server reported errors; ${reproduce}`);
    assert.deepEqual(tftpEvents.refused.other, [], 'refusals of an unexpected kind');
    assert.equal(barrier.missed, 0, 'the listener answered every barrier probe');
    // Accounting: each malformed or misdirected datagram earned exactly one refusal of its kind.
    // Loopback under the barrier drops nothing; allow a sliver in case the kernel does.
    const slack = Math.ceil(sent.listener * (1 - processedShareMin));
    const refused = tftpEvents.refused;
    for (const kind of ['malformed', 'writes', 'noTransfer', 'notRrq'] as const) {
      assert.ok(
        refused[kind] <= expected[kind] && refused[kind] >= expected[kind] - slack,
        `${refused[kind]} ${kind} refusals for ${expected[kind]} such datagrams; ${reproduce}`,
      );
    }
    // A well-formed read is served, refused, or (a retransmission, or asked again while the
    // first is still being looked up) dropped silently by design.
    const reads = tftpEvents.started.length + refused.requests;
    assert.ok(reads <= expected.requests, `${reads} outcomes for ${expected.requests} reads`);
    assert.ok(
      tftpEvents.started.length > 0 && refused.requests > 0,
      'the storm reached both serving and refusing',
    );
    assert.ok(
      expected.malformed > sent.listener / 4,
      `only ${expected.malformed} malformed: the mutator is too gentle`,
    );
    assert.ok(
      sent.strays > 0 && tftpStrayAnswers === 0,
      `${tftpStrayAnswers} ERROR 5 from transfer ports for ${sent.strays} wrong-TID packets sent`,
    );
    assert.ok(sent.transfer > tftpDatagrams / 20, `only ${sent.transfer} datagrams reached transfer ports`);

    // Nothing outside the root was served, and nothing anywhere was written.
    const realRoot = await realpath(rootDir);
    for (const { filename, bytes } of tftpEvents.started) {
      assert.ok(servableSizes.has(bytes), `a transfer of ${bytes} bytes for "${filename}"`);
    }
    for (const filename of new Set(tftpEvents.started.map((event) => event.filename))) {
      const served = await realpath(path.join(realRoot, filename.replaceAll('\\', '/')));
      assert.ok(
        served.startsWith(realRoot + path.sep),
        `"${filename}" was served from ${served}; ${reproduce}`,
      );
    }
    assert.deepEqual(
      await snapshot(baseDir),
      tftpSnapshotBefore,
      'files changed under the TFTP root or beside it',
    );
  });

  it('TFTP: transfers files byte-identical after the storm', async () => {
    const big = await download('ipxe.efi', [
      ['blksize', '1468'],
      ['tsize', '0'],
    ]);
    assert.equal(sha256(big), sha256(rootFiles['ipxe.efi'] ?? new Uint8Array()));
    const small = await download('undionly.kpxe', []);
    assert.equal(sha256(small), sha256(rootFiles['undionly.kpxe'] ?? new Uint8Array()));
  });
});

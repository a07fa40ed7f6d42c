// `npm run bench -- dhcp [--quick] [--mode reservation|dynamic|both] [--rates LIST] [--period S]
//  [--nodes 1|3] [--keep] [--slipway-only] [--client-rcvbuf BYTES]`
// Slipway's DHCP server against Kea 2.2 (memfile), measured with perfdhcp in one network-namespace
// lab, one system at a time: for each, the highest DORA rate with under 1 % drops, found by a
// bounded search over rates. Prints one JSON object per line on stdout (the first describes the
// machine, the last compares the systems with the targets); progress goes to stderr. See
// bench/README.md.
//
// The lab: namespace lan holds bridge br0; n1..n3 each hold one server's veth on it (n1 runs Kea
// when Kea is measured); cli holds perfdhcp's veth. Every process is started inside the lab and
// stopped by PID, and the namespaces are deleted at the end, on failure and on Ctrl-C too.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { NetnsLab, type LabProcess } from '../cluster/netns-lab.js';
import { repoRoot } from './clusters.js';
import { machineFacts } from './machine.js';
import { eldSnapshot } from './eld-read.js';
import type { NodeStatusLine } from './dhcp-admin.js';
import { findTools, installCommand, keaConfig, sbinPath, type Tools } from './dhcp-kea.js';
import {
  dropPercentMax,
  parsePerfdhcp,
  perfdhcpArgv,
  stepOf,
  sweepRates,
  type SweepResult,
  type SweepStep,
} from './dhcp-perfdhcp.js';
import { raiseRcvbufDefault, readRcvbufDefault } from './rcvbuf-default.js';
import { slipwayBuild } from './slipway-build.js';
import { cpuSeconds, machineCpu, ratio, round, sleep } from './stats.js';
import { wholeNumber } from './options.js';

const adminScript = fileURLToPath(new URL('./dhcp-admin.ts', import.meta.url));

/** The lab's one subnet. 10.96/24: clear of ANCHORS' 10.99 and of the tests' subnets. */
const net = {
  prefix: 24,
  cidr: '10.96.0.0/24',
  router: '10.96.0.1',
  client: '10.96.0.2',
  /** Server addresses: n1 (also Kea's), n2, n3. */
  nodes: ['10.96.0.1', '10.96.0.3', '10.96.0.4'],
  pool: ['10.96.0.10', '10.96.0.250'] as const,
};
const serverIface = 'eth0';
const clientIface = 'eth0';
const raftPort = 7000;
const apiPort = 7001;
/** perfdhcp's client count, as in ANCHORS §2 (the pool holds 241 addresses). */
const clients = 200;
const leaseTimeS = 3600;
/** perfdhcp's receive buffer (the host's default for the run): 1 MiB holds ~70 ms of replies. */
const clientRcvbufDefaultBytes = 1024 * 1024;
const clientRcvbufMaxBytes = 64 * 1024 * 1024;

/** Unmeasured load before each sweep, so every client holds a lease and the server is warm. */
const warmupRatePerS = 500;
/** Warm-up tries while a server comes up: each is a warm-up run. */
const warmupTriesMax = 5;
const stepPauseMs = 1000;
/** perfdhcp is killed this long after its period should have ended. */
const perfdhcpSlackMs = 30_000;
/** tsx compiles the server on first start; three at once on 2 busy cores take a while. */
const nodeReadyTimeoutMs = 90_000;
const leaderTimeoutMs = 30_000;
const adminTimeoutMs = 180_000;
/** How long the event-loop probe gets to write its histogram. */
/** SIGTERM, then SIGKILL: long enough for a leader hand-over and a CPU profile write. */
const stopGraceMs = 15_000;

type Mode = 'reservation' | 'dynamic';

interface Options {
  readonly quick: boolean;
  readonly modes: readonly Mode[];
  readonly rates: readonly number[];
  readonly periodS: number;
  readonly warmupS: number;
  readonly nodes: number;
  readonly keep: boolean;
  readonly slipwayOnly: boolean;
  /** net.core.rmem_default for the run (see bench/rcvbuf-default.ts); 0 leaves the host's. */
  readonly clientRcvbufBytes: number;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      quick: { type: 'boolean', default: false },
      mode: { type: 'string', default: 'both' },
      rates: { type: 'string' },
      period: { type: 'string' },
      nodes: { type: 'string', default: '3' },
      keep: { type: 'boolean', default: false },
      'slipway-only': { type: 'boolean', default: false },
      'client-rcvbuf': { type: 'string', default: String(clientRcvbufDefaultBytes) },
    },
    strict: true,
  });
  const chosen: readonly Mode[] | undefined =
    values.mode === 'both'
      ? ['reservation', 'dynamic']
      : values.mode === 'reservation' || values.mode === 'dynamic'
        ? [values.mode]
        : undefined;
  if (chosen === undefined) throw new Error('--mode must be reservation, dynamic or both');
  const rates = (
    values.rates ??
    (values.quick ? '1000,2000,4000,6000,8000,10000' : '1000,2000,3000,4000,5000,6000,7000,8000,9000,10000')
  )
    .split(',')
    .filter((s) => s !== '')
    .map((s) => wholeNumber(s, 'rates', 1));
  if (rates.length === 0 || rates.length > 20) throw new Error('--rates must list 1 to 20 rates');
  const periodS = wholeNumber(values.period ?? (values.quick ? '3' : '10'), 'period', 1, 120);
  const clientRcvbuf = values['client-rcvbuf'];
  if (!/^\d+$/.test(clientRcvbuf) || Number(clientRcvbuf) > clientRcvbufMaxBytes)
    throw new Error(`--client-rcvbuf must be 0 (the host's default) to ${clientRcvbufMaxBytes} bytes`);
  const nodes = wholeNumber(values.nodes, 'nodes', 1);
  if (nodes !== 1 && nodes !== 3) throw new Error('--nodes must be 1 or 3');
  return {
    quick: values.quick,
    modes: chosen,
    rates,
    periodS,
    warmupS: values.quick ? 2 : 3,
    nodes,
    keep: values.keep,
    slipwayOnly: values['slipway-only'],
    clientRcvbufBytes: Number(clientRcvbuf),
  };
}

function emit(line: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

function progress(msg: string): void {
  process.stderr.write(`[bench dhcp ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// ------------------------------------------------------------ the lab

interface BenchLab {
  readonly lab: NetnsLab;
  /** perfdhcp's namespace; the admin helper runs there too. */
  readonly cli: string;
  /** The servers' namespaces, n1 first. */
  readonly servers: readonly string[];
  /** Configuration, MAC list, leases and logs; removed at the end unless --keep. */
  readonly dir: string;
  readonly macFile: string;
}

let liveLab: BenchLab | undefined;
let keepDir = false;

async function buildLab(nodes: number): Promise<BenchLab> {
  const dir = mkdtempSync(join(tmpdir(), 'slipway-dhcp-bench-'));
  let lab: NetnsLab;
  try {
    lab = await NetnsLab.create();
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const macFile = join(dir, 'macs.txt');
  writeFileSync(macFile, `${clientMacs().join('\n')}\n`);
  const partial: BenchLab = { lab, cli: '', servers: [], dir, macFile };
  liveLab = partial;
  const lan = await lab.addNamespace('lan');
  await lab.addBridge(lan, 'br0');
  const cli = await lab.addNamespace('cli');
  await lab.connect(
    { ns: lan, ifname: 'p-cli', bridge: 'br0' },
    { ns: cli, ifname: clientIface, addresses: [`${net.client}/${net.prefix}`] },
  );
  const servers: string[] = [];
  for (let i = 0; i < nodes; i++) {
    const ns = await lab.addNamespace(`n${i + 1}`);
    await lab.connect(
      { ns: lan, ifname: `p-n${i + 1}`, bridge: 'br0' },
      { ns, ifname: serverIface, addresses: [`${net.nodes[i]!}/${net.prefix}`] },
    );
    servers.push(ns);
  }
  const built: BenchLab = { ...partial, cli, servers };
  liveLab = built;
  return built;
}

async function destroyLab(): Promise<void> {
  const b = liveLab;
  liveLab = undefined;
  if (b === undefined) return;
  await b.lab.destroy();
  if (keepDir) progress(`kept configuration, leases and logs in ${b.dir}`);
  else rmSync(b.dir, { recursive: true, force: true });
}

/** perfdhcp's clients: 52:54:00:96:00:00 onwards. */
function clientMacs(): string[] {
  const hex = (n: number): string => n.toString(16).padStart(2, '0');
  return Array.from({ length: clients }, (_, i) => `52:54:00:96:${hex(i >> 8)}:${hex(i & 0xff)}`);
}

/** The address reserved for client i: the pool's start onwards (the pool holds them all). */
function reservedIp(i: number): string {
  const octets = net.pool[0].split('.');
  return [...octets.slice(0, 3), String(Number(octets[3]) + i)].join('.');
}

/** Runs argv in `ns` from the repository root; throws with its output unless it exits 0. */
async function runIn(b: BenchLab, ns: string, argv: readonly string[], timeoutMs: number): Promise<string> {
  const started = b.lab.spawn(ns, argv, { cwd: repoRoot });
  const timer = setTimeout(() => started.child.kill('SIGKILL'), timeoutMs);
  const { code, signal } = await started.exited;
  clearTimeout(timer);
  if (code !== 0)
    throw new Error(
      `${argv.slice(0, 4).join(' ')} exited ${code ?? signal}:\n${started.output.slice(-2000)}`,
    );
  return started.output;
}

async function stopAll(processes: readonly LabProcess[]): Promise<void> {
  await Promise.all(
    processes.map(async (p) => {
      if (!p.running) return;
      p.child.kill('SIGTERM');
      const timer = setTimeout(() => p.child.kill('SIGKILL'), stopGraceMs);
      await p.exited;
      clearTimeout(timer);
    }),
  );
}

// ------------------------------------------------------------ perfdhcp

interface Target {
  readonly server: string;
  /** The namespace the answering server runs in. */
  readonly ns: string;
  /** The server's processes, for CPU per step. */
  readonly pids: readonly number[];
  /** The answering process, when it runs bench/eld-probe.ts (Slipway's leader). */
  readonly eld?: { readonly pid: number; readonly dir: string };
}

async function perfdhcpStep(
  b: BenchLab,
  target: Target,
  ratePerS: number,
  periodS: number,
): Promise<SweepStep> {
  const argv = perfdhcpArgv({
    iface: clientIface,
    server: target.server,
    ratePerS,
    clients,
    periodS,
    macFile: b.macFile,
  });
  const udp0 = await Promise.all([udpRcvbufErrors(b, target.ns), udpRcvbufErrors(b, b.cli)]);
  if (target.eld !== undefined) await eldSnapshot(target.eld); // starts the step's histogram
  const cpu0 = target.pids.map(cpuSeconds);
  const client0 = reapedChildrenCpuSeconds();
  const backlog0 = softnetDropped();
  const machine0 = machineCpu().busy;
  const t0 = performance.now();
  const run = await b.lab.run(b.cli, argv, periodS * 1000 + perfdhcpSlackMs);
  const wallS = (performance.now() - t0) / 1000;
  const cpu1 = target.pids.map(cpuSeconds);
  const used = cpu1.flatMap((c, i) => {
    const c0 = cpu0[i];
    return c === null || c0 === null || c0 === undefined ? [] : [c - c0];
  });
  const server = used.length === target.pids.length ? round(used.reduce((a, c) => a + c, 0) / wallS) : null;
  const machine = round((machineCpu().busy - machine0) / wallS);
  const client = client0 === null ? null : round((reapedChildrenCpuSeconds()! - client0) / wallS);
  const backlog1 = softnetDropped();
  const eld = target.eld === undefined ? undefined : await eldSnapshot(target.eld);
  const udp1 = await Promise.all([udpRcvbufErrors(b, target.ns), udpRcvbufErrors(b, b.cli)]);
  const delta = (i: 0 | 1): number | null => {
    const [a, z] = [udp0[i], udp1[i]];
    return a === null || z === null ? null : z - a;
  };
  const output = `${run.stdout}${run.stderr}`;
  const report = parsePerfdhcp(output);
  let step: SweepStep = {
    ...stepOf(ratePerS, periodS, report, { server, client, machine }),
    udp_rcvbuf_errors: { server: delta(0), client: delta(1) },
    backlog_drops: backlog0 === null || backlog1 === null ? null : backlog1 - backlog0,
    ...(eld === undefined ? {} : { server_event_loop_delay_ms: eld }),
  };
  if (report.ratePerS === null || report.discoverOffer === null)
    step = { ...step, error: `perfdhcp exited ${run.code ?? run.signal}: ${output.slice(-600)}` };
  return step;
}

/** The Udp RcvbufErrors counter of namespace `ns` (/proc/net/snmp is per namespace). */
async function udpRcvbufErrors(b: BenchLab, ns: string): Promise<number | null> {
  const run = await b.lab.run(ns, ['cat', '/proc/net/snmp'], 5000);
  const [names, values] = run.stdout.split('\n').filter((l) => l.startsWith('Udp:'));
  const at = names?.split(/\s+/).indexOf('RcvbufErrors') ?? -1;
  const value = at < 0 ? undefined : values?.split(/\s+/)[at];
  return value === undefined ? null : Number(value);
}

/**
 * Packets the kernel dropped because a CPU's input backlog was full (net.core.netdev_max_backlog),
 * summed over the CPUs: the second column of /proc/net/softnet_stat, machine-wide. A veth hands
 * every packet to that backlog, so a flood can cost packets of any kind, raft's TCP included.
 */
function softnetDropped(): number | null {
  try {
    const lines = readFileSync('/proc/net/softnet_stat', 'utf8').trim().split('\n');
    return lines.reduce((sum, line) => sum + parseInt(line.trim().split(/\s+/)[1] ?? '0', 16), 0);
  } catch {
    return null;
  }
}

/**
 * CPU seconds of this process's children that have exited and been reaped (cutime + cstime in
 * /proc/self/stat): perfdhcp's own, read around its run, since it is gone before it can be read.
 */
function reapedChildrenCpuSeconds(): number | null {
  try {
    const text = readFileSync('/proc/self/stat', 'utf8');
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // After "(comm) ": cutime is field 16 and cstime field 17 -> rest[13], rest[14].
    return (Number(rest[13]) + Number(rest[14])) / 100;
  } catch {
    return null;
  }
}

function describeStep(s: SweepStep): string {
  const pct = (x: number | null): string => (x === null ? '-' : `${round(x, 3)}%`);
  const dash = (x: number | null | undefined): string => (x === null || x === undefined ? '-' : `${x}`);
  const parts = [
    `${s.target_per_s}/s: achieved ${dash(s.achieved_per_s)}/s, acks ${dash(s.acks_per_s)}/s`,
    `drops DO ${pct(s.do_drop_pct)} RA ${pct(s.ra_drop_pct)}`,
    `avg ms DO ${dash(s.do_avg_ms)} RA ${dash(s.ra_avg_ms)}`,
    `cores: server ${dash(s.server_cores)} (${dash(s.server_cpu_us_per_exchange)} us/DORA)`,
    `perfdhcp ${dash(s.client_cores)}`,
    `machine ${dash(s.machine_busy_cores)}`,
    `UDP rcvbuf drops: server ${dash(s.udp_rcvbuf_errors?.server)}`,
    `client ${dash(s.udp_rcvbuf_errors?.client)}`,
    `backlog drops ${dash(s.backlog_drops)}`,
  ];
  const eld = s.server_event_loop_delay_ms;
  if (eld !== undefined && eld !== null)
    parts.push(`leader event-loop delay p99 ${eld.p99_ms} max ${eld.max_ms} ms, utilization ${eld.elu}`);
  const error = s.error === undefined ? '' : ` (${s.error.split('\n')[0] ?? ''})`;
  return `${parts.join(', ')} -> ${s.pass ? 'pass' : 'FAIL'}${error}`;
}

/** A change of the server perfdhcp aims at, after a failed step (Slipway: a new leader). */
interface Retarget {
  readonly after_step_per_s: number;
  readonly from: string;
  readonly to: string;
}

/**
 * Warm-up runs at a low rate until one is answered (the server may still be coming up), then
 * the rate search. After a failed step `retarget`, when given, names the server to aim at
 * from then on: only Slipway's leader answers, and an overload can cost it the leadership.
 */
async function measure(
  b: BenchLab,
  first: Target,
  o: Options,
  label: string,
  retarget?: () => Promise<Target>,
): Promise<{ warmup: SweepStep; sweep: SweepResult; retargets: Retarget[] }> {
  let target = first;
  let warmup: SweepStep | undefined;
  for (let i = 0; i < warmupTriesMax; i++) {
    warmup = await perfdhcpStep(b, target, warmupRatePerS, o.warmupS);
    progress(`${label} warm-up ${describeStep(warmup)}`);
    if ((warmup.acks_per_s ?? 0) > 0) break;
    await sleep(stepPauseMs);
  }
  if (warmup === undefined || (warmup.acks_per_s ?? 0) === 0)
    throw new Error(`${label}: no DHCPACK in ${warmupTriesMax} warm-up runs; the server answers nothing`);
  const retargets: Retarget[] = [];
  const sweep = await sweepRates(o.rates, async (rate) => {
    await sleep(stepPauseMs);
    const step: SweepStep = { ...(await perfdhcpStep(b, target, rate, o.periodS)), server: target.server };
    progress(`${label} ${describeStep(step)}`);
    if (!step.pass && retarget !== undefined) {
      const next = await retarget();
      if (next.server !== target.server) {
        progress(`${label}: the server to aim at moved from ${target.server} to ${next.server}`);
        retargets.push({ after_step_per_s: rate, from: target.server, to: next.server });
        target = next;
      }
    }
    return step;
  });
  return { warmup, sweep, retargets };
}

// ------------------------------------------------------------ Kea

type KeaConfigName = 'pool' | 'reservations';

async function runKea(b: BenchLab, config: KeaConfigName, o: Options, tools: Tools): Promise<SweepResult> {
  const ns = b.servers[0]!;
  const base = join(b.dir, `kea-${config}`);
  const leaseFile = `${base}-leases4.csv`;
  const configFile = `${base}.json`;
  const macs = clientMacs();
  const spec = {
    iface: serverIface,
    subnet: { cidr: net.cidr, router: net.router, pool: net.pool },
    leaseFile,
    logFile: `${base}.log`,
    leaseTimeS,
  };
  writeFileSync(
    configFile,
    JSON.stringify(
      keaConfig(
        config === 'reservations'
          ? { ...spec, reservations: macs.map((mac, i) => ({ mac, ip: reservedIp(i) })) }
          : spec,
      ),
      null,
      2,
    ),
  );
  const env = { KEA_PIDFILE_DIR: b.dir, KEA_LOCKFILE_DIR: b.dir, PATH: sbinPath() };
  await b.lab.check(ns, ['kea-dhcp4', '-t', configFile]);
  progress(`kea ${config}: starting kea-dhcp4 ${tools.kea ?? ''} in ${ns} on ${net.nodes[0]!}`);
  const kea = b.lab.spawn(ns, ['kea-dhcp4', '-c', configFile], { env });
  try {
    const pid = kea.pid;
    if (pid === undefined) throw new Error('kea-dhcp4 did not start');
    const { warmup, sweep } = await measure(
      b,
      { server: net.nodes[0]!, ns, pids: [pid] },
      o,
      `kea ${config}`,
    );
    if (!kea.running) throw new Error(`kea-dhcp4 exited during the run:\n${kea.output.slice(-2000)}`);
    emit({
      bench: 'dhcp',
      system: 'kea',
      config,
      version: tools.kea,
      nodes: 1,
      server: net.nodes[0],
      clients,
      period_s: o.periodS,
      best_per_s: sweep.best_per_s,
      best_step: sweep.best_step,
      other_cores_max: otherCoresMax(sweep),
      warmup,
      steps: sweep.steps,
      lease_file_mb: fileMb(leaseFile),
    });
    return sweep;
  } finally {
    await stopAll([kea]);
    if (o.keep) writeFileSync(`${base}.stdout`, kea.output);
    rmSync(leaseFile, { force: true });
  }
}

/**
 * The most CPU anything but the server and perfdhcp took during a step: above a few tenths of a
 * core, other jobs were competing for this machine's cores and the figures are noisy.
 */
function otherCoresMax(sweep: SweepResult): number | null {
  const others = sweep.steps.flatMap((s) => (s.other_cores === null ? [] : [s.other_cores]));
  return others.length === 0 ? null : Math.max(...others);
}

function fileMb(path: string): number | null {
  try {
    return round(statSync(path).size / 2 ** 20, 1);
  } catch {
    return null;
  }
}

// ------------------------------------------------------------ Slipway

/** The flags a mode adds to `slipway server`. */
function modeArgs(mode: Mode): string[] {
  switch (mode) {
    case 'reservation':
      return ['--dhcp-mode', 'reservation'];
    case 'dynamic':
      return [
        ...['--dhcp-mode', 'dynamic'],
        ...['--dhcp-pool', `${net.pool[0]}-${net.pool[1]}/${net.prefix}`],
        ...['--dhcp-lease-time', String(leaseTimeS)],
      ];
  }
}

/** The machines perfdhcp plays, each with its reserved address (reservation mode). */
function hardwareDocuments(): object[] {
  return clientMacs().map((mac, i) => ({
    id: `perf-${String(i).padStart(3, '0')}`,
    arch: 'x86_64',
    uefi: false,
    interfaces: [{ mac, ip: `${reservedIp(i)}/${net.prefix}`, gateway: net.router, leaseTime: leaseTimeS }],
    netboot: { allowPXE: true, allowWorkflow: true },
  }));
}

/**
 * Reservation mode: registers every perfdhcp client with its reserved address, through the API,
 * and waits until every node has applied them. Dynamic mode registers nothing: like Kea's pool
 * configuration, the server knows none of the clients and every address comes from the pool.
 */
async function registerClients(b: BenchLab, mode: Mode): Promise<object | null> {
  if (mode === 'dynamic') return null;
  const documentsFile = join(b.dir, 'hardware.json');
  writeFileSync(documentsFile, JSON.stringify(hardwareDocuments()));
  const out = await runIn(
    b,
    b.cli,
    [process.execPath, '--import', 'tsx', adminScript, 'register', apiAddrs(b), documentsFile],
    adminTimeoutMs,
  );
  return JSON.parse(out.split('\n').find((l) => l.startsWith('{')) ?? '{}') as object;
}

class SlipwayStartError extends Error {
  readonly refusedFlags: boolean;
  constructor(message: string, refusedFlags: boolean) {
    super(message);
    this.name = 'SlipwayStartError';
    this.refusedFlags = refusedFlags;
  }
}

function nodeArgv(i: number, ids: readonly string[], dataDir: string, mode: Mode): string[] {
  const addr = net.nodes[i]!;
  const peers = ids.map((id, j) => `${id}=${net.nodes[j]!}:${raftPort}`).join(',');
  const node = [process.execPath];
  // SLIPWAY_BENCH_PROFILE_DIR=DIR: a V8 CPU profile per server, written when it stops (SIGTERM).
  const profileDir = process.env['SLIPWAY_BENCH_PROFILE_DIR'];
  if (profileDir !== undefined && profileDir !== '') node.push('--cpu-prof', '--cpu-prof-dir', profileDir);
  // The probe measures the event-loop delay from inside, as for `raft` (see bench/eld-probe.ts):
  // a DHCP flood that stalls the loop delays raft heartbeats too.
  const build = slipwayBuild();
  node.push(...build.probeArgs);
  return [
    ...node,
    ...[build.main, 'server', '--id', ids[i]!, '--data-dir', dataDir],
    ...['--raft-addr', `${addr}:${raftPort}`, '--api-addr', `${addr}:${apiPort}`, '--peers', peers],
    // info, not debug: the DHCP server logs every answer at debug.
    ...['--log-level', 'info', '--insecure', '--insecure-allow-network'],
    ...['--dhcp-interface', serverIface, ...modeArgs(mode)],
  ];
}

async function startNodes(b: BenchLab, mode: Mode): Promise<LabProcess[]> {
  const ids = b.servers.map((_, i) => `n${i + 1}`);
  mkdirSync(eldDir(b), { recursive: true });
  const nodes = b.servers.map((ns, i) =>
    b.lab.spawn(ns, nodeArgv(i, ids, join(b.dir, `slipway-${mode}-${ids[i]!}`), mode), {
      cwd: repoRoot,
      env: { SLIPWAY_BENCH_ELD_DIR: eldDir(b) },
    }),
  );
  const results = await Promise.allSettled(
    nodes.map((p) =>
      p.waitForOutput((out) => out.includes('"msg":"node serving"'), nodeReadyTimeoutMs, 'node serving'),
    ),
  );
  const failed = results.findIndex((r) => r.status === 'rejected');
  if (failed >= 0) {
    const output = nodes[failed]!.output;
    await stopAll(nodes);
    const refused =
      mode === 'dynamic' &&
      !nodes[failed]!.running &&
      /dhcp-?(mode|pool|lease-?time)|dhcpMode|dhcpPool|dhcpLeaseTime|unknown option/i.test(output);
    const tail = output.trim().split('\n').slice(-12).join('\n');
    throw new SlipwayStartError(
      refused
        ? `slipway server refused the dynamic-mode flags (${modeArgs(mode).join(' ')}); ` +
            `dynamic mode has not landed in src/ yet?\n${tail}`
        : `node n${failed + 1} did not start:\n${tail}`,
      refused,
    );
  }
  return nodes;
}

/**
 * The nodes' "raft state changed" log lines since `sinceMs`: a leader that loses its term
 * under a DHCP flood shows here, seconds after the warm-up started.
 */
function raftStateChanges(nodes: readonly LabProcess[], sinceMs: number): object[] {
  const changes: object[] = [];
  nodes.forEach((node, i) => {
    for (const line of node.output.split('\n')) {
      if (!line.includes('"msg":"raft state changed"')) continue;
      try {
        const r = JSON.parse(line) as { time?: number; role?: unknown; term?: unknown; leader?: unknown };
        if (r.time === undefined || r.time < sinceMs) continue;
        const at_s = round((r.time - sinceMs) / 1000, 1);
        changes.push({ node: `n${i + 1}`, at_s, role: r.role, term: r.term, leader: r.leader });
      } catch {
        // A line cut by the output cap.
      }
    }
  });
  return changes;
}

function eldDir(b: BenchLab): string {
  return join(b.dir, 'eld');
}

function apiAddrs(b: BenchLab): string {
  return b.servers.map((_, i) => `${net.nodes[i]!}:${apiPort}`).join(',');
}

async function nodeStatus(b: BenchLab): Promise<NodeStatusLine[]> {
  const out = await runIn(
    b,
    b.cli,
    [process.execPath, '--import', 'tsx', adminScript, 'status', apiAddrs(b)],
    adminTimeoutMs,
  );
  return out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as NodeStatusLine);
}

/** The leader every node names, once they agree. */
async function waitLeader(b: BenchLab): Promise<{ index: number; commit: number }> {
  const deadline = Date.now() + leaderTimeoutMs;
  let last: NodeStatusLine[] = [];
  while (Date.now() < deadline) {
    last = await nodeStatus(b);
    const leaders = new Set(last.map((s) => s.leader));
    const [leader] = leaders;
    const index = last.findIndex((s) => s.id === leader);
    if (leaders.size === 1 && leader !== null && leader !== undefined && leader !== '' && index >= 0)
      return { index, commit: last[index]!.commit ?? 0 };
    await sleep(500);
  }
  throw new Error(`no agreed leader within ${leaderTimeoutMs} ms: ${JSON.stringify(last)}`);
}

async function runSlipway(b: BenchLab, mode: Mode, o: Options): Promise<SweepResult> {
  const label = `slipway ${mode}`;
  progress(`${label}: starting ${b.servers.length} node(s): ${modeArgs(mode).join(' ')}`);
  const nodes = await startNodes(b, mode);
  try {
    const leader = await waitLeader(b);
    const leaderAddr = net.nodes[leader.index]!;
    progress(`${label}: leader n${leader.index + 1} (${leaderAddr})`);
    const registered = await registerClients(b, mode);
    if (registered !== null) progress(`${label}: registered ${JSON.stringify(registered)}`);
    const before = await waitLeader(b);
    const pids = nodes.flatMap((p) => (p.pid === undefined ? [] : [p.pid]));
    const targetOf = (index: number): Target => {
      const pid = nodes[index]?.pid;
      return {
        server: net.nodes[index]!,
        ns: b.servers[index]!,
        pids,
        ...(pid === undefined ? {} : { eld: { pid, dir: eldDir(b) } }),
      };
    };
    const sweepStartMs = Date.now();
    const { warmup, sweep, retargets } = await measure(b, targetOf(before.index), o, label, async () =>
      targetOf((await waitLeader(b)).index),
    );
    const after = await waitLeader(b);
    const exited = nodes.filter((p) => !p.running).map((p) => p.name);
    emit({
      bench: 'dhcp',
      system: 'slipway',
      mode,
      nodes: b.servers.length,
      leader: `n${before.index + 1}`,
      leader_changed: after.index !== before.index,
      server: net.nodes[before.index],
      server_flags: modeArgs(mode),
      clients,
      period_s: o.periodS,
      best_per_s: sweep.best_per_s,
      best_step: sweep.best_step,
      other_cores_max: otherCoresMax(sweep),
      warmup,
      steps: sweep.steps,
      registered,
      raft_commit: { before_warmup: before.commit, after_sweep: after.commit },
      raft_state_changes: raftStateChanges(nodes, sweepStartMs),
      retargets,
      ...(exited.length === 0 ? {} : { exited }),
    });
    return sweep;
  } finally {
    await stopAll(nodes);
    if (o.keep)
      nodes.forEach((p, i) => writeFileSync(join(b.dir, `slipway-${mode}-n${i + 1}.log`), p.output));
  }
}

// ------------------------------------------------------------ the run

/** kea-dhcp4 processes this benchmark did not start (the Debian service, say): they take CPU. */
function strayKeaPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'kea-dhcp4') pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

interface Outcome {
  best: number | null;
  otherCoresMax?: number | null;
  error?: string;
  refusedFlags?: boolean;
}

/** Other jobs took more than this many cores during a step: the run is too noisy to judge. */
const noisyOtherCores = 0.3;

async function attempt(what: string, work: () => Promise<SweepResult>): Promise<Outcome> {
  try {
    const sweep = await work();
    return { best: sweep.best_per_s, otherCoresMax: otherCoresMax(sweep) };
  } catch (err) {
    const refusedFlags = err instanceof SlipwayStartError && err.refusedFlags;
    progress(`${what} failed: ${errorText(err)}`);
    emit({ bench: 'dhcp', what, error: errorText(err), ...(refusedFlags ? { refused_flags: true } : {}) });
    return { best: null, error: errorText(err).split('\n')[0] ?? '', refusedFlags };
  }
}

export async function runDhcpBench(argv: readonly string[]): Promise<void> {
  const o = parseOptions(argv);
  keepDir = o.keep;
  process.env['PATH'] = sbinPath();
  const tools = findTools();
  const missing = [
    ...(tools.perfdhcp === null ? ['perfdhcp (Debian kea-admin)'] : []),
    ...(tools.kea === null && !o.slipwayOnly ? ['kea-dhcp4 (Debian kea-dhcp4-server)'] : []),
  ];
  if (missing.length > 0) {
    process.stderr.write(
      `missing: ${missing.join(', ')}\nInstall with:  ${installCommand}\n` +
        (tools.perfdhcp === null
          ? ''
          : 'or measure slipway alone with:  npm run bench -- dhcp --slipway-only\n'),
    );
    process.exitCode = 2;
    return;
  }
  const stray = strayKeaPids();
  if (stray.length > 0)
    progress(
      `warning: kea-dhcp4 not started by this benchmark is running (pid ${stray.join(', ')}); ` +
        'it takes CPU. Stop it: systemctl stop kea-dhcp4-server (or kill its pid from /run/kea)',
    );
  const rcvbuf = o.clientRcvbufBytes === 0 ? null : raiseRcvbufDefault(o.clientRcvbufBytes);
  const onSignal = (): void => {
    progress('interrupted: stopping every process this benchmark started and deleting the lab');
    rcvbuf?.restore();
    void destroyLab().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  emit({
    ...machineFacts(),
    kea: tools.kea,
    perfdhcp: tools.perfdhcp,
    options: o,
    rmem_default_bytes: { run: rcvbuf?.bytes ?? readRcvbufDefault(), host: rcvbuf?.previousBytes ?? null },
    started: new Date().toISOString(),
  });
  try {
    const b = await buildLab(o.nodes);
    progress(
      `lab ${b.lab.id}: ${o.nodes} server namespace(s) and perfdhcp's on ${net.cidr}; files in ${b.dir}`,
    );
    const kea: Partial<Record<KeaConfigName, Outcome>> = {};
    const slipway: Partial<Record<Mode, Outcome>> = {};
    // One system at a time, so the idle one takes no CPU from the measured one.
    if (!o.slipwayOnly) {
      kea.pool = await attempt('kea pool', () => runKea(b, 'pool', o, tools));
      if (o.modes.includes('reservation'))
        kea.reservations = await attempt('kea reservations', () => runKea(b, 'reservations', o, tools));
    }
    for (const mode of o.modes)
      slipway[mode] = await attempt(`slipway ${mode}`, () => runSlipway(b, mode, o));
    emit(summary(o, kea, slipway));
    emit({ bench: 'done', finished: new Date().toISOString(), loadavg: loadavg().map((x) => round(x, 2)) });
  } finally {
    rcvbuf?.restore();
    await destroyLab();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

function summary(
  o: Options,
  kea: Partial<Record<KeaConfigName, Outcome>>,
  slipway: Partial<Record<Mode, Outcome>>,
): Record<string, unknown> {
  const baseline = kea.pool?.best ?? null;
  const judged = (mode: Mode, factor: number): Record<string, unknown> | null => {
    const outcome = slipway[mode];
    if (outcome === undefined) return null;
    const r = ratio(outcome.best, baseline);
    return {
      slipway_per_s: outcome.best,
      ratio: r,
      target: `>= ${factor.toFixed(1)}x Kea (memfile pool)`,
      met: r === null ? null : r >= factor,
      ...(outcome.error === undefined ? {} : { error: outcome.error }),
      ...(outcome.refusedFlags === true ? { refused_flags: true } : {}),
    };
  };
  const reservation = judged('reservation', 1.0);
  const runs: Record<string, Outcome | undefined> = {
    'kea pool': kea.pool,
    'kea reservations': kea.reservations,
    'slipway reservation': slipway.reservation,
    'slipway dynamic': slipway.dynamic,
  };
  const noisy = Object.entries(runs).flatMap(([name, outcome]) =>
    (outcome?.otherCoresMax ?? 0) > noisyOtherCores ? [name] : [],
  );
  return {
    bench: 'dhcp_summary',
    criterion:
      `highest perfdhcp DORA/s with DO and RA drops < ${dropPercentMax} %, ` +
      `${clients} clients, ${o.periodS} s steps, socket receive buffer default ` +
      (o.clientRcvbufBytes === 0 ? "the host's" : `${o.clientRcvbufBytes} bytes`),
    kea_pool_per_s: baseline,
    kea_reservations_per_s: kea.reservations?.best ?? null,
    ...(kea.pool?.error === undefined ? {} : { kea_error: kea.pool.error }),
    reservation:
      reservation === null
        ? null
        : {
            ...reservation,
            ratio_vs_kea_reservations: ratio(slipway.reservation?.best, kea.reservations?.best),
          },
    dynamic: judged('dynamic', 0.5),
    // Other jobs took CPU from these runs (other_cores_max above the limit): their figures, and
    // every ratio built on them, say more about the machine than about the servers.
    noisy_runs: noisy,
    ...(noisy.length === 0
      ? {}
      : {
          warning:
            `other jobs took over ${noisyOtherCores} cores during: ${noisy.join(', ')}; ` +
            'rerun on a quiet machine',
        }),
  };
}

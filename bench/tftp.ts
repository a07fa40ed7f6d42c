// `npm run bench -- tftp [--quick] [--rounds N] [--clients N] [--loopback] [--pin] [--keep]`
// Slipway's TFTP server against tftpd-hpa, side by side in one run and one network-namespace
// lab: N concurrent real clients (curl, atftp) download ipxe.efi from each, every download is
// checked byte for byte, and each configuration's median aggregate MB/s is compared. Prints one
// JSON object per line on stdout (the machine, one per configuration, a summary); progress goes
// to stderr. See bench/README.md.
//
// The lab. Two namespaces joined by a veth pair: "srv" (10.79.0.1) runs both servers, "cli"
// (10.79.0.2) runs the clients. The clients and the servers then live in separate network
// stacks and every datagram crosses an Ethernet-like link with a 1500-byte MTU, which is what a
// PXE client sees and what blksize 1468 is sized for; on loopback (MTU 65536) nothing would
// stop a client from asking for 8 KB blocks. `--loopback` runs everything in one namespace on
// 127.0.0.1 instead, as ANCHORS §3 measured. Either way nothing leaves the lab, and the
// namespaces are deleted at the end, on failure and on Ctrl-C too.
//
// The servers. Slipway is a real single-node `slipway server --insecure --tftp-addr` with the
// default TFTP root (the data dir's copy of /usr/lib/ipxe) and the default log level.
// tftpd-hpa runs as in ANCHORS' `tftpd-run.sh`: `in.tftpd -L -s ROOT -a ADDR:6969 -u root`,
// its root holding a copy of the same ipxe.efi. Both run for the whole benchmark, and the rounds
// alternate which system goes first, so drift in the machine's load falls on both alike.
//
// The measurement. Each round forks the clients first, gated, then releases them at once and
// times from the release to the last exit (bench/tftp-clients.ts), so fork() stays out of the
// figures. CPU is read from a cgroup v2 group per side (bench/tftp-cpu.ts), which counts
// tftpd-hpa's per-transfer children, plus how long each server waited for a CPU. `--pin` puts the
// servers on CPU 0 and the clients on CPU 1, so that each server gets exactly one core: a
// comparison of the servers' cost per byte rather than of how many cores each can use.
//
// "With windowsize" is atftp asking for blksize 1468 and windowsize 16 (Slipway's maximum) from
// both servers. tftpd-hpa does not implement RFC 7440: it leaves windowsize out of its OACK and
// the transfer runs lock-step, which is exactly what a client gets from it.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { access, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { LabProcess, NetnsLab } from '../cluster/netns-lab.js';
import { machineCpu, median, percentile, ratio, round, sleep } from './stats.js';
import { machineFacts } from './machine.js';
import { slipwayBuild } from './slipway-build.js';
import { CpuGroups } from './tftp-cpu.js';
import {
  clientsMax,
  outputPlaceholder,
  type RoundPrepared,
  type RoundSpec,
  type RoundTiming,
  type RoundVerdict,
  type WorkerCommand,
} from './tftp-clients.js';
import { wholeNumber } from './options.js';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const clientsScript = fileURLToPath(new URL('./tftp-clients.ts', import.meta.url));

const fileName = 'ipxe.efi';
/** Debian's iPXE binaries: what Slipway serves by default, and the reference bytes. */
const ipxeDir = '/usr/lib/ipxe';
const veth = { server: '10.79.0.1', client: '10.79.0.2', prefix: 24 };
const ports = { slipwayTftp: 69, slipwayRaft: 7000, slipwayApi: 7001, tftpd: 6969 };
/** Slipway's TRANSFER_LIMITS_DEFAULT.windowSizeMax: the largest window it grants. */
const windowSize = 16;
/** Below Slipway's default --tftp-transfers-max (256), past which requests are dropped. */
const clientsDefault = 50;
const roundsMax = 50;
/** A client that has not finished by then is killed and counted as a failure. */
const clientTimeoutMs = 60_000;
/** tsx compiles the server on first start; on a loaded 2-core machine that takes a while. */
const serverReadyTimeoutMs = 60_000;
/** How long the servers get to answer a first single download. */
const probeTimeoutMs = 20_000;

type SystemName = 'slipway' | 'tftpd_hpa';
const systems: readonly SystemName[] = ['slipway', 'tftpd_hpa'];

interface Options {
  readonly quick: boolean;
  readonly rounds: number;
  readonly clients: number;
  readonly loopback: boolean;
  /** Servers on CPU 0, clients on CPU 1 (taskset): each server gets one core, whatever its design. */
  readonly pin: boolean;
  readonly keep: boolean;
}

interface ClientConfig {
  /** The name on the result line. */
  readonly name: string;
  readonly client: 'curl' | 'atftp';
  readonly blockSize: number;
  /** null: the client does not ask for windowsize. */
  readonly windowSize: number | null;
  /** The target: Slipway's aggregate MB/s at least this many times tftpd-hpa's. */
  readonly ratioMin: number;
}

const configs: readonly ClientConfig[] = [
  { name: 'curl_blksize512', client: 'curl', blockSize: 512, windowSize: null, ratioMin: 1.0 },
  { name: 'curl_blksize1468', client: 'curl', blockSize: 1468, windowSize: null, ratioMin: 1.0 },
  { name: 'atftp_blksize1468', client: 'atftp', blockSize: 1468, windowSize: null, ratioMin: 1.0 },
  {
    name: `atftp_blksize1468_windowsize${windowSize}`,
    client: 'atftp',
    blockSize: 1468,
    windowSize,
    ratioMin: 1.5,
  },
];

/** The unmeasured warm-up round per system (Node compiles its hot paths during the first transfers). */
const warmupConfig = configs[1]!;

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      quick: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      clients: { type: 'string' },
      loopback: { type: 'boolean', default: false },
      pin: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const int = (v: string | undefined, name: string, dflt: number, min: number, max: number): number =>
    v === undefined ? dflt : wholeNumber(v, name, min, max);
  return {
    quick: values.quick,
    rounds: int(values.rounds, 'rounds', values.quick ? 1 : 3, 1, roundsMax),
    clients: int(values.clients, 'clients', clientsDefault, 1, clientsMax),
    loopback: values.loopback,
    pin: values.pin,
    keep: values.keep,
  };
}

function emit(line: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

function progress(msg: string): void {
  process.stderr.write(`[bench tftp ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

/** Commands the benchmark runs, and the Debian package of each. */
const requiredCommands: Readonly<Record<string, string>> = {
  ip: 'iproute2',
  'in.tftpd': 'tftpd-hpa',
  curl: 'curl',
  atftp: 'atftp',
  taskset: 'util-linux',
};

/** Null when everything is there; otherwise what is missing and the command that installs it. */
async function missingTools(): Promise<string | null> {
  const dirs = (process.env['PATH'] ?? '').split(':').concat(['/usr/sbin', '/sbin']);
  const missing: string[] = [];
  for (const [command, pkg] of Object.entries(requiredCommands)) {
    const found = await Promise.any(dirs.map((dir) => access(path.join(dir, command)))).then(
      () => true,
      () => false,
    );
    if (!found) missing.push(pkg);
  }
  const ipxeFound = await access(path.join(ipxeDir, fileName)).then(
    () => true,
    () => false,
  );
  if (!ipxeFound) missing.push('ipxe');
  if (missing.length === 0) return null;
  return (
    `the tftp benchmark needs ${missing.join(', ')}. Install with:\n` +
    `  apt-get update && apt-get install -y --no-install-recommends ${missing.join(' ')}\n` +
    '(Debian 12: tftpd-hpa 5.2, atftp 0.8.0, curl 7.88. The tftpd-hpa package may start its own\n' +
    'daemon on 0.0.0.0:69; it does not disturb the benchmark, which runs in its own namespaces.)'
  );
}

/** The first line a command prints (some print their version to stderr, or exit non-zero). */
function firstLine(command: string, args: readonly string[]): string {
  const r = spawnSync(command, args, { encoding: 'utf8', timeout: 5000 });
  const text = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim();
  return text.split('\n')[0] ?? 'unknown';
}

/**
 * CPU seconds (user + system) of a process, and with `reapedChildren` also of its children that
 * have exited and been waited for (the client worker's downloads). The fallback where cgroup v2
 * is not available; it cannot see tftpd-hpa's children, which nobody waits for.
 */
function processCpuSeconds(pid: number | undefined, reapedChildren: boolean): number | null {
  if (pid === undefined) return null;
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // After "(comm) " the state is field 3; utime, stime, cutime, cstime are fields 14-17.
    const fields = reapedChildren ? rest.slice(11, 15) : rest.slice(11, 13);
    return fields.reduce((sum, f) => sum + Number(f), 0) / 100; // CLK_TCK is 100 on Linux x86-64
  } catch {
    return null;
  }
}

function clientArgv(config: ClientConfig, host: string, port: number): string[] {
  switch (config.client) {
    case 'curl':
      return [
        ...['curl', '-sS', '--max-time', String(clientTimeoutMs / 1000), '-o', outputPlaceholder],
        ...(config.blockSize === 512 ? [] : ['--tftp-blksize', String(config.blockSize)]),
        `tftp://${host}:${port}/${fileName}`,
      ];
    case 'atftp':
      return [
        ...['atftp', '--option', `blksize ${config.blockSize}`],
        ...(config.windowSize === null ? [] : ['--option', `windowsize ${config.windowSize}`]),
        ...['--get', '-r', fileName, '-l', outputPlaceholder, host, String(port)],
      ];
    default: {
      const unknown: never = config.client;
      throw new TypeError(`unknown client ${String(unknown)}`);
    }
  }
}

/** One round as the worker reports it. */
interface RoundResult {
  /** Forking the gated clients: not part of the measurement. */
  readonly spawnMs: number;
  readonly wallMs: number;
  readonly clientMs: readonly number[];
  readonly verified: number;
  readonly failures: number;
  readonly failureReasons: readonly string[];
}

/** The client worker (bench/tftp-clients.ts) inside the client namespace. */
class ClientWorker {
  readonly process: LabProcess;
  #nextId = 1;

  private constructor(process: LabProcess) {
    this.process = process;
  }

  static async start(ns: string, pin: boolean): Promise<ClientWorker> {
    // Started here rather than with lab.spawn(), which gives a process no stdin; stopped by PID
    // in stop(), and the lab's destroy() removes anything left in the namespace.
    const argv = pinned(pin, pinnedCpus.clients, [process.execPath, '--import', 'tsx', clientsScript]);
    const child = spawn('ip', ['netns', 'exec', ns, ...argv], {
      cwd: repoRoot,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const worker = new ClientWorker(new LabProcess(`tftp-clients@${ns}`, child));
    await worker.process.waitForOutput((o) => o.includes('{"ready":true}'), serverReadyTimeoutMs, 'ready');
    return worker;
  }

  get pid(): number | undefined {
    return this.process.pid;
  }

  /**
   * Runs one round: forks the gated clients, calls `atStart`, opens the gate and waits for every
   * client, calls `atEnd`, then verifies every download. The callbacks read the CPU counters.
   */
  async run(spec: Omit<RoundSpec, 'id'>, atStart: () => void, atEnd: () => void): Promise<RoundResult> {
    const id = this.#nextId++;
    const prepared = await this.#ask<RoundPrepared>(
      { kind: 'prepare', spec: { ...spec, id } },
      id,
      'prepared',
      60_000,
    );
    atStart();
    const timing = await this.#ask<RoundTiming>({ kind: 'go', id }, id, 'ran', spec.clientTimeoutMs + 30_000);
    atEnd();
    const verdict = await this.#ask<RoundVerdict>({ kind: 'verify', id }, id, 'verified', 60_000);
    return {
      spawnMs: prepared.spawnMs,
      wallMs: timing.wallMs,
      clientMs: timing.clientMs,
      verified: verdict.verified,
      failures: verdict.failures,
      failureReasons: verdict.failureReasons,
    };
  }

  /** Sends one command and waits for its answer: the line with this id and phase, or an error line. */
  async #ask<T>(command: WorkerCommand, id: number, phase: string, timeoutMs: number): Promise<T> {
    const stdin = this.process.child.stdin;
    if (stdin === null) throw new Error('the client worker has no stdin');
    stdin.write(`${JSON.stringify(command)}\n`);
    const find = (output: string): Record<string, unknown> | undefined => {
      for (const line of output.split('\n')) {
        if (!line.startsWith(`{"id":${id},`)) continue;
        try {
          const answer = JSON.parse(line) as Record<string, unknown>;
          if (answer['phase'] === phase || typeof answer['error'] === 'string') return answer;
        } catch {
          // Not complete yet.
        }
      }
      return undefined;
    };
    const output = await this.process.waitForOutput(
      (o) => find(o) !== undefined,
      timeoutMs,
      `${phase} ${id}`,
    );
    const answer = find(output)!;
    if (typeof answer['error'] === 'string') throw new Error(`client round ${id}: ${answer['error']}`);
    return answer as T;
  }

  async stop(): Promise<void> {
    this.process.child.stdin?.end();
    await this.process.stop();
  }
}

interface ServerUnderTest {
  readonly system: SystemName;
  readonly host: string;
  readonly port: number;
  readonly process: LabProcess;
}

/** Whose CPU time a round reads: one of the servers (with its children), or the clients. */
type CpuSubject = SystemName | 'clients';

/** One system's figures in one round. */
interface Sample {
  readonly mbPerS: number;
  readonly wallS: number;
  readonly spawnS: number;
  readonly clientS: readonly number[];
  readonly failures: number;
  readonly failureReasons: readonly string[];
  readonly serverCpuS: number | null;
  /** Time some server process was runnable but waited for a CPU (cgroup PSI). */
  readonly serverWaitS: number | null;
  readonly clientCpuS: number | null;
  readonly machineBusyCores: number;
  readonly verifiedBytes: number;
}

interface Bench {
  readonly options: Options;
  /** The clients' output files, on tmpfs. */
  readonly outDir: string;
  readonly worker: ClientWorker;
  readonly servers: Readonly<Record<SystemName, ServerUnderTest>>;
  readonly fileBytes: number;
  readonly fileSha256: string;
  /** CPU seconds used so far, or null where it cannot be measured. */
  readonly cpuSeconds: (who: CpuSubject) => number | null;
  /** Seconds so far during which `who` was runnable but waiting for a CPU, or null. */
  readonly cpuWaitSeconds: (who: CpuSubject) => number | null;
}

function roundSpec(
  b: Bench,
  server: ServerUnderTest,
  config: ClientConfig,
  clients: number,
): Omit<RoundSpec, 'id'> {
  return {
    argv: clientArgv(config, server.host, server.port),
    clients,
    outDir: b.outDir,
    expectedBytes: b.fileBytes,
    expectedSha256: b.fileSha256,
    clientTimeoutMs,
  };
}

interface Counters {
  readonly serverCpuS: number | null;
  readonly serverWaitS: number | null;
  readonly clientCpuS: number | null;
  readonly machineBusyS: number;
}

async function measureRound(
  b: Bench,
  system: SystemName,
  config: ClientConfig,
  clients: number,
): Promise<Sample> {
  const server = b.servers[system];
  const counters = (): Counters => ({
    serverCpuS: b.cpuSeconds(system),
    serverWaitS: b.cpuWaitSeconds(system),
    clientCpuS: b.cpuSeconds('clients'),
    machineBusyS: machineCpu().busy,
  });
  let start: Counters | null = null;
  let end: Counters | null = null;
  const r = await b.worker.run(
    roundSpec(b, server, config, clients),
    () => (start = counters()),
    () => (end = counters()),
  );
  if (!server.process.running)
    throw new Error(`${system} exited during a round:\n${server.process.output.slice(-3000)}`);
  const s0: Counters = start ?? counters();
  const s1: Counters = end ?? counters();
  const wallS = r.wallMs / 1000;
  const diff = (f: (c: Counters) => number | null): number | null => {
    const x = f(s0);
    const y = f(s1);
    return x === null || y === null ? null : y - x;
  };
  return {
    mbPerS: (r.verified * b.fileBytes) / wallS / 1e6,
    wallS,
    spawnS: r.spawnMs / 1000,
    clientS: r.clientMs.map((ms) => ms / 1000),
    failures: r.failures,
    failureReasons: r.failureReasons,
    serverCpuS: diff((c) => c.serverCpuS),
    serverWaitS: diff((c) => c.serverWaitS),
    clientCpuS: diff((c) => c.clientCpuS),
    machineBusyCores: (s1.machineBusyS - s0.machineBusyS) / wallS,
    verifiedBytes: r.verified * b.fileBytes,
  };
}

function describeSample(s: Sample): string {
  const failed = s.failures === 0 ? '' : `, ${s.failures} FAILED (${s.failureReasons[0] ?? ''})`;
  return `${round(s.mbPerS, 1)} MB/s, wall ${round(s.wallS, 3)} s${failed}`;
}

/** One system's figures on a configuration's line (see bench/README.md). */
interface SystemSummary {
  readonly aggregate_MBps: number;
  readonly wall_s: number;
  readonly rounds_MBps: readonly number[];
  readonly client_s_p50: number;
  readonly client_s_max: number;
  readonly fork_s: number;
  readonly failures: number;
  readonly failure_reasons: readonly string[];
  readonly server_cpu_cores: number | null;
  readonly server_cpu_ms_per_MB: number | null;
  readonly server_cpu_wait_share: number | null;
  readonly client_cpu_cores: number | null;
  readonly machine_busy_cores: number;
  readonly other_processes_cores: number | null;
}

/** Medians over the rounds of one system in one configuration. */
function summarize(samples: readonly Sample[]): SystemSummary {
  const med = (f: (s: Sample) => number | null): number | null => {
    const xs = samples.map(f).filter((x): x is number => x !== null);
    return xs.length === 0 ? null : median(xs);
  };
  const allClientS = samples.flatMap((s) => s.clientS).sort((a, b) => a - b);
  const cpuMsPerMb = med((s) =>
    s.serverCpuS === null || s.verifiedBytes === 0 ? null : (s.serverCpuS * 1000) / (s.verifiedBytes / 1e6),
  );
  const waitShare = med((s) => (s.serverWaitS === null ? null : s.serverWaitS / s.wallS));
  const other = med((s) =>
    s.serverCpuS === null || s.clientCpuS === null
      ? null
      : Math.max(0, s.machineBusyCores - (s.serverCpuS + s.clientCpuS) / s.wallS),
  );
  const rounded = (x: number | null, digits: number): number | null => (x === null ? null : round(x, digits));
  return {
    aggregate_MBps: round(med((s) => s.mbPerS) ?? Number.NaN, 1),
    wall_s: round(med((s) => s.wallS) ?? Number.NaN, 3),
    rounds_MBps: samples.map((s) => round(s.mbPerS, 1)),
    client_s_p50: round(percentile(allClientS, 0.5), 3),
    client_s_max: round(allClientS[allClientS.length - 1] ?? Number.NaN, 3),
    fork_s: round(med((s) => s.spawnS) ?? Number.NaN, 3),
    failures: samples.reduce((n, s) => n + s.failures, 0),
    failure_reasons: samples.flatMap((s) => s.failureReasons).slice(0, 3),
    server_cpu_cores: rounded(
      med((s) => (s.serverCpuS === null ? null : s.serverCpuS / s.wallS)),
      2,
    ),
    server_cpu_ms_per_MB: rounded(cpuMsPerMb, 2),
    server_cpu_wait_share: rounded(waitShare, 2),
    client_cpu_cores: rounded(
      med((s) => (s.clientCpuS === null ? null : s.clientCpuS / s.wallS)),
      2,
    ),
    machine_busy_cores: round(med((s) => s.machineBusyCores) ?? Number.NaN, 2),
    other_processes_cores: rounded(other, 2),
  };
}

interface ConfigOutcome {
  readonly config: ClientConfig;
  readonly ratio: number | null;
  readonly met: boolean;
}

async function measureConfig(b: Bench, config: ClientConfig): Promise<ConfigOutcome> {
  const samples: Record<SystemName, Sample[]> = { slipway: [], tftpd_hpa: [] };
  for (let r = 0; r < b.options.rounds; r++) {
    const order = r % 2 === 0 ? systems : [...systems].reverse();
    for (const system of order) {
      const s = await measureRound(b, system, config, b.options.clients);
      samples[system].push(s);
      progress(`${config.name} round ${r + 1}/${b.options.rounds} ${system}: ${describeSample(s)}`);
      await sleep(200);
    }
  }
  const slipway = summarize(samples.slipway);
  const tftpd = summarize(samples.tftpd_hpa);
  const r = ratio(slipway.aggregate_MBps, tftpd.aggregate_MBps);
  const met = r !== null && r >= config.ratioMin && slipway.failures === 0;
  emit({
    bench: 'tftp',
    config: config.name,
    client: config.client,
    blksize: config.blockSize,
    windowsize: config.windowSize,
    clients: b.options.clients,
    rounds: b.options.rounds,
    file: fileName,
    file_bytes: b.fileBytes,
    slipway,
    tftpd_hpa: tftpd,
    ratio: r,
    target: `aggregate MB/s >= ${config.ratioMin.toFixed(1)}x tftpd-hpa, no failed download`,
    target_met: met,
  });
  return { config, ratio: r, met };
}

/** Waits until a single download from `server` succeeds, or fails at the deadline. */
async function probe(b: Bench, server: ServerUnderTest): Promise<void> {
  const deadline = Date.now() + probeTimeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (!server.process.running)
      throw new Error(`${server.system} exited at start:\n${server.process.output.slice(-2000)}`);
    const spec = { ...roundSpec(b, server, configs[0]!, 1), clientTimeoutMs: 5000 };
    const r = await b.worker.run(
      spec,
      () => undefined,
      () => undefined,
    );
    if (r.failures === 0) return;
    last = r.failureReasons[0] ?? '';
    await sleep(250);
  }
  throw new Error(`${server.system} did not serve ${fileName} within ${probeTimeoutMs} ms: ${last}`);
}

interface Topology {
  readonly serverNs: string;
  readonly clientNs: string;
  readonly host: string;
}

async function buildTopology(lab: NetnsLab, loopback: boolean): Promise<Topology> {
  if (loopback) {
    const ns = await lab.addNamespace('tftp');
    // in.tftpd resolves its -a address with AI_ADDRCONFIG, which finds no IPv4 at all in a
    // namespace whose only IPv4 address is 127.0.0.1: it would exit at once (status 66).
    await lab.check(ns, ['ip', 'addr', 'add', `${veth.server}/32`, 'dev', 'lo']);
    return { serverNs: ns, clientNs: ns, host: '127.0.0.1' };
  }
  const serverNs = await lab.addNamespace('srv');
  const clientNs = await lab.addNamespace('cli');
  await lab.connect(
    { ns: serverNs, ifname: 'eth0', addresses: [`${veth.server}/${veth.prefix}`] },
    { ns: clientNs, ifname: 'eth0', addresses: [`${veth.client}/${veth.prefix}`] },
  );
  return { serverNs, clientNs, host: veth.server };
}

/** The CPUs `--pin` gives each side, as taskset takes them. */
const pinnedCpus = { servers: '0', clients: '1' };

/** `argv`, run on `cpus` under --pin (taskset execs the command, so its PID stays the command's). */
function pinned(pin: boolean, cpus: string, argv: readonly string[]): string[] {
  return pin ? ['taskset', '-c', cpus, ...argv] : [...argv];
}

function startSlipway(lab: NetnsLab, ns: string, host: string, workDir: string, pin: boolean): LabProcess {
  const nodeArgs: string[] = [];
  // SLIPWAY_BENCH_PROFILE_DIR=DIR: the server writes a V8 CPU profile there when it stops (as
  // in bench/clusters.ts); the benchmark stops it with SIGTERM.
  const profileDir = process.env['SLIPWAY_BENCH_PROFILE_DIR'];
  if (profileDir !== undefined && profileDir !== '')
    nodeArgs.push('--cpu-prof', '--cpu-prof-dir', profileDir);
  const raft = `${host}:${ports.slipwayRaft}`;
  return lab.spawn(
    ns,
    pinned(pin, pinnedCpus.servers, [
      ...[process.execPath, ...nodeArgs, slipwayBuild().main, 'server', '--id', 'n1', '--insecure'],
      '--insecure-allow-network',
      ...['--data-dir', path.join(workDir, 'slipway-data'), '--raft-addr', raft],
      ...['--api-addr', `${host}:${ports.slipwayApi}`, '--peers', `n1=${raft}`],
      ...['--tftp-addr', `${host}:${ports.slipwayTftp}`],
    ]),
    { cwd: repoRoot },
  );
}

async function startTftpd(
  lab: NetnsLab,
  ns: string,
  host: string,
  workDir: string,
  pin: boolean,
): Promise<LabProcess> {
  const root = path.join(workDir, 'tftpd-root');
  await mkdir(root, { recursive: true });
  await copyFile(path.join(ipxeDir, fileName), path.join(root, fileName));
  const argv = ['in.tftpd', '-L', '-s', root, '-a', `${host}:${ports.tftpd}`, '-u', 'root'];
  return lab.spawn(ns, pinned(pin, pinnedCpus.servers, argv));
}

/**
 * Everything a run starts, filled in as it starts, so that release() (at the end, on failure
 * and on Ctrl-C) ends exactly that: processes by PID, then the lab's namespaces, the cgroups and
 * the temp directories.
 */
class Resources {
  readonly workDir: string;
  readonly outDir: string;
  lab: NetnsLab | null = null;
  groups: CpuGroups | null = null;
  worker: ClientWorker | null = null;
  slipway: LabProcess | null = null;
  tftpd: LabProcess | null = null;
  #released: Promise<void> | null = null;

  constructor(workDir: string, outDir: string) {
    this.workDir = workDir;
    this.outDir = outDir;
  }

  release(keep: boolean): Promise<void> {
    this.#released ??= (async () => {
      // SIGTERM (SIGKILL 3 s later), so that a profiling server writes its profile.
      await Promise.all([this.worker?.stop(), this.slipway?.stop(), this.tftpd?.stop()]);
      await this.lab?.destroy();
      await rm(this.outDir, { recursive: true, force: true });
      if (keep) {
        await writeFile(path.join(this.workDir, 'slipway.log'), this.slipway?.output ?? '');
        await writeFile(path.join(this.workDir, 'tftpd.log'), this.tftpd?.output ?? '');
        progress(`kept the slipway data dir, the tftpd-hpa root and both logs in ${this.workDir}`);
      } else {
        await rm(this.workDir, { recursive: true, force: true });
      }
      // Last: it waits for the groups' processes to be gone, and a leftover group is harmless.
      await this.groups?.remove().catch((error: unknown) => progress(String(error)));
    })();
    return this.#released;
  }
}

/** Builds the lab, starts both servers and the client worker, and waits until both servers serve. */
async function setUp(options: Options, res: Resources, source: Buffer): Promise<Bench> {
  const lab = await NetnsLab.create();
  res.lab = lab;
  const topo = await buildTopology(lab, options.loopback);
  res.groups = await CpuGroups.create(`slipway-tftp-bench-${lab.id}`);
  progress(`lab ${lab.id}: servers on ${topo.host}; starting slipway and tftpd-hpa`);
  const slipway = startSlipway(lab, topo.serverNs, topo.host, res.workDir, options.pin);
  res.slipway = slipway;
  const tftpd = await startTftpd(lab, topo.serverNs, topo.host, res.workDir, options.pin);
  res.tftpd = tftpd;
  const worker = await ClientWorker.start(topo.clientNs, options.pin);
  res.worker = worker;
  const pids: Record<CpuSubject, number | undefined> = {
    slipway: slipway.pid,
    tftpd_hpa: tftpd.pid,
    clients: worker.pid,
  };
  const grouped = new Set<CpuSubject>();
  for (const [who, pid] of Object.entries(pids) as [CpuSubject, number | undefined][]) {
    if (pid !== undefined && res.groups !== null && (await res.groups.add(who, pid))) grouped.add(who);
  }
  if (!grouped.has('tftpd_hpa')) progress('tftpd-hpa is in no cgroup v2 group: its CPU figures stay null');
  const groups = res.groups;
  const cpuSeconds = (who: CpuSubject): number | null => {
    if (groups !== null && grouped.has(who)) return groups.usageSeconds(who);
    // Fallbacks from /proc: Node reaps its children, tftpd-hpa lets the kernel discard them.
    if (who === 'slipway') return processCpuSeconds(pids.slipway, false);
    if (who === 'clients') return processCpuSeconds(pids.clients, true);
    return null;
  };
  await slipway.waitForOutput(
    (o) => o.includes('"msg":"node serving"'),
    serverReadyTimeoutMs,
    'node serving',
  );
  const server = (system: SystemName, port: number, process: LabProcess): ServerUnderTest => ({
    system,
    host: topo.host,
    port,
    process,
  });
  const b: Bench = {
    options,
    outDir: res.outDir,
    worker,
    servers: {
      slipway: server('slipway', ports.slipwayTftp, slipway),
      tftpd_hpa: server('tftpd_hpa', ports.tftpd, tftpd),
    },
    fileBytes: source.length,
    fileSha256: createHash('sha256').update(source).digest('hex'),
    cpuSeconds,
    cpuWaitSeconds: (who) => (groups !== null && grouped.has(who) ? groups.pressureSeconds(who) : null),
  };
  for (const system of systems) await probe(b, b.servers[system]);
  return b;
}

async function measureAll(b: Bench): Promise<void> {
  for (const system of systems) {
    const s = await measureRound(b, system, warmupConfig, b.options.clients);
    progress(`warm-up ${warmupConfig.name} ${system}: ${describeSample(s)}`);
  }
  const outcomes: ConfigOutcome[] = [];
  for (const config of configs) outcomes.push(await measureConfig(b, config));
  const group = (windowed: boolean): Record<string, unknown> => {
    const these = outcomes.filter((o) => (o.config.windowSize !== null) === windowed);
    return {
      target: `>= ${these[0]?.config.ratioMin.toFixed(1) ?? '?'}x tftpd-hpa, no failed download`,
      ratios: Object.fromEntries(these.map((o) => [o.config.name, o.ratio])),
      met: these.every((o) => o.met),
    };
  };
  emit({
    bench: 'tftp_summary',
    without_windowsize: group(false),
    with_windowsize: group(true),
    all_targets_met: outcomes.every((o) => o.met),
    loadavg: loadavg().map((x) => round(x, 2)),
    finished: new Date().toISOString(),
  });
}

function emitMachine(options: Options): void {
  emit({
    ...machineFacts(),
    tftpd_hpa: firstLine('in.tftpd', ['-V']),
    curl: firstLine('curl', ['--version']).split(' ').slice(0, 2).join(' '),
    atftp: firstLine('atftp', ['--version']),
    options,
    topology: options.loopback ? 'one namespace, 127.0.0.1' : 'server and client namespaces, veth, MTU 1500',
    started: new Date().toISOString(),
  });
}

export async function runTftpBench(argv: readonly string[]): Promise<void> {
  const options = parseOptions(argv);
  if (process.getuid?.() !== 0)
    throw new Error('the tftp benchmark needs root (it builds network namespaces)');
  const missing = await missingTools();
  if (missing !== null) {
    process.stderr.write(`${missing}\n`);
    process.exitCode = 2;
    return;
  }
  const source = await readFile(path.join(ipxeDir, fileName));
  emitMachine(options);
  const res = new Resources(
    await mkdtemp(path.join(tmpdir(), 'slipway-tftp-bench-')),
    await mkdtemp(path.join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'slipway-tftp-bench-')),
  );
  const onSignal = (): void => {
    progress('interrupted: stopping every process this benchmark started and deleting the lab');
    void res.release(options.keep).then(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await measureAll(await setUp(options, res, source));
  } finally {
    await res.release(options.keep);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

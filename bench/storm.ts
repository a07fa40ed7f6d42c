// `npm run bench -- storm [--machines N] [--actions A] [--hold-ms H] [--ramp-ms R] [--no-kill]
//  [--firmware bios|uefi|mixed] [--artifact-kib K] [--qemu] [--bootos-dir DIR] [--keep]`
// A boot storm: N simulated machines (bench/storm-fleet.ts) power on at once on a LAN of network
// namespaces with 3 slipway nodes (the compiled build), the VIP held by the leader, HAProxy in
// front of every node's API as `slipway balancer config` renders it. Each machine does what a
// real one does against the VIP: DHCP as a PXE ROM and the iPXE binary over TFTP (BIOS), or as
// UEFI HTTP boot and the binary over HTTP (UEFI; by default every other machine), DHCP as iPXE, the
// iPXE script, the boot OS's kernel and initrd (small stand-ins registered with `artifact add`),
// DHCP as the boot OS, the credential claim from its own address, then its workflow of A short
// actions on a worker stream through the balancer. Once half the machines hold a credential the
// leader is SIGKILLed, so the other half boot against the VIP while it moves.
// With --qemu, afterwards, one real machine of the machine lab (a QEMU VM under TCG behind its
// BMC) is provisioned the same way, by `workflow create --netboot`, BIOS then UEFI: a JSON line
// each with the time from the create to power on, to the iPXE script, to the worker connected and
// to the workflow done (bench/provision-vm.ts).
// Prints one JSON line: the time from the first power-on to the last workflow's success (target
// <= 60 s), whether every workflow succeeded with every action run once (by the fleet's count
// and by the cluster's records), and p50/p99 of each boot step and of dispatch (a result sent to
// the next action received), before and after the kill.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { renderHaproxyConfig } from '../lb/haproxy.js';
import { defaultHealthCheck } from '../src/model/balancer-spec.js';
import { NetnsLab, type LabProcess } from '../cluster/netns-lab.js';
import { buildBootOs } from '../src/bootos/index.js';
import { repoRoot } from './clusters.js';
import { slipwayBuild } from './slipway-build.js';
import { cpuSeconds, machineCpu, percentile, round } from './stats.js';
import {
  fleetResultOf,
  type FleetConfig,
  type FleetResult,
  type Sample,
  type SampleKind,
  type Shard,
} from './storm-fleet.js';
import { wholeNumber } from './options.js';

const run = promisify(execFile);

interface Options {
  readonly machines: number;
  readonly actions: number;
  readonly holdMs: number;
  readonly rampMs: number;
  readonly kill: boolean;
  readonly artifactKib: number;
  readonly firmware: 'bios' | 'uefi' | 'mixed';
  readonly qemu: boolean;
  readonly bootOsDir: string | undefined;
  readonly keep: boolean;
  /** Processes the simulated fleet is split across (storm-fleet.ts shards). */
  readonly fleetProcesses: number;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      quick: { type: 'boolean', default: false },
      machines: { type: 'string' },
      actions: { type: 'string', default: '5' },
      'hold-ms': { type: 'string' },
      'ramp-ms': { type: 'string' },
      'no-kill': { type: 'boolean', default: false },
      'artifact-kib': { type: 'string' },
      firmware: { type: 'string', default: 'mixed' },
      qemu: { type: 'boolean', default: false },
      'bootos-dir': { type: 'string' },
      keep: { type: 'boolean', default: false },
      'fleet-processes': { type: 'string' },
    },
    strict: true,
  });
  // --quick: the smallest storm that still boots both ways and kills the leader midway.
  const dflt = values.quick
    ? { machines: '30', hold: '50', ramp: '500', kib: '64' }
    : { machines: '1000', hold: '200', ramp: '2000', kib: '256' };
  const machines = wholeNumber(values.machines ?? dflt.machines, 'machines', 1, maxMachines);
  // One simulator process keeps up with about 5,000 machines on a core of this machine; beyond
  // that its own event loop stalls and its machines' timers fire late.
  const fleetProcessesDefault = Math.min(availableParallelism(), Math.ceil(machines / 5000));
  return {
    machines,
    actions: wholeNumber(values.actions, 'actions', 1, 20),
    holdMs: wholeNumber(values['hold-ms'] ?? dflt.hold, 'hold-ms', 0, 10_000),
    rampMs: wholeNumber(values['ramp-ms'] ?? dflt.ramp, 'ramp-ms', 0, 60_000),
    kill: !values['no-kill'],
    artifactKib: wholeNumber(values['artifact-kib'] ?? dflt.kib, 'artifact-kib', 1, 65_536),
    firmware: firmwareOption(values.firmware),
    qemu: values.qemu,
    bootOsDir: values['bootos-dir'],
    keep: values.keep,
    fleetProcesses: wholeNumber(
      values['fleet-processes'] ?? String(fleetProcessesDefault),
      'fleet-processes',
      1,
      8,
    ),
  };
}

function firmwareOption(v: string): Options['firmware'] {
  if (v === 'bios' || v === 'uefi' || v === 'mixed') return v;
  throw new Error(
    `--firmware must be bios (PXE, TFTP), uefi (UEFI HTTP boot) or mixed (every other), got ${v}`,
  );
}

const subnet = '10.214';
export const prefix = 16;
export const vip = `${subnet}.0.100`;
export const nodeIds = ['n1', 'n2', 'n3'] as const;
export const nodeAddress = (i: number): string => `${subnet}.0.${String(11 + i)}`;
export const fleetAddress = `${subnet}.0.5`;
export const balancerPort = 7070;
/** 10,000 machines on one LAN: the addresses (machineAddress) and MACs have room for them. */
const maxMachines = 10_000;
/**
 * Setup (registering N machines and workflows) and the storm itself are each bounded, in
 * proportion to the fleet: on 2 cores both grow with the number of machines.
 */
const setupTimeoutMs = (machines: number): number => 300_000 + 60 * machines;
const stormTimeoutMs = (machines: number): number => 240_000 + 60 * machines;
const targetS = 60;

function progress(msg: string): void {
  process.stderr.write(`storm: ${msg}\n`);
}

/** Deterministic stand-in bytes (the content only has to be checked, not booted). */
function standIn(bytes: number, label: string): Buffer {
  const out = Buffer.alloc(bytes);
  let block = createHash('sha256').update(label).digest();
  for (let at = 0; at < bytes; at += block.length) {
    block.copy(out, at);
    block = createHash('sha256').update(block).digest();
  }
  return out;
}

/**
 * Every neighbour entry of every namespace counts against the kernel's one table, whose default
 * hard limit (gc_thresh3, 1024) a thousand machines on one LAN exceed: raised for the run, as a
 * site with a large provisioning segment raises it, and put back afterwards.
 */
export async function raiseNeighbourLimits(machines: number): Promise<() => Promise<void>> {
  const keys = ['gc_thresh1', 'gc_thresh2', 'gc_thresh3'].map((k) => `net.ipv4.neigh.default.${k}`);
  const before = await Promise.all(
    keys.map(async (k) => (await run('sysctl', ['-n', k], { encoding: 'utf8' })).stdout.trim()),
  );
  // Each node's namespace and the fleet's hold an entry per machine that talks to them.
  const wanted = [Math.max(4096, machines), Math.max(16384, 4 * machines), Math.max(32768, 8 * machines)];
  await Promise.all(
    keys.map((k, i) =>
      run('sysctl', ['-q', '-w', `${k}=${String(Math.max(Number(before[i]), wanted[i] ?? 0))}`]),
    ),
  );
  return async () => {
    await Promise.all(keys.map((k, i) => run('sysctl', ['-q', '-w', `${k}=${before[i] ?? ''}`])));
  };
}

/** Whether the namespace's eth0 has the VIP. */
async function holdsVip(lab: NetnsLab, namespace: string): Promise<boolean> {
  const out = await lab.run(namespace, ['ip', '-4', '-o', 'addr', 'show', 'dev', 'eth0']);
  return out.stdout.includes(` ${vip}/`);
}

export async function vipHolder(lab: NetnsLab, ns: Record<string, string>): Promise<number> {
  for (let i = 0; i < nodeIds.length; i++) {
    if (await holdsVip(lab, ns[nodeIds[i] ?? ''] ?? '')) return i;
  }
  return -1;
}

/**
 * The running node holding the VIP, waiting up to `ms` for one (the address may be moving as the
 * storm ends). A SIGKILLed node's namespace keeps the address it held, so only live ones count.
 */
export async function liveVipHolder(
  lab: NetnsLab,
  ns: Record<string, string>,
  nodes: readonly LabProcess[],
  ms: number,
): Promise<LabProcess | undefined> {
  const deadline = Date.now() + ms;
  for (;;) {
    for (const [i, node] of nodes.entries()) {
      if (node.running && (await holdsVip(lab, ns[nodeIds[i] ?? ''] ?? ''))) return node;
    }
    if (Date.now() >= deadline) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

function stats(
  samples: readonly Sample[],
  kind: SampleKind,
  from: number,
  to: number,
): Record<string, number> | null {
  const xs = samples
    .filter(([k, at]) => k === kind && at >= from && at < to)
    .map(([, , ms]) => ms)
    .sort((a, b) => a - b);
  if (xs.length === 0) return null;
  return {
    n: xs.length,
    p50_ms: round(percentile(xs, 0.5), 1),
    p99_ms: round(percentile(xs, 0.99), 1),
    max_ms: round(xs.at(-1) ?? 0, 1),
  };
}

export async function runStormBench(argv: readonly string[]): Promise<void> {
  const o = parseOptions(argv);
  if (process.getuid?.() !== 0) throw new Error('the storm benchmark needs root (network namespaces)');
  await runStorm(o);
  if (!o.qemu) return;
  const { measureVmProvision } = await import('./provision-vm.js');
  let bootOsDir = o.bootOsDir;
  let built: string | undefined;
  if (bootOsDir === undefined) {
    // Built once for both machines (about a minute).
    built = await mkdtemp(join(tmpdir(), 'slipway-storm-bootos-'));
    progress('building the boot OS for the QEMU machines (slipway bootos build)');
    await buildBootOs({ outDir: built });
    bootOsDir = built;
  }
  try {
    for (const firmware of ['bios', 'uefi'] as const) {
      const figures = await measureVmProvision(firmware, o.actions, bootOsDir);
      process.stdout.write(
        `${JSON.stringify({ bench: 'storm-qemu', actions_per_workflow: o.actions, ...figures })}\n`,
      );
    }
  } finally {
    if (built !== undefined) await rm(built, { recursive: true, force: true });
  }
}

async function runStorm(o: Options): Promise<void> {
  const build = slipwayBuild();
  const restoreLimits = await raiseNeighbourLimits(o.machines);
  const lab = await NetnsLab.create();
  const dir = o.keep ? join(repoRoot, `storm-${lab.id}`) : lab.dir;
  mkdirSync(dir, { recursive: true });
  try {
    const ns = await lab.addLan({
      n1: { addresses: [`${nodeAddress(0)}/${String(prefix)}`] },
      n2: { addresses: [`${nodeAddress(1)}/${String(prefix)}`] },
      n3: { addresses: [`${nodeAddress(2)}/${String(prefix)}`] },
      fleet: { addresses: [`${fleetAddress}/${String(prefix)}`] },
    });
    const files = writeStandIns(dir, o.artifactKib);
    const nodes = await startNodes(lab, ns, dir, build.main, files.tftpRoot);
    const config = fleetConfig(o, dir, files);
    const configFile = join(dir, 'fleet.json');
    writeFileSync(configFile, JSON.stringify(config));
    progress(`registering ${String(o.machines)} machines, their workflows and the boot OS stand-ins`);
    const setupStart = Date.now();
    const setup = lab.spawn(ns.fleet, fleetArgv('setup', configFile), { cwd: repoRoot });
    await setup.waitForOutput(
      (out) => out.includes('"event":"setup"'),
      setupTimeoutMs(o.machines),
      'the setup',
    );
    await setup.exited;
    const setupS = round((Date.now() - setupStart) / 1000, 1);

    const storm = await powerOnFleet(lab, ns, nodes, o, config, configFile);
    process.stdout.write(`${JSON.stringify(stormReport(o, storm.result, { ...storm, setupS }))}\n`);
  } finally {
    await lab.destroy();
    await restoreLimits();
    if (o.keep) progress(`kept the configuration and data in ${dir}`);
  }
}

export type StormNamespaces = Record<(typeof nodeIds)[number] | 'fleet' | 'lan', string>;

/** The boot files the machines fetch: stand-ins of the real ones' sizes, written under `dir`. */
export interface StandIns {
  readonly tftpRoot: string;
  /** The iPXE binaries by name. */
  readonly binaries: Record<string, Buffer>;
  readonly kernelFile: string;
  readonly initrdFile: string;
}

export function writeStandIns(dir: string, artifactKib: number): StandIns {
  const tftpRoot = join(dir, 'tftp-root');
  mkdirSync(tftpRoot, { recursive: true });
  // undionly.kpxe is about 70 KiB; the stand-in has its size, not its code.
  // The iPXE binaries machines chainload: stand-ins of their sizes (undionly.kpxe about 70 KiB,
  // ipxe.efi about 1 MiB), served over TFTP and, for UEFI HTTP boot, over HTTP.
  const binaries = {
    'undionly.kpxe': standIn(72 * 1024, 'undionly.kpxe'),
    'ipxe.efi': standIn(1024 * 1024, 'ipxe.efi'),
  };
  for (const [name, content] of Object.entries(binaries)) writeFileSync(join(tftpRoot, name), content);
  const kernelFile = join(dir, 'vmlinuz-standin');
  const initrdFile = join(dir, 'initramfs-standin');
  writeFileSync(kernelFile, standIn(Math.ceil((artifactKib * 1024) / 4), 'kernel'));
  writeFileSync(initrdFile, standIn(Math.floor((artifactKib * 1024 * 3) / 4), 'initrd'));
  return { tftpRoot, binaries, kernelFile, initrdFile };
}

/**
 * The three nodes (the compiled build `main`) and HAProxy beside each; resolves once all serve.
 * `more`: node flags to add (the fleet benchmark's discovery), and the event-loop probe.
 */
export async function startNodes(
  lab: NetnsLab,
  ns: StormNamespaces,
  dir: string,
  main: string,
  tftpRoot: string,
  more: {
    readonly args?: readonly string[];
    readonly probe?: readonly string[];
    readonly eldDir?: string;
  } = {},
): Promise<LabProcess[]> {
  const haproxyConfig = join(dir, 'haproxy.cfg');
  writeFileSync(
    haproxyConfig,
    renderHaproxyConfig({
      listenAddr: `0.0.0.0:${String(balancerPort)}`,
      nodes: nodeIds.map((id, i) => ({ id, apiAddr: `${nodeAddress(i)}:7001` })),
      healthCheck: defaultHealthCheck,
    }),
  );
  const peers = nodeIds.map((id, i) => `${id}=${nodeAddress(i)}:7000`).join(',');
  const nodes: LabProcess[] = [];
  nodeIds.forEach((id, i) => {
    const address = nodeAddress(i);
    nodes.push(
      lab.spawn(
        ns[id],
        [
          // The default log level, as an operator runs it.
          ...[process.execPath, ...(more.probe ?? []), main, 'server', '--id', id],
          ...['--data-dir', join(dir, `data-${id}`), '--insecure', '--insecure-allow-network'],
          ...['--raft-addr', `${address}:7000`, '--api-addr', `${address}:7001`, '--peers', peers],
          ...['--vip', vip, '--vip-interface', 'eth0', '--dhcp-interface', 'eth0'],
          ...['--http-addr', '0.0.0.0:8080', '--tftp-addr', '0.0.0.0:69', '--tftp-root', tftpRoot],
          ...['--worker-server', `${vip}:${String(balancerPort)}`],
          ...(more.args ?? []),
        ],
        more.eldDir === undefined ? {} : { env: { SLIPWAY_BENCH_ELD_DIR: more.eldDir } },
      ),
    );
    lab.spawn(ns[id], ['haproxy', '-f', haproxyConfig, '-db']);
  });
  progress(`3 nodes and their balancers starting in ${lab.id}-*`);
  await Promise.all(
    nodes.map((n) => n.waitForOutput((out) => out.includes('"msg":"node serving"'), 60_000, 'serving')),
  );
  return nodes;
}

function fleetConfig(o: Options, dir: string, files: StandIns): FleetConfig {
  return {
    machines: o.machines,
    actions: o.actions,
    holdMs: o.holdMs,
    rampMs: o.rampMs,
    deadlineMs: 0,
    apiServers: nodeIds.map((_, i) => `${nodeAddress(i)}:7001`),
    subnetPrefix: prefix,
    kernelFile: files.kernelFile,
    initrdFile: files.initrdFile,
    firmware: o.firmware,
    binarySha256: Object.fromEntries(
      Object.entries(files.binaries).map(([name, content]) => [
        name,
        createHash('sha256').update(content).digest('hex'),
      ]),
    ),
    seed: 0x5707,
    addressFile: join(dir, 'addresses.batch'),
    resultFile: join(dir, 'fleet-result.json'),
  };
}

/** The simulated fleet's command line (bench/storm-fleet.ts): `setup`, `run` (of a shard) or `check`. */
export function fleetArgv(mode: string, configFile: string, shard?: Shard): string[] {
  return [
    ...[process.execPath, '--import', 'tsx', join(repoRoot, 'bench', 'storm-fleet.ts'), mode, configFile],
    ...(shard === undefined ? [] : [String(shard.index), String(shard.count)]),
  ];
}

/** The newest `claimed` count a shard has said (0 before its first). */
function lastClaimedCount(output: string): number {
  const at = output.lastIndexOf('"event":"claimed","count":');
  if (at < 0) return 0;
  return Number.parseInt(output.slice(at + '"event":"claimed","count":'.length), 10) || 0;
}

/** What the storm measured besides the fleet's result file. */
interface StormRun {
  readonly killedAt: number | null;
  readonly killed: string | null;
  /** CPU seconds each node used during the storm (the killed one until its kill). */
  readonly nodeCpuS: (number | null)[];
  /** The leader's CPU seconds: the killed one's until its kill, then the new one's. */
  readonly leaderCpuS: number | null;
  readonly coresBusy: number;
  readonly result: FleetResult;
}

/**
 * The storm: every machine powers on; once half the fleet holds a credential (the shards' claimed
 * counts added up), the node holding the VIP is SIGKILLed (unless --no-kill). Resolves once every shard has written its
 * result and exited, and the cluster's records have been read.
 */
async function powerOnFleet(
  lab: NetnsLab,
  ns: StormNamespaces,
  nodes: readonly LabProcess[],
  o: Options,
  config: FleetConfig,
  configFile: string,
): Promise<StormRun> {
  const cpuBefore = nodes.map((n) => (n.pid === undefined ? null : cpuSeconds(n.pid)));
  const machineBusyBefore = machineCpu().busy;
  const stormStart = Date.now();
  writeFileSync(
    configFile,
    JSON.stringify({ ...config, deadlineMs: stormStart + stormTimeoutMs(o.machines) - 20_000 }),
  );
  progress(
    `the storm: ${String(o.machines)} machines power on (simulated by ${String(o.fleetProcesses)} process(es))`,
  );
  const shards = Array.from({ length: o.fleetProcesses }, (_, index) =>
    lab.spawn(ns.fleet, fleetArgv('run', configFile, { index, count: o.fleetProcesses }), {
      cwd: repoRoot,
    }),
  );
  let killedAt: number | null = null;
  let killed: string | null = null;
  let victimCpu: number | null = null;
  let cpuAtKill: (number | null)[] = cpuBefore;
  const killOnce = async (): Promise<void> => {
    if (!o.kill || killedAt !== null) return;
    killedAt = Date.now();
    const holder = await vipHolder(lab, ns);
    const victim = nodes[holder];
    if (holder < 0 || victim === undefined) throw new Error('no node holds the VIP at midway');
    killed = nodeIds[holder] ?? null;
    cpuAtKill = nodes.map((n) => (n.pid === undefined ? null : cpuSeconds(n.pid)));
    victimCpu = cpuAtKill[holder] ?? null;
    victim.child.kill('SIGKILL');
    progress(`midway: SIGKILLed ${killed ?? '?'}, the leader holding the VIP`);
  };
  let killing: Promise<void> = Promise.resolve();
  const claimed = shards.map(() => 0);
  await Promise.all(
    shards.map((shard, index) =>
      shard.waitForOutput(
        (out) => {
          claimed[index] = lastClaimedCount(out);
          // killOnce marks the kill before its first await, so it starts once.
          const sum = claimed.reduce((a, b) => a + b, 0);
          if (sum >= Math.ceil(o.machines / 2) && killedAt === null) killing = killOnce();
          return out.includes('"event":"result"');
        },
        stormTimeoutMs(o.machines),
        'the storm result',
      ),
    ),
  );
  await killing;
  await Promise.all(shards.map((shard) => shard.exited));
  const stormS = (Date.now() - stormStart) / 1000;
  // How busy the machine's cores were: on 2 cores past about 1.8 every figure includes waiting
  // for one.
  const nodeCpuS = nodes.map((n, i) => {
    const end = nodeIds[i] === killed ? victimCpu : n.pid === undefined ? null : cpuSeconds(n.pid);
    const start = cpuBefore[i];
    return end === null || start === null || start === undefined ? null : round(end - start, 1);
  });
  const coresBusy = round((machineCpu().busy - machineBusyBefore) / stormS, 2);
  // Who led at the end, and what it used since the kill (or since the start, without one).
  const leader = await liveVipHolder(lab, ns, nodes, 10_000);
  const leaderEnd = leader?.pid === undefined ? null : cpuSeconds(leader.pid);
  const leaderFrom = leader === undefined ? undefined : cpuAtKill[nodes.indexOf(leader)];
  const killedIndex = killed === null ? -1 : nodeIds.indexOf(killed);
  const killedUsed = killedIndex < 0 ? 0 : (nodeCpuS[killedIndex] ?? null);
  const leaderCpuS =
    leaderEnd === null || leaderFrom === null || leaderFrom === undefined || killedUsed === null
      ? null
      : round(killedUsed + leaderEnd - leaderFrom, 1);
  const checker = lab.spawn(ns.fleet, fleetArgv('check', configFile), { cwd: repoRoot });
  const said = await checker.waitForOutput((out) => out.includes('"event":"check"'), 120_000, 'the check');
  return {
    killedAt,
    killed,
    nodeCpuS,
    leaderCpuS,
    coresBusy,
    result: fleetResultOf(config, shards.length, said),
  };
}

const sampleKinds: readonly SampleKind[] = [
  'dhcp_pxe',
  'tftp',
  'dhcp_http_boot',
  'http_boot',
  'dhcp_ipxe',
  'script',
  'artifacts',
  'dhcp_bootos',
  'claim',
  'dispatch',
  'boot',
  'workflow',
];

/** The storm's result line: the total time against the target, the checks, each step's figures. */
function stormReport(
  o: Options,
  result: FleetResult,
  storm: StormRun & { readonly setupS: number },
): Record<string, unknown> {
  const { killedAt, killed } = storm;
  const firstStart = Math.min(...result.machines.map((m) => m.startMs));
  const lastDone = Math.max(...result.machines.map((m) => m.doneMs ?? Number.POSITIVE_INFINITY));
  const failed = result.machines.filter((m) => m.error !== null);
  const totalS = Number.isFinite(lastDone) ? round((lastDone - firstStart) / 1000, 1) : null;
  const split = killedAt ?? Number.POSITIVE_INFINITY;
  const phases: Record<string, unknown> = {};
  for (const kind of sampleKinds) {
    phases[kind] = {
      before_kill: stats(result.samples, kind, 0, split),
      after_kill: stats(result.samples, kind, split, Number.POSITIVE_INFINITY),
    };
  }
  const allSucceeded = failed.length === 0 && result.check.succeeded === o.machines;
  const noneTwice = result.ranTwice === 0 && result.check.retriedActions === 0;
  return {
    bench: 'storm',
    machines: o.machines,
    actions_per_workflow: o.actions,
    hold_ms: o.holdMs,
    ramp_ms: o.rampMs,
    firmware: o.firmware,
    // Registering the machines and their workflows (not part of the storm's time).
    setup_s: storm.setupS,
    killed_leader: killed,
    killed_at_s: killedAt === null ? null : round((killedAt - firstStart) / 1000, 1),
    first_power_on_to_last_success_s: totalS,
    // The same end as the cluster recorded it (the leader's clock, on this machine).
    cluster_last_success_s: round((result.check.lastFinishedMs - firstStart) / 1000, 1),
    target_s: targetS,
    target_met: allSucceeded && noneTwice && totalS !== null && totalS <= targetS,
    workflows_succeeded: result.check.succeeded,
    machines_failed: failed.length,
    failures: failed.slice(0, 5).map((m) => m.error),
    not_succeeded: result.check.notSucceeded,
    actions_run: result.actionsRun,
    actions_run_twice: result.ranTwice,
    actions_retried_in_state: result.check.retriedActions,
    results_refused: result.refusedResults,
    reconnects: result.machines.reduce((n, m) => n + m.reconnects, 0),
    retransmits: result.machines.reduce((n, m) => n + m.retransmits, 0),
    // Ignored by the machines, as EDK2 ignores them; nonzero means replies left from the wrong address.
    tftp_packets_from_other_address: result.machines.reduce((n, m) => n + m.tftpOtherSource, 0),
    dhcp_replies_from_other_server: result.dhcpOtherServer,
    node_cpu_s: Object.fromEntries(nodeIds.map((id, i) => [id, storm.nodeCpuS[i]])),
    // The leader's CPU (the killed one's, then its successor's) per machine provisioned.
    leader_cpu_ms_per_machine:
      storm.leaderCpuS === null ? null : round((1000 * storm.leaderCpuS) / o.machines, 1),
    fleet_cpu_s: result.cpuS,
    fleet_loop_delay_max_ms: result.loopDelayMaxMs,
    cores_busy: storm.coresBusy,
    phases,
  };
}

// `npm run bench -- fleet [--machines N] [--pools P] [--pool-size S] [--spares K] [--fail-every F]
//  [--actions A] [--hold-ms H] [--ramp-ms R] [--no-kill] [--quick] [--keep]`
// The fleet at scale (issue 23 item 7): N machines Slipway has never been told about (1,000 by
// default) network-boot on a LAN of network namespaces with 3 slipway nodes run with --discovery
// (the compiled build, dynamic DHCP, the VIP held by the leader, HAProxy in front of each node's
// API). Each is discovered and inventoried (bench/fleet-machines.ts); the operator then accepts
// every machine, labels them into P groups, and creates P pools of S machines with K spares each,
// one per group. One machine in F fails its installation on purpose, so its pool must replace it.
// Once half of all the pools' slots are deployed the leader is SIGKILLed.
// Prints one JSON line: the time to discover every machine, to accept them, and until every pool
// reached its size; allocation decisions per second; the event-loop delay of the leader in each
// phase (bench/eld-probe.ts preloaded into the nodes); and the checks: no machine allocated twice,
// every machine that failed replaced, every pool at its size.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { NetnsLab, type LabProcess } from '../cluster/netns-lab.js';
import type { EldSample } from './eld-probe.js';
import { eldSnapshot } from './eld-read.js';
import { repoRoot } from './clusters.js';
import { slipwayBuild } from './slipway-build.js';
import { percentile, round } from './stats.js';
import type { FleetMachinesConfig, FleetMachinesResult } from './fleet-machines.js';
import {
  fleetAddress,
  nodeAddress,
  nodeIds,
  prefix,
  raiseNeighbourLimits,
  startNodes,
  liveVipHolder,
  vipHolder,
  writeStandIns,
  type StormNamespaces,
} from './storm.js';
import type { SampleKind } from './storm-worker.js';
import { wholeNumber } from './options.js';

interface Options {
  readonly machines: number;
  readonly pools: number;
  readonly poolSize: number;
  readonly spares: number;
  readonly failEvery: number;
  readonly actions: number;
  readonly holdMs: number;
  readonly rampMs: number;
  readonly kill: boolean;
  readonly keep: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      quick: { type: 'boolean', default: false },
      machines: { type: 'string' },
      pools: { type: 'string' },
      'pool-size': { type: 'string' },
      spares: { type: 'string' },
      'fail-every': { type: 'string', default: '20' },
      actions: { type: 'string', default: '3' },
      'hold-ms': { type: 'string', default: '100' },
      'ramp-ms': { type: 'string' },
      'no-kill': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
    strict: true,
  });
  // --quick: 3 pools of 9 with 1 spare from 40 machines, still with failures and the kill.
  const dflt = values.quick
    ? { machines: '40', pools: '3', size: '9', spares: '1', ramp: '500' }
    : { machines: '1000', pools: '10', size: '90', spares: '5', ramp: '5000' };
  const o: Options = {
    machines: wholeNumber(values.machines ?? dflt.machines, 'machines', 1, 2000),
    pools: wholeNumber(values.pools ?? dflt.pools, 'pools', 1, 100),
    poolSize: wholeNumber(values['pool-size'] ?? dflt.size, 'pool-size', 1, 1000),
    spares: wholeNumber(values.spares ?? dflt.spares, 'spares', 0, 100),
    failEvery: wholeNumber(values['fail-every'], 'fail-every', 0, 1000),
    actions: wholeNumber(values.actions, 'actions', 1, 20),
    holdMs: wholeNumber(values['hold-ms'], 'hold-ms', 0, 10_000),
    rampMs: wholeNumber(values['ramp-ms'] ?? dflt.ramp, 'ramp-ms', 0, 60_000),
    kill: !values['no-kill'],
    keep: values.keep,
  };
  const perGroup = Math.floor(o.machines / o.pools);
  const failingPerGroup = o.failEvery === 0 ? 0 : Math.ceil(perGroup / o.failEvery);
  if (perGroup - failingPerGroup < o.poolSize + o.spares)
    throw new Error(
      `${String(o.machines)} machines in ${String(o.pools)} groups leave ${String(perGroup - failingPerGroup)} good machines a group, fewer than a pool's size and spares (${String(o.poolSize + o.spares)})`,
    );
  return o;
}

/** The whole run is bounded: discovery, acceptance and filling the pools. */
const runTimeoutMs = (o: Options): number => (o.machines <= 100 ? 120_000 : 900_000);

function progress(msg: string): void {
  process.stderr.write(`fleet: ${msg}\n`);
}

export async function runFleetBench(argv: readonly string[]): Promise<void> {
  const o = parseOptions(argv);
  if (process.getuid?.() !== 0) throw new Error('the fleet benchmark needs root (network namespaces)');
  const build = slipwayBuild();
  const restoreLimits = await raiseNeighbourLimits(o.machines);
  const lab = await NetnsLab.create();
  const dir = o.keep ? join(repoRoot, `fleet-${lab.id}`) : lab.dir;
  const eldDir = join(dir, 'eld');
  mkdirSync(eldDir, { recursive: true });
  try {
    const ns = await lab.addLan({
      n1: { addresses: [`${nodeAddress(0)}/${String(prefix)}`] },
      n2: { addresses: [`${nodeAddress(1)}/${String(prefix)}`] },
      n3: { addresses: [`${nodeAddress(2)}/${String(prefix)}`] },
      fleet: { addresses: [`${fleetAddress}/${String(prefix)}`] },
    });
    const files = writeStandIns(dir, 64);
    const nodes = await startNodes(lab, ns, dir, build.main, files.tftpRoot, {
      args: [...['--dhcp-mode', 'dynamic', '--dhcp-pool', '10.214.16.1-10.214.31.250/16', '--discovery']],
      probe: build.probeArgs,
      eldDir,
    });
    const config: FleetMachinesConfig = {
      machines: o.machines,
      actions: o.actions,
      holdMs: o.holdMs,
      rampMs: o.rampMs,
      deadlineMs: Date.now() + runTimeoutMs(o) - 30_000,
      apiServers: nodeIds.map((_, i) => `${nodeAddress(i)}:7001`),
      subnetPrefix: prefix,
      kernelFile: files.kernelFile,
      initrdFile: files.initrdFile,
      binarySha256: createHash('sha256')
        .update(files.binaries['undionly.kpxe'] ?? Buffer.alloc(0))
        .digest('hex'),
      pools: o.pools,
      poolSize: o.poolSize,
      spares: o.spares,
      failEvery: o.failEvery,
      seed: 0xf1ee7,
      resultFile: join(dir, 'fleet-result.json'),
    };
    const configFile = join(dir, 'fleet.json');
    writeFileSync(configFile, JSON.stringify(config));
    const run = await runFleet(lab, ns, nodes, eldDir, o, configFile);
    const result = JSON.parse(readFileSync(config.resultFile, 'utf8')) as FleetMachinesResult;
    process.stdout.write(`${JSON.stringify(fleetReport(o, result, run))}\n`);
  } finally {
    await lab.destroy();
    await restoreLimits();
    if (o.keep) progress(`kept the configuration and data in ${dir}`);
  }
}

interface FleetRun {
  readonly killed: string | null;
  readonly killedAtMs: number | null;
  /** The leader's event-loop delay per phase (the leader of that phase). */
  readonly leaderLoop: Record<string, EldSample | null>;
}

/**
 * The machines and operator run; the event loops of the nodes are read at each phase's end, and
 * the leader is SIGKILLed at midway (unless --no-kill).
 */
async function runFleet(
  lab: NetnsLab,
  ns: StormNamespaces,
  nodes: readonly LabProcess[],
  eldDir: string,
  o: Options,
  configFile: string,
): Promise<FleetRun> {
  progress(`${String(o.machines)} unknown machines power on`);
  const fleet = lab.spawn(
    ns.fleet,
    [process.execPath, '--import', 'tsx', join(repoRoot, 'bench', 'fleet-machines.ts'), 'run', configFile],
    { cwd: repoRoot },
  );
  const leaderLoop: Record<string, EldSample | null> = {};
  const leaderEld = async (phase: string): Promise<void> => {
    // The live node holding the VIP, the leader; a moment after a kill, wait for it to move.
    const pid = (await liveVipHolder(lab, ns, nodes, 15_000))?.pid;
    leaderLoop[phase] = pid === undefined ? null : await eldSnapshot({ pid, dir: eldDir });
  };
  let killed: string | null = null;
  let killedAtMs: number | null = null;
  const pending: Promise<void>[] = [];
  const seen = new Set<string>();
  await fleet.waitForOutput(
    (out) => {
      for (const event of ['discovered', 'pools', 'midway'] as const) {
        if (!out.includes(`"event":"${event}"`) || seen.has(event)) continue;
        seen.add(event);
        progress(event);
        if (event === 'discovered') pending.push(leaderEld('discovery'));
        if (event === 'pools') pending.push(leaderEld('acceptance'));
        if (event === 'midway' && o.kill) {
          pending.push(
            (async () => {
              await leaderEld('filling_before_kill');
              const holder = await vipHolder(lab, ns);
              const victim = nodes[holder];
              if (victim === undefined) throw new Error('no node holds the VIP at midway');
              killed = nodeIds[holder] ?? null;
              killedAtMs = Date.now();
              victim.child.kill('SIGKILL');
              progress(`midway: SIGKILLed ${killed ?? '?'}, the leader holding the VIP`);
            })(),
          );
        }
      }
      return out.includes('"event":"result"');
    },
    runTimeoutMs(o),
    'the fleet result',
  );
  await Promise.all(pending);
  await leaderEld(o.kill ? 'filling_after_kill' : 'filling');
  await fleet.exited;
  return { killed, killedAtMs, leaderLoop };
}

function stepStats(r: FleetMachinesResult, kind: SampleKind): Record<string, number> | null {
  const xs = r.samples
    .filter(([k]) => k === kind)
    .map(([, , ms]) => ms)
    .sort((a, b) => a - b);
  if (xs.length === 0) return null;
  return { n: xs.length, p50_ms: round(percentile(xs, 0.5), 1), p99_ms: round(percentile(xs, 0.99), 1) };
}

function fleetReport(o: Options, r: FleetMachinesResult, run: FleetRun): Record<string, unknown> {
  const s = (from: number, to: number | null): number | null =>
    to === null ? null : round((to - from) / 1000, 1);
  const fillS = s(r.poolsCreatedMs, r.poolsFullMs);
  const checks = {
    every_machine_enrolled: r.enrolled === o.machines,
    no_machine_allocated_twice: r.check.allocatedTwice.length === 0 && r.ranTwice === 0,
    every_failed_machine_replaced: r.check.failedStillMembers.length === 0 && r.check.poolsAtSize === o.pools,
    every_pool_at_size: r.check.poolsAtSize === o.pools,
  };
  return {
    bench: 'fleet',
    machines: o.machines,
    pools: o.pools,
    pool_size: o.poolSize,
    spares: o.spares,
    failing_machines: r.check.failedOnPurpose,
    failed_installations: r.check.failedWorkflows,
    actions_per_workflow: o.actions,
    killed_leader: run.killed,
    killed_at_s: run.killedAtMs === null ? null : s(r.poolsCreatedMs, run.killedAtMs),
    discovery_s: s(r.firstPowerOnMs, r.discoveredMs),
    accept_and_label_s: s(r.discoveredMs, r.acceptedMs),
    pools_filled_s: fillS,
    allocation_decisions: r.check.poolWorkflows,
    decisions_per_s: fillS === null || fillS === 0 ? null : round(r.check.poolWorkflows / fillS, 1),
    ...checks,
    passed: Object.values(checks).every(Boolean),
    allocated_twice: r.check.allocatedTwice.slice(0, 10),
    failed_still_members: r.check.failedStillMembers.slice(0, 10),
    machine_errors: r.errors.slice(0, 5),
    results_refused: r.refusedResults,
    leader_event_loop: run.leaderLoop,
    steps: Object.fromEntries(
      (['dhcp_pxe', 'tftp', 'script', 'claim', 'inventory', 'workflow'] as const).map((k) => [
        k,
        stepStats(r, k),
      ]),
    ),
    per_pool: r.pools.map((p) => ({
      name: p.name,
      deployed: p.deployed,
      spares_ready: p.sparesReady,
      failed: p.failed,
    })),
    fleet_cpu_s: r.cpuS,
    fleet_loop_delay_max_ms: r.loopDelayMaxMs,
  };
}

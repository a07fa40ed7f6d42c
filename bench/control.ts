// `npm run bench -- control [--quick] [--workers N] [--active K] [--actions A] [--waves W]
//  [--hold-ms H] [--agent-processes P] [--phases steady,burst,paced] [--streams-per-connection S]
//  [--keep]`
// The control plane under many connected workers: a 3-node slipway cluster (real processes),
// N simulated agents on real gRPC worker streams (one stream each, as the agent opens), in P
// processes of their own (bench/control-agents.ts; default 1), one workflow of A actions per
// worker. Each agent answers an action at once with a success, so the
// figures measure the cluster, not the actions. Prints one JSON object per line:
//  - dispatch latency: from the commit of a result (the leader's apply of the entry that
//    recorded it and started the next action; the acknowledgment carries that time, and the
//    nodes share this machine's clock) to the next action arriving at that worker (p50, p90,
//    p99: the figure); also from the result's acknowledgment, from the leader's
//    proposal of the entry (its stamp) and from sending the result, in a
//    steady phase (K workflows running, the other agents connected and idle; W waves of K
//    workflows one after another on the same K machines, so the p99 rests on about
//    W x K x (A - 1) samples, not on the second-slowest of one wave) and in a burst (a workflow
//    for every other machine created at once), where the agents answer at once, so the cluster
//    runs at its limit and the figures are mostly queueing; and in a paced phase (a workflow
//    for every machine, each agent holding each action for 0.5 to 1.5 x H ms before it
//    answers, as real actions take time: every machine provisioning, below saturation; it
//    prints the dispatches per second that this offered). An action that arrives before its
//    result's acknowledgment is counted apart (actions_before_ack), not as a from-ack sample;
//  - workflows completed per second in the burst, and the nodes' CPU per action result;
//  - the check: every workflow succeeded, each action on its first attempt (else exit 1).
// The agents' streams go S to a connection (50 by default): a node serves at most
// --api-streams-per-connection-max (100) streams of one connection and queues the others.
//  - server memory per 1,000 connected workers (RSS with the streams open minus before).
// There is no reference system for this one: Tinkerbell's workers poll every 3 to 5 s.
import { parseArgs } from 'node:util';
import { credentials, Metadata } from '@grpc/grpc-js';
import { ControlClient } from '../src/gen/control.js';
import { ClusterClient } from '../src/cli/index.js';
import { allItems } from '../src/platform/pages.js';
import { SlipwayCluster } from './clusters.js';
import { AgentProcesses } from './control-agents.js';
import { ControlPhases, printResult, type CreateWorkflows } from './control-phases.js';
import { round, rssMb, sleep } from './stats.js';
import { wholeNumber } from './options.js';

interface Options {
  readonly workers: number;
  readonly actions: number;
  /** Workflows running at once in the steady phase. */
  readonly active: number;
  /** Steady-phase waves: each creates `active` workflows once the previous wave completed. */
  readonly waves: number;
  /** Paced phase: the mean time an agent holds an action (0: no paced phase). */
  readonly holdMs: number;
  /** Processes the simulated agents are spread over. */
  readonly agentProcesses: number;
  /** Which phases run: steady, burst, paced. */
  readonly phases: ReadonlySet<string>;
  /** Worker streams on one connection (below the node's --api-streams-per-connection-max). */
  readonly streamsPerConnection: number;
  readonly keep: boolean;
}

/** `--quick`: the smallest run that still goes through every phase and the check. */
const quickDefaults = { workers: '60', active: '10', actions: '3', waves: '2', 'hold-ms': '200' };

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      quick: { type: 'boolean', default: false },
      workers: { type: 'string' },
      active: { type: 'string' },
      actions: { type: 'string' },
      waves: { type: 'string' },
      'hold-ms': { type: 'string' },
      'agent-processes': { type: 'string', default: '1' },
      phases: { type: 'string', default: 'steady,burst,paced' },
      'streams-per-connection': { type: 'string', default: '50' },
      keep: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const fullDefaults = { workers: '1000', active: '50', actions: '5', waves: '5', 'hold-ms': '2000' };
  const defaults = values.quick ? quickDefaults : fullDefaults;
  const pick = (name: keyof typeof fullDefaults): string => values[name] ?? defaults[name];
  return {
    workers: wholeNumber(pick('workers'), 'workers', 1, 5000),
    actions: wholeNumber(pick('actions'), 'actions', 1, 50),
    active: wholeNumber(pick('active'), 'active', 1, 5000),
    waves: wholeNumber(pick('waves'), 'waves', 1, 100),
    holdMs: wholeNumber(pick('hold-ms'), 'hold-ms', 0, 60_000),
    agentProcesses: wholeNumber(values['agent-processes'], 'agent-processes', 1, 64),
    phases: phasesOf(values.phases),
    streamsPerConnection: wholeNumber(values['streams-per-connection'], 'streams-per-connection', 1, 100),
    keep: values.keep,
  };
}

const knownPhases = ['steady', 'burst', 'paced'];

function phasesOf(list: string): ReadonlySet<string> {
  const phases = new Set(list.split(',').filter((p) => p !== ''));
  for (const p of phases) {
    if (!knownPhases.includes(p)) throw new Error(`--phases: unknown phase ${p} (${knownPhases.join(', ')})`);
  }
  if (phases.size === 0) throw new Error(`--phases needs at least one of ${knownPhases.join(', ')}`);
  return phases;
}

export function call<Req, Res>(
  fn: (req: Req, md: Metadata, opts: { deadline: number }, cb: (e: Error | null, r: Res) => void) => unknown,
  req: Req,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    fn(req, new Metadata(), { deadline: Date.now() + 30_000 }, (e, r) =>
      e === null ? resolve(r) : reject(e),
    );
  });
}

/** Runs `f` over `items` with at most `width` in flight. */
export async function pool<T>(items: readonly T[], width: number, f: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const x = items[next++];
        if (x !== undefined) await f(x);
      }
    }),
  );
}

/** The bench template: one task of `actions` actions that each run `true`. */
export function benchTemplate(actions: number): string {
  const list = Array.from(
    { length: actions },
    (_, i) => `      - name: a${String(i + 1)}\n        command: ["true"]\n        timeout: 60`,
  ).join('\n');
  return `version: "0.1"\nname: bench\nglobal_timeout: 3600\ntasks:\n  - name: t\n    actions:\n${list}\n`;
}

/** Registers machine i as hardware bench-i, with a MAC and an address derived from i. */
export async function registerMachines(control: ControlClient, machines: readonly number[]): Promise<void> {
  process.stderr.write(`control: registering ${String(machines.length)} machines\n`);
  await pool(machines, 32, async (i) => {
    const mac = `02:${[(i >> 16) & 255, (i >> 8) & 255, i & 255, 0, 1].map((b) => b.toString(16).padStart(2, '0')).join(':')}`;
    const doc = {
      id: `bench-${String(i)}`,
      interfaces: [
        { mac, ip: `10.${String(100 + (i >> 16))}.${String((i >> 8) & 255)}.${String(i & 255)}/8` },
      ],
    };
    await call(control.hardwareCreate.bind(control), { documentJson: JSON.stringify(doc), replace: true });
  });
}

export function workflowCreator(control: ControlClient): CreateWorkflows {
  return (machines) =>
    pool(machines, 32, async (i) => {
      await call(control.workflowCreate.bind(control), {
        template: 'bench',
        hardwareId: `bench-${String(i)}`,
        hardwareMap: {},
        netboot: false,
      });
    });
}

/**
 * Connects every machine's worker stream and prints the servers' memory per 1,000 connected
 * workers: their RSS with the streams open minus `rssBefore`.
 */
async function connectWorkers(
  cluster: SlipwayCluster,
  agents: AgentProcesses,
  opts: Options,
  rssBefore: readonly number[],
): Promise<void> {
  process.stderr.write(`control: connecting ${String(opts.workers)} worker streams\n`);
  await agents.start(cluster.endpoints, opts.actions, opts.workers, opts.streamsPerConnection);
  await sleep(3000);
  const rssConnected = cluster.livePids().map((p) => rssMb(p) ?? 0);
  const delta = rssConnected.map((r, i) => r - (rssBefore[i] ?? 0));
  printResult({
    bench: 'control',
    metric: 'server_rss_mb_per_1000_workers',
    workers: opts.workers,
    value: round((delta.reduce((a, b) => a + b, 0) * 1000) / opts.workers),
    per_node_delta_mb: delta.map((x) => round(x)),
    rss_before_mb: rssBefore.map((x) => round(x)),
    rss_connected_mb: rssConnected.map((x) => round(x)),
  });
}

/**
 * The benchmark's own check: every workflow it created succeeded, each action on its first
 * attempt (read from the cluster, every page of the list). Prints the line; throws when not.
 */
export async function checkWorkflows(endpoints: readonly string[]): Promise<void> {
  const client = new ClusterClient([...endpoints], { timeoutMs: 30_000 });
  try {
    const workflows = await allItems(
      (token) => client.control('workflowList', { local: false, hardwareId: '', continue: token }),
      (page) => page.workflows,
    );
    const failed = workflows.filter((w) => w.state !== 'SUCCESS');
    const retried = workflows.reduce((n, w) => n + w.actions.filter((a) => a.attempt !== 1).length, 0);
    const pass = workflows.length > 0 && failed.length === 0 && retried === 0;
    printResult({
      bench: 'control',
      metric: 'check',
      workflows: workflows.length,
      not_succeeded: failed.slice(0, 10).map((w) => `${w.hardwareId} ${w.state} ${w.message}`),
      actions_retried: retried,
      pass,
    });
    if (!pass)
      throw new Error('control: not every workflow succeeded on its first attempts (see the check line)');
  } finally {
    client.close();
  }
}

export async function runControlBench(argv: readonly string[]): Promise<void> {
  const opts = parseOptions(argv);
  const cluster = await SlipwayCluster.create();
  let stopAgents = (): Promise<void> => Promise.resolve();
  try {
    await cluster.start();
    await cluster.waitHealthy(30_000);
    const control = new ControlClient(cluster.endpoints[0] ?? '', credentials.createInsecure());
    await call(control.templateCreate.bind(control), { source: benchTemplate(opts.actions), replace: true });
    const ids = Array.from({ length: opts.workers }, (_, i) => i);
    await registerMachines(control, ids);
    const rssBefore = cluster.livePids().map((p) => rssMb(p) ?? 0);

    // Simulated agents, in child processes (bench/control-agents.ts): each answers an action at
    // once (or after holding it, in the paced phase) and measures how long the next action took.
    const agents = new AgentProcesses(opts.agentProcesses);
    stopAgents = () => agents.stop();
    const phases = new ControlPhases(cluster, agents, opts, workflowCreator(control));
    await connectWorkers(cluster, agents, opts, rssBefore);

    // The first `active` machines run the steady phase, the others the burst; all run the paced.
    const active = Math.min(opts.active, opts.workers);
    if (opts.phases.has('steady')) await phases.steady(ids.slice(0, active));
    const burstIds = ids.slice(active);
    if (opts.phases.has('burst') && burstIds.length > 0) await phases.burst(burstIds);
    if (opts.phases.has('paced') && opts.holdMs > 0) await phases.paced(ids);
    control.close();
    await checkWorkflows(cluster.endpoints);
  } finally {
    await stopAgents();
    await cluster.stop(opts.keep);
    if (opts.keep) process.stderr.write(`control: kept ${cluster.dir}\n`);
  }
}

// `npm run bench -- control [--workers N] [--active K] [--actions A] [--waves W] [--hold-ms H]
//  [--agent-processes P] [--phases steady,burst,paced] [--keep]`
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
//  - workflows completed per second in the burst;
//  - server memory per 1,000 connected workers (RSS with the streams open minus before).
// There is no reference system for this one: Tinkerbell's workers poll every 3 to 5 s.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { credentials, Metadata } from '@grpc/grpc-js';
import { ControlClient } from '../src/gen/control.js';
import { SlipwayCluster } from './clusters.js';
import { AgentProcesses } from './control-agents.js';
import { machineCpu, percentile, round, rssMb, sleep } from './stats.js';

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
  readonly keep: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      workers: { type: 'string', default: '1000' },
      active: { type: 'string', default: '50' },
      actions: { type: 'string', default: '5' },
      waves: { type: 'string', default: '5' },
      'hold-ms': { type: 'string', default: '2000' },
      'agent-processes': { type: 'string', default: '1' },
      phases: { type: 'string', default: 'steady,burst,paced' },
      keep: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const int = (v: string, name: string, min: number, max: number): number => {
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max)
      throw new Error(`--${name} must be ${min}..${max}`);
    return Number(v);
  };
  return {
    workers: int(values.workers, 'workers', 1, 5000),
    actions: int(values.actions, 'actions', 1, 50),
    active: int(values.active, 'active', 1, 5000),
    waves: int(values.waves, 'waves', 1, 100),
    holdMs: int(values['hold-ms'], 'hold-ms', 0, 60_000),
    agentProcesses: int(values['agent-processes'], 'agent-processes', 1, 64),
    phases: phasesOf(values.phases),
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

function call<Req, Res>(
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

function out(o: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(o)}\n`);
}

export async function runControlBench(argv: readonly string[]): Promise<void> {
  const opts = parseOptions(argv);
  const cluster = await SlipwayCluster.create();
  let stopAgents = (): Promise<void> => Promise.resolve();
  try {
    await cluster.start();
    await cluster.waitHealthy(30_000);
    const endpoints = cluster.endpoints;
    const control = new ControlClient(endpoints[0] ?? '', credentials.createInsecure());
    const actions = Array.from(
      { length: opts.actions },
      (_, i) => `      - name: a${String(i + 1)}\n        command: ["true"]\n        timeout: 60`,
    ).join('\n');
    const template = `version: "0.1"\nname: bench\nglobal_timeout: 3600\ntasks:\n  - name: t\n    actions:\n${actions}\n`;
    await call(control.templateCreate.bind(control), { source: template, replace: true });
    const ids = Array.from({ length: opts.workers }, (_, i) => i);
    process.stderr.write(`control: registering ${String(opts.workers)} machines\n`);
    await pool(ids, 32, async (i) => {
      const mac = `02:${[(i >> 16) & 255, (i >> 8) & 255, i & 255, 0, 1].map((b) => b.toString(16).padStart(2, '0')).join(':')}`;
      const doc = {
        id: `bench-${String(i)}`,
        interfaces: [
          { mac, ip: `10.${String(100 + (i >> 16))}.${String((i >> 8) & 255)}.${String(i & 255)}/8` },
        ],
      };
      await call(control.hardwareCreate.bind(control), { documentJson: JSON.stringify(doc), replace: true });
    });
    const rssBefore = cluster.livePids().map((p) => rssMb(p) ?? 0);

    // Simulated agents, in child processes (bench/control-agents.ts): each answers an action at
    // once (or after holding it, in the paced phase) and measures how long the next action took.
    const agents = new AgentProcesses(opts.agentProcesses);
    stopAgents = () => agents.stop();
    const waitCompleted = async (n: number, what: string): Promise<void> => {
      const deadline = Date.now() + 600_000;
      while (agents.completed < n && Date.now() < deadline) await sleep(50);
      if (agents.completed < n)
        throw new Error(
          `${what}: only ${String(agents.completed)} of ${String(n)} workflows completed in 10 minutes`,
        );
    };
    const create = (list: readonly number[]): Promise<void> =>
      pool(list, 32, async (i) => {
        await call(control.workflowCreate.bind(control), {
          template: 'bench',
          hardwareId: `bench-${String(i)}`,
          hardwareMap: {},
          netboot: false,
        });
      });
    // Where a slow dispatch comes from: the agent processes' event loops, each server's (the
    // probe), and the snapshots the servers took meanwhile.
    let phaseStartedAt = Date.now();
    let phaseCpu0 = machineCpu().busy;
    const startPhase = async (): Promise<void> => {
      await cluster.eventLoopDelay();
      await agents.collect();
      phaseStartedAt = Date.now();
      phaseCpu0 = machineCpu().busy;
    };
    const snapshotsSince = (since: number): number[] =>
      cluster.members.map((m) => {
        let count = 0;
        for (const line of readFileSync(m.logPath, 'utf8').split('\n')) {
          if (!line.includes('took a snapshot')) continue;
          const time = (JSON.parse(line) as { time?: number }).time ?? 0;
          if (time >= since) count++;
        }
        return count;
      });
    const latency = async (
      phase: string,
      active: number,
      waves = 1,
      extra: (actions: number) => Record<string, unknown> = () => ({}),
    ): Promise<number> => {
      // The machine's cores busy over the phase (2.0: both, all the time): past about 1.8 the
      // processes wait for a core, and that wait is in every figure.
      const coresBusy = (machineCpu().busy - phaseCpu0) / ((Date.now() - phaseStartedAt) / 1000);
      const samples = await agents.collect();
      const a = [...samples.sinceAck].sort((x, y) => x - y);
      const r = [...samples.sinceSend].sort((x, y) => x - y);
      const st = [...samples.sinceStamp].sort((x, y) => x - y);
      const c = [...samples.sinceCommit].sort((x, y) => x - y);
      // The slowest dispatches, with when their result was acknowledged (ms into the phase).
      const slowest = samples.sinceAck
        .map((ms, i) => ({
          ms: round(ms),
          at_ms: round((samples.ackAt[i] ?? 0) - phaseStartedAt),
          node: `n${String((samples.node[i] ?? 0) + 1)}`,
        }))
        .sort((x, y) => y.ms - x.ms)
        .slice(0, 5);
      const servers = [...(await cluster.eventLoopDelay()).values()];
      const leader = await cluster.agreedLeader();
      out({
        bench: 'control',
        metric: 'dispatch_latency_ms',
        phase,
        connected_workers: opts.workers,
        active_workflows: active,
        waves,
        samples: c.length,
        from_commit_p50: round(percentile(c, 0.5)),
        from_commit_p90: round(percentile(c, 0.9)),
        from_commit_p99: round(percentile(c, 0.99)),
        from_ack_samples: a.length,
        actions_before_ack: samples.actionBeforeAck,
        from_ack_p50: round(percentile(a, 0.5)),
        from_ack_p99: round(percentile(a, 0.99)),
        from_result_sent_p50: round(percentile(r, 0.5)),
        from_result_sent_p99: round(percentile(r, 0.99)),
        from_leader_proposal_p50: round(percentile(st, 0.5)),
        from_leader_proposal_p99: round(percentile(st, 0.99)),
        target_p99_ms: 50,
        ...extra(samples.actions),
        slowest_from_ack: slowest,
        leader: leader < 0 ? 'none agreed' : `n${String(leader + 1)}`,
        server_event_loop_delay_max_ms: servers.map((e) => e.max_ms),
        agent_event_loop_delay_max_ms: round(samples.loopDelayMaxMs),
        machine_cores_busy: round(coresBusy),
        snapshots_taken: snapshotsSince(phaseStartedAt),
      });
      return samples.actions;
    };

    process.stderr.write(`control: connecting ${String(opts.workers)} worker streams\n`);
    await agents.start(endpoints, opts.actions, opts.workers);
    await sleep(3000);
    const rssConnected = cluster.livePids().map((p) => rssMb(p) ?? 0);
    const delta = rssConnected.map((r, i) => r - (rssBefore[i] ?? 0));
    out({
      bench: 'control',
      metric: 'server_rss_mb_per_1000_workers',
      workers: opts.workers,
      value: round((delta.reduce((a, b) => a + b, 0) * 1000) / opts.workers),
      per_node_delta_mb: delta.map((x) => round(x)),
      rss_before_mb: rssBefore.map((x) => round(x)),
      rss_connected_mb: rssConnected.map((x) => round(x)),
    });

    // Steady: the first `active` machines' agents go offline, their workflows are created, then
    // the agents come back at once; every other agent stays connected and idle.
    const active = Math.min(opts.active, opts.workers);
    const steadyIds = ids.slice(0, active);
    if (opts.phases.has('steady')) {
      agents.cancel(steadyIds);
      process.stderr.write(
        `control: steady phase, ${String(opts.waves)} waves of ${String(active)} active workflows among ${String(opts.workers)} workers\n`,
      );
      await startPhase();
      // The first wave's agents reconnect at once, as after an outage; later waves find them
      // connected, and each new workflow's first action is pushed when its create commits.
      for (let wave = 1; wave <= opts.waves; wave++) {
        await create(steadyIds);
        if (wave === 1) agents.connect(steadyIds);
        await waitCompleted(active * wave, `steady phase, wave ${String(wave)}`);
      }
      await latency('steady', active, opts.waves);
    }

    // Burst: every other machine gets a workflow at once while all agents are connected.
    const burstIds = ids.slice(active);
    if (opts.phases.has('burst') && burstIds.length > 0) {
      process.stderr.write(`control: burst phase, ${String(burstIds.length)} workflows created at once\n`);
      await startPhase();
      const t0 = Date.now();
      const before = agents.completed;
      await create(burstIds);
      const created = Date.now();
      await waitCompleted(before + burstIds.length, 'burst phase');
      await latency('burst', burstIds.length);
      const wall = (agents.lastDoneMs - t0) / 1000;
      out({
        bench: 'control',
        metric: 'workflows_per_second',
        phase: 'burst',
        workflows: burstIds.length,
        actions_per_workflow: opts.actions,
        seconds: round(wall),
        create_seconds: round((created - t0) / 1000),
        value: round(burstIds.length / wall),
      });
    }

    // Paced: every machine gets a workflow while its agent holds each action for a while.
    if (opts.phases.has('paced') && opts.holdMs > 0) {
      process.stderr.write(
        `control: paced phase, ${String(ids.length)} workflows, actions held ${String(opts.holdMs)} ms on average\n`,
      );
      agents.hold(opts.holdMs);
      await startPhase();
      const t0 = Date.now();
      const before = agents.completed;
      await create(ids);
      await waitCompleted(before + ids.length, 'paced phase');
      await latency('paced', ids.length, 1, (actions) => ({
        hold_ms: opts.holdMs,
        dispatches_per_second: round(actions / ((agents.lastDoneMs - t0) / 1000)),
      }));
    }
    control.close();
  } finally {
    await stopAgents();
    await cluster.stop(opts.keep);
    if (opts.keep) process.stderr.write(`control: kept ${cluster.dir}\n`);
  }
}

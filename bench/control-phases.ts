// The control benchmark's phases (bench/control.ts sets up the cluster, the machines and the
// agents): steady, burst and paced, each creating workflows, waiting for the agents to finish
// them and printing the dispatch latency the agents measured, with where a slow dispatch comes
// from (event loops, cores busy, snapshots taken meanwhile).
import { readFileSync } from 'node:fs';
import type { SlipwayCluster } from './clusters.js';
import type { AgentProcesses } from './control-agents.js';
import { cpuSeconds, machineCpu, percentile, round, sleep } from './stats.js';

/** Prints one result line (JSON) on stdout. */
export function printResult(o: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(o)}\n`);
}

export interface PhaseOptions {
  readonly workers: number;
  readonly actions: number;
  readonly waves: number;
  readonly holdMs: number;
}

/** Creates one workflow of the bench template for each of these machines. */
export type CreateWorkflows = (machines: readonly number[]) => Promise<void>;

/** Drives the phases over one cluster and one set of agent processes. */
export class ControlPhases {
  readonly #cluster: SlipwayCluster;
  readonly #agents: AgentProcesses;
  readonly #opts: PhaseOptions;
  readonly #createWorkflows: CreateWorkflows;
  #phaseStartedAt = Date.now();
  #phaseCpu0 = machineCpu().busy;

  constructor(
    cluster: SlipwayCluster,
    agents: AgentProcesses,
    opts: PhaseOptions,
    createWorkflows: CreateWorkflows,
  ) {
    this.#cluster = cluster;
    this.#agents = agents;
    this.#opts = opts;
    this.#createWorkflows = createWorkflows;
  }

  /**
   * Steady: the given machines' agents go offline, their workflows are created, then the agents
   * come back at once; every other agent stays connected and idle.
   */
  async steady(machines: readonly number[]): Promise<void> {
    const active = machines.length;
    this.#agents.cancel(machines);
    process.stderr.write(
      `control: steady phase, ${String(this.#opts.waves)} waves of ${String(active)} active workflows among ${String(this.#opts.workers)} workers\n`,
    );
    await this.#startPhase();
    // The first wave's agents reconnect at once, as after an outage; later waves find them
    // connected, and each new workflow's first action is pushed when its create commits.
    for (let wave = 1; wave <= this.#opts.waves; wave++) {
      await this.#createWorkflows(machines);
      if (wave === 1) this.#agents.connect(machines);
      await this.#waitCompleted(active * wave, `steady phase, wave ${String(wave)}`);
    }
    await this.#reportDispatchLatency('steady', active, this.#opts.waves);
  }

  /**
   * Burst: each of the given machines gets a workflow at once while all agents are connected.
   * Resolves with the nodes' CPU milliseconds per action result, all nodes together.
   */
  async burst(machines: readonly number[]): Promise<number> {
    process.stderr.write(`control: burst phase, ${String(machines.length)} workflows created at once\n`);
    await this.#startPhase();
    const t0 = Date.now();
    const pids = this.#cluster.livePids();
    const cpu0 = pids.map((pid) => cpuSeconds(pid) ?? 0);
    const before = this.#agents.completed;
    await this.#createWorkflows(machines);
    const created = Date.now();
    await this.#waitCompleted(before + machines.length, 'burst phase');
    // Each node's CPU (its own accounting, which other load disturbs far less than wall time)
    // per action result: a result and the start of the next action are one entry.
    const cpuMs = pids.map((pid, i) => ((cpuSeconds(pid) ?? 0) - (cpu0[i] ?? 0)) * 1000);
    const results = machines.length * this.#opts.actions;
    await this.#reportDispatchLatency('burst', machines.length);
    const wall = (this.#agents.lastDoneMs - t0) / 1000;
    printResult({
      bench: 'control',
      metric: 'workflows_per_second',
      phase: 'burst',
      workflows: machines.length,
      actions_per_workflow: this.#opts.actions,
      seconds: round(wall),
      create_seconds: round((created - t0) / 1000),
      value: round(machines.length / wall),
      server_cpu_ms_per_action_result: round(cpuMs.reduce((a, b) => a + b, 0) / results, 3),
      node_cpu_ms_per_action_result: cpuMs.map((ms) => round(ms / results, 3)),
    });
    return cpuMs.reduce((a, b) => a + b, 0) / results;
  }

  /** Paced: each of the given machines gets a workflow while its agent holds each action a while. */
  async paced(machines: readonly number[]): Promise<void> {
    const holdMs = this.#opts.holdMs;
    process.stderr.write(
      `control: paced phase, ${String(machines.length)} workflows, actions held ${String(holdMs)} ms on average\n`,
    );
    this.#agents.hold(holdMs);
    await this.#startPhase();
    const t0 = Date.now();
    const before = this.#agents.completed;
    await this.#createWorkflows(machines);
    await this.#waitCompleted(before + machines.length, 'paced phase');
    await this.#reportDispatchLatency('paced', machines.length, 1, (actions) => ({
      hold_ms: holdMs,
      dispatches_per_second: round(actions / ((this.#agents.lastDoneMs - t0) / 1000)),
    }));
  }

  /** Drops what the agents and the servers' probes measured so far, and starts the clock. */
  async #startPhase(): Promise<void> {
    await this.#cluster.eventLoopDelay();
    await this.#agents.collect();
    this.#phaseStartedAt = Date.now();
    this.#phaseCpu0 = machineCpu().busy;
  }

  async #waitCompleted(n: number, what: string): Promise<void> {
    const agents = this.#agents;
    const deadline = Date.now() + 600_000;
    while (agents.completed < n && Date.now() < deadline) await sleep(50);
    if (agents.completed < n)
      throw new Error(
        `${what}: only ${String(agents.completed)} of ${String(n)} workflows completed in 10 minutes`,
      );
  }

  /** Each node's count of the snapshots it took since `since` (ms since the epoch), from its log. */
  #snapshotsSince(since: number): number[] {
    return this.#cluster.members.map((m) => {
      let count = 0;
      for (const line of readFileSync(m.logPath, 'utf8').split('\n')) {
        if (!line.includes('took a snapshot')) continue;
        const time = (JSON.parse(line) as { time?: number }).time ?? 0;
        if (time >= since) count++;
      }
      return count;
    });
  }

  /** Prints the phase's dispatch latency line from the samples the agents took since it started. */
  async #reportDispatchLatency(
    phase: string,
    active: number,
    waves = 1,
    extra: (actions: number) => Record<string, unknown> = () => ({}),
  ): Promise<void> {
    // The machine's cores busy over the phase (2.0: both, all the time): past about 1.8 the
    // processes wait for a core, and that wait is in every figure.
    const coresBusy = (machineCpu().busy - this.#phaseCpu0) / ((Date.now() - this.#phaseStartedAt) / 1000);
    const samples = await this.#agents.collect();
    const a = [...samples.sinceAck].sort((x, y) => x - y);
    const r = [...samples.sinceSend].sort((x, y) => x - y);
    const st = [...samples.sinceStamp].sort((x, y) => x - y);
    const c = [...samples.sinceCommit].sort((x, y) => x - y);
    // The slowest dispatches, with when their result was acknowledged (ms into the phase).
    const slowest = samples.sinceAck
      .map((ms, i) => ({
        ms: round(ms),
        at_ms: round((samples.ackAt[i] ?? 0) - this.#phaseStartedAt),
        node: `n${String((samples.node[i] ?? 0) + 1)}`,
      }))
      .sort((x, y) => y.ms - x.ms)
      .slice(0, 5);
    const servers = [...(await this.#cluster.eventLoopDelay()).values()];
    const leader = await this.#cluster.agreedLeader();
    printResult({
      bench: 'control',
      metric: 'dispatch_latency_ms',
      phase,
      connected_workers: this.#opts.workers,
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
      snapshots_taken: this.#snapshotsSince(this.#phaseStartedAt),
    });
  }
}

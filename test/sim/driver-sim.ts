// The production raft driver under deterministic simulation. Each simulated server is the real
// RaftNode (src/raft/node.ts) with the real LevelLogStore over a simulated disk and the real
// ReplicatedState (test/sim/sim-server.ts), on a virtual clock and a simulated network. One
// seed picks the scenario and drives every random choice, so a failing seed replays exactly.
//
// Chaos: clients put and read keys and run workflows through the control plane while a nemesis
// kills processes and cuts power (unsynced writes lost, torn tails), pauses processes, and
// partitions the network (symmetric, one-way, a bridge, the leader cut off), and an operator
// transfers leadership and changes membership (add a learner, promote it, remove a voter;
// always 3-5 voters). Healing: the network heals, every crashed member restarts; a leader must
// be elected, a new proposal commit and apply on every member, and the members converge on one
// state within a bound.
//
// The Monitor (monitor.ts) checks raft's invariants after every event: election safety, one
// vote per term, log matching, one entry committed per index, leader completeness, state
// machine safety, matching snapshots, and no committed entry lost from the disks whatever
// crashed. The ControlMonitor checks the changefeed (no gap, no duplicate), that each action
// attempt is started and recorded at most once, and that a deadline takes effect only once it
// has passed. Each server runs the production deadline scanner and power executor while it
// leads (sim-duties.ts), the executor on simulated BMCs that fail and hang (sim-bmc.ts), which
// check that a power job's steps begin once per claimed attempt, in order. In half the seeds
// machine m1 is run by a simulated agent (sim-agent.ts) over a simulated worker stream
// (sim-worker-stream.ts) to the production WorkerService of some member (sim-worker-service.ts):
// the agent executes each attempt at most once, and a result acknowledged to it must be recorded
// by then. Once faults stop,
// every workflow and power job must finish. At the end the clients' history, which ends with a
// read of every key, must be linearizable: every acknowledged write is present.
import { createHash } from 'node:crypto';
import pino from 'pino';
import { checkLinearizable, describeOp, type Op } from '../support/linearizability.js';
import { RaftError, type ConfChange, type Member, type RaftConfig } from '../../src/raft/core/types.js';
import type { ReplicatedState } from '../../src/state/replicated-state.js';
import { decodeResult, encodeCommand } from '../../src/state/store-command.js';
import { Prng } from '../../src/platform/prng.js';
import { Monitor, SimViolation, describeMembership, type ViolationKind } from './monitor.js';
import { SimNetwork, type NetFaults } from './network.js';
import { Scheduler } from './scheduler.js';
import type { DiskFaults } from './sim-level-disk.js';
import { SimServer, type ServerBug, type ServerEnv } from './sim-server.js';
import type { SimSwitchboard } from './sim-transport.js';
import { ControlMonitor, ControlWorkload, type ControlStats } from './control-workload.js';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import { SimBmcs, type BmcStats } from './sim-bmc.js';
import { startDuties, type DutyBug } from './sim-duties.js';
import { SimAgent, type AgentStats, type AgentTarget } from './sim-agent.js';
import { startWorkerService, type WorkerServiceBug } from './sim-worker-service.js';

/** Deliberate defects, for the tests that prove the checks can fail. */
export type DriverSimBug = ServerBug | 'staleRead' | DutyBug | WorkerServiceBug | 'forgetJournal';

export interface DriverSimOptions {
  /** Overrides the seed's length of the chaos phase (virtual ms). */
  readonly chaosMs?: number;
  readonly bug?: DriverSimBug;
  /** Overrides the seed's choice of a long run with slow faults (see runDriverSim). */
  readonly slowFaults?: boolean;
  /** Overrides the seed's choice of running a machine by a simulated agent (sim-agent.ts). */
  readonly agents?: boolean;
  /** Gets a line for every fault and operator action. */
  readonly trace?: (line: string) => void;
}

export interface DriverSimStats {
  events: number;
  crashes: number;
  powerLosses: number;
  tornWrites: number;
  lostUnsynced: number;
  /** Writes LevelLogStore did not sync (a new commit index alone, background deletes). */
  unsyncedWrites: number;
  pauses: number;
  partitions: number;
  transfers: number;
  confChanges: number;
  clientOps: number;
  clientOk: number;
  leaders: number;
  maxTerm: number;
  applied: number;
  snapshots: number;
  /** Runs with slow faults, which end once every workflow and power job has finished. */
  drains: number;
  /** Virtual ms from healing until every workflow and power job had finished. */
  drainMs: number;
}

export interface DriverSimResult {
  readonly seed: number;
  readonly ok: boolean;
  /** The first violation: `kind: what happened (seed, virtual time)`. */
  readonly failure?: string;
  readonly kind?: ViolationKind;
  /** Identical for two runs of one seed: the run replays exactly. */
  readonly fingerprint: string;
  readonly control: ControlStats;
  readonly power: BmcStats;
  readonly agents: AgentStats;
  readonly stats: DriverSimStats;
}

const tickMs = 10;
const keys = ['a', 'b', 'c', 'd'];
const nodeIdsMax = 7;
const healMs = 4000;
/** After healing, how long every workflow and power job may take to finish. */
const drainMs = 6000;
/** How much longer the chaos of a seed with slow faults lasts: deadlines pass within it. */
const slowChaosMs = 800;
const clientTimeoutMs = 200;
const text = new TextEncoder();
const untext = new TextDecoder();

/** Runs fn at exponentially distributed intervals of this mean during chaos; never for Infinity. */
type Every = (meanMs: number, fn: () => void) => void;

export async function runDriverSim(seed: number, opts: DriverSimOptions = {}): Promise<DriverSimResult> {
  const r = Prng.derive(seed, 'driver-scenario');
  const voters = r.pick([3, 3, 5]);
  // Some seeds run longer, with faults that take seconds to recover from: a worker hanging on an
  // attempt until its deadline (a second at least) fires, a BMC that fails (a retry waits a
  // second) or hangs past the executor's claim (a second). Those seeds then wait until every
  // workflow and power job has finished. Only some: each costs three times a short run.
  const slowFaults = opts.slowFaults ?? Prng.derive(seed, 'slow-faults').chance(0.08);
  const shortChaosMs = r.range(400, 900);
  const chaosMs = opts.chaosMs ?? (slowFaults ? shortChaosMs + slowChaosMs : shortChaosMs);
  const raft: Partial<Omit<RaftConfig, 'id'>> = {
    electionTicks: 10,
    heartbeatTicks: r.pick([1, 2]),
    preVote: true,
    checkQuorum: r.chance(0.7),
  };
  const netFaults: NetFaults = {
    dropP: r.pick([0, 0.02, 0.08]),
    dupP: r.pick([0, 0.02]),
    delayMinMs: 0.5,
    delayMaxMs: r.pick([2, 6]),
    longDelayP: 0.01,
    longDelayMaxMs: 40,
  };
  const diskFaults: DiskFaults = {
    latencyMinMs: 0.2,
    latencyMaxMs: r.pick([1, 4]),
    spikeP: 0.02,
    spikeMaxMs: 60,
    spikesUntil: chaosMs,
    powerLossP: 0.5,
    tornP: 0.3,
  };
  const means = {
    crash: r.pick([150, 300, Infinity]),
    partition: r.pick([200, 400, Infinity]),
    pause: r.pick([300, Infinity]),
    transfer: r.pick([300, Infinity]),
    conf: r.pick([150, 400, Infinity]),
  };
  const snapshotEntries = r.pick([0, 20, 60]);

  const sched = new Scheduler();
  const rng = Prng.derive(seed, 'driver-sim');
  const operatorRng = Prng.derive(seed, 'operator');
  const net = new SimNetwork(sched, Prng.derive(seed, 'net'), netFaults);
  const board: SimSwitchboard = new Map();
  const monitor = new Monitor();
  const stats: DriverSimStats = {
    events: 0,
    crashes: 0,
    powerLosses: 0,
    tornWrites: 0,
    lostUnsynced: 0,
    unsyncedWrites: 0,
    pauses: 0,
    partitions: 0,
    transfers: 0,
    confChanges: 0,
    clientOps: 0,
    clientOk: 0,
    leaders: 0,
    maxTerm: 0,
    applied: 0,
    snapshots: 0,
    drains: 0,
    drainMs: 0,
  };
  const trace = (line: string): void => opts.trace?.(`${sched.now.toFixed(1)} ${line}`);
  let failure: { kind: ViolationKind; message: string } | null = null;
  const fail = (kind: ViolationKind, message: string): void => {
    failure ??= { kind, message: `${kind}: ${message} (seed ${seed} at ${sched.now.toFixed(1)} ms)` };
  };
  const check = (fn: () => void): void => {
    try {
      fn();
    } catch (e) {
      if (e instanceof SimViolation) fail(e.kind, e.message.slice(e.kind.length + 2));
      else throw e;
    }
  };

  const controlMonitor = new ControlMonitor(
    (msg) => {
      fail('control-plane', msg);
    },
    () => sched.now,
  );
  const bmcs = new SimBmcs(
    sched,
    Prng.derive(seed, 'bmc'),
    () => slowFaults && sched.now < chaosMs,
    (msg) => {
      fail('power', msg);
    },
  );
  // Some seeds run machine m1 by a simulated agent over the worker stream, to the production
  // WorkerService of some server (sim-worker-service.ts); the others keep the direct workers.
  const agentMachines: ReadonlySet<string> =
    (opts.agents ?? Prng.derive(seed, 'sim-agents').chance(0.5)) ? new Set(['m1']) : new Set();
  const serverBug = opts.bug === 'ackBeforePersist' || opts.bug === 'tamperApply' ? opts.bug : undefined;
  const dutyBug = opts.bug === 'deadlineTwice' || opts.bug === 'powerStepTwice' ? opts.bug : undefined;
  const control = new ControlWorkload(
    sched,
    Prng.derive(seed, 'control'),
    (command, done) => {
      proposeControl(command, done);
    },
    (done) => {
      readControl(done);
    },
    chaosMs,
    slowFaults ? 0.15 : 0,
    agentMachines,
  );

  // ------------------------------------------------------------------ servers
  const servers = new Map<string, SimServer>();
  const disks = new Map<string, SimServer['disk']>();
  const env: ServerEnv = {
    seed,
    sched,
    net,
    board,
    monitor,
    logger: pino({ level: 'silent' }),
    raft,
    tickMs,
    snapshotEntries,
    diskFaults,
    bug: serverBug,
    check,
    fail: (message) => {
      fail('driver', message);
    },
    onVoteGranted: (voter, term, candidate) => {
      check(() => {
        monitor.onVoteGranted(voter, term, candidate);
      });
    },
    onStart: (server, kv) => {
      kv.onRestored = controlMonitor.watch(server.id, kv, control.stats);
    },
    onApplied: () => {
      stats.applied++;
    },
    onNode: (server, proc, node, kv) => {
      startDuties(server.id, proc, node, kv, { bmcs, logger: env.logger, bug: dutyBug });
      if (agentMachines.size > 0)
        workerTargets.set(server.id, startWorkerService(server.id, proc, node, kv, workerEnv));
    },
  };
  const workerTargets = new Map<string, AgentTarget>();
  const workerEnv = {
    net,
    logger: env.logger,
    server: (id: string) => {
      const s = servers.get(id);
      return s?.proc == null || s.node === null || !s.ready ? undefined : { proc: s.proc, node: s.node };
    },
    forwardTimeoutMs: clientTimeoutMs,
    bug: opts.bug === 'ackBeforeCommit' ? opts.bug : undefined,
  };
  /** The machines' executions, across agent restarts: an attempt runs at most once. */
  const executed = new Set<string>();
  const agents = [...agentMachines].map(
    (m) =>
      new SimAgent(m, Prng.derive(seed, `agent:${m}`), {
        sched,
        stream: { sched, net, rng: Prng.derive(seed, `worker-stream:${m}`) },
        // The cluster's members, as an agent's configured servers are.
        targets: () =>
          members()
            .filter((s) => s.ready && workerTargets.get(s.id)?.proc === s.proc)
            .map((s) => workerTargets.get(s.id)!),
        faulty: () => sched.now < chaosMs,
        hangP: slowFaults ? 0.15 : 0,
        forgetJournal: opts.bug === 'forgetJournal',
        onExecute: (key) => {
          if (executed.has(key)) fail('control-plane', `attempt ${key} executed twice on its machine`);
          executed.add(key);
        },
        onAck: (key) => {
          if (!controlMonitor.recorded(key))
            fail('control-plane', `the result of attempt ${key} was acknowledged but is not recorded`);
        },
      }),
  );
  const initial: Member[] = [];
  for (let i = 1; i <= voters; i++) {
    const s = new SimServer(`n${i}`, env);
    servers.set(s.id, s);
    disks.set(s.id, s.disk);
    initial.push(s.member);
  }
  const bootstrapOf = (s: SimServer): readonly Member[] =>
    initial.some((m) => m.id === s.id) ? initial : [];
  for (const s of servers.values()) s.start(bootstrapOf(s));
  const crash = (s: SimServer): void => {
    if (!s.alive) return;
    stats.crashes++;
    s.crash();
  };
  const live = (): SimServer[] => [...servers.values()].filter((s) => s.ready);
  const leaderUp = (): SimServer | undefined => {
    let best: SimServer | undefined;
    for (const s of live()) {
      const ss = s.node!.softState();
      if (
        ss.role === 'leader' &&
        sched.now >= s.proc!.pausedUntil &&
        (best === undefined || ss.term > best.node!.softState().term)
      )
        best = s;
    }
    return best;
  };
  /** Each server's state, for a failure's message. */
  const describeServers = (): string =>
    `committed config ${describeMembership(monitor.committedConfig())}; ` +
    [...servers.values()]
      .map((s) => {
        if (s.retired) return `${s.id} retired`;
        if (!s.ready) return `${s.id} ${s.alive ? 'starting' : 'down'}`;
        const st = s.node!.status();
        return (
          `${s.id} ${st.role} t${st.term} commit ${st.commit} applied ${st.appliedToStateMachine} ` +
          `last ${st.lastIndex} conf ${describeMembership(st.membership)}` +
          (st.transferee === '' ? '' : ` transferring to ${st.transferee}`)
        );
      })
      .join('; ');
  const members = (): SimServer[] => {
    const conf = monitor.committedConfig();
    return [...conf.voters, ...conf.learners].map((m) => servers.get(m.id)).filter((s) => s !== undefined);
  };

  // ------------------------------------------------------------------ nemesis and operator
  const every: Every = (meanMs, fn) => {
    if (!Number.isFinite(meanMs)) return;
    const loop = (): void => {
      if (sched.now >= chaosMs) return;
      fn();
      sched.after(rng.exp(meanMs), loop);
    };
    sched.after(rng.exp(meanMs), loop);
  };
  /** Voters whose removal was proposed: retired once it is committed. */
  const retiring = new Set<string>();
  const ids = (): string[] => [...servers.values()].filter((s) => !s.retired).map((s) => s.id);
  every(means.crash, () => {
    const victim = servers.get(rng.pick(ids()))!;
    if (!victim.alive) return;
    crash(victim);
    trace(`crash ${victim.id}`);
    sched.after(rng.uniform(20, 200), () => {
      if (!victim.alive && !victim.retired) victim.start(bootstrapOf(victim));
    });
  });
  every(means.pause, () => {
    const victim = servers.get(rng.pick(ids()))!;
    stats.pauses++;
    victim.pause(sched.now + rng.uniform(20, 150));
    trace(`pause ${victim.id}`);
  });
  every(means.partition, () => {
    const all = ids();
    const shape = rng.int(4);
    if (shape === 0) {
      const cut = all.filter(() => rng.chance(0.4));
      net.split(
        cut,
        all.filter((id) => !cut.includes(id)),
      );
    } else if (shape === 1) {
      const [x, y] = rng.shuffled(all);
      net.cut(x!, y!);
    } else if (shape === 2 && all.length >= 3) {
      // A bridge: two halves that cannot talk, and one node that reaches both.
      const [, ...rest] = rng.shuffled(all);
      const k = rng.range(1, rest.length - 1);
      net.split(rest.slice(0, k), rest.slice(k));
    } else {
      const leader = leaderUp();
      if (leader === undefined) return;
      net.split(
        [leader.id],
        all.filter((id) => id !== leader.id),
      );
    }
    stats.partitions++;
    trace(`network: ${net.describe()}`);
    sched.after(rng.uniform(50, 300), () => {
      net.heal();
    });
  });
  every(means.transfer, () => {
    const leader = leaderUp();
    if (leader === undefined) return;
    const to = leader.node!.membership().voters.filter((v) => v.id !== leader.id);
    if (to.length === 0) return;
    const target = operatorRng.pick(to).id;
    stats.transfers++;
    trace(`transfer ${leader.id} -> ${target}`);
    leader.node!.transferLeadership(target, 300).catch(() => undefined);
  });
  every(means.conf, () => {
    retireRemoved();
    const leader = leaderUp();
    if (leader === undefined) return;
    const node = leader.node!;
    const m = node.membership();
    const learner = m.learners[0];
    let change: ConfChange;
    if (learner !== undefined) {
      const st = node.status();
      const pr = st.progress.find((p) => p.id === learner.id);
      // §4.2.1: promote only a learner that has caught up.
      if (pr === undefined || pr.match < st.commit) return;
      change = { type: 'promote', member: learner };
    } else if (
      m.voters.length < 5 &&
      servers.size < nodeIdsMax &&
      (m.voters.length < 4 || operatorRng.chance(0.5))
    ) {
      const s = new SimServer(`n${servers.size + 1}`, env);
      servers.set(s.id, s);
      disks.set(s.id, s.disk);
      s.start([]);
      change = { type: 'addLearner', member: s.member };
    } else if (m.voters.length > 3) {
      const victim = operatorRng.chance(0) ? leader.member : operatorRng.pick(m.voters);
      change = { type: 'remove', member: victim };
      retiring.add(victim.id);
    } else return;
    stats.confChanges++;
    trace(`conf ${change.type} ${change.member.id} via ${leader.id}`);
    try {
      node.proposeConfChange(change).catch(() => undefined);
    } catch {
      // Refused at once (not leader any more, a change in flight): the operator tries later.
    }
  });
  /** Shuts down removed servers once their removal is committed (decommissioning). */
  const retireRemoved = (): void => {
    const conf = monitor.committedConfig();
    for (const id of [...retiring]) {
      if (conf.voters.some((v) => v.id === id) || conf.learners.some((v) => v.id === id)) continue;
      retiring.delete(id);
      servers.get(id)?.retire();
      trace(`retire ${id}`);
    }
  };

  // ------------------------------------------------------------------ clients
  const history: Op[] = [];
  let valueSeq = 0;
  /** Operations still waiting for an answer; at the end their outcome is unknown. */
  const unsettled = new Set<(outcome: 'unknown') => void>();
  const target = (): SimServer | undefined => {
    const up = live();
    const leader = up.find((s) => s.node!.softState().role === 'leader');
    return leader !== undefined && rng.chance(0.8) ? leader : up[rng.int(Math.max(1, up.length))];
  };
  /** Runs one operation; `done` gets the outcome. */
  const operate = (
    client: number,
    key: string,
    op: 'put' | 'get',
    done: (outcome: 'ok' | 'refused' | 'unknown') => void,
  ): void => {
    const s = target();
    const call = sched.now;
    stats.clientOps++;
    let settled = false;
    const value = `v${++valueSeq}`;
    const finish = (outcome: 'ok' | 'refused' | 'unknown', read?: string): void => {
      if (settled) return;
      settled = true;
      if (outcome !== 'refused') {
        const ret = outcome === 'ok' ? sched.now : Infinity;
        if (outcome === 'ok') stats.clientOk++;
        if (op === 'put')
          history.push({
            kind: 'put',
            client,
            key,
            call,
            ret,
            input: { value },
            output: outcome === 'ok' ? { ok: true } : undefined,
          });
        else if (outcome === 'ok')
          history.push({ kind: 'get', client, key, call, ret, input: undefined, output: { value: read } });
      }
      unsettled.delete(finish);
      done(outcome);
    };
    unsettled.add(finish);
    sched.after(clientTimeoutMs, () => {
      finish('unknown');
    });
    if (s?.node == null) {
      finish('refused');
      return;
    }
    const { node, kv } = s;
    const refusedOrUnknown = (e: unknown): void => {
      // Refused before anything was appended; anything else may still commit.
      finish(e instanceof RaftError && e.code === 'E_NOT_LEADER' ? 'refused' : 'unknown');
    };
    try {
      if (op === 'put') {
        const command = encodeCommand({
          type: 'put',
          stampMs: Math.floor(sched.now),
          ns: 'default',
          key,
          value: text.encode(value),
        });
        node.propose(command).then((bytes) => {
          finish(decodeResult(bytes).type === 'put' ? 'ok' : 'refused');
        }, refusedOrUnknown);
      } else {
        const read = (): void => {
          const kvValue = kv!.get('default', key);
          finish('ok', kvValue === undefined ? undefined : untext.decode(kvValue.value));
        };
        // The injected defect: answer from local state without confirming leadership.
        if (opts.bug === 'staleRead') read();
        else node.linearizableRead().then(read, refusedOrUnknown);
      }
    } catch (e) {
      refusedOrUnknown(e);
    }
  };
  /**
   * A control-plane call through some node: `call` starts it and settles it through `finish`,
   * which passes on the first outcome only; no outcome within the client's timeout is null.
   */
  const controlCall = <T>(
    done: (r: T | null) => void,
    call: (s: SimServer, finish: (r: T | null) => void) => void,
  ): void => {
    const s = target();
    let settled = false;
    const finish = (r: T | null): void => {
      if (settled) return;
      settled = true;
      done(r);
    };
    sched.after(clientTimeoutMs, () => {
      finish(null);
    });
    if (s?.node == null) {
      finish(null);
      return;
    }
    try {
      call(s, finish);
    } catch {
      finish(null);
    }
  };
  /** One control command through some node; null when its outcome is unknown or refused. */
  const proposeControl = (command: ControlCommand, done: (r: ControlResult | null) => void): void => {
    controlCall(done, (s, finish) => {
      s.node!.propose(encodeCommand({ type: 'control', stampMs: Math.floor(sched.now), command })).then(
        (bytes) => {
          const res = decodeResult(bytes);
          finish(res.type === 'control' ? res.result : null);
        },
        () => {
          finish(null);
        },
      );
    });
  };
  /** A linearizable read of some node's control state; null when it could not be confirmed. */
  const readControl = (done: (kv: ReplicatedState | null) => void): void => {
    controlCall(done, (s, finish) => {
      const kv = s.kv;
      s.node!.linearizableRead().then(
        () => {
          finish(kv);
        },
        () => {
          finish(null);
        },
      );
    });
  };
  control.start();
  for (const a of agents) a.start();
  const clients = r.range(2, 4);
  for (let c = 0; c < clients; c++) {
    const loop = (): void => {
      if (sched.now >= chaosMs) return;
      sched.after(rng.uniform(1, 15), () => {
        operate(c, rng.pick(keys), rng.chance(0.6) ? 'put' : 'get', loop);
      });
    };
    loop();
  }

  // ------------------------------------------------------------------ the run
  // Lets the promise chains an event started run before the next event. Only the seed decides
  // the order (no real timer or I/O takes part), so a run replays exactly either way; a chain
  // deeper than this carries on after the next event, like a process that was slow to get there.
  const settle = async (): Promise<void> => {
    for (let i = 0; i < 16; i++) await Promise.resolve();
  };
  /** After every event: the disks still hold every committed entry, and no node stopped itself. */
  const checkStep = (): void => {
    // Decommissioned once its removal is committed, even after the faults: a removed node left
    // running would hold its agents' streams on a state that no longer moves.
    if (retiring.size > 0) retireRemoved();
    check(() => {
      monitor.checkDurability(disks);
    });
    for (const s of live()) {
      const why = s.node!.stoppedBy;
      if (why !== null) fail('storage-contract', `${s.id} stopped: ${why.message}`);
    }
  };
  const runUntil = async (until: number, stop: () => boolean = () => false): Promise<void> => {
    while (failure === null && !stop() && sched.peekTime() <= until && sched.step()) {
      stats.events++;
      await settle();
      checkStep();
    }
  };
  await runUntil(chaosMs);
  // Workers stop with the faults, unless the run waits for every workflow to finish.
  const stopWorkers = (): void => {
    control.stop();
    for (const a of agents) a.stop();
  };
  if (!slowFaults) stopWorkers();
  // Healing: the network heals and stops losing messages, every crashed member restarts, no
  // process stays paused, no more disk spikes.
  retireRemoved();
  net.heal();
  net.faults = { ...net.faults, dropP: 0, longDelayP: 0 };
  for (const s of servers.values()) {
    if (!s.alive && !s.retired) s.start(bootstrapOf(s));
    if (s.proc !== null) s.proc.pausedUntil = 0;
  }
  let healEnd = sched.now + healMs;
  // A stable leader: live, and it has committed an entry of its own term.
  const stableLeader = (): SimServer | undefined => {
    const l = leaderUp();
    if (l === undefined) return undefined;
    const st = l.node!.status();
    return l.node!.logTermAt(st.commit) === st.term ? l : undefined;
  };
  await runUntil(healEnd, () => stableLeader() !== undefined);
  if (failure === null && stableLeader() === undefined)
    fail('liveness', `no leader within ${healMs} ms of healing`);
  if (slowFaults) {
    // Faults have stopped: the workers, the deadline scanner and the power executor finish every
    // workflow and power job.
    const allFinished = (): boolean => {
      const leader = leaderUp();
      return leader !== undefined && ControlWorkload.finished(leader.kv!) && stableLeader() === leader;
    };
    const drainFrom = sched.now;
    await runUntil(sched.now + drainMs, allFinished);
    stats.drains++;
    stats.drainMs = Math.round(sched.now - drainFrom);
    if (failure === null && !allFinished()) {
      const kv = stableLeader()?.kv ?? null;
      const left = kv === null ? 'no stable leader' : describeUnfinished(kv);
      fail('liveness', `not finished ${drainMs} ms after healing: ${left}`);
    }
    healEnd = Math.max(healEnd, sched.now + healMs);
  }
  stopWorkers();
  // A final read of every key joins the history: acknowledged writes must be there.
  let finals = 0;
  for (const key of keys) {
    const once = (): void => {
      operate(99, key, 'get', (outcome) => {
        if (outcome === 'ok') finals++;
        else if (sched.now < healEnd) sched.after(5, once);
      });
    };
    once();
  }
  await runUntil(healEnd, () => finals === keys.length);
  if (failure === null && finals < keys.length)
    fail('liveness', `final reads did not complete within ${healMs} ms of healing`);
  // A proposal made after healing commits and every member applies it.
  let proposedAt = 0;
  const proposeFresh = (): void => {
    if (proposedAt > 0 || sched.now >= healEnd) return;
    const leader = stableLeader();
    if (leader === undefined) {
      sched.after(5, proposeFresh);
      return;
    }
    const command = encodeCommand({
      type: 'put',
      stampMs: Math.floor(sched.now),
      ns: 'default',
      key: 'healed',
      value: text.encode('yes'),
    });
    // As a client does: an answer, or a retry after a timeout (a leader that has just removed
    // itself, for one, never hears how its last proposals ended).
    let answered = false;
    const retry = (): void => {
      if (answered) return;
      answered = true;
      sched.after(5, proposeFresh);
    };
    sched.after(clientTimeoutMs, retry);
    try {
      leader.node!.propose(command).then(() => {
        if (answered) return;
        answered = true;
        proposedAt = leader.node?.status().appliedToStateMachine ?? 0;
      }, retry);
    } catch {
      retry();
    }
  };
  proposeFresh();
  const appliedEverywhere = (): boolean =>
    proposedAt > 0 && members().every((s) => s.ready && s.node!.status().appliedToStateMachine >= proposedAt);
  await runUntil(healEnd, appliedEverywhere);
  if (failure === null && !appliedEverywhere())
    fail(
      'liveness',
      `a proposal made after healing (applied at ${proposedAt || 'none'}) was not applied by every member ` +
        `within ${healMs} ms; ${describeServers()}`,
    );
  // Convergence: every member applies everything the leader committed and holds the same state.
  const converged = (): boolean => {
    const ms = members();
    if (!ms.every((s) => s.ready)) return false;
    const commit = Math.max(...ms.map((s) => s.node!.status().commit));
    return ms.every(
      (s) => s.node!.status().appliedToStateMachine >= commit && s.node!.status().commit === commit,
    );
  };
  await runUntil(healEnd, converged);
  if (failure === null) {
    if (!converged())
      fail('convergence', `members did not converge within ${healMs} ms of healing; ${describeServers()}`);
    else {
      const states = members().map((s) => Buffer.from(s.kv!.snapshot()).toString('base64'));
      if (new Set(states).size !== 1)
        fail('state-machine-safety', 'members applied the same log but hold different states');
    }
  }
  for (const finish of [...unsettled]) finish('unknown');
  if (failure === null) {
    const lin = checkLinearizable(history);
    if (!lin.ok)
      fail(
        'linearizability',
        `history not linearizable on key ${lin.key}: ${lin.explanation}\n` +
          history
            .filter((o) => o.key === lin.key)
            .map(describeOp)
            .join('\n'),
      );
  }
  for (const s of servers.values()) {
    stats.powerLosses += s.disk.stats.powerLosses;
    stats.tornWrites += s.disk.stats.tornWrites;
    stats.lostUnsynced += s.disk.stats.lostUnsynced;
    stats.unsyncedWrites += s.disk.stats.writes - s.disk.stats.syncedWrites;
  }
  stats.leaders = monitor.stats.leaders;
  stats.maxTerm = monitor.stats.maxTerm;
  stats.snapshots = monitor.stats.snapshots;
  const fingerprint = [
    stats.events,
    stats.applied,
    sched.now.toFixed(3),
    createHash('sha256').update(JSON.stringify(history)).digest('hex').slice(0, 16),
  ].join('/');
  const f = failure as { kind: ViolationKind; message: string } | null;
  return {
    seed,
    ok: f === null,
    ...(f === null ? {} : { failure: f.message, kind: f.kind }),
    fingerprint,
    stats,
    control: control.stats,
    power: bmcs.stats,
    agents: sumAgentStats(agents),
  };
}

/** The workflows and power jobs still under way, for a liveness failure's message. */
function describeUnfinished(kv: ReplicatedState): string {
  const workflows = [...kv.control.activeWorkflowIds()].map((id) => {
    const wf = kv.control.workflow(id);
    return `${id} ${wf?.state ?? '?'} [${wf?.actions.map((a) => `${a.state}#${a.attempt}`).join(' ') ?? ''}]`;
  });
  const jobs = [...kv.control.activePowerJobIds()].map((id) => {
    const job = kv.control.powerJob(id);
    return `${id} ${job?.state ?? '?'} step ${job?.stepIndex ?? '?'} attempt ${job?.attempt ?? '?'}`;
  });
  return `workflows: ${workflows.join(', ') || 'none'}; power jobs: ${jobs.join(', ') || 'none'}`;
}

function sumAgentStats(agents: readonly SimAgent[]): AgentStats {
  const sum: AgentStats = { connects: 0, executed: 0, acked: 0, crashes: 0 };
  for (const a of agents) for (const k of Object.keys(sum) as (keyof AgentStats)[]) sum[k] += a.stats[k];
  return sum;
}

// The real raft driver under deterministic simulation: each simulated server is a RaftNode
// (src/raft/node.ts) with the real ReplicatedState as its state machine, on a SimProcess clock, a
// SimLogStore over a SimDisk (torn tails, writes lost at a crash) and a SimTransport over the
// SimNetwork. Clients put and read through the nodes' public API while a nemesis crashes and
// restarts nodes and partitions the network; then everything heals. After every event: one
// leader per term, and every node applies the same entry at each index. At the end: the
// members converge on one state, and the clients' history is linearizable (acknowledged
// writes are present, since a final read of every key joins the history).
import { createHash } from 'node:crypto';
import pino from 'pino';
import { checkLinearizable, describeOp, type Op } from '../support/linearizability.js';
import { RaftNode } from '../../src/raft/node.js';
import { RaftError, type Entry, type Member, type RaftConfig } from '../../src/raft/core/types.js';
import { ReplicatedState } from '../../src/state/replicated-state.js';
import { decodeResult, encodeCommand } from '../../src/state/store-command.js';
import { Prng } from '../../src/platform/prng.js';
import { SimDisk, emptyMembershipSnapshot, type DiskFaults } from './disk.js';
import { SimNetwork, type NetFaults } from './network.js';
import { Scheduler } from './scheduler.js';
import { SimProcess } from './sim-process.js';
import { SimLogStore, type StoreBug } from './sim-log-store.js';
import { SimTransport, type SimSwitchboard } from './sim-transport.js';
import { ControlMonitor, ControlWorkload, type ControlStats } from './control-workload.js';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';

/** The real ReplicatedState, telling the monitor when a snapshot replaced its state. */
class WatchedReplicatedState extends ReplicatedState {
  onRestored: () => void = () => undefined;

  override restore(data: Uint8Array): void {
    super.restore(data);
    this.onRestored();
  }

  override async restoreInSlices(data: Uint8Array, pause: () => Promise<void>): Promise<void> {
    await super.restoreInSlices(data, pause);
    this.onRestored();
  }
}

export interface DriverSimResult {
  readonly seed: number;
  readonly ok: boolean;
  readonly failure?: string;
  /** Identical for two runs of one seed: the run replays exactly. */
  readonly fingerprint: string;
  readonly control: ControlStats;
  readonly stats: {
    events: number;
    crashes: number;
    partitions: number;
    clientOps: number;
    clientOk: number;
    leaders: number;
    applied: number;
  };
}

interface Server {
  readonly id: string;
  readonly disk: SimDisk;
  incarnation: number;
  proc: SimProcess | null;
  node: RaftNode | null;
  kv: WatchedReplicatedState | null;
  /** start() has resolved: the node answers calls. */
  ready: boolean;
}

const tickMs = 10;
const keys = ['a', 'b', 'c', 'd'];
const text = new TextEncoder();
const untext = new TextDecoder();

/** Deliberate defects, for the tests that prove the checks can fail. */
export type DriverSimBug = StoreBug | 'staleRead';

export interface DriverSimOptions {
  /** Overrides the seed's length of the chaos phase (virtual ms). */
  readonly chaosMs?: number;
  readonly bug?: DriverSimBug;
}

export async function runDriverSim(seed: number, opts: DriverSimOptions = {}): Promise<DriverSimResult> {
  const r = Prng.derive(seed, 'driver-scenario');
  const voters = r.pick([3, 3, 5]);
  const chaosMs = opts.chaosMs ?? r.range(400, 900);
  const healMs = 4000;
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
    tornP: 0.5,
  };
  const crashMeanMs = r.pick([150, 300, 1e9]);
  const partitionMeanMs = r.pick([200, 400, 1e9]);
  const snapshotEntries = r.pick([0, 20, 60]);
  const clientTimeoutMs = 200;

  const sched = new Scheduler();
  const rng = Prng.derive(seed, 'driver-sim');
  const net = new SimNetwork(sched, Prng.derive(seed, 'net'), netFaults);
  const board: SimSwitchboard = new Map();
  const logger = pino({ level: 'silent' });
  const ids = Array.from({ length: voters }, (_, i) => `n${i + 1}`);
  const members: Member[] = ids.map((id) => ({ id, addr: `${id}:7000`, apiAddr: '' }));
  const stats = { events: 0, crashes: 0, partitions: 0, clientOps: 0, clientOk: 0, leaders: 0, applied: 0 };
  let failure: string | null = null;
  const fail = (msg: string): void => {
    failure ??= `seed ${seed} at ${sched.now.toFixed(1)} ms: ${msg}`;
  };

  // ------------------------------------------------------------------ invariants
  const leaderOfTerm = new Map<number, string>();
  const appliedAt = new Map<number, string>();
  const votes = new Map<string, string>();
  const onApplied = (id: string, e: Entry): void => {
    stats.applied++;
    const key = `${e.term}:${e.type}:${Buffer.from(e.data).toString('base64')}`;
    const seen = appliedAt.get(e.index);
    if (seen === undefined) appliedAt.set(e.index, key);
    else if (seen !== key) fail(`${id} applied a different entry at ${e.index} (term ${e.term})`);
  };

  const controlMonitor = new ControlMonitor(fail);
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
  );
  // ------------------------------------------------------------------ servers
  const servers = new Map<string, Server>();
  for (const id of ids) {
    const disk = new SimDisk(id, sched, Prng.derive(seed, `disk:${id}`), diskFaults, {
      hardState: { term: 0, vote: '', commit: 0 },
      snapshot: emptyMembershipSnapshot,
      entries: [],
    });
    servers.set(id, { id, disk, incarnation: 0, proc: null, node: null, kv: null, ready: false });
  }
  const start = (s: Server): void => {
    s.incarnation++;
    const proc = new SimProcess(sched);
    const kv = new WatchedReplicatedState();
    kv.onRestored = controlMonitor.watch(s.id, kv, control.stats);
    const transport = new SimTransport(s.id, proc, {
      sched,
      net,
      rng: Prng.derive(seed, `transport:${s.id}#${s.incarnation}`),
      board,
      snapLossP: 0.1,
      onSend: (m) => {
        if (m.type !== 'voteResp' || m.reject) return;
        // A vote is durable before it is sent: one voter, one candidate per term, across restarts.
        const key = `${m.from}@${m.term}`;
        const other = votes.get(key);
        if (other !== undefined && other !== m.to)
          fail(`${m.from} granted its vote in term ${m.term} to ${other} and to ${m.to}`);
        votes.set(key, m.to);
      },
    });
    const node = new RaftNode({
      id: s.id,
      store: new SimLogStore(s.disk, proc, opts.bug === 'staleRead' ? undefined : opts.bug),
      transport,
      stateMachine: kv,
      logger,
      bootstrapPeers: members,
      tickMs,
      raft,
      clock: proc.clock,
      random: Prng.derive(seed, `raft:${s.id}#${s.incarnation}`),
      snapshotEntries,
      trailingEntries: 5,
      onApplied: (e) => {
        onApplied(s.id, e);
      },
      onSoftState: (ss) => {
        if (ss.role !== 'leader') return;
        stats.leaders++;
        const other = leaderOfTerm.get(ss.term);
        if (other !== undefined && other !== s.id)
          fail(`two leaders in term ${ss.term}: ${other} and ${s.id}`);
        leaderOfTerm.set(ss.term, s.id);
      },
    });
    Object.assign(s, { proc, node, kv, ready: false });
    node.start().then(
      () => {
        if (proc.alive) s.ready = true;
      },
      (e: unknown) => {
        if (proc.alive) fail(`${s.id} failed to start: ${String(e)}`);
      },
    );
  };
  const crash = (s: Server): void => {
    if (s.proc === null) return;
    stats.crashes++;
    s.proc.alive = false;
    s.disk.crash();
    if (board.get(s.id)?.proc === s.proc) board.delete(s.id);
    Object.assign(s, { proc: null, node: null, kv: null, ready: false });
  };
  for (const s of servers.values()) start(s);

  // ------------------------------------------------------------------ nemesis
  const nemesis = (): void => {
    if (sched.now >= chaosMs) return;
    const next = Math.min(crashMeanMs, partitionMeanMs);
    sched.after(rng.exp(next), nemesis);
    if (rng.chance(crashMeanMs / (crashMeanMs + partitionMeanMs))) {
      const victim = servers.get(rng.pick(ids))!;
      crash(victim);
      sched.after(rng.uniform(20, 200), () => {
        if (victim.proc === null) start(victim);
      });
    } else {
      stats.partitions++;
      const cut = ids.filter(() => rng.chance(0.4));
      net.split(
        cut,
        ids.filter((id) => !cut.includes(id)),
      );
      sched.after(rng.uniform(50, 300), () => {
        net.heal();
      });
    }
  };
  sched.after(rng.exp(Math.min(crashMeanMs, partitionMeanMs)), nemesis);

  // ------------------------------------------------------------------ clients
  const history: Op[] = [];
  let valueSeq = 0;
  /** Operations still waiting for an answer; at the end their outcome is unknown. */
  const unsettled = new Set<(outcome: 'unknown') => void>();
  const live = (): Server[] => [...servers.values()].filter((s) => s.ready);
  const target = (): Server | undefined => {
    const up = live();
    const leader = up.find((s) => s.node!.softState().role === 'leader');
    return leader !== undefined && rng.chance(0.8) ? leader : up[rng.int(Math.max(1, up.length))];
  };
  /** Runs one operation; `record` gets the outcome (undefined: unknown, null: refused). */
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
  /** One control command through some node; null when its outcome is unknown or refused. */
  const proposeControl = (command: ControlCommand, done: (r: ControlResult | null) => void): void => {
    const s = target();
    let settled = false;
    const finish = (r: ControlResult | null): void => {
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
      s.node.propose(encodeCommand({ type: 'control', stampMs: Math.floor(sched.now), command })).then(
        (bytes) => {
          const res = decodeResult(bytes);
          finish(res.type === 'control' ? res.result : null);
        },
        () => {
          finish(null);
        },
      );
    } catch {
      finish(null);
    }
  };
  const readControl = (done: (kv: ReplicatedState | null) => void): void => {
    const s = target();
    let settled = false;
    const finish = (kv: ReplicatedState | null): void => {
      if (settled) return;
      settled = true;
      done(kv);
    };
    sched.after(clientTimeoutMs, () => {
      finish(null);
    });
    if (s?.node == null) {
      finish(null);
      return;
    }
    const kv = s.kv;
    try {
      s.node.linearizableRead().then(
        () => {
          finish(kv);
        },
        () => {
          finish(null);
        },
      );
    } catch {
      finish(null);
    }
  };
  control.start();
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
  const runUntil = async (until: number, stop: () => boolean = () => false): Promise<void> => {
    while (failure === null && !stop() && sched.peekTime() <= until && sched.step()) {
      stats.events++;
      await settle();
    }
  };
  await runUntil(chaosMs);
  // Healing: the network heals, every crashed server restarts, no more disk spikes.
  net.heal();
  for (const s of servers.values()) if (s.node === null) start(s);
  const healEnd = sched.now + healMs;
  const leaderUp = (): Server | undefined => live().find((s) => s.node!.softState().role === 'leader');
  await runUntil(healEnd, () => leaderUp() !== undefined);
  if (failure === null && leaderUp() === undefined) fail(`no leader within ${healMs} ms of healing`);
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
    fail(`final reads did not complete within ${healMs} ms of healing`);
  // Convergence: every member applies everything the leader committed and holds the same state.
  const converged = (): boolean => {
    const up = live();
    const commit = Math.max(...up.map((s) => s.node!.status().commit));
    return up.every(
      (s) => s.node!.status().appliedToStateMachine >= commit && s.node!.status().commit === commit,
    );
  };
  await runUntil(healEnd, converged);
  if (failure === null) {
    if (!converged()) fail(`members did not converge within ${healMs} ms of healing`);
    else {
      const states = live().map((s) => Buffer.from(s.kv!.snapshot()).toString('base64'));
      if (new Set(states).size !== 1) fail('members applied the same log but hold different states');
    }
  }
  for (const finish of [...unsettled]) finish('unknown');
  if (failure === null) {
    const lin = checkLinearizable(history);
    if (!lin.ok)
      fail(
        `history not linearizable on key ${lin.key}: ${lin.explanation}\n` +
          history
            .filter((o) => o.key === lin.key)
            .map(describeOp)
            .join('\n'),
      );
  }
  const fingerprint = [
    stats.events,
    stats.applied,
    sched.now.toFixed(3),
    createHash('sha256').update(JSON.stringify(history)).digest('hex').slice(0, 16),
  ].join('/');
  return {
    seed,
    ok: failure === null,
    ...(failure === null ? {} : { failure }),
    fingerprint,
    stats,
    control: control.stats,
  };
}

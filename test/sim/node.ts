// One simulated server: the real RaftCore driven by a simulated driver over a SimDisk, a
// SimNetwork and the KV state machine. The driver follows the Ready contract in
// src/raft/core/types.ts: messages go out at once; entries, hard state and snapshot are
// written in one batch, and only when that write completes are messagesAfterPersist sent and
// advance() called; committed entries are applied in order. Everything the driver does is
// reported to the Monitor. A crash throws away everything in memory; a restart rebuilds the
// core and the state machine from the disk alone, as the real driver does.
import { encodeConfChange } from '../../src/raft/core/membership.js';
import { RaftCore } from '../../src/raft/core/raft.js';
import type { Entry, Message, RaftConfig, Ready } from '../../src/raft/core/types.js';
import { RaftError } from '../../src/raft/core/types.js';
import type { DiskFaults } from './disk.js';
import { SimDisk, emptyMembershipSnapshot, type StoredSnapshot } from './disk.js';
import type { KvCommand, KvResult } from './kv.js';
import { KvMachine, decodeCommand, encodeCommand, fnv1a } from './kv.js';
import type { Monitor } from './monitor.js';
import { violation } from './monitor.js';
import { Prng } from '../../src/platform/prng.js';
import type { SimNetwork } from './network.js';
import type { Scheduler } from './scheduler.js';

/** Deliberate defects for the tests that prove the checks can fail. Never set in normal runs. */
export type InjectedBug =
  /** The driver sends messagesAfterPersist (acks, votes) before the write is durable. */
  | 'ackBeforePersist'
  /** A node answers reads from its local state without a ReadIndex round. */
  | 'staleRead'
  /** One node applies a corrupted copy of the first command it applies. */
  | 'tamperApply'
  /** A restarted node forgets whom it voted for. */
  | 'forgetVote';

export type ClientRequest =
  { readonly kind: 'get'; readonly key: string } | { readonly kind: 'write'; readonly cmd: KvCommand };

export type ClientResponse =
  | { readonly ok: true; readonly result: KvResult | { readonly value: string | undefined } }
  | { readonly ok: false; readonly reason: string; readonly leader: string };

export type Reply = (r: ClientResponse) => void;

/** What a node needs from the simulation around it. */
export interface NodeEnv {
  readonly seed: number;
  readonly sched: Scheduler;
  readonly net: SimNetwork;
  readonly monitor: Monitor;
  readonly rng: Prng;
  readonly nodes: ReadonlyMap<string, SimNode>;
  readonly raft: Omit<RaftConfig, 'id'>;
  readonly diskFaults: DiskFaults;
  readonly tickMs: number;
  readonly compactEvery: number;
  readonly compactTail: number;
  readonly snapLossP: number;
  readonly bug: InjectedBug | undefined;
  readonly stats: NodeStats;
  nextReadId(): number;
  /** Trace lines are built only when someone reads them. */
  readonly verbose: boolean;
  trace(line: string): void;
}

export interface NodeStats {
  crashes: number;
  restarts: number;
  compactions: number;
  snapshotsSent: number;
  snapshotsInstalled: number;
  applied: number;
}

interface PendingProposal {
  readonly term: number;
  readonly id: string;
  readonly reply: Reply;
}

interface PendingRead {
  readonly key: string;
  readonly reply: Reply;
}

const snapKey = (index: number, term: number): string => `${index}:${term}`;

export class SimNode {
  readonly id: string;
  readonly disk: SimDisk;
  core!: RaftCore;
  kv = new KvMachine();
  alive = false;
  /** Stopped for good: removed from the cluster and decommissioned. */
  retired = false;
  incarnation = 0;
  pausedUntil = 0;
  private readonly env: NodeEnv;
  private readonly tickSkew: number;
  private lastSeenCommit = 0;
  private pendingProposals = new Map<number, PendingProposal>();
  private pendingReads = new Map<number, PendingRead>();
  private waitingReads: { index: number; read: PendingRead }[] = [];
  /** Snapshot data by (index, term): local snapshots, and received ones not yet installed. */
  private snapStore = new Map<string, Uint8Array>();
  private restoreInFlight = false;
  private lastCompactIndex = 0;
  private tampered = false;

  /** bootstrap: the initial voters when this node is one of them; null for a node added later. */
  constructor(env: NodeEnv, id: string, bootstrap: readonly string[] | null) {
    this.env = env;
    this.id = id;
    this.tickSkew = env.rng.uniform(-0.05, 0.05);
    const diskRng = Prng.derive(env.seed, `disk:${id}`);
    if (bootstrap === null) {
      this.disk = new SimDisk(id, env.sched, diskRng, env.diskFaults, {
        hardState: { term: 0, vote: '', commit: 0 },
        snapshot: emptyMembershipSnapshot,
        entries: [],
      });
    } else {
      const entry: Entry = {
        term: 1,
        index: 1,
        type: 'conf',
        data: encodeConfChange({ type: 'bootstrap', voters: bootstrap.map(member) }),
      };
      this.disk = new SimDisk(id, env.sched, diskRng, env.diskFaults, {
        hardState: { term: 1, vote: '', commit: 1 },
        snapshot: emptyMembershipSnapshot,
        entries: [entry],
      });
    }
  }

  // ---------------------------------------------------------------- lifecycle

  start(): void {
    // The injected defect: a store that does not keep the vote across restarts.
    if (this.env.bug === 'forgetVote' && this.incarnation > 0)
      this.disk.hardState = { ...this.disk.hardState, vote: '' };
    const { initial, snapshotData } = this.disk.load();
    const hardState = initial.hardState;
    this.incarnation++;
    this.alive = true;
    this.pausedUntil = 0;
    const rng = Prng.derive(this.env.seed, `raft:${this.id}#${this.incarnation}`);
    this.core = new RaftCore({ ...this.env.raft, id: this.id }, initial, rng);
    this.kv = new KvMachine();
    this.kv.restore(snapshotData);
    if (this.kv.applied !== initial.snapshot.index)
      violation(
        'driver',
        `${this.id}: snapshot data at ${this.kv.applied} but meta at ${initial.snapshot.index}`,
      );
    // The restored commit index is re-reported: the committed entries read back from disk must
    // be the ones committed before the crash.
    this.lastSeenCommit = initial.snapshot.index;
    this.lastCompactIndex = initial.snapshot.index;
    this.snapStore = new Map();
    if (initial.snapshot.index > 0)
      this.snapStore.set(snapKey(initial.snapshot.index, initial.snapshot.term), snapshotData);
    this.pendingProposals = new Map();
    this.pendingReads = new Map();
    this.waitingReads = [];
    this.restoreInFlight = false;
    this.env.trace(
      `${this.id} start #${this.incarnation}: term ${hardState.term} vote '${hardState.vote}' commit ` +
        `${this.core.log.committed} snap ${initial.snapshot.index} last ${this.core.log.lastIndex()}`,
    );
    this.scheduleTick(this.env.rng.uniform(0, this.env.tickMs));
  }

  crash(): void {
    if (!this.alive) return;
    this.alive = false;
    this.disk.crash();
    this.env.stats.crashes++;
    this.env.trace(`${this.id} crash #${this.incarnation} (disk last ${this.disk.lastIndex()})`);
  }

  retire(): void {
    this.crash();
    this.retired = true;
  }

  pause(untilMs: number): void {
    if (this.alive) this.pausedUntil = Math.max(this.pausedUntil, untilMs);
  }

  /**
   * Wraps work for this node: dropped if the node died (or, with `incarnation`, restarted)
   * in the meantime, and deferred while the process is paused.
   */
  run(fn: () => void, incarnation?: number): () => void {
    const guarded = (): void => {
      if (!this.alive || (incarnation !== undefined && incarnation !== this.incarnation)) return;
      if (this.env.sched.now < this.pausedUntil) {
        this.env.sched.at(this.pausedUntil, guarded);
        return;
      }
      fn();
    };
    return guarded;
  }

  private scheduleTick(delay: number): void {
    const inc = this.incarnation;
    this.env.sched.after(delay, () => {
      if (!this.alive || inc !== this.incarnation) return;
      this.scheduleTick(this.env.tickMs * (1 + this.tickSkew));
      // A paused process misses its ticks; they are not made up afterwards.
      if (this.env.sched.now < this.pausedUntil) return;
      this.core.tick();
      this.drain();
    });
  }

  // ---------------------------------------------------------------- inputs

  receive(m: Message): void {
    if (this.env.verbose) this.env.trace(`${m.from}->${this.id} ${describeMessage(m)}`);
    this.core.step(m);
    this.drain();
  }

  /** The snapshot stream from the leader finished: stage the data, then step the 'snap' message. */
  receiveSnapshot(m: Message, data: Uint8Array): void {
    const meta = m.snapshot!;
    this.snapStore.set(snapKey(meta.index, meta.term), data);
    this.receive(m);
  }

  clientRequest(req: ClientRequest, reply: Reply): void {
    if (req.kind === 'get') {
      if (this.env.bug === 'staleRead') {
        reply({ ok: true, result: { value: this.kv.get(req.key) } });
        return;
      }
      const rid = this.env.nextReadId();
      this.pendingReads.set(rid, { key: req.key, reply });
      this.core.readIndex(rid);
      this.drain();
      return;
    }
    try {
      const r = this.core.propose([encodeCommand(req.cmd)]);
      this.pendingProposals.set(r.firstIndex, { term: r.term, id: req.cmd.id, reply });
    } catch (e) {
      if (!(e instanceof RaftError)) throw e;
      reply({ ok: false, reason: e.code, leader: e.leader });
      return;
    }
    this.drain();
  }

  /** Admin calls (transfer, membership) made directly on this node by the operator. */
  admin(fn: (core: RaftCore) => void): string | undefined {
    try {
      fn(this.core);
    } catch (e) {
      if (!(e instanceof RaftError)) throw e;
      return e.code;
    }
    this.drain();
    return undefined;
  }

  // ---------------------------------------------------------------- the Ready loop

  drain(): void {
    for (let n = 0; this.core.hasReady(); n++) {
      if (n > 10_000) violation('driver', `${this.id}: hasReady() stays true after 10000 Readies`);
      this.handleReady(this.core.ready());
    }
  }

  private handleReady(rd: Ready): void {
    const { monitor } = this.env;
    // Commits first, before anything below can compact the entries away.
    this.observeCommit();
    if (rd.softState !== null) {
      const ss = rd.softState;
      if (this.env.verbose)
        this.env.trace(`${this.id} is ${ss.role} in term ${ss.term} (leader '${ss.leader}')`);
      if (ss.role === 'leader') {
        monitor.onLeader(this.id, this.incarnation, ss.term);
        const log = this.core.log;
        monitor.checkLeaderCompleteness(this.id, ss.term, log.snapshot.index, (i) => log.term(i));
      }
    }
    if (rd.entries.length > 0) {
      monitor.onEntries(this.id, rd.entries, this.core.log.term(rd.entries[0]!.index - 1));
    }
    for (const m of rd.messages) this.send(m);
    for (const e of rd.committedEntries) this.apply(e);
    this.serveWaitingReads();
    for (const rs of rd.readStates) {
      const read = this.pendingReads.get(rs.requestId);
      if (read === undefined) continue;
      this.pendingReads.delete(rs.requestId);
      this.waitingReads.push({ index: rs.index, read });
    }
    this.serveWaitingReads();
    for (const rf of rd.readFailures) {
      const read = this.pendingReads.get(rf.requestId);
      if (read === undefined) continue;
      this.pendingReads.delete(rf.requestId);
      read.reply({ ok: false, reason: rf.reason, leader: this.core.softState().leader });
    }

    if (rd.mustPersist) this.persist(rd);
    else for (const m of rd.messagesAfterPersist) this.send(m);
    this.maybeCompact();
  }

  private persist(rd: Ready): void {
    let snapshot: StoredSnapshot | null = null;
    if (rd.snapshot !== null) {
      const data = this.snapStore.get(snapKey(rd.snapshot.index, rd.snapshot.term));
      if (data === undefined) violation('driver', `${this.id}: no data for snapshot ${rd.snapshot.index}`);
      snapshot = { meta: rd.snapshot, data };
      this.restoreInFlight = true;
    }
    const inc = this.incarnation;
    if (this.env.bug === 'ackBeforePersist') for (const m of rd.messagesAfterPersist) this.send(m);
    this.disk.write(
      { kind: 'batch', hardState: rd.hardState, entries: rd.entries, snapshot },
      this.run(() => {
        if (snapshot !== null) this.installSnapshot(snapshot.meta, snapshot.data);
        this.core.advance(rd);
        if (this.env.bug !== 'ackBeforePersist') for (const m of rd.messagesAfterPersist) this.send(m);
        this.drain();
      }, inc),
    );
  }

  private installSnapshot(meta: NonNullable<Ready['snapshot']>, data: Uint8Array): void {
    this.kv.restore(data);
    if (this.kv.applied !== meta.index)
      violation('driver', `${this.id}: snapshot data is at ${this.kv.applied}, its meta at ${meta.index}`);
    this.restoreInFlight = false;
    this.lastCompactIndex = meta.index;
    this.env.stats.snapshotsInstalled++;
    this.env.monitor.onSnapshot(this.id, meta, fnv1a(data));
    this.env.trace(`${this.id} installed snapshot (index ${meta.index}, term ${meta.term})`);
    // Proposals inside the snapshot can no longer be told apart: their clients time out.
    for (const index of [...this.pendingProposals.keys()])
      if (index <= meta.index) this.pendingProposals.delete(index);
    this.pruneSnapshots();
    this.serveWaitingReads();
  }

  private observeCommit(): void {
    const log = this.core.log;
    if (log.committed <= this.lastSeenCommit) return;
    const term = this.core.softState().term;
    for (let i = this.lastSeenCommit + 1; i <= log.committed; i++) {
      const e = log.entry(i);
      if (e !== undefined) this.env.monitor.onCommitted(this.id, e, term);
    }
    this.lastSeenCommit = log.committed;
  }

  private apply(entry: Entry): void {
    let e = entry;
    if (this.env.bug === 'tamperApply' && !this.tampered && e.type === 'normal' && this.id === 'n1') {
      this.tampered = true;
      const cmd = decodeCommand(e.data);
      e = { ...e, data: encodeCommand({ ...cmd, id: `${cmd.id}-tampered` }) };
    }
    this.env.monitor.onApply(this.id, e);
    this.env.stats.applied++;
    let result: KvResult | undefined;
    let cmdId = '';
    if (e.type === 'normal') {
      const cmd = decodeCommand(e.data);
      cmdId = cmd.id;
      result = this.kv.apply(e.index, cmd);
    } else {
      this.kv.skip(e.index);
    }
    const p = this.pendingProposals.get(e.index);
    if (p === undefined) return;
    this.pendingProposals.delete(e.index);
    if (p.term === e.term) {
      // (index, term) names one entry: it must be the one this node proposed.
      if (cmdId !== p.id || result === undefined)
        violation(
          'log-matching',
          `${this.id} proposed ${p.id} at (${e.index}, ${e.term}) but applied ${cmdId}`,
        );
      p.reply({ ok: true, result });
    } else {
      // Another entry is committed at this index: this proposal can never commit.
      p.reply({ ok: false, reason: 'E_PROPOSAL_DROPPED', leader: this.core.softState().leader });
    }
  }

  private serveWaitingReads(): void {
    if (this.waitingReads.length === 0) return;
    const still: { index: number; read: PendingRead }[] = [];
    for (const w of this.waitingReads) {
      if (w.index <= this.kv.applied) w.read.reply({ ok: true, result: { value: this.kv.get(w.read.key) } });
      else still.push(w);
    }
    this.waitingReads = still;
  }

  private maybeCompact(): void {
    const applied = this.kv.applied;
    if (
      this.restoreInFlight ||
      applied - this.lastCompactIndex < this.env.compactEvery ||
      applied !== this.core.log.applying ||
      applied <= this.core.log.snapshot.index
    )
      return;
    const data = this.kv.snapshot();
    const compactTo = Math.max(0, applied - this.env.compactTail);
    const meta = this.core.compact(applied, compactTo);
    this.lastCompactIndex = applied;
    this.snapStore.set(snapKey(meta.index, meta.term), data);
    this.pruneSnapshots();
    this.env.stats.compactions++;
    this.env.monitor.onSnapshot(this.id, meta, fnv1a(data));
    this.disk.write({ kind: 'localSnapshot', snapshot: { meta, data }, compactTo }, () => undefined);
  }

  /** Keeps the data of the core's current snapshot and of anything newer (staged installs). */
  private pruneSnapshots(): void {
    const floor = this.core.log.snapshot.index;
    for (const key of [...this.snapStore.keys()]) {
      if (Number(key.split(':')[0]) < floor) this.snapStore.delete(key);
    }
  }

  // ---------------------------------------------------------------- output

  private send(m: Message): void {
    const { env } = this;
    if (m.type === 'voteResp' && !m.reject) env.monitor.onVoteGranted(m.from, m.term, m.to);
    if (m.type === 'snap') {
      this.streamSnapshot(m);
      return;
    }
    const delivered = env.net.send(this.id, m.to, () => {
      const target = env.nodes.get(m.to);
      if (target !== undefined) target.run(() => target.receive(m))();
    });
    // A cut link sometimes breaks the transport's stream, which reports the peer unreachable.
    if (!delivered && env.rng.chance(0.2)) this.core.reportUnreachable(m.to);
  }

  /**
   * The snapshot stream: the data travels to the target (or is lost), the target steps the
   * 'snap' message, and the leader hears how it went through reportSnapshot.
   */
  private streamSnapshot(m: Message): void {
    const { env } = this;
    const meta = m.snapshot;
    if (meta === null) violation('driver', `${this.id}: snap message without metadata`);
    const data = this.snapStore.get(snapKey(meta.index, meta.term));
    if (data === undefined) violation('driver', `${this.id}: asked to send snapshot ${meta.index} it lacks`);
    env.stats.snapshotsSent++;
    env.trace(`${this.id}->${m.to} snapshot stream (index ${meta.index}, term ${meta.term})`);
    const inc = this.incarnation;
    const lost = env.rng.chance(env.snapLossP);
    const transfer = env.rng.uniform(2, 20) + data.length / 200;
    env.sched.after(transfer, () => {
      const target = env.nodes.get(m.to);
      const ok =
        !lost &&
        this.alive &&
        this.incarnation === inc &&
        target !== undefined &&
        target.alive &&
        env.sched.now >= target.pausedUntil &&
        env.net.linkUp(this.id, m.to) &&
        env.net.linkUp(m.to, this.id);
      if (ok) target.run(() => target.receiveSnapshot(m, data))();
      const report = ok ? env.net.delay() : env.rng.uniform(20, 100);
      env.sched.after(
        report,
        this.run(() => {
          this.core.reportSnapshot(m.to, ok);
          this.drain();
        }, inc),
      );
    });
  }
}

export function member(id: string): { id: string; addr: string; apiAddr: string } {
  return { id, addr: `${id}:7000`, apiAddr: '' };
}

export function describeMessage(m: Message): string {
  let s = `${m.type} t${m.term}`;
  switch (m.type) {
    case 'app':
      s += ` prev(${m.index},${m.logTerm}) n${m.entries.length} c${m.commit}`;
      break;
    case 'appResp':
      s += m.reject ? ` reject ${m.index} hint ${m.rejectHint}/${m.logTerm}` : ` ${m.index}`;
      break;
    case 'vote':
    case 'preVote':
      s += ` last(${m.index},${m.logTerm})${m.transfer ? ' transfer' : ''}`;
      break;
    case 'voteResp':
    case 'preVoteResp':
    case 'readIndexResp':
      s += m.reject ? ' reject' : ' grant';
      if (m.type === 'readIndexResp') s += ` ${m.index} ctx ${m.context}`;
      break;
    case 'heartbeat':
      s += ` c${m.commit} ctx ${m.context}`;
      break;
    case 'heartbeatResp':
    case 'readIndex':
      s += ` ctx ${m.context}`;
      break;
    case 'snap':
      s += ` (${m.index})`;
      break;
    case 'timeoutNow':
      break;
  }
  return s;
}

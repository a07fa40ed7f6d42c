// An in-process cluster for datadriven raft scenarios (etcd's rafttest.InteractionEnv): N
// RaftCore nodes, each with an in-memory "disk" (hard state, log, snapshot), a state machine
// that is simply the list of applied entries, and one message queue between them. Nothing
// happens unless a command says so, so every scenario is deterministic; election jitter comes
// from a seeded Prng (src/platform/prng.ts) per node. The commands themselves live in interaction-commands.ts.
import { encodeConfChange, emptyMembership } from '../../src/raft/core/membership.js';
import { RaftCore } from '../../src/raft/core/raft.js';
import type {
  Entry,
  HardState,
  Member,
  Message,
  RaftConfig,
  Ready,
  SnapshotMeta,
  SoftState,
} from '../../src/raft/core/types.js';
import { defaultRaftConfig, RaftError } from '../../src/raft/core/types.js';
import {
  fmtEntries,
  fmtHardState,
  fmtMessage,
  fmtSnapshot,
  fmtSoftState,
  fmtSoftStateFields,
} from './format.js';
import { InvariantChecker } from './invariants.js';
import { Prng } from '../../src/platform/prng.js';

/** What survives a crash: exactly what the node's Readies asked to persist, once persisted. */
export interface Disk {
  hardState: HardState;
  snapshot: SnapshotMeta;
  /** The state machine at snapshot.index: the applied entries, in order. */
  snapshotData: readonly Entry[];
  entries: Entry[];
}

export class EnvNode {
  readonly id: string;
  readonly cfg: RaftConfig;
  readonly rand: Prng;
  /** null while the node is down. */
  core: RaftCore | null;
  disk: Disk;
  /** The state machine: every entry applied, from index 1 on. Volatile; rebuilt on restart. */
  applied: Entry[];
  /** A Ready whose write was handed out but not yet done (`process-ready ... persist=false`). */
  heldWrite: Ready | null = null;
  /** The soft state last printed, to report role and term changes as they happen. */
  lastSoft: SoftState;
  /** Snapshot data that arrived on the snapshot stream, by index, until its Ready is persisted. */
  readonly snapInbox = new Map<number, readonly Entry[]>();

  constructor(id: string, cfg: RaftConfig, seed: number, disk: Disk) {
    this.id = id;
    this.cfg = cfg;
    this.rand = new Prng(seed);
    this.disk = disk;
    this.applied = [...disk.snapshotData];
    this.core = this.load();
    this.lastSoft = this.core.softState();
  }

  /** Builds a core from the disk, as a restarting process does. */
  load(): RaftCore {
    const snap = this.disk.snapshot;
    const core = new RaftCore(
      this.cfg,
      {
        hardState: this.disk.hardState,
        snapshot: snap,
        entries: this.disk.entries.filter((e) => e.index > snap.index),
      },
      this.rand,
    );
    this.applied = [...this.disk.snapshotData];
    return core;
  }

  live(): RaftCore {
    if (this.core === null) throw new EnvError(`node ${this.id} is down`);
    return this.core;
  }
}

/** A mistake in a scenario script (as opposed to a core bug): printed, not thrown. */
export class EnvError extends Error {}

interface Envelope {
  readonly msg: Message;
  /** For 'snap': the sender's state machine at the snapshot index, captured at send time. */
  readonly snapData: readonly Entry[] | null;
}

export function memberOf(id: string): Member {
  return { id, addr: `10.0.0.${id}:2380`, apiAddr: '' };
}

export interface NodeOptions {
  readonly preVote: boolean;
  readonly checkQuorum: boolean;
  readonly electionTicks: number;
  readonly heartbeatTicks: number;
  readonly maxInflightMsgs: number;
  readonly maxUncommittedBytes: number;
  readonly maxMsgBytes: number;
}

export class InteractionEnv {
  readonly nodes = new Map<string, EnvNode>();
  readonly invariants = new InvariantChecker();
  private queue: Envelope[] = [];
  /** Links that drop messages, as "from-to" (both directions are stored). */
  private readonly blocked = new Set<string>();
  private out: string[] = [];
  private indent = '';
  seed = 1;

  // ------------------------------------------------------------ output

  print(line: string): void {
    this.out.push(this.indent + line);
  }

  takeOutput(): string[] {
    const out = this.out;
    this.out = [];
    return out;
  }

  withIndent(fn: () => void): void {
    const saved = this.indent;
    this.indent += '  ';
    try {
      fn();
    } finally {
      this.indent = saved;
    }
  }

  /** Runs a core call, printing a RaftError (an operating error) instead of throwing it. */
  attempt(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      if (!(err instanceof RaftError)) throw err;
      this.print(`error: ${err.code} ${err.message}`);
    }
  }

  /** Prints role and term changes since the last call, and feeds the leader check. */
  observe(n: EnvNode): void {
    if (n.core === null) return;
    const s = n.core.softState();
    if (s.role !== n.lastSoft.role || s.term !== n.lastSoft.term) {
      this.print(fmtSoftState(n.id, s));
      if (s.role === 'leader') this.invariants.noteLeader(s.term, n.id);
    }
    n.lastSoft = s;
  }

  // ------------------------------------------------------------ nodes

  node(id: string): EnvNode {
    const n = this.nodes.get(id);
    if (n === undefined) throw new EnvError(`no node ${id}`);
    return n;
  }

  sortedNodes(): EnvNode[] {
    return [...this.nodes.values()].sort((a, b) => Number(a.id) - Number(b.id));
  }

  addNodes(count: number, opts: NodeOptions, spare: readonly string[]): void {
    const bootstrap = this.nodes.size === 0;
    const first = this.nodes.size + 1;
    const voters: Member[] = [];
    for (let i = 0; i < count; i++) voters.push(memberOf(String(first + i)));
    const ids = [...voters.map((m) => m.id), ...spare];
    for (const id of ids) {
      if (this.nodes.has(id)) throw new EnvError(`node ${id} already exists`);
      const cfg: RaftConfig = { ...defaultRaftConfig, id, ...opts };
      const founder = bootstrap && voters.some((m) => m.id === id);
      const disk: Disk = founder
        ? {
            hardState: { term: 1, vote: '', commit: 1 },
            snapshot: { index: 0, term: 0, membership: emptyMembership },
            snapshotData: [],
            entries: [
              { term: 1, index: 1, type: 'conf', data: encodeConfChange({ type: 'bootstrap', voters }) },
            ],
          }
        : {
            hardState: { term: 0, vote: '', commit: 0 },
            snapshot: { index: 0, term: 0, membership: emptyMembership },
            snapshotData: [],
            entries: [],
          };
      const n = new EnvNode(id, cfg, this.seed * 1000003 + Number(id), disk);
      this.nodes.set(id, n);
      if (!founder) {
        this.print(`${id}: empty log, not a member yet`);
        continue;
      }
      // Founders apply the bootstrap entry at once, so that they know the membership and can
      // campaign; the Ready doing it is not interesting, so only its effect is printed.
      const saved = this.takeOutput();
      this.processReady(n, true);
      this.out = saved;
      this.print(`${id}: bootstrapped, applied 1/1 conf:bootstrap(${voters.map((m) => m.id).join(',')})`);
    }
  }

  crash(n: EnvNode): void {
    n.live();
    n.core = null;
    n.heldWrite = null;
    n.snapInbox.clear();
    this.print(`${n.id} crashed (unsynced state lost)`);
  }

  restart(n: EnvNode): void {
    if (n.core !== null) throw new EnvError(`node ${n.id} is up`);
    n.core = n.load();
    n.lastSoft = n.core.softState();
    const hs = n.disk.hardState;
    const last = n.disk.entries.at(-1)?.index ?? n.disk.snapshot.index;
    this.print(`${n.id} restarted: ${fmtHardState(hs)} snapshot=${n.disk.snapshot.index} lastIndex=${last}`);
  }

  // ------------------------------------------------------------ ready handling

  /** Handles one Ready: send, persist (or hold the write), send after persist, apply, advance. */
  processReady(n: EnvNode, persist: boolean): void {
    const core = n.live();
    if (!core.hasReady()) {
      this.print('<empty Ready>');
      return;
    }
    const rd = core.ready();
    if (rd.softState !== null) this.print(`softState ${fmtSoftStateFields(rd.softState)}`);
    if (rd.hardState !== null) this.print(`hardState ${fmtHardState(rd.hardState)}`);
    if (rd.snapshot !== null) this.print(`snapshot ${fmtSnapshot(rd.snapshot)}`);
    if (rd.entries.length > 0) this.print(`entries: ${fmtEntries(rd.entries)}`);
    for (const m of rd.messages) this.send(n, m);
    if (rd.mustPersist) {
      if (persist) this.persist(n, rd);
      else {
        n.heldWrite = rd;
        this.print('write held (not yet durable)');
      }
    } else {
      for (const m of rd.messagesAfterPersist) this.send(n, m);
    }
    this.apply(n, rd);
    this.observe(n);
  }

  /** The durable write of a Ready, then what waits on it. */
  persist(n: EnvNode, rd: Ready): void {
    const core = n.live();
    const disk = n.disk;
    if (rd.snapshot !== null) {
      const data = n.snapInbox.get(rd.snapshot.index);
      if (data === undefined) throw new Error(`node ${n.id}: snapshot ${rd.snapshot.index} has no data`);
      n.snapInbox.clear();
      disk.snapshot = rd.snapshot;
      disk.snapshotData = data;
      disk.entries = [];
      // The state machine is replaced by the snapshot's contents.
      n.applied = [...data];
    }
    const first = rd.entries[0];
    if (first !== undefined) {
      disk.entries = [...disk.entries.filter((e) => e.index < first.index), ...rd.entries];
    }
    if (rd.hardState !== null) disk.hardState = rd.hardState;
    this.print('persisted');
    if (rd.snapshot !== null)
      this.print(`state machine restored from snapshot at index ${rd.snapshot.index}`);
    for (const m of rd.messagesAfterPersist) this.send(n, m);
    core.advance(rd);
    this.observe(n);
  }

  private apply(n: EnvNode, rd: Ready): void {
    for (const e of rd.committedEntries) {
      const expect = n.applied.length + 1;
      if (e.index !== expect) throw new Error(`node ${n.id}: applying ${e.index}, expected ${expect}`);
      n.applied.push(e);
    }
    if (rd.committedEntries.length > 0) this.print(`apply: ${fmtEntries(rd.committedEntries)}`);
    // A read may be served once the state machine has applied its index.
    for (const r of rd.readStates)
      this.print(`read-state req=${r.requestId} index=${r.index} (applied ${n.applied.length})`);
    for (const f of rd.readFailures) this.print(`read-failure req=${f.requestId}: ${f.reason}`);
  }

  private send(n: EnvNode, m: Message): void {
    let snapData: readonly Entry[] | null = null;
    if (m.type === 'snap') {
      const meta = m.snapshot;
      if (meta === null || meta.index !== n.disk.snapshot.index)
        throw new Error(`node ${n.id}: snap message does not match the snapshot on disk`);
      snapData = n.disk.snapshotData;
    }
    if (this.isBlocked(m.from, m.to)) {
      // A partition drops what is sent across it, and (in deliver) what was in flight.
      this.print(`dropped (partitioned): ${fmtMessage(m)}`);
      if (m.type === 'snap') this.reportSnapshot(m, false);
      return;
    }
    this.print(`send: ${fmtMessage(m)}`);
    this.queue.push({ msg: m, snapData });
  }

  // ------------------------------------------------------------ network

  isBlocked(from: string, to: string): boolean {
    return this.blocked.has(`${from}-${to}`);
  }

  block(a: string, b: string): void {
    this.blocked.add(`${a}-${b}`);
    this.blocked.add(`${b}-${a}`);
  }

  heal(): void {
    this.blocked.clear();
  }

  hasMessagesFor(id: string): boolean {
    return this.queue.some((e) => e.msg.to === id);
  }

  /** Delivers every message queued for `to` (all nodes if null), dropping those on `drops` links. */
  deliver(to: string | null, drops: ReadonlySet<string>): number {
    const batch = this.queue.filter((e) => to === null || e.msg.to === to);
    this.queue = this.queue.filter((e) => !(to === null || e.msg.to === to));
    for (const { msg, snapData } of batch) {
      const target = this.nodes.get(msg.to);
      let dropped = '';
      if (drops.has(`${msg.from}-${msg.to}`)) dropped = 'dropped';
      else if (this.isBlocked(msg.from, msg.to)) dropped = 'dropped (partitioned)';
      else if (target?.core == null) dropped = `dropped (${msg.to} down)`;
      if (dropped !== '') {
        this.print(`${dropped}: ${fmtMessage(msg)}`);
        if (msg.type === 'snap') this.reportSnapshot(msg, false);
        continue;
      }
      const core = target!.live();
      this.print(fmtMessage(msg));
      if (snapData !== null && msg.snapshot !== null) target!.snapInbox.set(msg.snapshot.index, snapData);
      core.step(msg);
      this.withIndent(() => this.observe(target!));
      if (msg.type === 'snap') this.reportSnapshot(msg, true);
    }
    return batch.length;
  }

  /** The sender's transport finished (or failed) streaming a snapshot. */
  private reportSnapshot(msg: Message, ok: boolean): void {
    const sender = this.nodes.get(msg.from);
    if (sender?.core == null) return;
    sender.core.reportSnapshot(msg.to, ok);
    this.withIndent(() => {
      this.print(`${msg.from} reportSnapshot(${msg.to}, ${ok ? 'ok' : 'failed'})`);
      this.observe(sender);
    });
  }

  /**
   * Processes Readies and delivers messages among `ids` (all nodes if empty) until nothing
   * moves. Held writes are completed first.
   */
  stabilize(ids: readonly string[]): void {
    const chosen = (n: EnvNode): boolean => ids.length === 0 || ids.includes(n.id);
    for (let round = 0; ; round++) {
      if (round > 1000) throw new Error('stabilize did not converge in 1000 rounds');
      let moved = false;
      for (const n of this.sortedNodes()) {
        if (!chosen(n) || n.core === null) continue;
        const held = n.heldWrite;
        if (held !== null) {
          n.heldWrite = null;
          this.print(`> ${n.id} completing held write`);
          this.withIndent(() => this.persist(n, held));
          moved = true;
        }
        if (n.core.hasReady()) {
          this.print(`> ${n.id} handling Ready`);
          this.withIndent(() => this.processReady(n, true));
          moved = true;
        }
      }
      for (const n of this.sortedNodes()) {
        if (!chosen(n) || !this.hasMessagesFor(n.id)) continue;
        this.print(`> ${n.id} receiving messages`);
        this.withIndent(() => this.deliver(n.id, new Set()));
        moved = true;
      }
      if (!moved) return;
    }
  }

  checkInvariants(): void {
    this.invariants.check(
      [...this.nodes.values()].map((n) => {
        // Between stepping a 'snap' and persisting its Ready, the core's snapshot is ahead of
        // the disk's, and the state machine has yet to be replaced.
        const snap = n.core?.log.snapshot.index ?? 0;
        const restoringTo = snap > n.disk.snapshot.index ? snap : null;
        return { id: n.id, core: n.core, applied: n.applied, restoringTo };
      }),
    );
  }
}

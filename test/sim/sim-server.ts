// One simulated server of the driver simulation: the production RaftNode (src/raft/node.ts) with
// the production LevelLogStore over a SimLevelDisk (through the LogDb seam) and the production
// ReplicatedState, on a SimProcess clock and a SimTransport. Its incarnations share the disk;
// a crash kills the process (its promises never settle) and the disk keeps what LevelDB would.
// What the server does is reported to the Monitor: the entries each batch writes, every
// snapshot stored, every applied entry, each new leader's log.
import { crc32c } from '../../src/platform/crc32c.js';
import { Prng } from '../../src/platform/prng.js';
import { RaftNode } from '../../src/raft/node.js';
import type { Entry, Member, RaftConfig, SnapshotMeta } from '../../src/raft/core/types.js';
import { LevelLogStore } from '../../src/raft/storage/level-log-store.js';
import type { LoadedState, LogStore, SaveBatch, Snapshot } from '../../src/raft/storage/log-store.js';
import { ReplicatedState } from '../../src/state/replicated-state.js';
import { decodeCommand, encodeCommand } from '../../src/state/store-command.js';
import type { Logger } from 'pino';
import type { Monitor } from './monitor.js';
import type { SimNetwork } from './network.js';
import type { Scheduler } from './scheduler.js';
import { SimLevelDisk, type DiskFaults } from './sim-level-disk.js';
import { SimProcess } from './sim-process.js';
import { SimTransport, type SimSwitchboard } from './sim-transport.js';

/** Deliberate defects, for the tests that prove the checks can fail. Never set in normal runs. */
export type ServerBug =
  /** The disk acknowledges a synced write before it is durable. */
  | 'ackBeforePersist'
  /** One node's state machine applies a different command than the log holds, once. */
  | 'tamperApply';

/** The real ReplicatedState, telling the watchers when a snapshot replaced its state. */
export class WatchedReplicatedState extends ReplicatedState {
  onRestored: () => void = () => undefined;
  /** Rewrites a command before it is applied (the tamperApply defect). */
  tamper: ((data: Uint8Array) => Uint8Array) | null = null;

  override apply(index: number, data: Uint8Array): Uint8Array {
    return super.apply(index, this.tamper === null ? data : this.tamper(data));
  }

  override restore(data: Uint8Array): void {
    super.restore(data);
    this.onRestored();
  }

  override async restoreInSlices(data: Uint8Array, pause: () => Promise<void>): Promise<void> {
    await super.restoreInSlices(data, pause);
    this.onRestored();
  }
}

/** What every server of one run shares. */
export interface ServerEnv {
  readonly seed: number;
  readonly sched: Scheduler;
  readonly net: SimNetwork;
  readonly board: SimSwitchboard;
  readonly monitor: Monitor;
  readonly logger: Logger;
  readonly raft: Partial<Omit<RaftConfig, 'id'>>;
  readonly tickMs: number;
  readonly snapshotEntries: number;
  readonly diskFaults: DiskFaults;
  readonly bug: ServerBug | undefined;
  /** Runs a monitor call; a violation it throws fails the run. */
  check(fn: () => void): void;
  /** The run fails: a server could not start. */
  fail(message: string): void;
  /** A vote granted (from the transport's sent messages). */
  onVoteGranted(voter: string, term: number, candidate: string): void;
  /** Stats and hooks the run keeps per server incarnation. */
  onStart(server: SimServer, kv: WatchedReplicatedState): void;
  onApplied(server: SimServer, e: Entry): void;
  /** A new incarnation's node exists (not yet started): its leader duties start here. */
  onNode(server: SimServer, proc: SimProcess, node: RaftNode, kv: WatchedReplicatedState): void;
}

const text = new TextEncoder();

/** A digest of a snapshot's state-machine bytes: replicas at one index must agree on it. */
function dataDigest(data: Uint8Array): number {
  return crc32c(data);
}

/**
 * The LevelLogStore as the Monitor sees it: each batch's entries enter the record with the term
 * of the entry before them in this node's log as written so far (kept here, in write order),
 * and each stored snapshot is compared with the other replicas'.
 */
class ObservedLogStore implements LogStore {
  readonly #inner: LevelLogStore;
  readonly #id: string;
  readonly #env: ServerEnv;
  /** The terms of the log as the writes handed to the store leave it. */
  readonly #terms = new Map<number, number>();
  #snapshot = { index: 0, term: 0 };

  constructor(inner: LevelLogStore, id: string, env: ServerEnv) {
    this.#inner = inner;
    this.#id = id;
    this.#env = env;
  }

  async load(): Promise<LoadedState> {
    const loaded = await this.#inner.load();
    this.#snapshot = { index: loaded.snapshot.index, term: loaded.snapshot.term };
    for (const e of loaded.entries) this.#terms.set(e.index, e.term);
    return loaded;
  }

  #termAt(index: number): number | undefined {
    return index === this.#snapshot.index ? this.#snapshot.term : this.#terms.get(index);
  }

  #observeSnapshot(meta: SnapshotMeta, data: Uint8Array): void {
    this.#env.check(() => {
      this.#env.monitor.onSnapshot(this.#id, meta, dataDigest(data));
    });
  }

  save(batch: SaveBatch): Promise<void> {
    const { snapshot, entries } = batch;
    if (snapshot !== null) {
      this.#observeSnapshot(snapshot.meta, snapshot.data);
      const { index, term } = snapshot.meta;
      const keepSuffix = this.#termAt(index) === term;
      for (const i of [...this.#terms.keys()]) if (i <= index || !keepSuffix) this.#terms.delete(i);
      this.#snapshot = { index, term };
    }
    const first = entries[0];
    if (first !== undefined) {
      const termBefore = this.#termAt(first.index - 1);
      this.#env.check(() => {
        this.#env.monitor.onEntries(this.#id, entries, termBefore);
      });
      for (const i of [...this.#terms.keys()]) if (i >= first.index) this.#terms.delete(i);
      for (const e of entries) this.#terms.set(e.index, e.term);
    }
    return this.#inner.save(batch);
  }

  saveLocalSnapshot(snapshot: Snapshot, compactTo: number): Promise<void> {
    this.#observeSnapshot(snapshot.meta, snapshot.data);
    this.#snapshot = { index: snapshot.meta.index, term: snapshot.meta.term };
    for (const i of [...this.#terms.keys()]) if (i <= compactTo) this.#terms.delete(i);
    return this.#inner.saveLocalSnapshot(snapshot, compactTo);
  }

  stageSnapshot(snapshot: Snapshot): Promise<void> {
    return this.#inner.stageSnapshot(snapshot);
  }

  close(): Promise<void> {
    return this.#inner.close();
  }
}

export class SimServer {
  readonly id: string;
  readonly member: Member;
  readonly disk: SimLevelDisk;
  incarnation = 0;
  proc: SimProcess | null = null;
  node: RaftNode | null = null;
  kv: WatchedReplicatedState | null = null;
  /** start() has resolved: the node answers calls. */
  ready = false;
  /** Removed from the cluster and shut down for good. */
  retired = false;
  readonly #env: ServerEnv;
  readonly #tampered = { done: false };

  constructor(id: string, env: ServerEnv) {
    this.id = id;
    this.member = { id, addr: `${id}:7000`, apiAddr: '' };
    this.#env = env;
    this.disk = new SimLevelDisk(id, env.sched, Prng.derive(env.seed, `disk:${id}`), env.diskFaults, {
      ackBeforePersist: env.bug === 'ackBeforePersist',
    });
  }

  get alive(): boolean {
    return this.proc !== null;
  }

  /** Starts a new incarnation: a fresh process over the same disk. */
  start(bootstrapPeers: readonly Member[]): void {
    const env = this.#env;
    this.incarnation++;
    const proc = new SimProcess(env.sched);
    const kv = new WatchedReplicatedState();
    if (env.bug === 'tamperApply' && this.id === 'n1') kv.tamper = (data) => this.#tamper(data);
    env.onStart(this, kv);
    const transport = new SimTransport(this.id, proc, {
      sched: env.sched,
      net: env.net,
      rng: Prng.derive(env.seed, `transport:${this.id}#${this.incarnation}`),
      board: env.board,
      snapLossP: 0.1,
      onSend: (m) => {
        if (m.type === 'voteResp' && !m.reject) env.onVoteGranted(m.from, m.term, m.to);
      },
    });
    const store = new ObservedLogStore(
      new LevelLogStore({ dir: `sim/${this.id}`, db: this.disk.open(proc) }),
      this.id,
      env,
    );
    const incarnation = this.incarnation;
    const node: RaftNode = new RaftNode({
      id: this.id,
      store,
      transport,
      stateMachine: kv,
      logger: env.logger,
      bootstrapPeers,
      tickMs: env.tickMs,
      raft: env.raft,
      clock: proc.clock,
      random: Prng.derive(env.seed, `raft:${this.id}#${incarnation}`),
      snapshotEntries: env.snapshotEntries,
      trailingEntries: 5,
      onApplied: (e) => {
        env.check(() => {
          env.monitor.onCommitted(this.id, e, node.softState().term);
          env.monitor.onApply(this.id, e);
        });
        env.onApplied(this, e);
      },
      onSoftState: (ss) => {
        if (ss.role !== 'leader') return;
        env.check(() => {
          env.monitor.onLeader(this.id, incarnation, ss.term);
          env.monitor.checkLeaderCompleteness(this.id, ss.term, node.status().snapshotIndex, (i) =>
            node.logTermAt(i),
          );
        });
      },
    });
    Object.assign(this, { proc, node, kv, ready: false });
    env.onNode(this, proc, node, kv);
    node.start().then(
      () => {
        if (proc.alive) this.ready = true;
      },
      (e: unknown) => {
        if (proc.alive) env.fail(`${this.id} failed to start: ${e instanceof Error ? e.message : String(e)}`);
      },
    );
  }

  /** The process dies at once (SIGKILL, or the power goes). */
  crash(): void {
    if (this.proc === null) return;
    this.proc.alive = false;
    this.disk.crash();
    if (this.#env.board.get(this.id)?.proc === this.proc) this.#env.board.delete(this.id);
    Object.assign(this, { proc: null, node: null, kv: null, ready: false });
  }

  /** Decommissioned after its removal committed: stopped for good, its disk kept. */
  retire(): void {
    this.crash();
    this.retired = true;
  }

  /** Stops the process's timers and message handling until `untilMs`. */
  pause(untilMs: number): void {
    if (this.proc !== null) this.proc.pausedUntil = Math.max(this.proc.pausedUntil, untilMs);
  }

  /** The defect tamperApply: the first put this node applies gets another value. */
  #tamper(data: Uint8Array): Uint8Array {
    if (this.#tampered.done) return data;
    const command = decodeCommand(data);
    if (command.type !== 'put') return data;
    this.#tampered.done = true;
    return encodeCommand({ ...command, value: text.encode('tampered') });
  }
}

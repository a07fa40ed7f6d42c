// One node's simulated durable storage, with the semantics of src/raft/storage's LogStore:
// a batch replaces the log from its first entry on and sets the hard state; a received
// snapshot discards the log (keeping the suffix only when the log holds the snapshot's
// (index, term)); a local snapshot drops entries through compactTo. Writes run one at a time
// and each takes simulated time, with occasional latency spikes. A crash loses every write not
// yet completed; optionally the write in progress is torn: its truncation and a prefix of its
// entries reach the disk (and its hard state, or not), like a torn tail truncated on load.
// The contract checks of LevelLogStore.save are repeated here, so a core that asks the driver
// for an impossible write fails the run instead of silently diverging from the real store.
import type { Entry, HardState, InitialState, SnapshotMeta } from '../../src/raft/core/types.js';
import type { Prng } from '../../src/platform/prng.js';
import type { Scheduler } from './scheduler.js';

export interface StoredSnapshot {
  readonly meta: SnapshotMeta;
  readonly data: Uint8Array;
}

export type DiskWrite =
  | {
      readonly kind: 'batch';
      readonly hardState: HardState | null;
      readonly entries: readonly Entry[];
      readonly snapshot: StoredSnapshot | null;
    }
  | { readonly kind: 'localSnapshot'; readonly snapshot: StoredSnapshot; readonly compactTo: number };

export interface DiskFaults {
  latencyMinMs: number;
  latencyMaxMs: number;
  /** Probability that a write takes a latency spike. */
  spikeP: number;
  spikeMaxMs: number;
  /** Spikes end by this virtual time (the healing phase has none). */
  spikesUntil: number;
  /** Probability that a crash tears the write in progress instead of losing it whole. */
  tornP: number;
}

export interface LoadedDisk {
  readonly initial: InitialState;
  /** The state machine data of initial.snapshot (empty for the zero snapshot). */
  readonly snapshotData: Uint8Array;
}

/** The driver asked the store for a write the real LevelLogStore would refuse. */
export class StorageContractError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StorageContractError';
  }
}

interface Queued {
  readonly write: DiskWrite;
  readonly onDone: () => void;
}

export const emptyMembershipSnapshot: StoredSnapshot = {
  meta: { index: 0, term: 0, membership: { voters: [], learners: [] } },
  data: new Uint8Array(),
};

export class SimDisk {
  readonly name: string;
  hardState: HardState;
  snapshot: StoredSnapshot;
  /** Contiguous; may start at or below the snapshot index (a compaction's trailing tail). */
  private entries: Entry[];
  private queue: Queued[] = [];
  private running = false;
  /** Bumped by a crash so that completions scheduled before it are ignored. */
  private epoch = 0;
  private readonly sched: Scheduler;
  private readonly rng: Prng;
  private readonly faults: DiskFaults;
  readonly stats = { writes: 0, spikes: 0, lostWrites: 0, tornWrites: 0 };

  constructor(
    name: string,
    sched: Scheduler,
    rng: Prng,
    faults: DiskFaults,
    init: { hardState: HardState; snapshot: StoredSnapshot; entries: readonly Entry[] },
  ) {
    this.name = name;
    this.sched = sched;
    this.rng = rng;
    this.faults = faults;
    this.hardState = init.hardState;
    this.snapshot = init.snapshot;
    this.entries = [...init.entries];
  }

  get busy(): boolean {
    return this.running;
  }

  /** Queues a write; onDone runs when it is durable (never, if a crash comes first). */
  write(write: DiskWrite, onDone: () => void): void {
    this.queue.push({ write, onDone });
    if (!this.running) this.startNext();
  }

  /** The process died: unfinished writes are lost, and the one in progress may be torn. */
  crash(): void {
    const inProgress = this.running ? this.queue[0] : undefined;
    this.stats.lostWrites += this.queue.length;
    if (inProgress !== undefined && inProgress.write.kind === 'batch' && inProgress.write.snapshot === null) {
      const w = inProgress.write;
      if (w.entries.length > 0 && this.rng.chance(this.faults.tornP)) {
        this.stats.tornWrites++;
        const kept = this.rng.int(w.entries.length);
        const hardState = this.rng.chance(0.5) ? w.hardState : null;
        this.apply({ kind: 'batch', hardState, entries: w.entries.slice(0, kept), snapshot: null });
      }
    }
    this.queue = [];
    this.running = false;
    this.epoch++;
  }

  /** What a restarting node reads back: the latest snapshot, the entries after it, the hard state. */
  load(): LoadedDisk {
    const snap = this.snapshot;
    const entries = this.entries.filter((e) => e.index > snap.meta.index);
    const lastIndex = entries.at(-1)?.index ?? snap.meta.index;
    // As LevelLogStore.load: a commit past a torn-off tail does not survive.
    if (this.hardState.commit > lastIndex) this.hardState = { ...this.hardState, commit: lastIndex };
    return {
      initial: { hardState: this.hardState, snapshot: snap.meta, entries },
      snapshotData: snap.data,
    };
  }

  lastIndex(): number {
    return this.entries.at(-1)?.index ?? this.snapshot.meta.index;
  }

  /** The term of the stored entry at index (the snapshot's term at its index), or undefined. */
  termAt(index: number): number | undefined {
    if (index === this.snapshot.meta.index) return this.snapshot.meta.term;
    const first = this.entries[0];
    if (first === undefined || index < first.index) return undefined;
    return this.entries[index - first.index]?.term;
  }

  entryAt(index: number): Entry | undefined {
    const first = this.entries[0];
    if (first === undefined || index < first.index) return undefined;
    return this.entries[index - first.index];
  }

  /** The disk durably holds the entry (index, term), directly or inside its snapshot. */
  covers(index: number, term: number): boolean {
    return this.snapshot.meta.index >= index || this.termAt(index) === term;
  }

  private startNext(): void {
    const head = this.queue[0];
    if (head === undefined) {
      this.running = false;
      return;
    }
    this.running = true;
    // Validated against the disk as it is when the write starts, as LevelLogStore.save does
    // before writing a byte.
    this.validate(head.write);
    const f = this.faults;
    let latency = this.rng.uniform(f.latencyMinMs, f.latencyMaxMs);
    if (this.rng.chance(f.spikeP)) {
      const spike = Math.min(this.rng.uniform(0, f.spikeMaxMs), f.spikesUntil - this.sched.now);
      if (spike > 0) {
        latency += spike;
        this.stats.spikes++;
      }
    }
    const epoch = this.epoch;
    this.sched.after(latency, () => {
      if (epoch !== this.epoch) return;
      this.queue.shift();
      this.apply(head.write);
      this.stats.writes++;
      head.onDone();
      if (epoch === this.epoch) this.startNext();
    });
  }

  private apply(w: DiskWrite): void {
    if (w.kind === 'localSnapshot') {
      this.snapshot = w.snapshot;
      this.entries = this.entries.filter((e) => e.index > w.compactTo);
      return;
    }
    if (w.snapshot !== null) {
      const meta = w.snapshot.meta;
      const keepSuffix = meta.index <= this.lastIndex() && this.termAt(meta.index) === meta.term;
      this.entries = keepSuffix ? this.entries.filter((e) => e.index > meta.index) : [];
      this.snapshot = w.snapshot;
    }
    const first = w.entries[0];
    if (first !== undefined) {
      const head = this.entries[0];
      const keep = head === undefined ? 0 : Math.max(0, first.index - head.index);
      this.entries.length = Math.min(this.entries.length, keep);
      for (const e of w.entries) this.entries.push(e);
    }
    if (w.hardState !== null) this.hardState = w.hardState;
  }

  /** LevelLogStore's refusals, against the durable state this write starts from. */
  private validate(w: DiskWrite): void {
    const fail = (msg: string): never => {
      throw new StorageContractError(`${this.name}: ${msg}`);
    };
    if (w.kind === 'localSnapshot') {
      const meta = w.snapshot.meta;
      if (w.compactTo > meta.index) fail(`compactTo ${w.compactTo} is past the snapshot at ${meta.index}`);
      if (meta.index < this.snapshot.meta.index)
        fail(`local snapshot at ${meta.index} is older than the stored one at ${this.snapshot.meta.index}`);
      if (meta.index > this.lastIndex())
        fail(`local snapshot at ${meta.index} is past the last stored index ${this.lastIndex()}`);
      const t = this.termAt(meta.index);
      if (t !== undefined && t !== meta.term)
        fail(`local snapshot at ${meta.index} has term ${meta.term} but the log has ${t}`);
      return;
    }
    for (let i = 1; i < w.entries.length; i++) {
      const a = w.entries[i - 1]!;
      const b = w.entries[i]!;
      if (b.index !== a.index + 1) fail(`entries are not contiguous: ${b.index} follows ${a.index}`);
      if (b.term < a.term) fail(`entry ${b.index} has term ${b.term} below ${a.term} before it`);
    }
    let snapIndex = this.snapshot.meta.index;
    let snapTerm = this.snapshot.meta.term;
    let lastIndex = this.lastIndex();
    let keepSuffix = true;
    if (w.snapshot !== null) {
      const meta = w.snapshot.meta;
      if (meta.index < snapIndex)
        fail(`snapshot at ${meta.index} is older than the stored one at ${snapIndex}`);
      if (meta.index === snapIndex && meta.index > 0 && meta.term !== snapTerm)
        fail(`snapshot at ${meta.index} has term ${meta.term} but the stored one has ${snapTerm}`);
      keepSuffix = meta.index <= lastIndex && this.termAt(meta.index) === meta.term;
      snapIndex = meta.index;
      snapTerm = meta.term;
      if (!keepSuffix) lastIndex = meta.index;
    }
    const first = w.entries[0];
    if (first !== undefined) {
      if (first.index <= snapIndex || first.index > lastIndex + 1)
        fail(`entries start at ${first.index}, outside [${snapIndex + 1}, ${lastIndex + 1}]`);
      const termBefore =
        first.index - 1 === snapIndex ? snapTerm : keepSuffix ? this.termAt(first.index - 1) : undefined;
      if (termBefore === undefined) fail(`the term of stored entry ${first.index - 1} is unknown`);
      else if (first.term < termBefore)
        fail(`entry ${first.index} has term ${first.term} below ${termBefore} before it`);
    }
    const newLast = w.entries.at(-1)?.index ?? lastIndex;
    const hs = w.hardState;
    if (hs !== null) {
      const stored = this.hardState;
      if (hs.term < stored.term) fail(`hard state term ${hs.term} is below the stored term ${stored.term}`);
      if (hs.term === stored.term && stored.vote !== '' && hs.vote !== stored.vote)
        fail(`hard state changes the vote in term ${hs.term} from ${stored.vote} to '${hs.vote}'`);
      if (hs.commit < stored.commit)
        fail(`hard state commit ${hs.commit} is below the stored commit ${stored.commit}`);
      if (hs.commit > newLast) fail(`hard state commit ${hs.commit} is past the last index ${newLast}`);
    }
  }
}

// The core's view of the replicated log: the latest snapshot, the entries after the
// compaction point, and how far they are durable, committed and handed out for apply.
// The driver mirrors every change to disk as Ready asks; this structure never does I/O.
import assert from './assert.js';
import type { Entry, SnapshotMeta } from './types.js';
import { entryBytes } from './types.js';

export class RaftLog {
  /** The latest snapshot, local or received; followers lagging behind offset get this. */
  snapshot: SnapshotMeta;
  /** Entries with index <= offset are compacted away; term(offset) is offsetTerm. */
  #offset: number;
  #offsetTerm: number;
  #entries: Entry[];
  /** The highest index known durable on local disk. */
  stableIndex: number;
  /** The lowest index whose entry has changed since it was last handed out for persisting. */
  unstableFrom: number;
  committed: number;
  /** The highest index handed out for apply (the driver applies in order). */
  applying: number;

  constructor(snapshot: SnapshotMeta, entries: readonly Entry[], commit: number) {
    this.snapshot = snapshot;
    this.#offset = snapshot.index;
    this.#offsetTerm = snapshot.term;
    this.#entries = [...entries];
    entries.forEach((e, i) =>
      assert(e.index === snapshot.index + 1 + i, 'loaded entries must be contiguous'),
    );
    this.stableIndex = this.lastIndex();
    this.unstableFrom = this.lastIndex() + 1;
    this.committed = Math.min(Math.max(commit, snapshot.index), this.lastIndex());
    this.applying = snapshot.index;
  }

  firstIndex(): number {
    return this.#offset + 1;
  }

  lastIndex(): number {
    return this.#offset + this.#entries.length;
  }

  lastTerm(): number {
    return this.term(this.lastIndex()) ?? 0;
  }

  /** The term of the entry at index, or undefined if it is compacted or beyond the log. */
  term(index: number): number | undefined {
    if (index === this.#offset) return this.#offsetTerm;
    if (index < this.#offset || index > this.lastIndex()) return undefined;
    return this.#entries[index - this.#offset - 1]!.term;
  }

  entry(index: number): Entry | undefined {
    if (index <= this.#offset) return undefined;
    return this.#entries[index - this.#offset - 1];
  }

  matchTerm(index: number, term: number): boolean {
    return this.term(index) === term;
  }

  /** Entries in [lo, hi], at least one if any, stopping before maxBytes would be exceeded. */
  slice(lo: number, hi: number, maxBytes: number): Entry[] {
    assert(lo > this.#offset, 'slice below the compaction point');
    const out: Entry[] = [];
    let bytes = 0;
    for (let i = lo; i <= Math.min(hi, this.lastIndex()); i++) {
      const e = this.#entries[i - this.#offset - 1]!;
      bytes += entryBytes(e);
      if (out.length > 0 && bytes > maxBytes) break;
      out.push(e);
    }
    return out;
  }

  /** A voter's log is at least as up to date as ours (§5.4.1). */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const myTerm = this.lastTerm();
    return lastTerm > myTerm || (lastTerm === myTerm && lastIndex >= this.lastIndex());
  }

  /** The leader's own appends. */
  append(entries: readonly Entry[]): void {
    for (const e of entries) {
      assert(e.index === this.lastIndex() + 1, 'leader append must be contiguous');
      this.#entries.push(e);
    }
  }

  /**
   * The follower's side of AppendEntries. Returns the index of the last new entry, or null
   * when the log does not contain (prevIndex, prevTerm). Conflicting uncommitted suffixes are
   * replaced; a conflict at or below the commit index is a safety violation. The caller
   * answers appends below the commit index itself, so prevIndex is never below the offset.
   */
  maybeAppend(prevIndex: number, prevTerm: number, entries: readonly Entry[]): number | null {
    assert(prevIndex >= this.#offset, 'append below the compaction point');
    if (!this.matchTerm(prevIndex, prevTerm)) return null;
    for (const e of entries) {
      const existing = this.term(e.index);
      if (existing === e.term) continue;
      if (existing !== undefined) {
        assert(e.index > this.committed, `conflict at committed index ${e.index}`);
        this.#truncateFrom(e.index);
      }
      assert(e.index === this.lastIndex() + 1, 'append must be contiguous');
      this.#entries.push(e);
      this.unstableFrom = Math.min(this.unstableFrom, e.index);
    }
    return prevIndex + entries.length;
  }

  #truncateFrom(index: number): void {
    this.#entries.length = index - this.#offset - 1;
    this.stableIndex = Math.min(this.stableIndex, index - 1);
    this.unstableFrom = Math.min(this.unstableFrom, index);
  }

  commitTo(index: number): boolean {
    if (index <= this.committed) return false;
    assert(index <= this.lastIndex(), `commit ${index} beyond last index ${this.lastIndex()}`);
    this.committed = index;
    return true;
  }

  /** The last index at which entries can be handed out for apply: committed and durable. */
  applicableTo(): number {
    return Math.min(this.committed, this.stableIndex);
  }

  /** Entries not yet handed out for persisting, and marks them as handed out. */
  takeUnstable(): Entry[] {
    if (this.unstableFrom > this.lastIndex()) return [];
    const out = this.#entries.slice(this.unstableFrom - this.#offset - 1);
    this.unstableFrom = this.lastIndex() + 1;
    return out;
  }

  /** The driver persisted entries through `index` written in `term`. */
  stableTo(index: number, term: number): void {
    // Guard against the ABA case: the entries written may have been replaced meanwhile.
    if (this.term(index) === term && index < this.unstableFrom)
      this.stableIndex = Math.max(this.stableIndex, index);
  }

  /** Replace everything with a snapshot received from the leader (§5: the log is discarded). */
  restore(snapshot: SnapshotMeta): void {
    const keep = this.matchTerm(snapshot.index, snapshot.term)
      ? this.#entries.slice(snapshot.index - this.#offset)
      : [];
    this.snapshot = snapshot;
    this.#offset = snapshot.index;
    this.#offsetTerm = snapshot.term;
    this.#entries = keep;
    this.committed = Math.max(this.committed, snapshot.index);
    this.applying = Math.max(this.applying, snapshot.index);
    // Nothing may be applied until the snapshot is durable and restored (advance), and kept
    // entries are written again after it so the store holds one consistent picture.
    this.stableIndex = Math.min(this.stableIndex, snapshot.index - 1);
    this.unstableFrom = snapshot.index + 1;
  }

  /** Record a snapshot taken locally at snapshot.index and drop entries through compactTo. */
  compact(snapshot: SnapshotMeta, compactTo: number): void {
    assert(compactTo <= snapshot.index && snapshot.index <= this.applying, 'compact beyond applied');
    this.snapshot = snapshot;
    if (compactTo <= this.#offset) return;
    const term = this.term(compactTo);
    assert(term !== undefined, 'compact point must be in the log');
    this.#entries = this.#entries.slice(compactTo - this.#offset);
    this.#offset = compactTo;
    this.#offsetTerm = term;
  }

  /** Largest index <= index whose term is <= term (fast log backtracking, etcd style). */
  findConflictByTerm(index: number, term: number): number {
    let i = Math.min(index, this.lastIndex());
    for (; i > this.#offset; i--) {
      if ((this.term(i) ?? 0) <= term) return i;
    }
    return i;
  }
}

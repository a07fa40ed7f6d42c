// The durable raft log on LevelDB. Every write is one batch, so what the driver persists for a
// Ready lands whole or not at all, and synced (fsync) unless it changes nothing but the commit
// index; every entry carries its own CRC-32C so that load() can tell bit rot or a torn tail
// from a sound log. See
// docs/decisions/0002-raft-log-on-leveldb.md for the layout and the corruption policy.
//
// Key layout (keys are raw bytes):
//   l/<index u64 BE>      one entry record (entry-codec.ts); big-endian keeps them in log order
//   m/hardstate           the hard state
//   m/snapshot-meta       the latest snapshot's index, term and membership
//   s/data                the snapshot data header: size, chunk count, CRC-32C of the bytes,
//                         generation
//   s/gen/<generation u32 BE><chunk u32 BE>
//                         the snapshot bytes, in chunks of at most snapshotChunkBytesMax; each
//                         snapshot has a new generation, written before the header names it
//   s/data/<chunk u32 BE> generation 0: the chunks as versions before generations wrote them
//
// Writes are not reentrant: the driver awaits each save() before the next (one Ready at a
// time), and a second write while one is in flight is refused rather than interleaved.
import { Buffer } from 'node:buffer';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Level } from 'level';
import type { Entry, HardState, SnapshotMeta } from '../core/types.js';
import { crc32c, crc32cUpdate } from '../../platform/crc32c.js';
import {
  assertStorableEntry,
  assertStorableHardState,
  assertStorableSnapshotMeta,
  decodeEntry,
  decodeHardState,
  decodeSnapshotDataHeader,
  decodeSnapshotMeta,
  encodeEntryInto,
  encodeHardState,
  encodeSnapshotDataHeader,
  encodeSnapshotMeta,
  entryRecordBytes,
  isDamagedBytes,
  type RecordError,
} from './entry-codec.js';
import {
  StorageCorruptionError,
  type LoadedState,
  type LogStore,
  type SaveBatch,
  type Snapshot,
} from './log-store.js';
import { TermRuns } from './term-runs.js';
import type { LogDb, LogDbOp } from './log-db.js';

/**
 * Snapshot bytes are split into values of at most this size: LevelDB handles huge values
 * poorly, and each chunk's put copies it on the event loop (a megabyte: a few ms).
 */
export const snapshotChunkBytesMax = 1 << 20;

const entryKeyBytes = 10;
const entryKeyPrefix = Buffer.from('l/');
/** The first key after every entry key ('0' follows '/'). */
const entryKeysEnd = Buffer.from('l0');
const hardStateKey = Buffer.from('m/hardstate');
/** The key of the snapshot meta (exported for the simulation, as entryKey). */
export const snapshotMetaKey = Buffer.from('m/snapshot-meta');
const snapshotDataKey = Buffer.from('s/data');
const snapshotChunkKeyPrefix = Buffer.from('s/data/');
const snapshotGenerationKeyPrefix = Buffer.from('s/gen/');
const twoPow32 = 0x1_0000_0000;

const restoreAdvice =
  'the node refuses to start. Restore this node from a peer: remove the data directory and re-add the member';

type BatchOp = LogDbOp;

const zeroHardState: HardState = { term: 0, vote: '', commit: 0 };
const zeroSnapshotMeta: SnapshotMeta = { index: 0, term: 0, membership: { voters: [], learners: [] } };

function writeEntryKey(target: Buffer, offset: number, index: number): void {
  entryKeyPrefix.copy(target, offset);
  target.writeUInt32BE(Math.floor(index / twoPow32), offset + 2);
  target.writeUInt32BE(index >>> 0, offset + 6);
}

/** The key of entry `index` (exported for the simulation, which inspects what a disk holds). */
export function entryKey(index: number): Buffer {
  const key = Buffer.allocUnsafe(entryKeyBytes);
  writeEntryKey(key, 0, index);
  return key;
}

/** The index in an entry key, or -1 when the key is not shaped like one. */
function entryKeyIndex(key: Buffer): number {
  if (key.length !== entryKeyBytes) return -1;
  return key.readUInt32BE(2) * twoPow32 + key.readUInt32BE(6);
}

/** Appends deletes of the entry keys [from, to], sharing one allocation for the keys. */
function pushEntryDeletes(ops: BatchOp[], from: number, to: number): void {
  if (to < from) return;
  const slab = Buffer.allocUnsafe((to - from + 1) * entryKeyBytes);
  for (let i = from, at = 0; i <= to; i++, at += entryKeyBytes) {
    writeEntryKey(slab, at, i);
    ops.push({ type: 'del', key: slab.subarray(at, at + entryKeyBytes) });
  }
}

/** Where chunk `chunk` of snapshot generation `generation` lives (see the key layout above). */
function snapshotChunkKey(generation: number, chunk: number): Buffer {
  if (generation === 0) {
    const key = Buffer.allocUnsafe(snapshotChunkKeyPrefix.length + 4);
    snapshotChunkKeyPrefix.copy(key, 0);
    key.writeUInt32BE(chunk, snapshotChunkKeyPrefix.length);
    return key;
  }
  const key = Buffer.allocUnsafe(snapshotGenerationKeyPrefix.length + 8);
  snapshotGenerationKeyPrefix.copy(key, 0);
  key.writeUInt32BE(generation, snapshotGenerationKeyPrefix.length);
  key.writeUInt32BE(chunk, snapshotGenerationKeyPrefix.length + 4);
  return key;
}

/** A snapshot's chunks, under a generation that no stored header names yet. */
interface StagedSnapshot {
  readonly data: Uint8Array;
  readonly generation: number;
  readonly chunks: number;
  readonly crc32c: number;
}

/** Writes (or finds staged) a snapshot's chunks; gives them and the header that names them. */
type SnapshotStage = () => Promise<{ readonly staged: StagedSnapshot; readonly header: Buffer }>;

function isCount(n: number): boolean {
  return Number.isSafeInteger(n) && n >= 0;
}

function errorCode(err: unknown): unknown {
  return typeof err === 'object' && err !== null && 'code' in err ? err.code : undefined;
}

export interface LevelLogStoreOptions {
  /** The node's data directory; the database lives in `${dir}/raft`. */
  readonly dir: string;
  /** The database to use instead of LevelDB at `${dir}/raft` (the simulation's disk). */
  readonly db?: LogDb;
}

export class LevelLogStore implements LogStore {
  /** The database directory, named in every corruption report. */
  readonly location: string;
  readonly #db: LogDb;
  #loaded = false;
  #writing = false;
  #closed = false;
  #writes = 0;
  #syncedWrites = 0;

  // What is on disk, read by load() and kept current by every write.
  #hardState: HardState = zeroHardState;
  #snapshotIndex = 0;
  #snapshotTerm = 0;
  #snapshotChunks = 0;
  #snapshotGeneration = 0;
  /** The highest generation handed out for staging; each staging gets its own. */
  #claimedGeneration = 0;
  /** Chunks stageSnapshot wrote for the next saveLocalSnapshot. */
  #staged: StagedSnapshot | null = null;
  #staging: Promise<unknown> = Promise.resolve();
  /** No entry key below this index is stored: where prefix deletes start. */
  #keysFirst = 1;
  /** The log's last index: the last stored entry, or the snapshot index when none follow it. */
  #lastIndex = 0;
  /** Terms of the entries in (snapshotIndex, lastIndex], at least. */
  readonly #terms = new TermRuns();
  /** Deletes of entry keys behind the snapshot, running on LevelDB's thread (#clearEntries). */
  #clearing: Promise<void> = Promise.resolve();
  /** A background delete failed: the database cannot write, and the next write says so. */
  #clearError: Error | null = null;

  constructor(options: LevelLogStoreOptions) {
    this.location = logStoreLocation(options.dir);
    this.#db =
      options.db ??
      new Level<Buffer, Uint8Array>(this.location, { keyEncoding: 'buffer', valueEncoding: 'view' });
  }

  /** Batches written since open, and how many of them were synced (for metrics and tests). */
  get writeCounts(): { readonly writes: number; readonly synced: number } {
    return { writes: this.#writes, synced: this.#syncedWrites };
  }

  /** Opens the database (load() does so too); explains a lock held by another process. */
  async open(): Promise<void> {
    if (this.#closed) throw new Error(`raft log store at ${this.location} is closed`);
    try {
      await this.#db.open();
    } catch (err) {
      const cause = err instanceof Error ? err.cause : undefined;
      if (errorCode(cause) === 'LEVEL_LOCKED') {
        throw new Error(
          `raft log at ${this.location} is locked by another process; is another slipway server using this data directory?`,
          { cause: err },
        );
      }
      throw new Error(`cannot open raft log at ${this.location}: ${(err as Error).message}`, { cause: err });
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#staging.catch(() => undefined);
    await this.#clearing;
    await this.#db.close();
  }

  async load(): Promise<LoadedState> {
    await this.open();
    const db = this.#db;

    const hsRecord = await db.get(hardStateKey);
    let hardState = zeroHardState;
    if (hsRecord !== undefined) {
      const d = decodeHardState(hsRecord);
      if (!d.ok) throw this.#corruption('hard state (key m/hardstate)', 0, d.error);
      hardState = d.value;
    }

    const metaRecord = await db.get(snapshotMetaKey);
    let snapshot = zeroSnapshotMeta;
    if (metaRecord !== undefined) {
      const d = decodeSnapshotMeta(metaRecord);
      if (!d.ok) throw this.#corruption('snapshot meta (key m/snapshot-meta)', 0, d.error);
      snapshot = d.value;
    }
    const { data: snapshotData, chunks, generation } = await this.#loadSnapshotData(snapshot);

    const firstKey = await this.#firstEntryKey();

    // Entries at or below the snapshot index (kept by a local compaction for slow followers)
    // are not part of the initial state; the next compaction deletes them.
    const entries: Entry[] = [];
    const terms = new TermRuns();
    let expected = snapshot.index + 1;
    let prevTerm = snapshot.term;
    let damaged: { index: number; key: Buffer; error: RecordError } | null = null;
    for await (const [key, value] of db.iterator({ gte: entryKey(expected), lt: entryKeysEnd })) {
      const index = entryKeyIndex(key);
      if (damaged !== null) throw this.#corruption('log', damaged.index, damaged.error);
      if (index !== expected) {
        const found = index < 0 ? `a malformed key ${key.toString('hex')}` : `entry ${index}`;
        throw this.#corruption('log', expected, {
          check: 'range',
          message: `entry ${expected} is missing; next is ${found}`,
        });
      }
      const d = decodeEntry(value);
      if (!d.ok) {
        // Damaged bytes may be a torn tail write; that is decided when we see whether anything follows.
        if (isDamagedBytes(d.error.check)) {
          damaged = { index, key, error: d.error };
          expected++;
          continue;
        }
        throw this.#corruption('log', index, d.error);
      }
      const e = d.value;
      if (e.index !== index) {
        throw this.#corruption('log', index, {
          check: 'range',
          message: `the record under this key holds index ${e.index}`,
        });
      }
      if (e.term < prevTerm) {
        throw this.#corruption('log', index, {
          check: 'range',
          message: `term ${e.term} is below the previous term ${prevTerm}`,
        });
      }
      entries.push(e);
      terms.append(index, e.term);
      prevTerm = e.term;
      expected++;
    }

    let truncatedTornTailAt: number | null = null;
    if (damaged !== null) {
      await db.batch([{ type: 'del', key: damaged.key }], { sync: true });
      truncatedTornTailAt = damaged.index;
    }

    const lastEntry = entries.at(-1);
    const lastIndex = lastEntry?.index ?? snapshot.index;
    // A commit index beyond a truncated tail must not survive: those entries are gone here.
    if (hardState.commit > lastIndex) hardState = { ...hardState, commit: lastIndex };

    this.#hardState = hardState;
    this.#snapshotIndex = snapshot.index;
    this.#snapshotTerm = snapshot.term;
    this.#snapshotChunks = chunks;
    this.#snapshotGeneration = generation;
    this.#keysFirst = Math.min(firstKey ?? Infinity, snapshot.index + 1);
    this.#lastIndex = lastIndex;
    this.#terms.clear();
    for (const e of entries) this.#terms.append(e.index, e.term);
    this.#loaded = true;

    return { hardState, snapshot, entries, snapshotData, truncatedTornTailAt };
  }

  async save(batch: SaveBatch): Promise<void> {
    this.#assertWritable();
    const { hardState, entries, snapshot } = batch;

    // Validate the whole batch against the log as it will be after the snapshot, before any
    // byte is written, so that a bad batch changes nothing.
    let snapIndex = this.#snapshotIndex;
    let snapTerm = this.#snapshotTerm;
    let lastIndex = this.#lastIndex;
    let keepSuffix = false;
    if (snapshot !== null) {
      this.#checkSnapshot(snapshot);
      const meta = snapshot.meta;
      keepSuffix = meta.index <= lastIndex && this.#termAt(meta.index) === meta.term;
      snapIndex = meta.index;
      snapTerm = meta.term;
      if (!keepSuffix) lastIndex = meta.index;
    }
    const first = entries[0];
    if (first !== undefined) {
      for (const e of entries) assertStorableEntry(e);
      if (first.index <= snapIndex || first.index > lastIndex + 1) {
        throw new RangeError(
          `entries start at index ${first.index} but must start in [${snapIndex + 1}, ${lastIndex + 1}] ` +
            `(after the snapshot at ${snapIndex}, at most one past the last index ${lastIndex})`,
        );
      }
      const termBefore = first.index - 1 === snapIndex ? snapTerm : this.#termAt(first.index - 1);
      if (termBefore === undefined)
        throw new Error(`invariant: the term of stored entry ${first.index - 1} is unknown`);
      let prevTerm = termBefore;
      let prevIndex = first.index - 1;
      for (const e of entries) {
        if (e.index !== prevIndex + 1) {
          throw new RangeError(`entries are not contiguous: index ${e.index} follows ${prevIndex}`);
        }
        if (e.term < prevTerm) {
          throw new RangeError(
            `entry ${e.index} has term ${e.term}, below the term ${prevTerm} of the entry before it`,
          );
        }
        prevTerm = e.term;
        prevIndex = e.index;
      }
    }
    const newLast = entries.at(-1)?.index ?? lastIndex;
    if (hardState !== null) this.#checkHardState(hardState, newLast);

    const ops: BatchOp[] = [];
    let staged: SnapshotStage | null = null;
    if (snapshot !== null) {
      // Raft §5 / §7: keep the entries after the snapshot only if the log has its (index, term).
      // Those at or below it go after the write (#clearEntries); those after it, with it.
      if (!keepSuffix) pushEntryDeletes(ops, snapshot.meta.index + 1, this.#lastIndex);
      staged = this.#pushSnapshotWrites(ops, snapshot);
    }
    if (first !== undefined) {
      // Puts overwrite [first, newLast]; only stored keys past the new end need deleting.
      pushEntryDeletes(ops, newLast + 1, lastIndex);
      this.#pushEntryPuts(ops, entries);
    }
    if (hardState !== null) ops.push({ type: 'put', key: hardStateKey, value: encodeHardState(hardState) });
    if (ops.length === 0) return;

    // Raft needs the commit index on disk only as a hint: a node restarted with a lower one
    // learns the rest from the leader (and never goes below its snapshot). So a write of nothing
    // but a new commit index skips the fsync, as etcd's MustSync does. A process crash loses
    // nothing (the OS has the write); a power loss can only lose commit progress since the last
    // synced write, which carries the hard state of its time.
    const commitOnly =
      snapshot === null &&
      first === undefined &&
      hardState !== null &&
      hardState.term === this.#hardState.term &&
      hardState.vote === this.#hardState.vote;
    const written = await this.#write(ops, !commitOnly, staged);

    if (snapshot !== null && written !== null) {
      this.#setSnapshot(snapshot.meta, written);
      this.#clearEntries(this.#keysFirst, snapIndex);
      if (keepSuffix) {
        this.#terms.dropThrough(snapIndex);
      } else {
        this.#terms.clear();
        this.#lastIndex = snapIndex;
      }
      this.#keysFirst = snapIndex + 1;
    }
    if (first !== undefined) {
      this.#terms.truncateFrom(first.index);
      for (const e of entries) this.#terms.append(e.index, e.term);
      this.#lastIndex = newLast;
    }
    if (hardState !== null) this.#hardState = hardState;
  }

  async saveLocalSnapshot(snapshot: Snapshot, compactTo: number): Promise<void> {
    this.#assertWritable();
    this.#checkSnapshot(snapshot);
    const meta = snapshot.meta;
    if (meta.index > this.#lastIndex) {
      throw new RangeError(
        `local snapshot at index ${meta.index} is past the last log index ${this.#lastIndex}`,
      );
    }
    const termThere = this.#termAt(meta.index);
    if (termThere !== undefined && termThere !== meta.term) {
      throw new RangeError(
        `local snapshot at index ${meta.index} has term ${meta.term} but the log has term ${termThere}`,
      );
    }
    if (!isCount(compactTo) || compactTo > meta.index) {
      throw new RangeError(
        `compactTo must be an integer in [0, ${meta.index}] (the snapshot index), got ${compactTo}`,
      );
    }

    const ops: BatchOp[] = [];
    const staged = this.#pushSnapshotWrites(ops, snapshot);
    const written = await this.#write(ops, true, staged);
    if (written === null) throw new Error('invariant: a snapshot write staged nothing');

    this.#setSnapshot(meta, written);
    this.#terms.dropThrough(compactTo);
    this.#clearEntries(this.#keysFirst, compactTo);
    this.#keysFirst = Math.max(this.#keysFirst, compactTo + 1);
  }

  /**
   * Deletes the entry keys [from, to] once the snapshot that covers them is written, on
   * LevelDB's own thread: ten thousand deletes added to a batch one at a time held the event
   * loop for about 60 ms (heartbeats and requests waited). Nothing needs them gone atomically:
   * every one is at or below the stored snapshot's index, load() skips such leftovers after a
   * crash (the next compaction takes them), and no later write puts a key there.
   */
  #clearEntries(from: number, to: number): void {
    if (to < from) return;
    this.#clearKeys(`compacted entries ${from}..${to}`, { gte: entryKey(from), lte: entryKey(to) });
  }

  /** Deletes a key range on LevelDB's thread, after the deletes queued before it. */
  #clearKeys(what: string, range: { gte: Buffer; lte: Buffer } | { gte: Buffer; lt: Buffer }): void {
    this.#clearing = this.#clearing
      .then(() => this.#db.clear(range))
      .catch((err: unknown) => {
        this.#clearError ??= new Error(
          `raft log at ${this.location}: deleting ${what} failed: ${(err as Error).message}`,
          { cause: err },
        );
      });
  }

  /** The store can take writes at all: loaded, not closed, no background delete failed. */
  #assertOpen(): void {
    if (this.#closed) throw new Error(`raft log store at ${this.location} is closed`);
    if (this.#clearError !== null) throw this.#clearError;
    if (!this.#loaded) throw new Error(`raft log store at ${this.location}: call load() before writing`);
  }

  /** As #assertOpen, and no other write (save, saveLocalSnapshot) is in flight. */
  #assertWritable(): void {
    this.#assertOpen();
    if (this.#writing) {
      throw new Error(
        `raft log store at ${this.location}: a write is already in flight; await it before the next`,
      );
    }
  }

  /**
   * Writes `ops` as one batch. `stage` first writes a snapshot's chunks and gives what the
   * header must say of them; the header goes into the batch.
   */
  async #write(
    ops: BatchOp[],
    sync: boolean,
    stage: SnapshotStage | null = null,
  ): Promise<StagedSnapshot | null> {
    this.#writing = true;
    let staged: StagedSnapshot | null = null;
    try {
      if (stage !== null) {
        const done = await stage();
        staged = done.staged;
        ops.push({ type: 'put', key: snapshotDataKey, value: done.header });
      }
      // A chained batch copies each operation into the native batch as it is added; the array
      // form clones and re-validates every operation first, which costs twice the CPU per entry.
      const batch = this.#db.batch();
      try {
        for (const op of ops) {
          if (op.type === 'put') batch.put(op.key, op.value);
          else batch.del(op.key);
        }
      } catch (err) {
        await batch.close();
        throw err;
      }
      await batch.write({ sync });
      this.#writes++;
      if (sync) this.#syncedWrites++;
      return staged;
    } finally {
      this.#writing = false;
    }
  }

  /** The term at `index` in the stored log, or undefined when not held (compacted or past the end). */
  #termAt(index: number): number | undefined {
    if (index === this.#snapshotIndex) return this.#snapshotTerm;
    return this.#terms.termAt(index);
  }

  #checkSnapshot(snapshot: Snapshot): void {
    assertStorableSnapshotMeta(snapshot.meta);
    if (!(snapshot.data instanceof Uint8Array)) throw new TypeError('snapshot data must be a Uint8Array');
    const { index, term } = snapshot.meta;
    if (index < this.#snapshotIndex) {
      throw new RangeError(
        `snapshot at index ${index} is older than the stored snapshot at ${this.#snapshotIndex}`,
      );
    }
    if (index === this.#snapshotIndex && index > 0 && term !== this.#snapshotTerm) {
      throw new RangeError(
        `snapshot at index ${index} has term ${term} but the stored snapshot there has term ${this.#snapshotTerm}`,
      );
    }
  }

  #checkHardState(hs: HardState, lastIndex: number): void {
    assertStorableHardState(hs);
    const stored = this.#hardState;
    if (hs.term < stored.term) {
      throw new RangeError(`hard state term ${hs.term} is below the stored term ${stored.term}`);
    }
    if (hs.term === stored.term && stored.vote !== '' && hs.vote !== stored.vote) {
      throw new RangeError(
        `hard state changes the vote in term ${hs.term} from ${stored.vote} to ${hs.vote || "''"}`,
      );
    }
    if (hs.commit < stored.commit) {
      throw new RangeError(`hard state commit ${hs.commit} is below the stored commit ${stored.commit}`);
    }
    if (hs.commit > lastIndex) {
      throw new RangeError(`hard state commit ${hs.commit} is past the last log index ${lastIndex}`);
    }
  }

  /** Records the snapshot a batch just stored, and deletes the chunks no header names now. */
  #setSnapshot(meta: SnapshotMeta, staged: StagedSnapshot): void {
    this.#snapshotIndex = meta.index;
    this.#snapshotTerm = meta.term;
    this.#snapshotChunks = staged.chunks;
    this.#snapshotGeneration = staged.generation;
    // Earlier generations, and chunks past the end of this one that a crash left from a
    // snapshot staged under the same generation number.
    this.#clearKeys('snapshot chunks of earlier generations', {
      gte: snapshotGenerationKeyPrefix,
      lt: snapshotChunkKey(staged.generation, 0),
    });
    this.#clearKeys('snapshot chunks left by an interrupted write', {
      gte: snapshotChunkKey(staged.generation, staged.chunks),
      lt: snapshotChunkKey(staged.generation + 1, 0),
    });
  }

  /** Encodes every record into one allocation; the batch's values are views into it. */
  #pushEntryPuts(ops: BatchOp[], entries: readonly Entry[]): void {
    let recordBytes = 0;
    for (const e of entries) recordBytes += entryRecordBytes(e);
    const keys = Buffer.allocUnsafe(entries.length * entryKeyBytes);
    const records = Buffer.allocUnsafe(recordBytes);
    let keyAt = 0;
    let recordAt = 0;
    for (const e of entries) {
      writeEntryKey(keys, keyAt, e.index);
      const recordEnd = encodeEntryInto(e, records, recordAt);
      ops.push({
        type: 'put',
        key: keys.subarray(keyAt, keyAt + entryKeyBytes),
        value: records.subarray(recordAt, recordEnd),
      });
      keyAt += entryKeyBytes;
      recordAt = recordEnd;
    }
  }

  /**
   * Writes a snapshot's chunks ahead of saveLocalSnapshot, alongside other writes: the chunks
   * go under a generation of their own that no header names yet, so nothing reads them, and
   * saveLocalSnapshot of the same data then writes only the header and meta. Without it, the
   * chunks are written inside saveLocalSnapshot, holding up the appends queued behind it.
   */
  async stageSnapshot(snapshot: Snapshot): Promise<void> {
    this.#assertOpen();
    // Checked against the stored snapshot by saveLocalSnapshot: a leader's snapshot may be
    // installed meanwhile, and then this one is simply never named.
    if (!(snapshot.data instanceof Uint8Array)) throw new TypeError('snapshot data must be a Uint8Array');
    const generation = this.#claimGeneration();
    const staging = this.#writeChunks(snapshot.data, generation);
    this.#staging = staging;
    this.#staged = await staging;
  }

  /**
   * Adds the meta's put to `ops` and returns the step that gives the chunks (staged already by
   * stageSnapshot, or written now) for the header. Each snapshot gets a new generation, so until
   * the batch names it load() reads the old one, and a crash in between loses nothing. Legacy
   * (generation 0) chunks are deleted in the batch. The chunks are views of snapshot.data: the
   * caller must not change it until the write resolves.
   */
  #pushSnapshotWrites(ops: BatchOp[], snapshot: Snapshot): SnapshotStage {
    const { meta, data } = snapshot;
    if (this.#snapshotGeneration === 0) {
      for (let c = 0; c < this.#snapshotChunks; c++) ops.push({ type: 'del', key: snapshotChunkKey(0, c) });
    }
    ops.push({ type: 'put', key: snapshotMetaKey, value: encodeSnapshotMeta(meta) });
    const header = (staged: StagedSnapshot): { staged: StagedSnapshot; header: Buffer } => ({
      staged,
      header: encodeSnapshotDataHeader({
        index: meta.index,
        term: meta.term,
        bytes: data.byteLength,
        chunks: staged.chunks,
        crc32c: staged.crc32c,
        generation: staged.generation,
      }),
    });
    const staged = this.#staged;
    this.#staged = null;
    // Staged chunks serve only the data they were written for, and only while no later
    // generation has been stored (its background delete takes every generation below it).
    if (staged !== null && staged.data === data && staged.generation > this.#snapshotGeneration) {
      return () => Promise.resolve(header(staged));
    }
    const generation = this.#claimGeneration();
    return async () => header(await this.#writeChunks(data, generation));
  }

  #claimGeneration(): number {
    const generation = Math.max(this.#claimedGeneration, this.#snapshotGeneration) + 1;
    if (generation > 0xffffffff) throw new RangeError('snapshot generations are exhausted');
    this.#claimedGeneration = generation;
    return generation;
  }

  /**
   * Writes `data` in chunks under `generation`, each by its own synced put, one after another
   * so that each copy into LevelDB is its own short turn of the event loop (a batch of a 12 MB
   * snapshot held it for 40 to 120 ms), with the checksum taken a chunk at a time.
   */
  async #writeChunks(data: Uint8Array, generation: number): Promise<StagedSnapshot> {
    // A background delete of an earlier generation's range must not meet these puts.
    await this.#clearing;
    const chunks = Math.ceil(data.byteLength / snapshotChunkBytesMax);
    let crc = 0;
    for (let c = 0; c < chunks; c++) {
      const start = c * snapshotChunkBytesMax;
      const end = Math.min(start + snapshotChunkBytesMax, data.byteLength);
      crc = crc32cUpdate(crc, data, start, end);
      await this.#db.put(snapshotChunkKey(generation, c), data.subarray(start, end), { sync: true });
    }
    return { data, generation, chunks, crc32c: crc };
  }

  async #loadSnapshotData(
    meta: SnapshotMeta,
  ): Promise<{ data: Uint8Array | null; chunks: number; generation: number }> {
    const what = 'snapshot data (keys s/*)';
    const headerRecord = await this.#db.get(snapshotDataKey);
    if (headerRecord === undefined) {
      if (meta.index === 0) return { data: null, chunks: 0, generation: 0 };
      throw this.#corruption(what, meta.index, {
        check: 'size',
        message: 'the snapshot data header is missing',
      });
    }
    const d = decodeSnapshotDataHeader(headerRecord);
    if (!d.ok) throw this.#corruption(what, meta.index, d.error);
    const header = d.value;
    if (header.index !== meta.index || header.term !== meta.term) {
      throw this.#corruption(what, meta.index, {
        check: 'range',
        message: `the data is for (index ${header.index}, term ${header.term}) but the meta is for (index ${meta.index}, term ${meta.term})`,
      });
    }
    const keys: Buffer[] = [];
    for (let c = 0; c < header.chunks; c++) keys.push(snapshotChunkKey(header.generation, c));
    const parts = await this.#db.getMany(keys);
    const missing = parts.findIndex((p) => p === undefined);
    if (missing >= 0) {
      throw this.#corruption(what, meta.index, {
        check: 'size',
        message: `chunk ${missing} of ${header.chunks} is missing`,
      });
    }
    const present = parts as Uint8Array[];
    const data = present.length === 1 ? present[0]! : Buffer.concat(present);
    if (data.byteLength !== header.bytes) {
      throw this.#corruption(what, meta.index, {
        check: 'length',
        message: `the chunks hold ${data.byteLength} bytes but the header announces ${header.bytes}`,
      });
    }
    if (crc32c(data) !== header.crc32c) {
      throw this.#corruption(what, meta.index, { check: 'checksum', message: 'checksum mismatch' });
    }
    return { data, chunks: header.chunks, generation: header.generation };
  }

  /** The index of the first stored entry key, or null when there is none. */
  async #firstEntryKey(): Promise<number | null> {
    const keys = await this.#db.keys({ gte: entryKeyPrefix, lt: entryKeysEnd, limit: 1 }).all();
    const key = keys[0];
    if (key === undefined) return null;
    const index = entryKeyIndex(key);
    if (index < 0) {
      throw this.#corruption('log', 0, {
        check: 'size',
        message: `malformed entry key ${key.toString('hex')}`,
      });
    }
    return index;
  }

  #corruption(what: string, index: number, error: RecordError): StorageCorruptionError {
    const where = what === 'log' ? `raft log corrupted at index ${index}` : `raft ${what} corrupted`;
    const at = what !== 'log' && index > 0 ? ` (snapshot index ${index})` : '';
    return new StorageCorruptionError(
      `${where}${at} in ${this.location}: ${error.message}; ${restoreAdvice}`,
      index,
      this.location,
    );
  }
}

/** Creates the data directory if needed and opens the raft log in it; call load() next. */
/** Where the log lives under a data dir; absent until a node first opens it. */
export function logStoreLocation(dataDir: string): string {
  return join(dataDir, 'raft');
}

export async function openLogStore(dir: string): Promise<LevelLogStore> {
  await mkdir(dir, { recursive: true });
  const store = new LevelLogStore({ dir });
  await store.open();
  return store;
}

// One server's disk under the LogDb seam (src/raft/storage/log-db.ts), so that the production
// LevelLogStore runs in the simulation with its own keys, records and checks. It keeps what
// LevelDB promises and no more:
// - writes from a process run one at a time in order, each taking simulated time (with
//   occasional spikes); a write is visible to reads once it resolves;
// - a synced write is durable when it resolves, with every write before it; an unsynced one
//   (LevelLogStore's commit-only hard state, its background deletes) is durable only once a
//   later synced write is;
// - a crash is a process kill or a power loss. A kill keeps every resolved write; a power loss
//   keeps a prefix of the unsynced ones. The write in progress is lost or lands whole (LevelDB
//   drops a torn batch record), or lands with its last log record cut short: the torn tail
//   LevelLogStore's load() must find by its checksum and truncate.
// Promises of a dead process never settle, as in a killed one.
import { Buffer } from 'node:buffer';
import type {
  LogDb,
  LogDbChainedBatch,
  LogDbOp,
  LogDbRange,
  LogDbWriteOptions,
} from '../../src/raft/storage/log-db.js';
import { entryKey, snapshotMetaKey } from '../../src/raft/storage/level-log-store.js';
import { decodeEntry, decodeSnapshotMeta } from '../../src/raft/storage/entry-codec.js';
import type { Prng } from '../../src/platform/prng.js';
import type { Scheduler } from './scheduler.js';
import type { SimProcess } from './sim-process.js';

export interface DiskFaults {
  latencyMinMs: number;
  latencyMaxMs: number;
  /** Probability that a write takes a latency spike. */
  spikeP: number;
  spikeMaxMs: number;
  /** Spikes end by this virtual time (the healing phase has none). */
  spikesUntil: number;
  /** Probability that a crash is a power loss (unsynced writes may go) rather than a kill. */
  powerLossP: number;
  /** Probability that a write in progress at a crash lands with its last log record cut short. */
  tornP: number;
}

/** Keys as latin1 strings: one code unit per byte, so string order is LevelDB's byte order. */
type Image = Map<string, Uint8Array>;

type Change =
  | { readonly kind: 'ops'; readonly ops: readonly LogDbOp[] }
  | { readonly kind: 'clear'; readonly range: LogDbRange };

interface Queued {
  readonly change: Change;
  readonly sync: boolean;
  readonly onDone: () => void;
}

const keyOf = (key: Buffer): string => key.toString('latin1');
const entryKeyLength = entryKey(0).length;
const entryKeyHead = keyOf(entryKey(0)).slice(0, 2);

function inRange(key: string, range: LogDbRange): boolean {
  if (key < keyOf(range.gte)) return false;
  return 'lt' in range ? key < keyOf(range.lt) : key <= keyOf(range.lte);
}

function applyChange(image: Image, change: Change): void {
  if (change.kind === 'ops' && change.ops.length === 0) return;
  if (change.kind === 'clear') {
    for (const key of [...image.keys()]) if (inRange(key, change.range)) image.delete(key);
    return;
  }
  for (const op of change.ops) {
    if (op.type === 'put') image.set(keyOf(op.key), op.value);
    else image.delete(keyOf(op.key));
  }
}

/** The change with its last log record cut short, or null when it writes no log record. */
function tornCopy(change: Change, rng: Prng): Change | null {
  if (change.kind !== 'ops') return null;
  let last = -1;
  change.ops.forEach((op, i) => {
    if (op.type === 'put' && op.key.length === entryKeyLength && keyOf(op.key).startsWith(entryKeyHead))
      last = i;
  });
  const op = change.ops[last];
  if (op?.type !== 'put') return null;
  const cut = { ...op, value: op.value.slice(0, rng.int(op.value.length)) };
  return { kind: 'ops', ops: change.ops.map((o, i) => (i === last ? cut : o)) };
}

export class SimLevelDisk {
  readonly name: string;
  /** What survives a power loss. */
  #durable: Image = new Map();
  /** What the running process reads: every resolved write. */
  #live: Image = new Map();
  /** The last answer of covers(), dropped whenever the durable image changes. */
  #covered: { readonly asked: string; readonly answer: boolean } | null = null;
  /** Resolved writes not yet made durable by a synced one, oldest first. */
  #unsynced: Change[] = [];
  #queue: Queued[] = [];
  #running = false;
  /** Bumped by a crash so that completions scheduled before it are ignored. */
  #epoch = 0;
  readonly #sched: Scheduler;
  readonly #rng: Prng;
  readonly #faults: DiskFaults;
  /** The defect ackBeforePersist: a synced write resolves when queued, durable only later. */
  readonly #ackBeforePersist: boolean;
  readonly stats = {
    writes: 0,
    syncedWrites: 0,
    spikes: 0,
    lostWrites: 0,
    lostUnsynced: 0,
    tornWrites: 0,
    powerLosses: 0,
  };

  constructor(
    name: string,
    sched: Scheduler,
    rng: Prng,
    faults: DiskFaults,
    defects: { readonly ackBeforePersist?: boolean } = {},
  ) {
    this.#ackBeforePersist = defects.ackBeforePersist === true;
    this.name = name;
    this.#sched = sched;
    this.#rng = rng;
    this.#faults = faults;
  }

  /** The database as one incarnation of the server process sees it. */
  open(proc: SimProcess): LogDb {
    return new SimLogDb(this, proc);
  }

  /** The process died: what was not written yet is lost, and the write in progress may be torn. */
  crash(): void {
    const powerLoss = this.#rng.chance(this.#faults.powerLossP);
    const inProgress = this.#running ? this.#queue[0] : undefined;
    this.stats.lostWrites += this.#queue.length - (inProgress === undefined ? 0 : 1);
    // A prefix of the log of writes reaches the disk: all resolved ones on a kill, some on a
    // power loss; then the one in progress lands (whole or torn) only if all before it did.
    const resolved = this.#unsynced;
    const kept = powerLoss ? this.#rng.int(resolved.length + 1) : resolved.length;
    if (powerLoss) this.stats.powerLosses++;
    this.stats.lostUnsynced += resolved.length - kept;
    for (const change of resolved.slice(0, kept)) this.#makeDurable(change);
    if (inProgress !== undefined && kept === resolved.length) {
      const torn = this.#rng.chance(this.#faults.tornP) ? tornCopy(inProgress.change, this.#rng) : null;
      if (torn !== null) {
        this.stats.tornWrites++;
        this.#makeDurable(torn);
      } else if (this.#rng.chance(0.5)) {
        this.#makeDurable(inProgress.change);
      } else {
        this.stats.lostWrites++;
      }
    } else if (inProgress !== undefined) {
      this.stats.lostWrites++;
    }
    this.#unsynced = [];
    this.#live = new Map(this.#durable);
    this.#queue = [];
    this.#running = false;
    this.#epoch++;
  }

  #makeDurable(change: Change): void {
    applyChange(this.#durable, change);
    this.#covered = null;
  }

  /** The disk durably holds the entry (index, term), as a log record or inside its snapshot. */
  covers(index: number, term: number): boolean {
    // The monitor asks after every event, mostly about the same entry: the answer stands until
    // the durable image changes.
    const asked = `${index}:${term}`;
    if (this.#covered?.asked === asked) return this.#covered.answer;
    const answer = this.#coversNow(index, term);
    this.#covered = { asked, answer };
    return answer;
  }

  #coversNow(index: number, term: number): boolean {
    const meta = this.#durable.get(keyOf(snapshotMetaKey));
    if (meta !== undefined) {
      const m = decodeSnapshotMeta(meta);
      if (m.ok && m.value.index >= index) return true;
    }
    const record = this.#durable.get(keyOf(entryKey(index)));
    if (record === undefined) return false;
    const e = decodeEntry(record);
    return e.ok && e.value.term === term;
  }

  read(key: Buffer): Uint8Array | undefined {
    return this.#live.get(keyOf(key));
  }

  /** The live entries in a range, in key order. */
  range(range: LogDbRange, limit = Infinity): [Buffer, Uint8Array][] {
    const keys = [...this.#live.keys()].filter((k) => inRange(k, range)).sort();
    return keys.slice(0, limit).map((k) => [Buffer.from(k, 'latin1'), this.#live.get(k)!]);
  }

  /** Queues a write; onDone runs when it resolves (never, if a crash comes first). */
  write(change: Change, options: LogDbWriteOptions, onDone: () => void): void {
    if (this.#ackBeforePersist && options.sync) {
      this.#sched.after(0, onDone);
      this.#queue.push({ change, sync: options.sync, onDone: () => undefined });
    } else this.#queue.push({ change, sync: options.sync, onDone });
    if (!this.#running) this.#startNext();
  }

  #startNext(): void {
    const head = this.#queue[0];
    if (head === undefined) {
      this.#running = false;
      return;
    }
    this.#running = true;
    const f = this.#faults;
    let latency = this.#rng.uniform(f.latencyMinMs, f.latencyMaxMs);
    if (this.#rng.chance(f.spikeP)) {
      const spike = Math.min(this.#rng.uniform(0, f.spikeMaxMs), f.spikesUntil - this.#sched.now);
      if (spike > 0) {
        latency += spike;
        this.stats.spikes++;
      }
    }
    const epoch = this.#epoch;
    this.#sched.after(latency, () => {
      if (epoch !== this.#epoch) return;
      this.#queue.shift();
      applyChange(this.#live, head.change);
      this.#unsynced.push(head.change);
      if (head.sync) {
        for (const change of this.#unsynced) this.#makeDurable(change);
        this.#unsynced = [];
        this.stats.syncedWrites++;
      }
      this.stats.writes++;
      head.onDone();
      if (epoch === this.#epoch) this.#startNext();
    });
  }
}

/** One process's handle on a SimLevelDisk: its promises die with the process. */
class SimLogDb implements LogDb {
  readonly #disk: SimLevelDisk;
  readonly #proc: SimProcess;

  constructor(disk: SimLevelDisk, proc: SimProcess) {
    this.#disk = disk;
    this.#proc = proc;
  }

  /** Resolves on a later event of this process, as a read on LevelDB's thread does. */
  #later<T>(value: () => T): Promise<T> {
    return new Promise((resolve) => {
      this.#proc.clock.defer(() => {
        resolve(value());
      });
    });
  }

  #write(change: Change, options: LogDbWriteOptions): Promise<void> {
    return new Promise((resolve) => {
      this.#disk.write(change, options, this.#proc.guard(resolve));
    });
  }

  open(): Promise<void> {
    return this.#later(() => undefined);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  get(key: Buffer): Promise<Uint8Array | undefined> {
    return this.#later(() => this.#disk.read(key));
  }

  getMany(keys: Buffer[]): Promise<(Uint8Array | undefined)[]> {
    return this.#later(() => keys.map((k) => this.#disk.read(k)));
  }

  put(key: Buffer, value: Uint8Array, options: LogDbWriteOptions): Promise<void> {
    return this.#write(
      { kind: 'ops', ops: [{ type: 'put', key: Buffer.from(key), value: value.slice() }] },
      options,
    );
  }

  batch(ops: LogDbOp[], options: LogDbWriteOptions): Promise<void>;
  batch(): LogDbChainedBatch;
  batch(ops?: LogDbOp[], options?: LogDbWriteOptions): Promise<void> | LogDbChainedBatch {
    if (ops !== undefined)
      return this.#write({ kind: 'ops', ops: ops.map(copyOp) }, options ?? { sync: false });
    const collected: LogDbOp[] = [];
    return {
      put: (key: Buffer, value: Uint8Array) => collected.push(copyOp({ type: 'put', key, value })),
      del: (key: Buffer) => collected.push(copyOp({ type: 'del', key })),
      write: (o: LogDbWriteOptions) => this.#write({ kind: 'ops', ops: collected }, o),
      close: () => Promise.resolve(),
    };
  }

  iterator(range: LogDbRange): AsyncIterable<[Buffer, Uint8Array]> {
    const rows = this.#later(() => this.#disk.range(range));
    return {
      async *[Symbol.asyncIterator]() {
        yield* await rows;
      },
    };
  }

  keys(range: LogDbRange & { readonly limit: number }): { all(): Promise<Buffer[]> } {
    return { all: () => this.#later(() => this.#disk.range(range, range.limit).map(([k]) => k)) };
  }

  clear(range: LogDbRange): Promise<void> {
    return this.#write({ kind: 'clear', range }, { sync: false });
  }
}

/** LevelDB copies what it is given; so does the simulation, since callers reuse their buffers. */
function copyOp(op: LogDbOp): LogDbOp {
  return op.type === 'put'
    ? { type: 'put', key: Buffer.from(op.key), value: op.value.slice() }
    : { type: 'del', key: Buffer.from(op.key) };
}

// The durable-storage seam between the raft driver and the disk. The core never calls it:
// the driver persists what each Ready asks for and feeds the loaded state back on start.
import type { Entry, HardState, InitialState, SnapshotMeta } from '../core/types.js';

export interface Snapshot {
  readonly meta: SnapshotMeta;
  /** The state machine's serialized state at meta.index. */
  readonly data: Uint8Array;
}

export interface LoadedState extends InitialState {
  /** The data of InitialState.snapshot, or null when no snapshot was ever taken (index 0). */
  readonly snapshotData: Uint8Array | null;
  /** Set when a torn tail write was found and truncated on load: the first index dropped. */
  readonly truncatedTornTailAt: number | null;
}

export interface SaveBatch {
  readonly hardState: HardState | null;
  /** Replace stored entries from entries[0].index on (deleting any later ones), then append. */
  readonly entries: readonly Entry[];
  /** A snapshot received from the leader: the log is discarded up to snapshot.meta.index first. */
  readonly snapshot: Snapshot | null;
}

export interface LogStore {
  /**
   * Reads the whole durable state back, verifying every entry's checksum and the index and
   * term continuity. A torn tail (the last write partly on disk) is truncated; corruption
   * anywhere before the tail rejects with a StorageCorruptionError naming the index and file.
   */
  load(): Promise<LoadedState>;
  /**
   * Writes hard state, entries and snapshot in one batch, synced to disk before it resolves. A
   * batch that changes only the hard state's commit index may skip the sync: raft needs the
   * commit index only as a hint, and entries, terms and votes are always synced.
   */
  save(batch: SaveBatch): Promise<void>;
  /**
   * Stores a snapshot the local state machine took at meta.index and drops log entries with
   * index <= compactTo (compactTo <= meta.index; trailing entries are kept for slow followers).
   */
  saveLocalSnapshot(snapshot: Snapshot, compactTo: number): Promise<void>;
  /**
   * Optional: writes a local snapshot's bytes ahead of saveLocalSnapshot, while save() calls go
   * on (one staging at a time); saveLocalSnapshot of the same snapshot then only names them, so
   * the appends queued behind it do not wait for megabytes to be written.
   */
  stageSnapshot?(snapshot: Snapshot): Promise<void>;
  close(): Promise<void>;
}

export class StorageCorruptionError extends Error {
  readonly index: number;
  readonly file: string;
  constructor(message: string, index: number, file: string) {
    super(message);
    this.name = 'StorageCorruptionError';
    this.index = index;
    this.file = file;
  }
}

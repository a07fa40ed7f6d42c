// The part of LevelDB that the raft log uses: point reads, ordered range reads, atomic batches
// with or without fsync, and range deletes. LevelLogStore is written against this, so the
// deterministic simulation runs the production log store over a simulated disk (test/sim) with
// the same keys, records and checks; a real node passes nothing and gets LevelDB (`level`).
import type { Buffer } from 'node:buffer';

export type LogDbOp = { type: 'put'; key: Buffer; value: Uint8Array } | { type: 'del'; key: Buffer };

/** A key range: from gte, up to lt (exclusive) or lte (inclusive). */
export type LogDbRange =
  { readonly gte: Buffer; readonly lt: Buffer } | { readonly gte: Buffer; readonly lte: Buffer };

export interface LogDbWriteOptions {
  /** Durable when the promise resolves (fsync); otherwise a power loss may lose the write. */
  readonly sync: boolean;
}

/** A batch filled one operation at a time, written atomically. */
export interface LogDbChainedBatch {
  put(key: Buffer, value: Uint8Array): unknown;
  del(key: Buffer): unknown;
  write(options: LogDbWriteOptions): Promise<void>;
  close(): Promise<void>;
}

export interface LogDb {
  open(): Promise<void>;
  close(): Promise<void>;
  get(key: Buffer): Promise<Uint8Array | undefined>;
  getMany(keys: Buffer[]): Promise<(Uint8Array | undefined)[]>;
  put(key: Buffer, value: Uint8Array, options: LogDbWriteOptions): Promise<void>;
  batch(ops: LogDbOp[], options: LogDbWriteOptions): Promise<void>;
  batch(): LogDbChainedBatch;
  /** Entries in key order. */
  iterator(range: LogDbRange): AsyncIterable<[Buffer, Uint8Array]>;
  keys(range: LogDbRange & { readonly limit: number }): { all(): Promise<Buffer[]> };
  /** Deletes every key in the range; not synced. */
  clear(range: LogDbRange): Promise<void>;
}

// Reassembles one snapshot from the chunks of an InstallSnapshot stream and checks it: chunks
// must be contiguous, addressed to this node, from one sender, and the whole must match the
// CRC-32 the sender put on the last chunk. Nothing is handed on until all of that holds.
import { crc32 } from 'node:zlib';
import type { NodeId, SnapshotMeta } from '../core/types.js';
import type { SnapshotChunk } from '../../gen/raft.js';
import type { Snapshot } from '../storage/log-store.js';
import { CodecError, snapshotMetaFromWire } from './codec.js';

export type SnapshotRefusal = 'E_BAD_CHUNK' | 'E_CHECKSUM' | 'E_TOO_LARGE';

/** Why a snapshot transfer was refused; `code` picks the gRPC status the receiver answers. */
export class SnapshotTransferError extends Error {
  readonly code: SnapshotRefusal;
  constructor(code: SnapshotRefusal, message: string) {
    super(message);
    this.name = 'SnapshotTransferError';
    this.code = code;
  }
}

export interface AssembledSnapshot {
  readonly from: NodeId;
  readonly snapshot: Snapshot;
}

export class SnapshotAssembler {
  readonly #self: NodeId;
  readonly #bytesMax: number;
  #from: NodeId | null = null;
  #meta: SnapshotMeta | null = null;
  readonly #parts: Uint8Array[] = [];
  #received = 0;
  #crc = 0;
  #complete = false;

  constructor(self: NodeId, bytesMax: number) {
    this.#self = self;
    this.#bytesMax = bytesMax;
  }

  /** The sender, once the first chunk has been accepted (for logs). */
  get sender(): NodeId | null {
    return this.#from;
  }

  /**
   * Accepts the next chunk. Returns the whole snapshot on the last chunk, null before it, and
   * throws a SnapshotTransferError for anything out of place.
   */
  add(chunk: SnapshotChunk): AssembledSnapshot | null {
    if (this.#complete) throw bad('a chunk arrived after the last one (done was already set)');
    if (chunk.to !== this.#self)
      throw bad(`chunk addressed to '${chunk.to}', but this node is '${this.#self}'`);
    if (this.#from === null) {
      if (chunk.from === '') throw bad('the first chunk must name its sender in `from`');
      if (chunk.meta === undefined) throw bad('the first chunk must carry the snapshot metadata');
      try {
        this.#meta = snapshotMetaFromWire(chunk.meta, 'meta');
      } catch (err) {
        if (err instanceof CodecError) throw bad(`invalid snapshot metadata: ${err.message}`);
        throw err;
      }
      this.#from = chunk.from;
    } else {
      if (chunk.from !== this.#from)
        throw bad(`chunk from '${chunk.from}' inside a transfer from '${this.#from}'`);
      if (chunk.meta !== undefined) throw bad('only the first chunk may carry the snapshot metadata');
    }
    if (chunk.offset !== this.#received) {
      throw bad(`chunk offset ${chunk.offset} does not follow the ${this.#received} bytes received so far`);
    }
    if (this.#received + chunk.data.byteLength > this.#bytesMax) {
      throw new SnapshotTransferError('E_TOO_LARGE', `snapshot exceeds the ${this.#bytesMax}-byte limit`);
    }
    this.#parts.push(chunk.data);
    this.#received += chunk.data.byteLength;
    this.#crc = crc32(chunk.data, this.#crc);
    if (!chunk.done) return null;

    this.#complete = true;
    if (chunk.crc32 !== this.#crc) {
      throw new SnapshotTransferError(
        'E_CHECKSUM',
        `snapshot CRC-32 mismatch: sender says ${hex(chunk.crc32)}, received data has ${hex(this.#crc)}`,
      );
    }
    const data = Buffer.concat(this.#parts, this.#received);
    this.#parts.length = 0;
    // The first chunk set both; `complete` implies the first chunk was accepted.
    return { from: this.#from, snapshot: { meta: this.#meta!, data } };
  }
}

function bad(message: string): SnapshotTransferError {
  return new SnapshotTransferError('E_BAD_CHUNK', message);
}

function hex(crc: number): string {
  return `0x${crc.toString(16).padStart(8, '0')}`;
}

// Streams one snapshot to a peer on its own InstallSnapshot call: 1 MiB chunks, the metadata
// on the first, the CRC-32 of the whole on the last, pausing whenever the call is backed up.
import { crc32 } from 'node:zlib';
import { Metadata, type Client, type ClientWritableStream, type ServiceError } from '@grpc/grpc-js';
import { RaftService, type SnapshotAck, type SnapshotChunk } from '../../gen/raft.js';
import type { NodeId } from '../core/types.js';
import type { Snapshot } from '../storage/log-store.js';
import { snapshotMetaToWire } from './codec.js';
import { snapshotChunkBytes } from './limits.js';

export interface SnapshotSend {
  /** Resolves once the peer has verified and installed the snapshot; rejects otherwise. */
  readonly done: Promise<void>;
  /** Abandons the transfer; `done` then rejects. */
  cancel(): void;
}

export function streamSnapshot(client: Client, from: NodeId, to: NodeId, snapshot: Snapshot): SnapshotSend {
  const method = RaftService.installSnapshot;
  const meta = snapshotMetaToWire(snapshot.meta);
  const whole = snapshot.data;
  const checksum = crc32(whole);
  let settled = false;
  let call: ClientWritableStream<SnapshotChunk> | undefined;

  const done = new Promise<void>((resolve, reject) => {
    const onAck = (err: ServiceError | null, ack?: SnapshotAck) => {
      settled = true;
      if (err !== null) {
        reject(new Error(`snapshot at index ${meta.index} to ${to} failed: ${err.message}`, { cause: err }));
      } else if (ack?.index !== meta.index) {
        reject(new Error(`peer ${to} acknowledged snapshot index ${ack?.index}, expected ${meta.index}`));
      } else {
        resolve();
      }
    };
    const metadata = new Metadata();
    metadata.set('x-raft-from', from);
    call = client.makeClientStreamRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      metadata,
      {},
      onAck,
    );
  });
  const stream = call!;

  let offset = 0;
  let lastSent = false;
  const pump = (): void => {
    while (!lastSent && !settled) {
      const end = Math.min(offset + snapshotChunkBytes, whole.byteLength);
      const piece = whole.subarray(offset, end);
      lastSent = end === whole.byteLength;
      const chunk: SnapshotChunk = {
        from,
        to,
        offset,
        data: Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength),
        done: lastSent,
        crc32: lastSent ? checksum : 0,
      };
      if (offset === 0) chunk.meta = meta;
      offset = end;
      const more = stream.write(chunk);
      if (lastSent) {
        stream.end();
      } else if (!more) {
        stream.once('drain', pump);
        return;
      }
    }
  };
  pump();

  return {
    done,
    cancel: () => {
      stream.cancel();
    },
  };
}

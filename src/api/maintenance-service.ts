// The Maintenance API (proto/maintenance.proto): a consistent snapshot of the replicated state,
// streamed from the leader for `slipway snapshot save` (docs/decisions/0021-backup-and-recovery.md).
// Admin only. A follower streams the leader's snapshot through to the caller: it asks the
// leader's raft address (mutual TLS names the node there), where the same service is served
// without tokens, as the Kv service is for forwarded writes.
import { createHash } from 'node:crypto';
import { Metadata, status } from '@grpc/grpc-js';
import type { ServerWritableStream, ServiceError } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type {
  MaintenanceServer,
  SnapshotMember,
  SnapshotSaveRequest,
  SnapshotSaveResponse,
} from '../gen/maintenance.js';
import { MaintenanceClient } from '../gen/maintenance.js';
import type { Member, SnapshotMeta } from '../raft/core/types.js';
import type { RaftNode } from '../raft/node.js';
import { peerChannelCredentials, type PeerTls } from '../platform/peer-tls.js';
import type { ReplicatedState } from '../state/replicated-state.js';
import { buildVersion } from '../state/versions.js';
import type { CallAuditor } from './audit-calls.js';
import { ApiError, toServiceError } from './errors.js';
import { awaitLeader } from './proposer.js';

export interface MaintenanceServiceContext {
  readonly node: RaftNode;
  readonly store: ReplicatedState;
  readonly logger: Logger;
  /** The node's identity for asking the leader's raft address (mutual TLS). */
  readonly peerTls?: PeerTls | undefined;
}

/** The most state bytes one stream message carries. */
export const snapshotChunkBytes = 1 << 20;
const forwardedKey = 'x-slipway-forwarded';
/** Turns of the event loop to wait for the applied index to settle before capturing. */
const captureTries = 1_000;

type SaveCall = ServerWritableStream<SnapshotSaveRequest, SnapshotSaveResponse>;

export class MaintenanceService {
  readonly #ctx: MaintenanceServiceContext;
  readonly #clients = new Map<string, MaintenanceClient>();

  constructor(ctx: MaintenanceServiceContext) {
    this.#ctx = ctx;
  }

  /**
   * The handlers: with `auditor`, as served on the API port (admin only; a refusal goes into the
   * trail); without, as served on the raft address for a follower's forward.
   */
  handlers(auditor?: CallAuditor): MaintenanceServer {
    return {
      snapshotSave: (call: SaveCall) => {
        const work = async (): Promise<void> => {
          if (auditor !== undefined) {
            await auditor.authorize(
              {
                metadata: call.metadata,
                peer: call.getPeer(),
                method: 'Maintenance/SnapshotSave',
                kind: 'snapshot.save',
              },
              'admin',
              () => '',
            );
          }
          await this.#save(call);
        };
        work().then(
          () => call.end(),
          (err: unknown) => call.emit('error', toServiceError(err)),
        );
      },
    };
  }

  close(): void {
    for (const c of this.#clients.values()) c.close();
    this.#clients.clear();
  }

  async #save(call: SaveCall): Promise<void> {
    const node = this.#ctx.node;
    const forwarded = call.metadata.get(forwardedKey).length > 0;
    if (node.softState().role !== 'leader') {
      if (forwarded) throw new ApiError(status.UNAVAILABLE, `${node.id} is no longer the leader; retry`);
      const leader = await awaitLeader(node);
      if (leader.id !== node.id) {
        await this.#relay(call, leader);
        return;
      }
    }
    // Every write acknowledged before the call is in the state captured below.
    await node.linearizableRead();
    const { meta, encode } = await this.#capture();
    const data = await encode();
    const sha256 = createHash('sha256').update(data).digest('hex');
    this.#ctx.logger.info(
      { index: meta.index, term: meta.term, bytes: data.byteLength },
      'streaming a snapshot',
    );
    if (!(await send(call, { header: headerOf(meta, data.byteLength, sha256), chunk: Buffer.alloc(0) })))
      return;
    for (let at = 0; at < data.byteLength; at += snapshotChunkBytes) {
      const chunk = Buffer.from(
        data.buffer,
        data.byteOffset + at,
        Math.min(snapshotChunkBytes, data.byteLength - at),
      );
      if (!(await send(call, { chunk }))) return;
    }
  }

  /** The state at the applied index with that index's term and membership, captured in one turn. */
  async #capture(): Promise<{ meta: SnapshotMeta; encode: () => Promise<Uint8Array> }> {
    const store = this.#ctx.store;
    for (let i = 0; i < captureTries; i++) {
      const meta = this.#ctx.node.appliedSnapshotMeta();
      if (meta !== undefined) {
        const capture = store.captureSnapshot();
        return { meta, encode: () => capture.encode(nextTurn) };
      }
      await nextTurn();
    }
    throw new ApiError(status.UNAVAILABLE, 'the applied index did not settle; retry');
  }

  /** Streams the leader's snapshot through to the caller. */
  async #relay(call: SaveCall, leader: Member): Promise<void> {
    let client = this.#clients.get(leader.addr);
    if (client === undefined) {
      client = new MaintenanceClient(leader.addr, peerChannelCredentials(this.#ctx.peerTls), {
        'grpc.max_receive_message_length': 2 * snapshotChunkBytes,
      });
      this.#clients.set(leader.addr, client);
    }
    const md = new Metadata();
    md.set(forwardedKey, this.#ctx.node.id);
    const upstream = client.snapshotSave({}, md);
    call.on('cancelled', () => upstream.cancel());
    await new Promise<void>((resolve, reject) => {
      upstream.on('data', (msg: SnapshotSaveResponse) => {
        if (!call.write(msg)) {
          upstream.pause();
          call.once('drain', () => upstream.resume());
        }
      });
      upstream.on('error', (err: ServiceError) => reject(err));
      upstream.on('end', () => resolve());
    });
  }
}

function headerOf(meta: SnapshotMeta, bytes: number, sha256: string): SnapshotSaveResponse['header'] {
  const member = (m: Member): SnapshotMember => ({ id: m.id, raftAddr: m.addr, apiAddr: m.apiAddr });
  return {
    index: meta.index,
    term: meta.term,
    voters: meta.membership.voters.map(member),
    learners: meta.membership.learners.map(member),
    bytes,
    sha256,
    build: buildVersion,
  };
}

/** Writes one message, waiting for the stream to drain; false when the caller has gone. */
function send(call: SaveCall, msg: SnapshotSaveResponse): Promise<boolean> {
  if (call.cancelled) return Promise.resolve(false);
  if (call.write(msg)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const onDrain = (): void => {
      call.off('cancelled', onCancel);
      resolve(true);
    };
    const onCancel = (): void => {
      call.off('drain', onDrain);
      resolve(false);
    };
    call.once('drain', onDrain);
    call.once('cancelled', onCancel);
  });
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

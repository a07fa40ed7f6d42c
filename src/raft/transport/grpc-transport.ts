// The raft Transport over gRPC. Outgoing: one PeerLink per peer (a long-lived Stream call fed
// from a two-lane queue). Incoming: a grpc-js server whose Stream handler decodes envelopes and
// hands each valid message to the driver in order, and whose InstallSnapshot handler
// reassembles and checks a snapshot before the driver sees it. See
// docs/decisions/0003-raft-transport-grpc-streams.md for why it is shaped this way.
import {
  Server,
  status,
  type handleBidiStreamingCall,
  type handleClientStreamingCall,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { pino, type Logger } from 'pino';
import { callGuard, refusingUndecodable } from '../../platform/grpc-call-guard.js';
import { RaftService, type SnapshotAck, type SnapshotChunk, type StreamAck } from '../../gen/raft.js';
import type { Member, Message, NodeId } from '../core/types.js';
import type { Snapshot } from '../storage/log-store.js';
import { CodecError, decodeEnvelopeMessages, encodeMessageFrame } from './codec.js';
import { peerServerCredentials, type PeerTls } from '../../platform/peer-tls.js';
import { peerServerOptions } from './grpc-config.js';
import { removedNoticeCode, removedNoticeDetails } from './removed-notice.js';
import { certifiedNodeId, peerIdentityInterceptor } from './peer-identity.js';
import {
  messageBytesMaxDefault,
  messageHeadroomBytes,
  snapshotBytesMax,
  snapshotChunkBytes,
} from './limits.js';
import { laneOf } from './outbound-queue.js';
import { PeerLink } from './peer-link.js';
import { SnapshotAssembler, SnapshotTransferError, type SnapshotRefusal } from './snapshot-assembler.js';
import type { Transport, TransportHandlers } from './transport.js';

export interface GrpcTransportOptions {
  readonly id: NodeId;
  /** host:port to listen on; port 0 picks a free port (see `port`). */
  readonly listenAddr: string;
  readonly logger?: Logger;
  /** gRPC message size limit both ways; at least a snapshot chunk plus headroom (~1.06 MiB). */
  readonly maxMessageBytes?: number;
  /** Mutual TLS with the other nodes; plaintext when absent (loopback development only). */
  readonly tls?: PeerTls | undefined;
}

/**
 * The Raft service as served: envelopes stay raw bytes so a bad one is dropped, not fatal; a
 * snapshot chunk that does not decode is refused by callGuard (src/platform/grpc-call-guard.ts).
 */
const servedRaftService = {
  stream: { ...RaftService.stream, requestDeserialize: (bytes: Buffer) => bytes },
  installSnapshot: refusingUndecodable({ installSnapshot: RaftService.installSnapshot }).installSnapshot,
} satisfies ServiceDefinition;

const refusalStatus: Readonly<Record<SnapshotRefusal, status>> = {
  E_BAD_CHUNK: status.INVALID_ARGUMENT,
  E_CHECKSUM: status.DATA_LOSS,
  E_TOO_LARGE: status.RESOURCE_EXHAUSTED,
};

export class GrpcTransport implements Transport {
  readonly #id: NodeId;
  readonly #listenAddr: string;
  readonly #maxMessageBytes: number;
  readonly #tls: PeerTls | undefined;
  readonly #logger: Logger;
  readonly #links = new Map<NodeId, PeerLink>();
  readonly #unreachable = new Set<NodeId>();
  #removedNotice: string | undefined;
  /** The other members as the driver last named them: who may call here (peer-identity.ts). */
  #members = new Set<NodeId>();
  #handlers: TransportHandlers | null = null;
  readonly #server: Server;
  #started = false;
  #boundPort: number | null = null;
  #stopped = false;

  constructor(options: GrpcTransportOptions) {
    if (options.id === '') throw new Error('GrpcTransport: id must be a non-empty node id');
    checkHostPort(options.listenAddr);
    const maxMessageBytes = options.maxMessageBytes ?? messageBytesMaxDefault;
    const floor = snapshotChunkBytes + messageHeadroomBytes;
    if (!Number.isSafeInteger(maxMessageBytes) || maxMessageBytes < floor) {
      throw new Error(
        `GrpcTransport: maxMessageBytes must be an integer of at least ${floor} (a snapshot chunk plus headroom), got ${maxMessageBytes}`,
      );
    }
    this.#id = options.id;
    this.#listenAddr = options.listenAddr;
    this.#maxMessageBytes = maxMessageBytes;
    this.#tls = options.tls;
    this.#logger = (options.logger ?? pino({ level: 'silent' })).child({
      subsystem: 'raft-transport',
      nodeId: options.id,
    });
    // With mutual TLS, every call must come from the member its certificate names.
    const isMember = (id: NodeId): boolean => id === this.#id || this.#members.has(id);
    this.#server = new Server({
      ...peerServerOptions(maxMessageBytes),
      interceptors:
        options.tls === undefined
          ? [callGuard]
          : [
              peerIdentityInterceptor(isMember, this.#logger, (id) =>
                this.#handlers?.isRemoved?.(id) === true ? removedNoticeDetails(this.#id, id) : undefined,
              ),
              callGuard,
            ],
    });
    const stream: handleBidiStreamingCall<Buffer, StreamAck> = (call) => {
      this.#acceptStream(call);
    };
    const installSnapshot: handleClientStreamingCall<SnapshotChunk, SnapshotAck> = (call, callback) => {
      this.#acceptSnapshot(call, callback);
    };
    this.#server.addService(servedRaftService, { stream, installSnapshot });
  }

  /** The port the server is bound to (the real one when listenAddr asked for port 0). */
  get port(): number {
    if (this.#boundPort === null) throw new Error('GrpcTransport: not listening; call start() first');
    return this.#boundPort;
  }

  async start(handlers: TransportHandlers): Promise<void> {
    if (this.#started || this.#stopped) throw new Error('GrpcTransport: start() may be called once');
    this.#started = true;
    this.#handlers = handlers;
    const server = this.#server;
    this.#boundPort = await new Promise<number>((resolve, reject) => {
      server.bindAsync(this.#listenAddr, peerServerCredentials(this.#tls), (err, port) => {
        if (err === null) resolve(port);
        else
          reject(
            new Error(`GrpcTransport: cannot listen on ${this.#listenAddr}: ${err.message}`, { cause: err }),
          );
      });
    });
    this.#logger.info({ listenAddr: this.#listenAddr, port: this.#boundPort }, 'raft transport listening');
  }

  /**
   * Serves another gRPC service on the raft address as well (e.g. the Kv API, which followers
   * forward writes to). Best called before start(), so that it is there when peers connect. An
   * undecodable request is refused with INVALID_ARGUMENT before `implementation` sees it.
   */
  addService(service: ServiceDefinition, implementation: UntypedServiceImplementation): void {
    if (this.#stopped) throw new Error('GrpcTransport: addService() after stop()');
    this.#server.addService(refusingUndecodable(service), implementation);
  }

  setPeers(peers: readonly Member[]): void {
    if (this.#stopped) return;
    const wanted = new Map(peers.filter((p) => p.id !== this.#id).map((p) => [p.id, p.addr]));
    this.#members = new Set(wanted.keys());
    for (const [id, link] of this.#links) {
      if (wanted.get(id) !== link.addr) {
        link.close();
        this.#links.delete(id);
      }
    }
    for (const [id, addr] of wanted) {
      if (this.#links.has(id)) continue;
      const link = new PeerLink({
        self: this.#id,
        peer: id,
        addr,
        maxMessageBytes: this.#maxMessageBytes,
        logger: this.#logger,
        tls: this.#tls,
        onUnreachable: (peer) => this.#unreachable.add(peer),
        onRemoved: (notice) => {
          this.#removedNotice = notice;
        },
      });
      this.#links.set(id, link);
      link.warm();
    }
  }

  send(msgs: readonly Message[]): void {
    if (this.#stopped) return;
    for (const msg of msgs) {
      if (msg.to === this.#id) continue;
      const link = this.#links.get(msg.to);
      if (link === undefined) {
        this.#logger.debug(
          { to: msg.to, type: msg.type },
          'dropping a message for a node that is not a peer',
        );
        this.#unreachable.add(msg.to);
        continue;
      }
      let frame: Uint8Array;
      try {
        frame = encodeMessageFrame(msg);
      } catch (err) {
        this.#logger.error(
          { err, to: msg.to, type: msg.type },
          'dropping a raft message that cannot be encoded',
        );
        continue;
      }
      if (frame.byteLength > this.#maxMessageBytes) {
        this.#logger.error(
          { to: msg.to, type: msg.type, bytes: frame.byteLength, maxMessageBytes: this.#maxMessageBytes },
          'dropping a raft message larger than the gRPC message limit',
        );
        this.#unreachable.add(msg.to);
        continue;
      }
      link.enqueue(laneOf(msg.type), frame);
    }
  }

  async sendSnapshot(to: NodeId, snapshot: Snapshot): Promise<void> {
    const link = this.#links.get(to);
    if (this.#stopped) throw new Error('GrpcTransport: stopped');
    if (link === undefined) throw new Error(`GrpcTransport: cannot send a snapshot to '${to}': not a peer`);
    await link.sendSnapshot(snapshot);
  }

  takeRemovedNotice(): string | undefined {
    const notice = this.#removedNotice;
    this.#removedNotice = undefined;
    return notice;
  }

  takeUnreachable(): NodeId[] {
    const peers = [...this.#unreachable];
    this.#unreachable.clear();
    return peers;
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const link of this.#links.values()) link.close();
    this.#links.clear();
    const server = this.#server;
    // tryShutdown reports when listeners and sessions are closed; forceShutdown makes that
    // immediate by cancelling the long-lived streams peers hold open.
    await new Promise<void>((resolve) => {
      server.tryShutdown(() => resolve());
      server.forceShutdown();
    });
    this.#logger.info('raft transport stopped');
  }

  #acceptStream(call: Parameters<handleBidiStreamingCall<Buffer, StreamAck>>[0]): void {
    // With TLS, the certificate names the sender (and the interceptor checked any claim), and
    // every message must be from it; without, the claim is only for the logs.
    const certified = certifiedNodeId(call.getAuthContext());
    const sender = certified ?? call.metadata.get('x-raft-from')[0]?.toString() ?? 'unknown';
    let refused = false;
    call.on('error', () => undefined);
    call.on('end', () => call.end());
    call.on('data', (bytes: Buffer) => {
      if (refused) return;
      if (this.#handlers?.isRemoved?.(sender) === true) {
        // Its messages would only disturb (it campaigns, having never learned): tell it instead.
        refused = true;
        const details = removedNoticeDetails(this.#id, sender);
        this.#logger.info({ sender }, `ended a raft stream: ${details}`);
        call.emit('error', { code: removedNoticeCode, details });
        return;
      }
      const forged = this.#receiveEnvelope(bytes, sender, certified);
      if (forged === undefined) return;
      refused = true;
      const details = `a stream from ${sender} cannot carry a message from ${forged}`;
      this.#logger.warn({ sender, from: forged }, `refused a raft stream: ${details}`);
      call.emit('error', { code: status.PERMISSION_DENIED, details });
    });
    call.write({ nodeId: this.#id });
  }

  /**
   * Hands the envelope's messages on in order. With a `certified` sender, returns the claimed
   * sender of the first message not from it, which stops it there: a node speaks only for itself.
   */
  #receiveEnvelope(bytes: Buffer, sender: string, certified: NodeId | undefined): NodeId | undefined {
    const handlers = this.#handlers;
    if (this.#stopped || handlers === null) return undefined;
    let received;
    try {
      received = decodeEnvelopeMessages(bytes);
    } catch (err) {
      this.#logger.warn({ err, sender }, 'dropping an undecodable raft envelope');
      return undefined;
    }
    for (const msg of received) {
      if (msg instanceof CodecError) {
        this.#logger.warn({ err: msg, sender }, 'dropping a malformed raft message');
        continue;
      }
      if (msg.to !== this.#id) {
        this.#logger.warn(
          { sender, to: msg.to, type: msg.type },
          'dropping a raft message addressed to another node',
        );
        continue;
      }
      if (certified !== undefined && msg.from !== certified) return msg.from;
      handlers.onMessage(msg);
    }
    return undefined;
  }

  #acceptSnapshot(
    call: Parameters<handleClientStreamingCall<SnapshotChunk, SnapshotAck>>[0],
    callback: Parameters<handleClientStreamingCall<SnapshotChunk, SnapshotAck>>[1],
  ): void {
    const assembler = new SnapshotAssembler(this.#id, snapshotBytesMax);
    const certified = certifiedNodeId(call.getAuthContext());
    // receiving → installing (all chunks in, the driver is installing) → answered.
    let phase: 'receiving' | 'installing' | 'answered' = 'receiving';
    const answer = (err: { code: status; details: string } | null, index = 0) => {
      if (phase === 'answered') return;
      phase = 'answered';
      if (err === null) callback(null, { index });
      else callback(err);
    };

    call.on('error', () => {
      phase = 'answered';
    });
    call.on('end', () => {
      if (phase === 'receiving') {
        answer({
          code: status.INVALID_ARGUMENT,
          details: 'snapshot stream ended before its last chunk (done)',
        });
      }
    });
    call.on('data', (chunk: SnapshotChunk) => {
      if (phase !== 'receiving') return;
      if (certified !== undefined && chunk.from !== certified) {
        const details = `the certificate of ${certified} cannot send a snapshot as ${chunk.from}`;
        this.#logger.warn({ certified, from: chunk.from }, `refusing a snapshot: ${details}`);
        answer({ code: status.PERMISSION_DENIED, details });
        return;
      }
      let assembled;
      try {
        assembled = assembler.add(chunk);
      } catch (err) {
        if (!(err instanceof SnapshotTransferError)) throw err;
        this.#logger.warn({ err, sender: assembler.sender }, 'refusing a snapshot');
        answer({ code: refusalStatus[err.code], details: err.message });
        return;
      }
      const handlers = this.#handlers;
      if (assembled === null || handlers === null) return;
      phase = 'installing';
      const { from, snapshot } = assembled;
      this.#logger.info(
        { from, index: snapshot.meta.index, bytes: snapshot.data.byteLength },
        'snapshot received',
      );
      handlers.onSnapshot(from, snapshot).then(
        () => answer(null, snapshot.meta.index),
        (err: unknown) => {
          this.#logger.error(
            { err, from, index: snapshot.meta.index },
            'installing a received snapshot failed',
          );
          answer({ code: status.INTERNAL, details: `installing the snapshot failed: ${String(err)}` });
        },
      );
    });
  }
}

/** host:port with a numeric port (0 = any free port); IPv6 hosts in brackets. */
function checkHostPort(addr: string): void {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):(\d{1,5})$/.exec(addr);
  if (match === null || Number(match[2]) > 65535) {
    throw new Error(
      `GrpcTransport: listenAddr '${addr}' must be host:port (port 0 picks a free port), e.g. 127.0.0.1:7001`,
    );
  }
}

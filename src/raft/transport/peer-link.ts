// The connection to one peer: a gRPC channel and one long-lived Stream call carrying this
// node's messages to it. The call is kept open to every peer, also one this node has nothing to
// say to yet (a follower to another follower): it opens when the link is made (warm()) and again
// at the end of each backoff, so the first message after a change of leader (a vote, the new
// leader's first append) finds a stream instead of waiting for one to open. It counts as open
// once the peer acknowledges it under the expected id; after any failure it waits out a jittered
// backoff during which messages for the peer are dropped (raft retries) and the peer is
// reported unreachable.
import { Client, Metadata, type ClientDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { RaftService, type StreamAck } from '../../gen/raft.js';
import type { NodeId } from '../core/types.js';
import type { Snapshot } from '../storage/log-store.js';
import { peerChannelCredentials, type PeerTls } from '../../platform/peer-tls.js';
import { peerChannelOptions } from './grpc-config.js';
import { isRemovedNotice } from './removed-notice.js';
import {
  bulkQueueBytesMax,
  bulkQueueMessagesMax,
  priorityQueueMessagesMax,
  reconnectBackoffMsMax,
  reconnectBackoffMsMin,
  streamOpenTimeoutMs,
  writesInFlightMax,
} from './limits.js';
import { OutboundQueue, type Lane } from './outbound-queue.js';
import { streamSnapshot, type SnapshotSend } from './snapshot-sender.js';

/**
 * idle: no call, opens on the next message. opening: call started, waiting for the peer's
 * acknowledgement; messages queue. open: messages flow. backoff: the last call failed;
 * messages are dropped until the backoff ends. closed: the link was removed or stopped.
 */
type LinkState = 'idle' | 'opening' | 'open' | 'backoff' | 'closed';

type EnvelopeCall = ClientDuplexStream<Buffer, StreamAck>;

export interface PeerLinkOptions {
  readonly self: NodeId;
  readonly peer: NodeId;
  readonly addr: string;
  readonly maxMessageBytes: number;
  readonly logger: Logger;
  readonly tls?: PeerTls | undefined;
  /** Called whenever a message for this peer is lost: the stream failed or its queue overflowed. */
  readonly onUnreachable: (peer: NodeId) => void;
  /** The peer ended this node's stream saying that it removed this node (removed-notice.ts). */
  readonly onRemoved?: (notice: string) => void;
}

export class PeerLink {
  readonly peer: NodeId;
  readonly addr: string;
  readonly #self: NodeId;
  readonly #maxMessageBytes: number;
  readonly #tls: PeerTls | undefined;
  readonly #logger: Logger;
  readonly #onUnreachable: (peer: NodeId) => void;
  readonly #onRemoved: ((notice: string) => void) | undefined;
  readonly #queue = new OutboundQueue({
    priorityMessagesMax: priorityQueueMessagesMax,
    bulkMessagesMax: bulkQueueMessagesMax,
    bulkBytesMax: bulkQueueBytesMax,
  });
  #state: LinkState = 'idle';
  #client: Client | null = null;
  #call: EnvelopeCall | null = null;
  #writesInFlight = 0;
  #awaitingDrain = false;
  #flushScheduled = false;
  #failures = 0;
  #timer: NodeJS.Timeout | null = null;
  readonly #snapshots = new Set<SnapshotSend>();

  constructor(options: PeerLinkOptions) {
    this.#self = options.self;
    this.peer = options.peer;
    this.addr = options.addr;
    this.#tls = options.tls;
    this.#maxMessageBytes = options.maxMessageBytes;
    this.#logger = options.logger.child({ peer: options.peer, peerAddr: options.addr });
    this.#onUnreachable = options.onUnreachable;
    this.#onRemoved = options.onRemoved;
  }

  /** Queues one encoded message frame; never throws, never blocks. */
  enqueue(lane: Lane, frame: Uint8Array): void {
    switch (this.#state) {
      case 'closed':
        return;
      case 'backoff':
        this.#onUnreachable(this.peer);
        return;
      case 'idle':
        this.#open();
        break;
      case 'opening':
      case 'open':
        break;
      default: {
        const unknown: never = this.#state;
        throw new Error(`unknown link state ${String(unknown)}`);
      }
    }
    const dropped = this.#queue.push(lane, frame);
    if (dropped > 0) {
      this.#logger.debug({ dropped, lane }, 'outgoing queue full, dropped the oldest messages');
      this.#onUnreachable(this.peer);
    }
    this.#scheduleFlush();
  }

  /** Opens the stream now if it is not open or opening (a new link, before any message). */
  warm(): void {
    if (this.#state === 'idle') this.#open();
  }

  /** Streams a snapshot on its own call over this peer's channel. */
  sendSnapshot(snapshot: Snapshot): Promise<void> {
    if (this.#state === 'closed')
      return Promise.reject(new Error(`peer ${this.peer} was removed or stopped`));
    const send = streamSnapshot(this.#channel(), this.#self, this.peer, snapshot);
    this.#snapshots.add(send);
    const forget = () => this.#snapshots.delete(send);
    send.done.then(forget, forget);
    return send.done;
  }

  /** Closes the call and the channel for good; queued messages are dropped. */
  close(): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#clearTimer();
    this.#queue.clear();
    const call = this.#call;
    this.#call = null;
    call?.cancel();
    for (const send of this.#snapshots) send.cancel();
    this.#client?.close();
    this.#client = null;
  }

  #channel(): Client {
    this.#client ??= new Client(
      this.addr,
      peerChannelCredentials(this.#tls),
      peerChannelOptions(this.#maxMessageBytes),
    );
    return this.#client;
  }

  #open(): void {
    const method = RaftService.stream;
    const metadata = new Metadata();
    metadata.set('x-raft-from', this.#self);
    const call: EnvelopeCall = this.#channel().makeBidiStreamRequest(
      method.path,
      (frames: Buffer) => frames,
      method.responseDeserialize,
      metadata,
      {},
    );
    this.#call = call;
    this.#state = 'opening';
    this.#writesInFlight = 0;
    this.#awaitingDrain = false;
    this.#timer = setTimeout(() => {
      this.#fail(call, `the peer did not acknowledge the stream within ${streamOpenTimeoutMs} ms`);
    }, streamOpenTimeoutMs);
    this.#timer.unref();

    call.on('data', (ack: StreamAck) => {
      if (this.#call !== call || this.#state !== 'opening') return;
      if (ack.nodeId !== this.peer) {
        this.#fail(call, `address ${this.addr} is node '${ack.nodeId}', not '${this.peer}'`);
        return;
      }
      this.#clearTimer();
      this.#state = 'open';
      if (this.#failures > 0) this.#logger.info({ failures: this.#failures }, 'raft stream to peer reopened');
      this.#failures = 0;
      this.#scheduleFlush();
    });
    // 'status' follows every end, clean or not; 'error' precedes it for a failure and only
    // needs a listener so that it is not thrown.
    call.on('error', () => undefined);
    call.on('status', (status: { code: number; details: string }) => {
      if (this.#call === call && isRemovedNotice(status.code, status.details))
        this.#onRemoved?.(status.details);
      this.#fail(call, `stream ended with status ${status.code}: ${status.details}`);
    });
  }

  #fail(call: EnvelopeCall, reason: string): void {
    if (this.#call !== call) return;
    this.#call = null;
    call.cancel();
    this.#clearTimer();
    const dropped = this.#queue.clear();
    this.#failures++;
    // Log a failure streak once; retries while the peer stays down would only repeat it.
    if (this.#failures === 1) this.#logger.warn({ reason, dropped }, 'raft stream to peer failed');
    else
      this.#logger.debug({ reason, dropped, failures: this.#failures }, 'raft stream to peer failed again');
    this.#onUnreachable(this.peer);
    this.#state = 'backoff';
    this.#timer = setTimeout(() => {
      this.#timer = null;
      if (this.#state !== 'backoff') return;
      this.#state = 'idle';
      this.#open();
    }, backoffMs(this.#failures));
    this.#timer.unref();
  }

  #clearTimer(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }

  /** Flushing after the current task lets one write carry everything sent in it. */
  #scheduleFlush(): void {
    if (this.#flushScheduled || this.#state !== 'open') return;
    this.#flushScheduled = true;
    queueMicrotask(() => {
      this.#flushScheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    const call = this.#call;
    while (
      call !== null &&
      this.#state === 'open' &&
      !this.#awaitingDrain &&
      this.#writesInFlight < writesInFlightMax &&
      this.#queue.length > 0
    ) {
      const frames = this.#queue.takeBatch(this.#maxMessageBytes);
      // A lone frame is already an envelope: send a view of it rather than a copy.
      const single = frames.length === 1 ? frames[0] : undefined;
      const envelope =
        single === undefined
          ? Buffer.concat(frames)
          : Buffer.from(single.buffer, single.byteOffset, single.byteLength);
      this.#writesInFlight++;
      const more = call.write(envelope, () => {
        if (this.#call !== call) return;
        this.#writesInFlight--;
        this.#flush();
      });
      if (!more) {
        this.#awaitingDrain = true;
        call.once('drain', () => {
          if (this.#call !== call) return;
          this.#awaitingDrain = false;
          this.#flush();
        });
      }
    }
  }
}

/** Exponential from the minimum, capped, with jitter over the upper half so peers spread out. */
function backoffMs(failures: number): number {
  const ceiling = Math.min(reconnectBackoffMsMax, reconnectBackoffMsMin * 2 ** Math.min(failures - 1, 16));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

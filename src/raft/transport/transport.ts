// The network seam between the raft driver and its peers.
import type { Member, Message, NodeId } from '../core/types.js';
import type { Snapshot } from '../storage/log-store.js';

export interface TransportHandlers {
  /** A message from a peer, in the order the peer sent it on its stream. */
  onMessage(msg: Message): void;
  /** A whole snapshot received from `from` (all chunks reassembled and checksummed). */
  onSnapshot(from: NodeId, snapshot: Snapshot): Promise<void>;
  /**
   * Whether `from` was removed from the membership this node applied: its streams are ended
   * with a notice that tells it so (a removed node that never applied its removal would
   * otherwise campaign for ever).
   */
  isRemoved?(from: NodeId): boolean;
}

export interface Transport {
  /** Starts listening on the node's raft address. Resolves once bound. */
  start(handlers: TransportHandlers): Promise<void>;
  /** The peers to keep streams to (the node itself is ignored if present). */
  setPeers(peers: readonly Member[]): void;
  /**
   * Queues messages; never blocks and never throws for an unreachable peer (the message is
   * dropped, raft retries). Heartbeats and votes jump ahead of queued appends.
   */
  send(msgs: readonly Message[]): void;
  /** Streams a snapshot in chunks on its own stream; resolves when the peer has it all. */
  sendSnapshot(to: NodeId, snapshot: Snapshot): Promise<void>;
  /** Peers whose stream failed since the last call (for reporting unreachable to the core). */
  takeUnreachable(): NodeId[];
  /** The latest notice from a peer that this node was removed from the cluster, taken once. */
  takeRemovedNotice?(): string | undefined;
  stop(): Promise<void>;
}

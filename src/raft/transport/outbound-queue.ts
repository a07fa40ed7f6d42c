// The per-peer outgoing queue: two FIFO lanes of encoded message frames. Priority messages
// (heartbeats, votes, reads) are taken before bulk ones (appends, snapshot notices), so a backlog
// of appends cannot delay an election or a lease. Both lanes are bounded and drop their oldest
// frames when full: raft retries whatever matters, and a stale message is worth less than a new one.
import type { MessageType } from '../core/types.js';

export type Lane = 'priority' | 'bulk';

export function laneOf(type: MessageType): Lane {
  switch (type) {
    case 'heartbeat':
    case 'heartbeatResp':
    case 'vote':
    case 'voteResp':
    case 'preVote':
    case 'preVoteResp':
    case 'timeoutNow':
    case 'readIndex':
    case 'readIndexResp':
      return 'priority';
    case 'app':
    case 'appResp':
    case 'snap':
      return 'bulk';
    default: {
      const unknown: never = type;
      throw new Error(`unknown raft message type ${String(unknown)}`);
    }
  }
}

export interface OutboundQueueLimits {
  readonly priorityMessagesMax: number;
  readonly bulkMessagesMax: number;
  readonly bulkBytesMax: number;
}

/** A FIFO of byte frames with O(1) push and shift, tracking its total size. */
class FrameFifo {
  #frames: Uint8Array[] = [];
  #head = 0;
  bytes = 0;

  get length(): number {
    return this.#frames.length - this.#head;
  }

  push(frame: Uint8Array): void {
    this.#frames.push(frame);
    this.bytes += frame.byteLength;
  }

  peek(): Uint8Array | undefined {
    return this.#frames[this.#head];
  }

  shift(): Uint8Array | undefined {
    const frame = this.#frames[this.#head];
    if (frame === undefined) return undefined;
    this.#head++;
    this.bytes -= frame.byteLength;
    // Compact once the consumed prefix dominates, keeping memory proportional to the backlog.
    if (this.#head > 64 && this.#head * 2 > this.#frames.length) {
      this.#frames = this.#frames.slice(this.#head);
      this.#head = 0;
    }
    return frame;
  }

  clear(): number {
    const dropped = this.length;
    this.#frames = [];
    this.#head = 0;
    this.bytes = 0;
    return dropped;
  }
}

export class OutboundQueue {
  readonly #limits: OutboundQueueLimits;
  readonly #priority = new FrameFifo();
  readonly #bulk = new FrameFifo();

  constructor(limits: OutboundQueueLimits) {
    this.#limits = limits;
  }

  get length(): number {
    return this.#priority.length + this.#bulk.length;
  }

  get bytes(): number {
    return this.#priority.bytes + this.#bulk.bytes;
  }

  /** Appends a frame to its lane; returns how many older frames were dropped to make room. */
  push(lane: Lane, frame: Uint8Array): number {
    let dropped = 0;
    if (lane === 'priority') {
      this.#priority.push(frame);
      while (this.#priority.length > this.#limits.priorityMessagesMax) {
        this.#priority.shift();
        dropped++;
      }
    } else {
      this.#bulk.push(frame);
      while (
        this.#bulk.length > this.#limits.bulkMessagesMax ||
        (this.#bulk.bytes > this.#limits.bulkBytesMax && this.#bulk.length > 1)
      ) {
        this.#bulk.shift();
        dropped++;
      }
    }
    return dropped;
  }

  /**
   * Takes frames for one write: priority first, then bulk, each in order, up to `bytesMax` in
   * total. The first frame is always taken, so a frame larger than the bound still moves.
   */
  takeBatch(bytesMax: number): Uint8Array[] {
    const batch: Uint8Array[] = [];
    let bytes = 0;
    for (const lane of [this.#priority, this.#bulk]) {
      for (let next = lane.peek(); next !== undefined; next = lane.peek()) {
        if (batch.length > 0 && bytes + next.byteLength > bytesMax) return batch;
        lane.shift();
        batch.push(next);
        bytes += next.byteLength;
      }
    }
    return batch;
  }

  /** Drops everything queued; returns how many frames that was. */
  clear(): number {
    return this.#priority.clear() + this.#bulk.clear();
  }
}

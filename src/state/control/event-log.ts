// One workflow's events, oldest first, keeping only the newest `eventsMax`. Seqs come from the
// state's global counter, so they increase along the log (with gaps: other workflows' events).
// It also counts the output tails its events keep, so that apply can bound them per workflow
// (cutOutputTails): the oldest events lose theirs first.
import { utf8Length } from '../../platform/utf8-text.js';
import type { WorkflowEvent } from '../../model/records.js';

function tailBytesOf(event: WorkflowEvent | undefined): number {
  const tail = event?.outputTail;
  return tail === undefined || tail === '' ? 0 : utf8Length(tail);
}

export class EventLog {
  readonly #eventsMax: number;
  #items: WorkflowEvent[] = [];
  /** Items before this index were dropped; compacted once they are half the array. */
  #head = 0;
  /** UTF-8 bytes of the output tails of the kept events. */
  #tailBytes = 0;
  /** Kept items before this index have no output tail left (cut, or never had one). */
  #tailFrom = 0;

  constructor(eventsMax: number, events: readonly WorkflowEvent[] = []) {
    if (!Number.isSafeInteger(eventsMax) || eventsMax < 1) throw new RangeError(`eventsMax ${eventsMax}`);
    this.#eventsMax = eventsMax;
    for (const e of events) this.push(e);
  }

  get size(): number {
    return this.#items.length - this.#head;
  }

  /** UTF-8 bytes of the output tails the kept events hold. */
  get outputTailBytes(): number {
    return this.#tailBytes;
  }

  push(event: WorkflowEvent): void {
    const last = this.#items[this.#items.length - 1];
    if (last !== undefined && last.seq >= event.seq) {
      throw new Error(`event seq ${event.seq} after ${last.seq}: seqs must increase`);
    }
    this.#items.push(event);
    this.#tailBytes += tailBytesOf(event);
    if (this.size > this.#eventsMax) {
      this.#tailBytes -= tailBytesOf(this.#items[this.#head]);
      this.#head++;
    }
    // Amortized O(1) dropping without shifting the array on every event.
    if (this.#head >= this.#eventsMax) {
      this.#items = this.#items.slice(this.#head);
      this.#tailFrom = Math.max(0, this.#tailFrom - this.#head);
      this.#head = 0;
    }
  }

  /**
   * Cuts the output tails of the oldest events that have one until the kept tails take at most
   * `bytesMax`; returns how many were cut. Deterministic: the result depends only on the events
   * kept, not on when earlier cuts happened. Each event cut is replaced by a copy without its tail.
   */
  cutOutputTails(bytesMax: number): number {
    let cut = 0;
    let i = Math.max(this.#tailFrom, this.#head);
    for (; this.#tailBytes > bytesMax && i < this.#items.length; i++) {
      const event = this.#items[i];
      const bytes = tailBytesOf(event);
      if (event === undefined || bytes === 0) continue;
      const { outputTail: _cut, ...rest } = event;
      this.#items[i] = Object.freeze(rest);
      this.#tailBytes -= bytes;
      cut++;
    }
    this.#tailFrom = i;
    return cut;
  }

  /** Up to `limit` events with seq >= fromSeq, oldest first. */
  from(fromSeq: number, limit: number): WorkflowEvent[] {
    let lo = this.#head;
    let hi = this.#items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const seq = this.#items[mid]?.seq ?? Infinity;
      if (seq < fromSeq) lo = mid + 1;
      else hi = mid;
    }
    return this.#items.slice(lo, Math.min(lo + Math.max(0, limit), this.#items.length));
  }

  /** Every kept event, oldest first (for snapshots). */
  all(): WorkflowEvent[] {
    return this.#items.slice(this.#head);
  }
}

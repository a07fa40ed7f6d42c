// One workflow's events, oldest first, keeping only the newest `eventsMax`. Seqs come from the
// state's global counter, so they increase along the log (with gaps: other workflows' events).
import type { WorkflowEvent } from './model.js';

export class EventLog {
  readonly #eventsMax: number;
  #items: WorkflowEvent[] = [];
  /** Items before this index were dropped; compacted once they are half the array. */
  #head = 0;

  constructor(eventsMax: number, events: readonly WorkflowEvent[] = []) {
    if (!Number.isSafeInteger(eventsMax) || eventsMax < 1) throw new RangeError(`eventsMax ${eventsMax}`);
    this.#eventsMax = eventsMax;
    for (const e of events) this.push(e);
  }

  get size(): number {
    return this.#items.length - this.#head;
  }

  push(event: WorkflowEvent): void {
    const last = this.#items[this.#items.length - 1];
    if (last !== undefined && last.seq >= event.seq) {
      throw new Error(`event seq ${event.seq} after ${last.seq}: seqs must increase`);
    }
    this.#items.push(event);
    if (this.size > this.#eventsMax) this.#head++;
    // Amortized O(1) dropping without shifting the array on every event.
    if (this.#head >= this.#eventsMax) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
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

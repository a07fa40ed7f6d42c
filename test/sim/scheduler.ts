// Virtual time for the simulation: a clock that only moves when the next event runs, and a
// binary-heap event queue ordered by (time, insertion sequence). No real timers are involved,
// so a run's order of events depends on its seed alone, and virtual seconds cost only the
// events in them.

interface Event {
  readonly time: number;
  readonly seq: number;
  readonly run: () => void;
}

export class Scheduler {
  /** Virtual milliseconds since the start of the run. */
  now = 0;
  /** Events run so far. */
  executed = 0;
  private readonly heap: Event[] = [];
  private seq = 0;

  /** Runs fn at virtual time `time` (never before now). */
  at(time: number, run: () => void): void {
    const ev: Event = { time: Math.max(time, this.now), seq: this.seq++, run };
    const h = this.heap;
    h.push(ev);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(ev, h[parent]!)) break;
      h[i] = h[parent]!;
      i = parent;
    }
    h[i] = ev;
  }

  after(delayMs: number, run: () => void): void {
    this.at(this.now + delayMs, run);
  }

  get pending(): number {
    return this.heap.length;
  }

  /** The time of the next event, or Infinity when none is queued. */
  peekTime(): number {
    return this.heap[0]?.time ?? Infinity;
  }

  /** Runs the next event; false when the queue is empty. */
  step(): boolean {
    const h = this.heap;
    const top = h[0];
    if (top === undefined) return false;
    const last = h.pop()!;
    if (h.length > 0) {
      let i = 0;
      const n = h.length;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const c = r < n && before(h[r]!, h[l]!) ? r : l;
        if (!before(h[c]!, last)) break;
        h[i] = h[c]!;
        i = c;
      }
      h[i] = last;
    }
    this.now = top.time;
    this.executed++;
    top.run();
    return true;
  }
}

function before(a: Event, b: Event): boolean {
  return a.time < b.time || (a.time === b.time && a.seq < b.seq);
}

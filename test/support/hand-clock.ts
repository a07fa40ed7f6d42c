// A clock for tests of the leader's duties (src/platform/clock.ts): its timers fire only when
// the test moves the time on, each due timer in order, with its round let settle in between.
import type { Cancel, Clock } from '../../src/platform/clock.js';

/** Timers run only when the test moves the time on. */
export class HandClock implements Clock {
  nowMs = 0;
  #timers: { atMs: number; fn: () => void; live: boolean }[] = [];

  now(): number {
    return this.nowMs;
  }
  every(): Cancel {
    throw new Error('a hand clock has one-shot timers only');
  }
  after(ms: number, fn: () => void): Cancel {
    const timer = { atMs: this.nowMs + ms, fn, live: true };
    this.#timers.push(timer);
    return () => {
      timer.live = false;
    };
  }
  defer(fn: () => void): void {
    setImmediate(fn);
  }

  /** Moves to `untilMs`, firing each timer due on the way and letting its round settle. */
  async runUntil(untilMs: number): Promise<void> {
    for (;;) {
      const due = this.#timers.filter((t) => t.live && t.atMs <= untilMs).sort((a, b) => a.atMs - b.atMs)[0];
      if (due === undefined) break;
      due.live = false;
      this.nowMs = due.atMs;
      due.fn();
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.nowMs = untilMs;
  }

  /** When the earliest live timer is due, or undefined when none is. */
  get nextAtMs(): number | undefined {
    const live = this.#timers.filter((t) => t.live).map((t) => t.atMs);
    return live.length === 0 ? undefined : Math.min(...live);
  }

  get pending(): number {
    return this.#timers.filter((t) => t.live).length;
  }
}

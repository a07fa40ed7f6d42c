// The raft driver's view of time and chance, as a seam: production runs on Node's timers and
// crypto, the deterministic simulation on its virtual clock and seeded generator, so that a
// seed replays the same run of the real driver.
import { randomInt } from 'node:crypto';
import type { Random } from './core/types.js';

export interface RaftClock {
  /** Milliseconds, for deadlines only (differences matter, not the origin). */
  now(): number;
  /** Calls `fn` every `ms` until the returned function is called. */
  every(ms: number, fn: () => void): () => void;
  /** Calls `fn` once after `ms` unless the returned function is called first. */
  after(ms: number, fn: () => void): () => void;
  /** Calls `fn` on a later turn, after the I/O callbacks already due (setImmediate). */
  defer(fn: () => void): void;
}

export const realClock: RaftClock = {
  now: () => Date.now(),
  every(ms, fn) {
    const timer = setInterval(fn, ms);
    return () => {
      clearInterval(timer);
    };
  },
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    return () => {
      clearTimeout(timer);
    };
  },
  defer(fn) {
    setImmediate(fn);
  },
};

/** The randomized election timeouts' source in production. */
export const realRandom: Random = { int: (n) => randomInt(n) };

export function sleep(clock: RaftClock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.after(ms, resolve));
}

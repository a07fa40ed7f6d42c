// Time as a seam (docs/decisions/0043-one-clock.md): the raft driver, the leader's duties, the
// power executor and the worker service read the time and set their timers through a Clock that
// is passed in. Production runs on Node's timers; the deterministic simulation passes its
// virtual clock, so that a seed replays the same run of the production code.

/** Stops a timer; calling it again, or after a one-shot timer fired, does nothing. */
export type Cancel = () => void;

export interface TimerOptions {
  /** The timer does not keep the process alive (Node's unref): a background round. */
  readonly unref?: boolean;
}

export interface Clock {
  /** Milliseconds since the epoch on the real clock (the simulation's origin is its own). */
  now(): number;
  /** Calls `fn` every `ms` until the returned function is called. */
  every(ms: number, fn: () => void, options?: TimerOptions): Cancel;
  /** Calls `fn` once after `ms` unless the returned function is called first. */
  after(ms: number, fn: () => void, options?: TimerOptions): Cancel;
  /** Calls `fn` on a later turn, after the I/O callbacks already due (setImmediate). */
  defer(fn: () => void): void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  every(ms, fn, options) {
    const timer = setInterval(fn, ms);
    if (options?.unref === true) timer.unref();
    return () => {
      clearInterval(timer);
    };
  },
  after(ms, fn, options) {
    const timer = setTimeout(fn, ms);
    if (options?.unref === true) timer.unref();
    return () => {
      clearTimeout(timer);
    };
  },
  defer(fn) {
    setImmediate(fn);
  },
};

/** Resolves after `ms` on `clock`. */
export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.after(ms, resolve));
}

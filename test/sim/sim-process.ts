// One incarnation of a simulated server process, as the real driver sees it: a Clock on
// the scheduler's virtual time whose callbacks die with the process (a crash) and wait while
// it is paused (a stopped process misses timer ticks; they are not made up afterwards).
import type { Clock } from '../../src/platform/clock.js';
import type { Scheduler } from './scheduler.js';

export class SimProcess {
  alive = true;
  pausedUntil = 0;
  readonly clock: Clock;
  private readonly sched: Scheduler;

  constructor(sched: Scheduler) {
    this.sched = sched;
    const after = (ms: number, fn: () => void): (() => void) => {
      let cancelled = false;
      sched.after(
        ms,
        this.guard(() => {
          if (!cancelled) fn();
        }),
      );
      return () => {
        cancelled = true;
      };
    };
    this.clock = {
      now: () => sched.now,
      after,
      every: (ms, fn) => {
        let cancelled = false;
        const loop = (): void => {
          sched.after(ms, () => {
            if (cancelled || !this.alive) return;
            loop();
            if (sched.now >= this.pausedUntil) fn();
          });
        };
        loop();
        return () => {
          cancelled = true;
        };
      },
      defer: (fn) => {
        after(0, fn);
      },
    };
  }

  /** Wraps work for this process: dropped once it died, deferred while it is paused. */
  guard(fn: () => void): () => void {
    const guarded = (): void => {
      if (!this.alive) return;
      if (this.sched.now < this.pausedUntil) {
        this.sched.at(this.pausedUntil, guarded);
        return;
      }
      fn();
    };
    return guarded;
  }
}

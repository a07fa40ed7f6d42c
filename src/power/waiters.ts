// Callers waiting for a power job to finish on this node: the API answers `slipway power on`
// once the job's last step has been applied here. Fed by ControlState's powerJob changes, which
// fires on every node as the job's commands apply, so a follower answers too.
import type { PowerJob } from '../model/records.js';
import { isFinishedPowerJob } from '../state/control/power-jobs.js';
import type { Clock } from '../platform/clock.js';

export class PowerJobWaiters {
  readonly #waiting = new Map<string, Set<(job: PowerJob) => void>>();
  readonly #clock: Clock;

  /** `clock` times the waits (src/platform/clock.ts). */
  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Call on ControlState's powerJob changes. */
  changed(job: PowerJob): void {
    if (!isFinishedPowerJob(job)) return;
    const waiters = this.#waiting.get(job.id);
    if (waiters === undefined) return;
    this.#waiting.delete(job.id);
    for (const wake of waiters) wake(job);
  }

  /**
   * Resolves with the finished job, or with `current()` once `waitMs` has passed. `current` also
   * answers at once when the job finished before the wait began. Check and registration happen
   * in one turn, so a finish cannot slip between them.
   */
  wait(id: string, waitMs: number, current: () => PowerJob | undefined): Promise<PowerJob | undefined> {
    const now = current();
    // Not here yet is normal on a follower: the leader answered before this node applied it.
    if (now !== undefined && isFinishedPowerJob(now)) return Promise.resolve(now);
    return new Promise((resolve) => {
      let set = this.#waiting.get(id);
      if (set === undefined) {
        set = new Set();
        this.#waiting.set(id, set);
      }
      const waiters = set;
      const done = (job: PowerJob | undefined): void => {
        cancel();
        waiters.delete(wake);
        if (waiters.size === 0 && this.#waiting.get(id) === waiters) this.#waiting.delete(id);
        resolve(job);
      };
      const wake = (job: PowerJob): void => done(job);
      const cancel = this.#clock.after(waitMs, () => done(current()));
      waiters.add(wake);
    });
  }
}

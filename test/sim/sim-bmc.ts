// The simulated machines' BMCs, as the production power executor (src/power/executor.ts) reaches
// them through the PowerDriver seam. A BMC answers after a short delay, and while faults last it
// may fail a call (the command taking effect or not) or hang past the executor's claim. Replies
// reach the calling process only while it lives (a crashed leader never hears back); the power
// state changes at the BMC whatever becomes of the caller.
//
// The power check: each node's executor says, through its propose path, which attempt of which
// job's step it carries out (the claim it got back); the first BMC call that follows begins that
// execution. Per job, executions must begin in strictly increasing (step, attempt) order: a step
// runs once per claimed attempt, never again once a later attempt or step began, and steps run in
// their order.
import type { PowerState } from '../../src/model/records.js';
import type { Prng } from '../../src/platform/prng.js';
import { PowerDriverError, type BmcTarget, type PowerDriver } from '../../src/power/ipmitool.js';
import type { Scheduler } from './scheduler.js';
import type { SimProcess } from './sim-process.js';

/** One claimed attempt of one step of a power job. */
export interface StepAttempt {
  readonly jobId: string;
  readonly stepIndex: number;
  readonly attempt: number;
}

export interface BmcStats {
  calls: number;
  failed: number;
  hung: number;
  /** Step executions begun (the power check's unit). */
  executions: number;
}

/** What one process incarnation's executor is about to carry out, by machine (host). */
export type Claimed = Map<string, StepAttempt>;

export class SimBmcs {
  readonly stats: BmcStats = { calls: 0, failed: 0, hung: 0, executions: 0 };
  readonly #sched: Scheduler;
  readonly #rng: Prng;
  readonly #fail: (message: string) => void;
  readonly #faulty: () => boolean;
  readonly #power = new Map<string, PowerState>();
  /** Per job, the last execution begun. */
  readonly #last = new Map<string, StepAttempt>();

  /** `faulty()` says whether faults last (calls may fail or hang); `fail` reports a violation. */
  constructor(sched: Scheduler, rng: Prng, faulty: () => boolean, fail: (message: string) => void) {
    this.#sched = sched;
    this.#rng = rng;
    this.#faulty = faulty;
    this.#fail = fail;
  }

  /** The driver one process incarnation's executor uses; `claimed` names what it carries out. */
  driverFor(proc: SimProcess, claimed: Claimed): PowerDriver {
    const call = <T>(target: BmcTarget, effect: () => T): Promise<T> => {
      this.stats.calls++;
      const begun = claimed.get(target.host);
      if (begun !== undefined) {
        claimed.delete(target.host);
        this.#begin(begun);
      }
      return new Promise<T>((resolve, reject) => {
        const faulty = this.#faulty();
        let delay = this.#rng.uniform(1, 8);
        if (faulty && this.#rng.chance(0.08)) {
          this.stats.hung++;
          delay = this.#rng.uniform(1_200, 2_000); // past the claim's lease
        }
        const failed = faulty && this.#rng.chance(0.1);
        // A failed call may still have taken effect at the BMC.
        const value = !failed || this.#rng.chance(0.5) ? effect() : undefined;
        proc.clock.after(delay, () => {
          if (failed) {
            this.stats.failed++;
            reject(new PowerDriverError('unreachable', `simulated BMC ${target.host} did not answer`));
          } else resolve(value as T);
        });
      });
    };
    const switchTo = (host: string, state: PowerState): void => {
      // The machine takes a moment to get there: a settle wait polls.
      this.#sched.after(this.#rng.uniform(2, 30), () => this.#power.set(host, state));
    };
    return {
      status: (target) => call(target, () => this.#power.get(target.host) ?? 'off'),
      powerOn: (target) => call(target, () => switchTo(target.host, 'on')),
      powerOff: (target) => call(target, () => switchTo(target.host, 'off')),
      bootDevice: (target) => call(target, () => undefined),
    };
  }

  #begin(now: StepAttempt): void {
    this.stats.executions++;
    const last = this.#last.get(now.jobId);
    if (
      last !== undefined &&
      (now.stepIndex < last.stepIndex || (now.stepIndex === last.stepIndex && now.attempt <= last.attempt))
    ) {
      this.#fail(
        `power job ${now.jobId}: step ${now.stepIndex} attempt ${now.attempt} began at the BMC after ` +
          `step ${last.stepIndex} attempt ${last.attempt}`,
      );
    }
    this.#last.set(now.jobId, now);
  }
}

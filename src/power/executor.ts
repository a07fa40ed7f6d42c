// The leader's power executor. Only the leader runs it (like src/node/deadline-scanner.ts): it
// looks for due power jobs, claims the next attempt through the log (power.claim: so an attempt
// is carried out at most once per claim, whichever node asks), carries out the step on the BMC
// and proposes the result (power.step). A leader that dies mid-step leaves a claim that lapses
// at claimExpiresMs; the next leader's executor then claims the following attempt and does the
// step again, which is harmless because steps are idempotent (src/power/steps.ts).
import type { Logger } from 'pino';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import type { PowerJob } from '../model/records.js';
import { powerJobDueMs } from '../state/control/power-jobs.js';
import { parseBmcAddress } from '../model/bmc-address.js';
import type { PowerDriver } from './ipmitool.js';
import { runPowerStep, type StepOptions } from './steps.js';
import type { Clock, Cancel } from '../platform/clock.js';

export interface PowerExecutorOptions {
  /** This node's raft id: the claimer named in power.claim. */
  readonly nodeId: string;
  readonly control: ControlState;
  /** Proposes through the leader and resolves with the applied result. */
  readonly propose: (command: ControlCommand) => Promise<ControlResult>;
  readonly isLeader: () => boolean;
  readonly driver: PowerDriver;
  readonly logger: Logger;
  /**
   * How long a claim lasts. It must outlast a step (a few bounded ipmitool runs plus the wait
   * for the power change to show): a claim that lapses while its step still runs lets another
   * leader start the same step, harmless but wasteful.
   */
  readonly leaseMs?: number;
  readonly scanMs?: number;
  readonly step?: Omit<StepOptions, 'uefi' | 'clock'>;
  /** Its timers (src/platform/clock.ts: real ones in a node, virtual ones in the simulation). */
  readonly clock: Clock;
}

export const powerClaimMsDefault = 120_000;
const scanMsDefault = 200;

export class PowerExecutor {
  readonly #o: PowerExecutorOptions;
  /** Machines with a step under way here: one step per machine at a time. */
  readonly #busy = new Set<string>();
  #stopTimer: Cancel | undefined;
  /** Steps carried out by this node, by outcome (for metrics and tests). */
  succeeded = 0;
  failed = 0;

  constructor(options: PowerExecutorOptions) {
    this.#o = options;
  }

  start(): void {
    const { clock } = this.#o;
    this.#stopTimer = clock.every(this.#o.scanMs ?? scanMsDefault, () => this.scan(clock.now()));
  }

  stop(): void {
    this.#stopTimer?.();
    this.#stopTimer = undefined;
  }

  /** Starts every job step that is due at `nowMs` and not already under way here. */
  scan(nowMs: number): void {
    if (!this.#o.isLeader()) return;
    const control = this.#o.control;
    // Collected first: proposing may apply locally and change the set while it is walked.
    const due: PowerJob[] = [];
    for (const id of control.activePowerJobIds()) {
      const job = control.powerJob(id);
      if (job === undefined || this.#busy.has(job.hardwareId)) continue;
      if (control.firstActivePowerJob(job.hardwareId)?.id !== job.id) continue;
      if ((powerJobDueMs(job) ?? Infinity) <= nowMs) due.push(job);
    }
    for (const job of due) {
      this.#busy.add(job.hardwareId);
      this.#carryOut(job)
        .catch((err: unknown) => {
          this.#o.logger.warn(
            { err, jobId: job.id },
            'power step could not be proposed; retried on a later scan',
          );
        })
        .finally(() => this.#busy.delete(job.hardwareId));
    }
  }

  async #carryOut(job: PowerJob): Promise<void> {
    const { nodeId, logger } = this.#o;
    const claim = await this.#o.propose({
      type: 'power.claim',
      jobId: job.id,
      stepIndex: job.stepIndex,
      attempt: job.attempt + 1,
      claimer: nodeId,
      leaseMs: this.#o.leaseMs ?? powerClaimMsDefault,
    });
    // Refused (another node claimed it, or it is not due after all) or the claim ended the job.
    if (claim.type !== 'powerJob' || claim.job.state !== 'RUNNING' || claim.job.claimedBy !== nodeId) return;
    const claimed = claim.job;
    const step = claimed.steps[claimed.stepIndex];
    if (step === undefined) return;
    const log = { jobId: claimed.id, hardwareId: claimed.hardwareId, step, attempt: claimed.attempt };
    let ok = false;
    let message: string;
    let powerState: 'on' | 'off' | undefined;
    const hardware = this.#o.control.hardware(claimed.hardwareId);
    const endpoint = hardware?.bmc === undefined ? undefined : parseBmcAddress(hardware.bmc.address);
    if (hardware?.bmc === undefined || endpoint === undefined) {
      message = `hardware "${claimed.hardwareId}" no longer has a BMC`;
    } else if ('problem' in endpoint) {
      message = `bmc.address: ${endpoint.problem}`;
    } else {
      try {
        const target = {
          host: endpoint.host,
          port: endpoint.port,
          username: hardware.bmc.username,
          password: hardware.bmc.password,
        };
        const outcome = await runPowerStep(this.#o.driver, target, step, {
          ...this.#o.step,
          uefi: hardware.uefi,
          clock: this.#o.clock,
        });
        ok = true;
        message = outcome.message;
        powerState = outcome.powerState;
      } catch (err) {
        message = err instanceof Error ? err.message : String(err);
      }
    }
    if (ok) this.succeeded++;
    else this.failed++;
    // Never the target: it holds the password.
    logger.info({ ...log, ok, message, powerState }, ok ? 'power step done' : 'power step failed');
    await this.#o.propose({
      type: 'power.step',
      jobId: claimed.id,
      stepIndex: claimed.stepIndex,
      attempt: claimed.attempt,
      claimer: nodeId,
      ok,
      message,
      ...(powerState === undefined ? {} : { powerState }),
    });
  }
}

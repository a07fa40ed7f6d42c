// How a power job changes: pure functions from a job, a command and the leader's stamp to a new
// job or a refusal, as transitions.ts is for workflows. The leader's power executor
// (src/power/executor.ts) drives a job with two commands per attempt:
//
//   power.claim  attempt n of step i is taken by node N until stamp + leaseMs. Refused unless it
//                is exactly the next attempt and the job is due: PENDING past its backoff, or
//                RUNNING with the previous claim lapsed (its leader died mid-step). So at most
//                one claim per attempt is ever committed, and an attempt is carried out at most
//                once per claim.
//   power.step   node N's result for attempt n of step i. Recorded only for the claim it answers;
//                a result for a step already recorded is a duplicate (acknowledged, nothing
//                changes), one from a claim that was superseded is stale (refused).
//
// Steps are idempotent (power on when on is a no-op), so a step repeated by the next leader
// after a lapsed claim is harmless. Attempts, lapsed claims included, are bounded per step.
import type { ControlCommand, ControlErrorCode } from './commands.js';
import type { PowerJob, PowerOp, PowerStep } from '../../model/records.js';
import { record } from './immutable.js';
import { headUtf8 } from '../../platform/utf8-text.js';
import {
  attemptMessageBytesMax,
  powerAttemptsMax,
  powerClaimMsMax,
  powerClaimMsMin,
  powerStepsMax,
  retryBackoffBaseMs,
  retryBackoffMaxMs,
} from '../../model/limits.js';

type Command<T extends ControlCommand['type']> = Extract<ControlCommand, { readonly type: T }>;

export type PowerTransition =
  | { readonly kind: 'changed'; readonly job: PowerJob }
  | { readonly kind: 'duplicate'; readonly job: PowerJob }
  | { readonly kind: 'refused'; readonly code: ControlErrorCode; readonly message: string };

/**
 * What each request does, as idempotent steps. A cycle is off then on rather than IPMI's own
 * "power cycle": each half can be repeated safely by a new leader, and on a machine that is off
 * it simply powers it on. Netboot sets the next boot to PXE first, then cycles, so the machine
 * boots from the network whether it was on or off; diskboot only sets the next boot.
 */
export function powerStepsOf(op: PowerOp): readonly PowerStep[] {
  switch (op) {
    case 'on':
      return ['on'];
    case 'off':
      return ['off'];
    case 'cycle':
      return ['off', 'on'];
    case 'status':
      return ['status'];
    case 'netboot':
      return ['bootdev-pxe', 'off', 'on'];
    case 'diskboot':
      return ['bootdev-disk'];
  }
}

/** Attempts per step: a BMC that drops a UDP exchange or is busy usually answers the next try. */
export const powerAttemptsDefault = 3;

/**
 * The power.request that asks for `op` on a machine: its steps and its attempts per step. The API
 * proposes one with a fresh job id for an operator's request (any node may; the leader's executor,
 * src/power/executor.ts, carries the job out); a netbooting workflow's own jobs are made with it
 * when the workflow's commands apply, named after the workflow.
 */
export function powerRequest(jobId: string, hardwareId: string, op: PowerOp): Command<'power.request'> {
  return {
    type: 'power.request',
    jobId,
    hardwareId,
    op,
    steps: powerStepsOf(op),
    maxAttempts: powerAttemptsDefault,
  };
}

function refused(code: ControlErrorCode, message: string): PowerTransition {
  return { kind: 'refused', code, message };
}

export function isFinishedPowerJob(job: PowerJob): boolean {
  return job.state === 'SUCCEEDED' || job.state === 'FAILED';
}

/** Deterministic backoff before attempt n+1 of a step, after attempt n failed. */
export function powerRetryBackoffMs(failedAttempt: number): number {
  return Math.min(retryBackoffBaseMs * 2 ** Math.max(failedAttempt - 1, 0), retryBackoffMaxMs);
}

/** The domain rules of a request, before it becomes a job. */
export function powerRequestProblem(command: Command<'power.request'>): string | undefined {
  if (command.steps.length === 0 || command.steps.length > powerStepsMax) {
    return `steps: must hold 1-${powerStepsMax} steps, got ${command.steps.length}`;
  }
  if (!Number.isSafeInteger(command.maxAttempts) || command.maxAttempts < 1) {
    return `maxAttempts: must be 1-${powerAttemptsMax}, got ${command.maxAttempts}`;
  }
  if (command.maxAttempts > powerAttemptsMax) {
    return `maxAttempts: must be 1-${powerAttemptsMax}, got ${command.maxAttempts}`;
  }
  return undefined;
}

export function createPowerJob(command: Command<'power.request'>, nowMs: number): PowerJob {
  return record<PowerJob>({
    id: command.jobId,
    hardwareId: command.hardwareId,
    op: command.op,
    steps: Object.freeze([...command.steps]),
    state: 'PENDING',
    stepIndex: 0,
    attempt: 0,
    maxAttempts: command.maxAttempts,
    createdMs: nowMs,
    updatedMs: nowMs,
    finishedMs: undefined,
    claimedBy: undefined,
    claimExpiresMs: undefined,
    notBeforeMs: undefined,
    powerState: undefined,
    message: undefined,
  });
}

/** When the job may next be claimed (for the executor), or undefined when it is finished. */
export function powerJobDueMs(job: PowerJob): number | undefined {
  switch (job.state) {
    case 'PENDING':
      return job.notBeforeMs ?? 0;
    case 'RUNNING':
      return job.claimExpiresMs ?? 0;
    default:
      return undefined;
  }
}

/**
 * A claim of the job's next attempt. `first` says whether the job is the oldest unfinished one
 * of its machine (jobs of one machine run one at a time, in order).
 */
export function claimPowerJob(
  job: PowerJob,
  command: Command<'power.claim'>,
  first: boolean,
  nowMs: number,
): PowerTransition {
  const what = `claim of attempt ${command.attempt} of step ${command.stepIndex} of power job "${job.id}"`;
  if (isFinishedPowerJob(job)) return refused('E_STALE_ATTEMPT', `${what}: the job is ${job.state}`);
  if (!first) {
    return refused('E_NOT_DUE', `${what}: an older job of hardware "${job.hardwareId}" runs first`);
  }
  if (!Number.isSafeInteger(command.leaseMs) || command.leaseMs < powerClaimMsMin) {
    return refused(
      'E_INVALID',
      `leaseMs: must be ${powerClaimMsMin}-${powerClaimMsMax}, got ${command.leaseMs}`,
    );
  }
  if (command.leaseMs > powerClaimMsMax) {
    return refused(
      'E_INVALID',
      `leaseMs: must be ${powerClaimMsMin}-${powerClaimMsMax}, got ${command.leaseMs}`,
    );
  }
  if (command.claimer === '') return refused('E_INVALID', 'claimer: is empty');
  if (command.stepIndex !== job.stepIndex || command.attempt !== job.attempt + 1) {
    return refused(
      'E_STALE_ATTEMPT',
      `${what}: the next is attempt ${job.attempt + 1} of step ${job.stepIndex}`,
    );
  }
  const due = powerJobDueMs(job) ?? 0;
  if (nowMs < due) {
    const why = job.state === 'RUNNING' ? `"${job.claimedBy ?? ''}" holds it` : 'the retry waits';
    return refused('E_NOT_DUE', `${what}: ${why} until ${due} (now ${nowMs})`);
  }
  if (job.state === 'RUNNING' && job.attempt >= job.maxAttempts) {
    // The last allowed attempt's leader vanished: the job ends here rather than stay RUNNING.
    const message = `step ${job.stepIndex} (${job.steps[job.stepIndex] ?? '?'}) gave up after ${job.attempt} attempts: the claim of node "${job.claimedBy ?? ''}" lapsed without a result`;
    return { kind: 'changed', job: finish(job, 'FAILED', nowMs, message) };
  }
  return {
    kind: 'changed',
    job: record<PowerJob>({
      ...job,
      state: 'RUNNING',
      attempt: command.attempt,
      updatedMs: nowMs,
      claimedBy: command.claimer,
      claimExpiresMs: nowMs + command.leaseMs,
      notBeforeMs: undefined,
    }),
  };
}

/** A node's result for the attempt it claimed. */
export function recordPowerStep(
  job: PowerJob,
  command: Command<'power.step'>,
  nowMs: number,
): PowerTransition {
  const what = `result of attempt ${command.attempt} of step ${command.stepIndex} of power job "${job.id}"`;
  const current = command.stepIndex === job.stepIndex && command.attempt === job.attempt;
  if (command.stepIndex < job.stepIndex || (isFinishedPowerJob(job) && current)) {
    // The step was recorded already (this result or another attempt's): nothing to do again.
    return { kind: 'duplicate', job };
  }
  if (!current || job.state !== 'RUNNING') {
    const latest = job.attempt === 0 ? 'none yet' : `attempt ${job.attempt} is ${job.state}`;
    return refused(
      'E_STALE_ATTEMPT',
      `${what} is not the running attempt (${latest}, step ${job.stepIndex})`,
    );
  }
  if (command.claimer !== job.claimedBy) {
    return refused(
      'E_STALE_ATTEMPT',
      `${what}: claimed by "${job.claimedBy ?? ''}", not "${command.claimer}"`,
    );
  }
  const message = headUtf8(command.message, attemptMessageBytesMax);
  const powerState = command.powerState ?? job.powerState;
  if (command.ok) {
    const next = job.stepIndex + 1;
    const done = next >= job.steps.length;
    const base = { ...job, powerState, message, stepIndex: next, attempt: 0 };
    return {
      kind: 'changed',
      job: done
        ? finish(record<PowerJob>(base), 'SUCCEEDED', nowMs, message)
        : record<PowerJob>({
            ...base,
            state: 'PENDING',
            updatedMs: nowMs,
            claimedBy: undefined,
            claimExpiresMs: undefined,
            notBeforeMs: undefined,
          }),
    };
  }
  if (job.attempt >= job.maxAttempts) {
    const plural = job.attempt === 1 ? '' : 's';
    const why = `step ${job.stepIndex} (${job.steps[job.stepIndex] ?? '?'}) gave up after ${job.attempt} attempt${plural}: ${message}`;
    return { kind: 'changed', job: finish(record<PowerJob>({ ...job, powerState }), 'FAILED', nowMs, why) };
  }
  return {
    kind: 'changed',
    job: record<PowerJob>({
      ...job,
      state: 'PENDING',
      updatedMs: nowMs,
      claimedBy: undefined,
      claimExpiresMs: undefined,
      notBeforeMs: nowMs + powerRetryBackoffMs(job.attempt),
      powerState,
      message,
    }),
  };
}

function finish(job: PowerJob, state: 'SUCCEEDED' | 'FAILED', nowMs: number, message: string): PowerJob {
  return record<PowerJob>({
    ...job,
    state,
    updatedMs: nowMs,
    finishedMs: nowMs,
    claimedBy: undefined,
    claimExpiresMs: undefined,
    notBeforeMs: undefined,
    message: headUtf8(message, attemptMessageBytesMax),
  });
}

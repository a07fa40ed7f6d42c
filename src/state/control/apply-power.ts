// Power jobs at apply (docs/decisions/0015-power-control.md): a request checked against the
// machine and the limits, each job's claim and steps stored, and a machine's finished jobs
// dropped, oldest first, to keep room. The job's own rules are power-jobs.ts.
import { powerJobsActivePerHardwareMax, powerJobsKeptPerHardware, powerJobsMax } from '../../model/limits.js';
import type { PowerJob } from '../../model/records.js';
import type { ControlResult } from './commands.js';
import { failure, unreachable, type Command, type Refusal } from './apply-outcome.js';
import { indexPowerJob, unindexPowerJob } from './control-indexes.js';
import type { ControlTables } from './control-tables.js';
import {
  claimPowerJob,
  createPowerJob,
  isFinishedPowerJob,
  powerRequest,
  powerRequestProblem,
  recordPowerStep,
  type PowerTransition,
} from './power-jobs.js';
import { idProblem } from './validate.js';

export function requestPower(
  t: ControlTables,
  command: Command<'power.request'>,
  nowMs: number,
): ControlResult {
  const refusal = powerRequestRefusal(t, command);
  if (refusal !== undefined) return refusal;
  const jobs = t.powerJobsOf(command.hardwareId);
  // Keep room for this job among the machine's kept ones: the oldest finished go first.
  const finished = jobs.filter(isFinishedPowerJob);
  const drop = finished.slice(0, Math.max(finished.length - (powerJobsKeptPerHardware - 1), 0));
  for (const job of drop) dropPowerJob(t, job);
  return storePowerJob(t, createPowerJob(command, nowMs));
}

/** Why a power request would be refused, checked without changing anything. */
export function powerRequestRefusal(
  t: ControlTables,
  command: Command<'power.request'>,
): Refusal | undefined {
  const problem = idProblem('jobId', command.jobId) ?? powerRequestProblem(command);
  if (problem !== undefined) return failure('E_INVALID', problem);
  if (t.powerJobs.has(command.jobId)) {
    return failure('E_EXISTS', `power job "${command.jobId}" already exists`);
  }
  const hardware = t.hardware.get(command.hardwareId);
  if (hardware === undefined)
    return failure('E_NOT_FOUND', `hardware "${command.hardwareId}" does not exist`);
  if (hardware.bmc === undefined) {
    return failure(
      'E_CONFLICT',
      `hardware "${hardware.id}" has no BMC; add one (hardware create --replace ... --bmc ipmi://HOST:PORT)`,
    );
  }
  const jobs = t.powerJobsOf(hardware.id);
  const active = jobs.filter((job) => !isFinishedPowerJob(job));
  if (active.length >= powerJobsActivePerHardwareMax) {
    return failure(
      'E_CONFLICT',
      `hardware "${hardware.id}" already has ${active.length} unfinished power jobs; wait for them`,
    );
  }
  const finished = jobs.filter(isFinishedPowerJob);
  const drop = Math.max(finished.length - (powerJobsKeptPerHardware - 1), 0);
  if (t.powerJobs.size - drop >= powerJobsMax) {
    return failure('E_CONFLICT', `the state holds the maximum of ${powerJobsMax} power jobs`);
  }
  return undefined;
}

/** power.claim: the executor takes the job, if it is the machine's oldest unfinished one. */
export function claimPower(t: ControlTables, command: Command<'power.claim'>, nowMs: number): ControlResult {
  return onPowerJob(t, command.jobId, (job) =>
    claimPowerJob(job, command, t.firstActivePowerJob(job.hardwareId)?.id === job.id, nowMs),
  );
}

/** power.step: the executor's report of one step of the job. */
export function recordPower(t: ControlTables, command: Command<'power.step'>, nowMs: number): ControlResult {
  return onPowerJob(t, command.jobId, (job) => recordPowerStep(job, command, nowMs));
}

/** The power job a netbooting workflow makes at its start ('netboot') or success ('diskboot'). */
export function workflowPowerJob(
  workflowId: string,
  hardwareId: string,
  op: 'netboot' | 'diskboot',
): Command<'power.request'> {
  return powerRequest(`${workflowId}-${op}`, hardwareId, op);
}

/** Drops a job and its index entries (its machine keeps room, or is deleted). */
export function dropPowerJob(t: ControlTables, job: PowerJob): void {
  t.powerJobs.delete(job.id);
  unindexPowerJob(t, job);
}

function onPowerJob(t: ControlTables, id: string, change: (job: PowerJob) => PowerTransition): ControlResult {
  const job = t.powerJobs.get(id);
  if (job === undefined) return failure('E_NOT_FOUND', `power job "${id}" does not exist`);
  const transition = change(job);
  switch (transition.kind) {
    case 'refused':
      return failure(transition.code, transition.message);
    case 'duplicate':
      return { type: 'powerJobDuplicate', job: transition.job };
    case 'changed':
      return storePowerJob(t, transition.job);
    default:
      return unreachable(transition);
  }
}

function storePowerJob(t: ControlTables, job: PowerJob): ControlResult {
  t.powerJobs.set(job.id, job);
  indexPowerJob(t, job);
  t.changed.powerJobs.push(job);
  return { type: 'powerJob', job };
}

// Workflows at apply: created, moved by their transitions (transitions.ts) and stored with their
// events (commit), retried, cancelled, deleted and collected. A stored change tells the machine
// lifecycle, turns PXE off once a machine is installed, and settles a race whose lane won.
// Allocation, alternates and the start of a race are apply-allocation.ts.
import { workflowEventsMax, workflowOutputTailBytesMax, workflowsMax } from '../../model/limits.js';
import {
  isTerminal,
  type AlternatePolicy,
  type RaceLane,
  type Workflow,
  type WorkflowEvent,
} from '../../model/records.js';
import { nextAction } from '../../workflow/rules.js';
import { stateVersionBoundedState } from '../versions.js';
import { awaitsAlternate } from './allocation.js';
import { setAllowPXE, unknownWorker } from './apply-hardware.js';
import { deleted, failure, unreachable, type Command, type Refusal } from './apply-outcome.js';
import { powerRequestRefusal, requestPower, workflowPowerJob } from './apply-power.js';
import type { CollectedWorkflow, ControlResult } from './commands.js';
import { indexWorkflow } from './control-indexes.js';
import type { ControlTables } from './control-tables.js';
import { EventLog } from './event-log.js';
import { deepFreeze, record } from './immutable.js';
import { idProblem, specProblem } from './validate.js';
import {
  cancelWorkflow,
  createWorkflow as workflowCreated,
  recordResult,
  retryWorkflow,
  startAttempt,
  type Allocated,
  type Transition,
} from './transitions.js';

export function createWorkflow(
  t: ControlTables,
  command: Command<'workflow.create'>,
  nowMs: number,
  allocated?: Allocated,
): ControlResult {
  const refusal = createRefusal(t, command, allocated);
  if (refusal !== undefined) return refusal;
  // The netboot job is made in the same entry; if it cannot be, neither is the workflow.
  const netboot =
    command.netboot === true ? workflowPowerJob(command.id, command.hardwareId, 'netboot') : undefined;
  if (netboot !== undefined) {
    const refusal = powerRequestRefusal(t, netboot);
    if (refusal !== undefined) return failure(refusal.code, `cannot netboot the machine: ${refusal.message}`);
  }
  deepFreeze(command.spec);
  deepFreeze(command.hardwareMap);
  const result = commit(t, workflowCreated(command, nowMs, allocated), nowMs);
  if (netboot !== undefined) requestPower(t, netboot, nowMs);
  return result;
}

/** Why a workflow.create would be refused (but for its netboot job), or undefined. */
export function createRefusal(
  t: ControlTables,
  command: Command<'workflow.create'>,
  allocated?: Allocated,
): Refusal | undefined {
  const refusal = newWorkflowRefusal(t, command.id, command.spec);
  if (refusal !== undefined) return refusal;
  if (!t.hardware.has(command.hardwareId)) {
    return failure('E_NOT_FOUND', `hardware "${command.hardwareId}" does not exist`);
  }
  const rendered = renderedRefusal(t, command.template, command);
  if (rendered !== undefined) return rendered;
  // One machine, one owner (invariant 9), and only from a state the lifecycle allows.
  const taken =
    allocated?.release === true
      ? t.machines.releaseRefusal(command.hardwareId)
      : t.machines.provisionRefusal(command.hardwareId);
  if (taken !== undefined) return failure('E_CONFLICT', taken);
  return roomRefusal(t, 1);
}

/** Why no workflow may be made with this id and spec: a bad one, or the id taken. */
export function newWorkflowRefusal(
  t: ControlTables,
  id: string,
  spec: Workflow['spec'],
): Refusal | undefined {
  const problem = idProblem('id', id) ?? specProblem(spec);
  if (problem !== undefined) return failure('E_INVALID', problem);
  return t.workflows.has(id) ? failure('E_EXISTS', `workflow "${id}" already exists`) : undefined;
}

/** Why a workflow rendered from this template would be refused: the template, or its workers. */
export function renderedRefusal(
  t: ControlTables,
  templateName: string,
  wf: Pick<Command<'workflow.create'>, 'spec' | 'templateVersion'>,
): Refusal | undefined {
  const template = t.templates.get(templateName);
  if (template === undefined) return failure('E_NOT_FOUND', `template "${templateName}" does not exist`);
  if (template.version !== wf.templateVersion) {
    return failure(
      'E_VERSION',
      `template changed since rendering; retry (template "${template.name}" is at version ${template.version}, the workflow was rendered from version ${wf.templateVersion})`,
    );
  }
  const unknown = unknownWorker(t, wf.spec.tasks);
  return unknown === undefined ? undefined : failure('E_INVALID', unknown);
}

/** Refused when `count` more workflows would pass the limit. */
export function roomRefusal(t: ControlTables, count: number): Refusal | undefined {
  if (t.workflows.size + count <= workflowsMax) return undefined;
  return failure(
    'E_CONFLICT',
    `the state holds the maximum of ${workflowsMax} workflows; delete finished ones`,
  );
}

/** Applies a change to the workflow with this id, or refuses when there is none. */
export function onWorkflow(
  t: ControlTables,
  id: string,
  change: (wf: Workflow) => Transition,
  nowMs: number,
): ControlResult {
  const wf = t.workflows.get(id);
  if (wf === undefined) return failure('E_NOT_FOUND', `workflow "${id}" does not exist`);
  return commit(t, change(wf), nowMs);
}

/** Stores a workflow's change with its events, and what follows from it (see the file's head). */
export function commit(t: ControlTables, transition: Transition, nowMs: number): ControlResult {
  switch (transition.kind) {
    case 'refused':
      return failure(transition.code, transition.message);
    case 'duplicate':
      return { type: 'duplicate', ...transition.outcome };
    case 'changed':
      break;
    default:
      return unreachable(transition);
  }
  const wf = transition.workflow;
  const before = t.workflows.get(wf.id);
  t.workflows.set(wf.id, wf);
  indexWorkflow(t, wf);
  if (awaitsAlternate(wf)) t.awaitingAlternate.add(wf.id);
  else t.awaitingAlternate.delete(wf.id);
  t.changed.workflows.set(wf.id, wf);
  t.machines.follow(before, wf, nowMs);
  let log = t.events.get(wf.id);
  if (log === undefined) {
    log = new EventLog(workflowEventsMax);
    t.events.set(wf.id, log);
  }
  for (const draft of transition.events) {
    const event = record<WorkflowEvent>({
      seq: ++t.lastEventSeq,
      workflowId: wf.id,
      stampMs: nowMs,
      ...draft,
    });
    log.push(event);
    t.changed.events.push(event);
  }
  // Builds of version 1 keep every tail, so the budget holds only once none can be applying.
  if (t.clusterVersion >= stateVersionBoundedState) log.cutOutputTails(workflowOutputTailBytesMax);
  // A provisioned machine must not boot into the installer again (Tinkerbell's allowPXE). A
  // released one stays in the boot OS, ready for its next workflow: PXE stays on.
  const installed = wf.state === 'SUCCESS' && before?.state !== 'SUCCESS' && wf.release !== true;
  if (installed && t.hardware.has(wf.hardwareId)) {
    setAllowPXE(t, wf.hardwareId, false, nowMs);
    // A netbooted machine boots its disk next; best effort: a machine whose BMC was removed
    // meanwhile still has PXE off, so it falls through to its disk anyway.
    if (wf.netboot === true) {
      const diskboot = workflowPowerJob(wf.id, wf.hardwareId, 'diskboot');
      if (powerRequestRefusal(t, diskboot) === undefined) requestPower(t, diskboot, nowMs);
    }
  }
  if (wf.race !== undefined && wf.state === 'SUCCESS' && before?.state !== 'SUCCESS') raceWon(t, wf, nowMs);
  if (transition.outcome !== undefined) return { type: 'attempt', ...transition.outcome };
  return { type: 'workflow', workflow: t.workflows.get(wf.id) ?? wf };
}

/**
 * A race's lane succeeded (docs/decisions/0037): the request records the winner, and the rival
 * is cancelled (its running action stopped; its machine released) or, failed and awaiting
 * another machine, given up. Called once the lane's success is committed.
 */
function raceWon(t: ControlTables, lane: Workflow, nowMs: number): void {
  const race = lane.race;
  const request = race === undefined ? undefined : t.workflows.get(race.request);
  if (race === undefined || request?.race === undefined || request.race.winner !== undefined) return;
  const where = `workflow ${lane.id} succeeded first, on ${lane.hardwareId}`;
  const decided = `race won: ${where}`;
  // The lane is stored already: when it is the request, this is it.
  const won = record<Workflow>({
    ...request,
    race: record<RaceLane>({ ...request.race, winner: lane.id }),
  });
  commit(t, { kind: 'changed', workflow: won, events: [{ type: 'workflow.race', message: decided }] }, nowMs);
  // Read after: when the winner is the rival lane, its rival is the request just stored.
  const rival = t.workflows.get(race.rival);
  if (rival === undefined) return;
  const lost = `lost the race: ${where}`;
  if (!isTerminal(rival.state)) {
    const cancelled = cancelWorkflow(rival, lost, nowMs);
    if (cancelled.kind !== 'changed') return;
    const loser = record<Workflow>({
      ...cancelled.workflow,
      race: record<RaceLane>({ ...(cancelled.workflow.race ?? race), lostTo: lane.id }),
    });
    commit(t, { ...cancelled, workflow: loser }, nowMs);
  } else giveUpAlternate(t, rival, lost, nowMs);
}

/** A failed lane awaiting another machine gives up: its race is over. */
function giveUpAlternate(t: ControlTables, lane: Workflow, why: string, nowMs: number): void {
  if (!awaitsAlternate(lane) || lane.alternate === undefined) return;
  const gaveUp = record<AlternatePolicy>({ ...lane.alternate, gaveUp: why });
  const done = record<Workflow>({ ...lane, alternate: gaveUp });
  commit(t, { kind: 'changed', workflow: done, events: [{ type: 'workflow.race', message: why }] }, nowMs);
}

/** workflow.cancel: an operator's cancel ends the request, so a race's rival lane ends too. */
export function cancel(t: ControlTables, command: Command<'workflow.cancel'>, nowMs: number): ControlResult {
  const cancelled = onWorkflow(t, command.id, (wf) => cancelWorkflow(wf, command.message, nowMs), nowMs);
  if (cancelled.type === 'workflow') cancelRival(t, cancelled.workflow, nowMs);
  return cancelled;
}

/** An operator cancelled a race's lane: the request ends, so its rival lane ends too. */
function cancelRival(t: ControlTables, lane: Workflow, nowMs: number): void {
  const rival = lane.race === undefined ? undefined : t.workflows.get(lane.race.rival);
  if (rival === undefined) return;
  const why = `cancelled with its rival lane ${lane.id}: ${lane.message ?? ''}`;
  if (!isTerminal(rival.state)) commit(t, cancelWorkflow(rival, why, nowMs), nowMs);
  else giveUpAlternate(t, rival, why, nowMs);
}

/** workflow.retry, once its machines are there and free. */
export function retry(t: ControlTables, command: Command<'workflow.retry'>, nowMs: number): ControlResult {
  return onWorkflow(
    t,
    command.id,
    (wf) => {
      // Hardware may have been deleted while the workflow was finished.
      const missing = t.hardware.has(wf.hardwareId)
        ? unknownWorker(t, wf.spec.tasks)
        : `hardware "${wf.hardwareId}" no longer exists`;
      if (missing !== undefined)
        return { kind: 'refused', code: 'E_CONFLICT', message: `cannot retry: ${missing}` };
      const taken = isTerminal(wf.state) ? t.machines.provisionRefusal(wf.hardwareId) : undefined;
      if (taken !== undefined)
        return { kind: 'refused', code: 'E_CONFLICT', message: `cannot retry: ${taken}` };
      return retryWorkflow(wf, command.fromStart);
    },
    nowMs,
  );
}

/** Records the attempt's result; with startNext, also starts the workflow's next action. */
export function recordAttemptResult(
  t: ControlTables,
  command: Command<'attempt.result'>,
  nowMs: number,
): ControlResult {
  const result = onWorkflow(t, command.workflowId, (wf) => recordResult(wf, command, nowMs), nowMs);
  if (command.startNext !== true || result.type !== 'attempt') return result;
  const started = startNext(t, command, nowMs);
  if (started?.type !== 'attempt') return result;
  const { actionIndex, attempt, deadlineMs } = started;
  return {
    ...result,
    started: deadlineMs === undefined ? { actionIndex, attempt } : { actionIndex, attempt, deadlineMs },
  };
}

/**
 * After a recorded result: starts the workflow's next action if it runs on the reporting
 * worker, is due by this stamp and the worker may run workflows, exactly as an attempt.start
 * from that worker's session would, and returns that start's result. Otherwise nothing: the
 * session proposes the start later.
 */
function startNext(
  t: ControlTables,
  report: Command<'attempt.result'>,
  nowMs: number,
): ControlResult | undefined {
  const wf = t.workflows.get(report.workflowId);
  if (wf === undefined || isTerminal(wf.state)) return undefined;
  if (t.hardware.get(report.workerId)?.netboot.allowWorkflow === false) return undefined;
  const next = nextAction(wf);
  if (next === null || next.workerId !== report.workerId) return undefined;
  if ((next.notBeforeMs ?? 0) > nowMs) return undefined;
  const start = {
    type: 'attempt.start',
    workflowId: wf.id,
    actionIndex: next.index,
    attempt: next.attempt,
    workerId: report.workerId,
  } as const;
  return commit(t, startAttempt(wf, start, nowMs), nowMs);
}

export function deleteWorkflow(t: ControlTables, id: string): ControlResult {
  const wf = t.workflows.get(id);
  if (wf === undefined) return failure('E_NOT_FOUND', `workflow "${id}" does not exist`);
  if (!isTerminal(wf.state)) {
    return failure('E_CONFLICT', `workflow "${id}" is ${wf.state}; cancel it before deleting it`);
  }
  dropFinishedWorkflow(t, id);
  return deleted;
}

/**
 * workflow.gc: deletes each listed workflow that is finished at the listed finish time, in the
 * command's order; skips the others (gone, running again after a retry, or finished again
 * since the collector chose it), so what goes is exactly what the collector archived.
 */
export function collect(t: ControlTables, workflows: readonly CollectedWorkflow[]): ControlResult {
  const ids: string[] = [];
  for (const { id, finishedMs } of workflows) {
    const wf = t.workflows.get(id);
    if (wf === undefined || !isTerminal(wf.state) || (wf.finishedMs ?? 0) !== finishedMs) continue;
    dropFinishedWorkflow(t, id);
    ids.push(id);
  }
  t.changed.collected.push(...ids);
  return { type: 'collected', ids };
}

function dropFinishedWorkflow(t: ControlTables, id: string): void {
  t.workflows.delete(id);
  t.awaitingAlternate.delete(id);
  // A finished workflow is in neither the active set nor the per-worker index.
  t.events.delete(id);
  t.changed.workflows.set(id, undefined);
}

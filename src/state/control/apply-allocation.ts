// Allocation at apply (docs/decisions/0030): workflow.allocate takes a machine the selector
// matches as this entry finds the fleet, or two for a race (0037); workflow.alternate moves a
// failed workflow to another machine, or gives its policy up. The choosing is allocation.ts.
import type { Workflow } from '../../model/records.js';
import { alternateOf, allocate as allocated, type Allocation } from './allocation.js';
import { unknownWorker } from './apply-hardware.js';
import { failure, type Command } from './apply-outcome.js';
import { commit, createRefusal, createWorkflow, roomRefusal } from './apply-workflows.js';
import type { ControlResult } from './commands.js';
import type { ControlTables } from './control-tables.js';
import { deepFreeze } from './immutable.js';
import { raceTook, raceTriedOf } from './race.js';
import { alternateWorkflow, type Allocated } from './transitions.js';

/** workflow.allocate (docs/decisions/0030): the machine chosen at apply, or two for a race. */
export function allocate(
  t: ControlTables,
  command: Command<'workflow.allocate'>,
  nowMs: number,
): ControlResult {
  const allocation = allocated(
    command,
    (id) => t.hardware.get(id),
    () => t.hardware.values(),
  );
  if (allocation.kind === 'refused') return failure(allocation.code, allocation.message);
  if (allocation.rival !== undefined) return startRace(t, command, allocation, nowMs);
  const attempts = command.alternateAttempts;
  const alternate = attempts === undefined ? undefined : { attempts, tried: [allocation.create.hardwareId] };
  return createWorkflow(t, allocation.create, nowMs, { selector: allocation.selector, alternate });
}

/**
 * workflow.allocate under the race policy (docs/decisions/0037): both lanes created in this one
 * entry, each taking its machine, or neither (the rival's problems are checked first).
 */
export function startRace(
  t: ControlTables,
  command: Command<'workflow.allocate'>,
  allocation: Extract<Allocation, { readonly kind: 'allocated' }>,
  nowMs: number,
): ControlResult {
  const { create, rival } = allocation;
  const attempts = command.alternateAttempts;
  if (rival === undefined || attempts === undefined || attempts < 2 || command.netboot === true) {
    return failure('E_INVALID', 'race: alternateAttempts of at least 2 (both lanes included), no netboot');
  }
  const refusal = createRefusal(t, create) ?? createRefusal(t, rival) ?? roomRefusal(t, 2);
  if (refusal !== undefined) return refusal;
  const tried = Object.freeze([create.hardwareId, rival.hardwareId]);
  const lane = (own: Command<'workflow.create'>, other: string, request?: readonly string[]): Allocated => ({
    selector: allocation.selector,
    alternate: { attempts, tried: [own.hardwareId] },
    race: { request: create.id, rival: other, ...(request === undefined ? {} : { tried: request }) },
  });
  const first = createWorkflow(t, create, nowMs, lane(create, rival.id, tried));
  if (first.type === 'error') return first;
  const second = createWorkflow(t, rival, nowMs, lane(rival, create.id));
  // Checked as the first was (id, template, machine): a refusal here is a bug, not input.
  if (second.type === 'error') throw new Error(`race: the rival lane was refused: ${second.message}`);
  const request = t.workflows.get(create.id);
  if (request === undefined) return first;
  const message =
    `race started: workflow ${create.id} on ${create.hardwareId}, workflow ${rival.id} on ` +
    `${rival.hardwareId}, both ready and matching ${allocation.selector}; at most ${attempts} machines`;
  return commit(
    t,
    { kind: 'changed', workflow: request, events: [{ type: 'workflow.race', message }] },
    nowMs,
  );
}

/** workflow.alternate: the leader's re-allocation of a failed workflow, or its policy given up. */
export function alternate(
  t: ControlTables,
  command: Command<'workflow.alternate'>,
  nowMs: number,
): ControlResult {
  const wf = t.workflows.get(command.id);
  if (wf === undefined) return failure('E_NOT_FOUND', `workflow "${command.id}" does not exist`);
  const request = wf.race === undefined ? undefined : t.workflows.get(wf.race.request);
  const decided = alternateOf(
    command,
    wf,
    (id) => t.hardware.get(id),
    () => t.hardware.values(),
    wf.race === undefined ? undefined : raceTriedOf(wf, request),
  );
  if (decided.kind === 'refused') return failure(decided.code, decided.message);
  if (decided.kind === 'moved') deepFreeze(decided.spec);
  const next = decided.kind === 'moved' ? decided : undefined;
  if (next !== undefined) {
    const unknown = unknownWorker(t, next.spec.tasks);
    if (unknown !== undefined) return failure('E_INVALID', unknown);
  }
  const moved = alternateWorkflow(wf, next, decided.why);
  if (next === undefined || request === undefined || moved.kind !== 'changed') return commit(t, moved, nowMs);
  // A race's lane moved: the request keeps every machine either lane took, in order.
  const took = (r: Workflow): Workflow => raceTook(r, next.hardwareId);
  if (request.id === wf.id) return commit(t, { ...moved, workflow: took(moved.workflow) }, nowMs);
  const result = commit(t, moved, nowMs);
  commit(t, { kind: 'changed', workflow: took(request), events: [] }, nowMs);
  return result;
}

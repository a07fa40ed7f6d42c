// How a workflow changes: pure functions from a workflow, a command and the leader's stamp to a
// new workflow and the events it emits, or a refusal. They never mutate their input: records are
// immutable, so a new version shares the spec and the untouched action statuses with the old.
//
// Attempts (invariant 3). An action's `attempt` counts its starts and is never reused. A report
// (attempt.result or attempt.lost) is about attempt n of action i from worker w, and is one of
// these (classifyReport in src/workflow/rules.ts decides which; the node's screen asks it too):
//   - n is the action's current attempt, it is RUNNING and w ran it: recorded.
//   - n is the current attempt but it is no longer RUNNING: it was already recorded (by a
//     result, a timeout, a loss or a cancel), so the report is a duplicate: acknowledged, ignored.
//     A late result after a timeout is such a duplicate: the timeout was the attempt's outcome.
//   - n was never started, is older than the current attempt, or w did not run it: stale, refused.
import type { AttemptOutcome, ControlCommand, ControlErrorCode } from './commands.js';
import type {
  ActionStatus,
  AlternatePolicy,
  RaceLane,
  RenderedTemplate,
  Workflow,
  WorkflowEvent,
  WorkflowState,
} from '../../model/records.js';
import { isTerminal } from '../../model/records.js';
import {
  actionPositions,
  classifyReport,
  cutReport,
  nextAction,
  retryBackoffMs,
  type ActionPosition,
} from '../../workflow/rules.js';
import { attemptMessageBytesMax } from '../../model/limits.js';
import { record, type Loose } from './immutable.js';
import { headUtf8 } from '../../platform/utf8-text.js';

type Command<T extends ControlCommand['type']> = Extract<ControlCommand, { readonly type: T }>;

/** An event before the state numbers, stamps and files it. */
export type EventDraft = Omit<WorkflowEvent, 'seq' | 'workflowId' | 'stampMs'>;

export type Transition =
  | {
      readonly kind: 'changed';
      readonly workflow: Workflow;
      readonly events: readonly EventDraft[];
      /** For attempt commands: where the attempt stands now. */
      readonly outcome?: AttemptOutcome;
    }
  | { readonly kind: 'duplicate'; readonly outcome: AttemptOutcome }
  | { readonly kind: 'refused'; readonly code: ControlErrorCode; readonly message: string };

function refused(code: ControlErrorCode, message: string): Transition {
  return { kind: 'refused', code, message };
}

function label(position: ActionPosition): string {
  return `"${position.task.name}/${position.action.name}"`;
}

/** A new version of the workflow with some fields and one action's status replaced. */
function revise(
  wf: Workflow,
  fields: Partial<Loose<Pick<Workflow, 'state' | 'startedMs' | 'finishedMs' | 'deadlineMs' | 'message'>>>,
  index?: number,
  status?: ActionStatus,
): Workflow {
  let actions = wf.actions;
  if (index !== undefined && status !== undefined) {
    const copy = actions.slice();
    copy[index] = status;
    actions = Object.freeze(copy);
  }
  return record<Workflow>({ ...wf, ...fields, actions });
}

function outcome(wf: Workflow, index: number, attempt: number): AttemptOutcome {
  const status = wf.actions[index];
  return record<AttemptOutcome>({
    workflowId: wf.id,
    actionIndex: index,
    attempt,
    actionState: status?.state ?? 'PENDING',
    workflowState: wf.state,
    deadlineMs: status?.state === 'RUNNING' ? status.deadlineMs : undefined,
    notBeforeMs: status?.state === 'PENDING' ? status.notBeforeMs : undefined,
  });
}

/** How a workflow.allocate's machine was chosen, kept with the workflow. */
export interface Allocated {
  readonly selector?: string | undefined;
  readonly alternate?: AlternatePolicy | undefined;
  /** Under the race policy: the lane this workflow is (docs/decisions/0037). */
  readonly race?: RaceLane | undefined;
  /** A release workflow (docs/decisions/0036). */
  readonly release?: true | undefined;
}

/** A new workflow; `allocated` when its machine was allocated by a selector (workflow.allocate). */
export function createWorkflow(
  command: Command<'workflow.create'>,
  nowMs: number,
  allocated?: Allocated,
): Transition {
  const positions = actionPositions(command.spec);
  const pending: ActionStatus = Object.freeze({ state: 'PENDING', attempt: 0 });
  const workflow = record<Workflow>({
    id: command.id,
    template: command.template,
    hardwareId: command.hardwareId,
    hardwareMap: command.hardwareMap,
    spec: command.spec,
    state: 'PENDING',
    createdMs: nowMs,
    startedMs: undefined,
    finishedMs: undefined,
    deadlineMs: undefined,
    actions: Object.freeze(positions.map(() => pending)),
    message: undefined,
    netboot: command.netboot === true ? true : undefined,
    selector: allocated?.selector,
    alternate: allocated?.alternate,
    race: allocated?.race,
    release: allocated?.release,
  });
  return { kind: 'changed', workflow, events: [{ type: 'workflow.created' }] };
}

export function startAttempt(wf: Workflow, command: Command<'attempt.start'>, nowMs: number): Transition {
  const what = `attempt ${command.attempt} of action ${command.actionIndex} of workflow "${wf.id}"`;
  if (isTerminal(wf.state)) return refused('E_STALE_ATTEMPT', `${what}: the workflow is ${wf.state}`);
  const next = nextAction(wf);
  if (next === null) {
    const running = wf.actions.findIndex((s) => s.state === 'RUNNING');
    const why =
      running >= 0
        ? `action ${running} is RUNNING attempt ${wf.actions[running]?.attempt}`
        : 'nothing to run';
    return refused('E_STALE_ATTEMPT', `${what}: ${why}`);
  }
  if (command.actionIndex !== next.index) {
    return refused('E_STALE_ATTEMPT', `${what}: action ${next.index} is next, not ${command.actionIndex}`);
  }
  if (command.attempt !== next.attempt) {
    return refused('E_STALE_ATTEMPT', `${what}: the next attempt is ${next.attempt}`);
  }
  if (command.workerId !== next.workerId) {
    return refused(
      'E_STALE_ATTEMPT',
      `${what}: task "${next.task.name}" runs on worker "${next.workerId}", not "${command.workerId}"`,
    );
  }
  if (next.notBeforeMs !== undefined && nowMs < next.notBeforeMs) {
    return refused('E_NOT_DUE', `${what}: the retry may start at ${next.notBeforeMs} (now ${nowMs})`);
  }
  if (wf.deadlineMs !== undefined && wf.deadlineMs <= nowMs) {
    return refused(
      'E_STALE_ATTEMPT',
      `${what}: the workflow's deadline passed at ${wf.deadlineMs}; it times out`,
    );
  }
  const previous = wf.actions[next.index];
  const status = record<ActionStatus>({
    state: 'RUNNING',
    attempt: command.attempt,
    attemptsBefore: previous?.attemptsBefore,
    startedMs: nowMs,
    deadlineMs: nowMs + next.action.timeoutS * 1000,
    workerId: command.workerId,
  });
  const first = wf.state === 'PENDING';
  const fields = first
    ? { state: 'RUNNING' as const, startedMs: nowMs, deadlineMs: nowMs + wf.spec.globalTimeoutS * 1000 }
    : {};
  const workflow = revise(wf, fields, next.index, status);
  const events: EventDraft[] = first ? [{ type: 'workflow.running' }] : [];
  events.push({
    type: 'action.started',
    task: next.task.name,
    action: next.action.name,
    actionIndex: next.index,
    attempt: command.attempt,
    message: `on worker ${command.workerId}`,
  });
  return { kind: 'changed', workflow, events, outcome: outcome(workflow, next.index, command.attempt) };
}

/**
 * A report's standing (src/workflow/rules.ts classifyReport) as a transition: undefined when it
 * is about the running attempt and is to be recorded.
 */
function screened(
  wf: Workflow,
  report: Command<'attempt.result'> | Command<'attempt.lost'>,
): Transition | undefined {
  const standing = classifyReport(wf, report);
  switch (standing.kind) {
    case 'current':
      return undefined;
    case 'duplicate':
      return { kind: 'duplicate', outcome: outcome(wf, report.actionIndex, report.attempt) };
    case 'refused':
      return refused(standing.code, standing.message);
  }
}

export function recordResult(wf: Workflow, command: Command<'attempt.result'>, nowMs: number): Transition {
  const which = screened(wf, command);
  if (which !== undefined) return which;
  const report = { exitStatus: command.exitStatus, ...cutReport(command) };
  if (!command.success) return failAttempt(wf, command.actionIndex, nowMs, 'action.failed', report);
  const i = command.actionIndex;
  const position = actionPositions(wf.spec)[i];
  const running = wf.actions[i];
  if (position === undefined || running === undefined) throw new Error(`action ${i} has no position`);
  const status = record<ActionStatus>({ ...stopped(running, nowMs), state: 'SUCCESS', ...report });
  const done = wf.actions.every((s, j) => j === i || s.state === 'SUCCESS');
  const workflow = revise(wf, done ? { state: 'SUCCESS', finishedMs: nowMs } : {}, i, status);
  const events: EventDraft[] = [
    { type: 'action.succeeded', ...about(position, i, command.attempt), ...report },
  ];
  if (done) events.push({ type: 'workflow.succeeded' });
  return { kind: 'changed', workflow, events, outcome: outcome(workflow, i, command.attempt) };
}

export function recordLost(wf: Workflow, command: Command<'attempt.lost'>, nowMs: number): Transition {
  const which = screened(wf, command);
  if (which !== undefined) return which;
  const message = headUtf8(`the worker lost the attempt: ${command.message}`, attemptMessageBytesMax);
  return failAttempt(wf, command.actionIndex, nowMs, 'action.failed', { message });
}

export function expireDeadline(wf: Workflow, nowMs: number): Transition {
  if (isTerminal(wf.state))
    return refused('E_NOT_DUE', `workflow "${wf.id}" is ${wf.state}; no deadline applies`);
  const i = wf.actions.findIndex((s) => s.state === 'RUNNING');
  const running = i < 0 ? undefined : wf.actions[i];
  if (wf.deadlineMs !== undefined && wf.deadlineMs <= nowMs) {
    const message = `the workflow's global timeout of ${wf.spec.globalTimeoutS} s passed`;
    const events: EventDraft[] = [];
    let status: ActionStatus | undefined;
    if (running !== undefined) {
      const position = actionPositions(wf.spec)[i];
      status = record<ActionStatus>({ ...stopped(running, nowMs), state: 'TIMEOUT', message });
      if (position !== undefined)
        events.push({ type: 'action.timeout', ...about(position, i, running.attempt), message });
    }
    events.push({ type: 'workflow.timeout', message });
    const workflow = revise(wf, { state: 'TIMEOUT', finishedMs: nowMs, message }, i, status);
    return { kind: 'changed', workflow, events };
  }
  if (running?.deadlineMs !== undefined && running.deadlineMs <= nowMs) {
    const timeoutS = actionPositions(wf.spec)[i]?.action.timeoutS ?? 0;
    const timedOut = failAttempt(wf, i, nowMs, 'action.timeout', {
      message: `timed out after ${timeoutS} s`,
    });
    // deadline.expire answers with the workflow, whichever deadline passed.
    if (timedOut.kind !== 'changed') return timedOut;
    return { kind: 'changed', workflow: timedOut.workflow, events: timedOut.events };
  }
  const earliest = [running?.deadlineMs, wf.deadlineMs].filter((d) => d !== undefined);
  const when = earliest.length === 0 ? 'it has no deadline yet' : `the next is at ${Math.min(...earliest)}`;
  return refused('E_NOT_DUE', `workflow "${wf.id}": no deadline has passed at ${nowMs}; ${when}`);
}

interface AttemptReport {
  readonly exitStatus?: number;
  readonly message: string;
  readonly outputTail?: string;
}

/**
 * The running attempt of action i failed (or timed out, or was lost). With retries left in this
 * run, the action goes back to PENDING behind a backoff; otherwise it and the workflow end,
 * FAILED, or TIMEOUT when the last attempt timed out.
 */
function failAttempt(
  wf: Workflow,
  i: number,
  nowMs: number,
  type: 'action.failed' | 'action.timeout',
  report: AttemptReport,
): Transition {
  const running = wf.actions[i];
  const position = actionPositions(wf.spec)[i];
  if (running === undefined || position === undefined) throw new Error(`action ${i} has no position`);
  const attempt = running.attempt;
  const used = attempt - (running.attemptsBefore ?? 0);
  const events: EventDraft[] = [{ type, ...about(position, i, attempt), ...report }];
  let workflow: Workflow;
  if (used <= position.action.retries) {
    const notBeforeMs = nowMs + retryBackoffMs(used);
    const status = record<ActionStatus>({
      ...stopped(running, nowMs),
      state: 'PENDING',
      notBeforeMs,
      ...report,
    });
    workflow = revise(wf, {}, i, status);
    events.push({
      type: 'action.retry-scheduled',
      ...about(position, i, attempt + 1),
      message: `retry ${used} of ${position.action.retries} may start at ${notBeforeMs}`,
    });
  } else {
    const final: WorkflowState = type === 'action.timeout' ? 'TIMEOUT' : 'FAILED';
    const status = record<ActionStatus>({ ...stopped(running, nowMs), state: final, ...report });
    const plural = used === 1 ? '' : 's';
    const message = headUtf8(
      `action ${label(position)} gave up after ${used} attempt${plural}: ${report.message}`,
      attemptMessageBytesMax,
    );
    workflow = revise(wf, { state: final, finishedMs: nowMs, message }, i, status);
    events.push({
      type: final === 'TIMEOUT' ? 'workflow.timeout' : 'workflow.failed',
      actionIndex: i,
      message,
    });
  }
  return { kind: 'changed', workflow, events, outcome: outcome(workflow, i, attempt) };
}

export function cancelWorkflow(wf: Workflow, message: string | undefined, nowMs: number): Transition {
  if (isTerminal(wf.state)) {
    return refused(
      'E_CONFLICT',
      `workflow "${wf.id}" is already ${wf.state}; only an active workflow can be cancelled`,
    );
  }
  const why = headUtf8(message ?? 'cancelled by an operator', attemptMessageBytesMax);
  const i = wf.actions.findIndex((s) => s.state === 'RUNNING');
  const running = i < 0 ? undefined : wf.actions[i];
  const events: EventDraft[] = [];
  let status: ActionStatus | undefined;
  if (running !== undefined) {
    const position = actionPositions(wf.spec)[i];
    status = record<ActionStatus>({ ...stopped(running, nowMs), state: 'CANCELLED', message: why });
    if (position !== undefined)
      events.push({ type: 'action.cancelled', ...about(position, i, running.attempt), message: why });
  }
  events.push({ type: 'workflow.cancelled', message: why });
  const workflow = revise(wf, { state: 'CANCELLED', finishedMs: nowMs, message: why }, i, status);
  return { kind: 'changed', workflow, events };
}

/**
 * Ends an active workflow with TIMEOUT for a reason outside it: its machine's provisioning
 * deadline passed (docs/decisions/0028-machine-lifecycle.md), which happens when the workflow
 * never started or its own timeout was never proposed.
 */
export function timeOutWorkflow(wf: Workflow, message: string, nowMs: number): Transition {
  if (isTerminal(wf.state)) {
    return refused('E_CONFLICT', `workflow "${wf.id}" is already ${wf.state}`);
  }
  const why = headUtf8(message, attemptMessageBytesMax);
  const i = wf.actions.findIndex((s) => s.state === 'RUNNING');
  const running = i < 0 ? undefined : wf.actions[i];
  const events: EventDraft[] = [];
  let status: ActionStatus | undefined;
  if (running !== undefined) {
    const position = actionPositions(wf.spec)[i];
    status = record<ActionStatus>({ ...stopped(running, nowMs), state: 'TIMEOUT', message: why });
    if (position !== undefined)
      events.push({ type: 'action.timeout', ...about(position, i, running.attempt), message: why });
  }
  events.push({ type: 'workflow.timeout', message: why });
  const workflow = revise(wf, { state: 'TIMEOUT', finishedMs: nowMs, message: why }, i, status);
  return { kind: 'changed', workflow, events };
}

/**
 * Runs a finished, unsuccessful workflow again from its first unsuccessful action (or from the
 * start). Attempt numbers carry on, so reports of old attempts stay refused or duplicates; the
 * retry budget starts afresh (attemptsBefore).
 */
export function retryWorkflow(wf: Workflow, fromStart: boolean): Transition {
  if (wf.state !== 'FAILED' && wf.state !== 'TIMEOUT' && wf.state !== 'CANCELLED') {
    return refused(
      'E_CONFLICT',
      `workflow "${wf.id}" is ${wf.state}; only FAILED, TIMEOUT or CANCELLED workflows can be retried`,
    );
  }
  const firstUnfinished = wf.actions.findIndex((s) => s.state !== 'SUCCESS');
  const from = fromStart || firstUnfinished < 0 ? 0 : firstUnfinished;
  const actions = wf.actions.map((s, j) =>
    j < from
      ? s
      : record<ActionStatus>({
          state: 'PENDING',
          attempt: s.attempt,
          attemptsBefore: s.attempt === 0 ? undefined : s.attempt,
          workerId: s.workerId,
        }),
  );
  const workflow = record<Workflow>({
    ...wf,
    state: 'PENDING',
    startedMs: undefined,
    finishedMs: undefined,
    deadlineMs: undefined,
    message: undefined,
    actions: Object.freeze(actions),
    // A retried workflow is a new run: its machine claims a new credential.
    credentials: undefined,
  });
  const where = from === 0 ? 'from the start' : `from action ${from}`;
  return {
    kind: 'changed',
    workflow,
    events: [{ type: 'workflow.retried', actionIndex: from, message: `retried ${where}` }],
  };
}

/**
 * A failed workflow under its alternate policy, run again from the start on another machine with
 * the template rendered for it (workflow.alternate), or its policy given up; `why` is the event's.
 */
export function alternateWorkflow(
  wf: Workflow,
  next: { readonly hardwareId: string; readonly spec: RenderedTemplate } | undefined,
  why: string,
): Transition {
  const policy = wf.alternate;
  if (policy === undefined) throw new Error(`workflow ${wf.id} has no alternate policy`);
  const event: EventDraft = { type: 'workflow.alternate', message: why };
  if (next === undefined) {
    const gaveUp = record<AlternatePolicy>({ ...policy, gaveUp: why });
    return { kind: 'changed', workflow: record<Workflow>({ ...wf, alternate: gaveUp }), events: [event] };
  }
  const pending: ActionStatus = Object.freeze({ state: 'PENDING', attempt: 0 });
  const workflow = record<Workflow>({
    ...wf,
    hardwareId: next.hardwareId,
    spec: next.spec,
    state: 'PENDING',
    startedMs: undefined,
    finishedMs: undefined,
    deadlineMs: undefined,
    message: undefined,
    actions: Object.freeze(actionPositions(next.spec).map(() => pending)),
    credentials: undefined,
    alternate: record<AlternatePolicy>({
      ...policy,
      tried: Object.freeze([...policy.tried, next.hardwareId]),
    }),
  });
  return { kind: 'changed', workflow, events: [event] };
}

/** The running status's fields that survive its end: the attempt, who ran it and when. */
function stopped(running: ActionStatus, nowMs: number): Loose<ActionStatus> {
  return {
    state: running.state,
    attempt: running.attempt,
    attemptsBefore: running.attemptsBefore,
    startedMs: running.startedMs,
    stoppedMs: nowMs,
    deadlineMs: undefined,
    notBeforeMs: undefined,
    exitStatus: undefined,
    message: undefined,
    outputTail: undefined,
    workerId: running.workerId,
  };
}

function about(position: ActionPosition, actionIndex: number, attempt: number) {
  return { task: position.task.name, action: position.action.name, actionIndex, attempt };
}

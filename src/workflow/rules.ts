// The rules that drive a workflow: which action runs next, on which worker, when a retry may
// start, which deadline comes first, which attempt a worker's report is about and what of it is
// kept. Pure functions of a Workflow, shared by the replicated state machine (which enforces
// them), the dispatcher and deadline scanner (which propose the commands), the node's screen of
// a worker's result and the agent (which send them), so every side agrees by construction.
import type { ActionSpec, RenderedTemplate, TaskSpec, Workflow } from '../model/records.js';
import { isTerminal } from '../model/records.js';
import {
  attemptMessageBytesMax,
  attemptOutputTailBytesMax,
  retryBackoffBaseMs,
  retryBackoffMaxMs,
} from '../model/limits.js';
import { headUtf8, tailUtf8 } from '../platform/utf8-text.js';

/** One position of a workflow's flat action list: Workflow.actions[i] is the status of position i. */
export interface ActionPosition {
  readonly taskIndex: number;
  readonly actionIndex: number;
  readonly task: TaskSpec;
  readonly action: ActionSpec;
}

/** The action a worker should run next, and the attempt number its start must name. */
export interface NextAction {
  /** The position in the flat list. */
  readonly index: number;
  readonly task: TaskSpec;
  readonly action: ActionSpec;
  /** The attempt attempt.start must carry: the action's last attempt + 1. */
  readonly attempt: number;
  /** A retry may not start before this time. */
  readonly notBeforeMs?: number;
  /** The hardware id whose worker runs it. */
  readonly workerId: string;
}

// Specs are immutable and shared by every version of a workflow, so the flat list is computed
// once per spec; the dispatch path asks for it on every look at a workflow.
const positionsBySpec = new WeakMap<RenderedTemplate, readonly ActionPosition[]>();

/** The flat list, task by task, action by action. The result is shared: do not mutate it. */
export function actionPositions(spec: RenderedTemplate): readonly ActionPosition[] {
  const cached = positionsBySpec.get(spec);
  if (cached !== undefined) return cached;
  const positions: ActionPosition[] = [];
  spec.tasks.forEach((task, taskIndex) => {
    task.actions.forEach((action, actionIndex) => {
      positions.push(Object.freeze({ taskIndex, actionIndex, task, action }));
    });
  });
  const frozen = Object.freeze(positions);
  positionsBySpec.set(spec, frozen);
  return frozen;
}

/**
 * The first action that has not succeeded, while the workflow is active: the one running or the
 * one to run next. Undefined for a finished workflow or one whose actions all succeeded.
 */
export function currentActionIndex(wf: Workflow): number | undefined {
  if (isTerminal(wf.state)) return undefined;
  const index = wf.actions.findIndex((s) => s.state !== 'SUCCESS');
  return index < 0 ? undefined : index;
}

/**
 * What to start next: the first action not yet successful, when the workflow is PENDING or
 * RUNNING and that action is PENDING. A RUNNING action means there is nothing new to hand out.
 */
export function nextAction(wf: Workflow): NextAction | null {
  const index = currentActionIndex(wf);
  if (index === undefined) return null;
  const status = wf.actions[index];
  const position = actionPositions(wf.spec)[index];
  if (status?.state !== 'PENDING' || position === undefined) return null;
  const next = {
    index,
    task: position.task,
    action: position.action,
    attempt: status.attempt + 1,
    workerId: position.task.worker,
  };
  return status.notBeforeMs === undefined ? next : { ...next, notBeforeMs: status.notBeforeMs };
}

/**
 * How long a retry waits after the nth attempt of this run failed (n from 1): 1 s, 2 s, 4 s …
 * capped at 60 s. No jitter: the state machine must be deterministic, and retries of different
 * machines are spread by their own start times anyway.
 */
export function retryBackoffMs(attemptJustFailed: number): number {
  if (!Number.isSafeInteger(attemptJustFailed) || attemptJustFailed < 1) {
    throw new RangeError(`attemptJustFailed must be a positive integer, got ${attemptJustFailed}`);
  }
  return Math.min(retryBackoffBaseMs * 2 ** (attemptJustFailed - 1), retryBackoffMaxMs);
}

/**
 * The earliest deadline of an active workflow: its running attempt's or its own. The leader's
 * scanner proposes deadline.expire once it has passed. Undefined when nothing is pending.
 */
export function nextDeadline(wf: Workflow): number | undefined {
  if (isTerminal(wf.state)) return undefined;
  const index = currentActionIndex(wf);
  const running = index === undefined ? undefined : wf.actions[index];
  const actionDeadlineMs = running?.state === 'RUNNING' ? running.deadlineMs : undefined;
  if (actionDeadlineMs === undefined) return wf.deadlineMs;
  return wf.deadlineMs === undefined ? actionDeadlineMs : Math.min(actionDeadlineMs, wf.deadlineMs);
}

/** The attempt a worker's report (attempt.result or attempt.lost) names, and who sends it. */
export interface AttemptReportRef {
  readonly actionIndex: number;
  readonly attempt: number;
  readonly workerId: string;
}

/**
 * Which attempt a report is about (invariant 3): the running one ('current', to be recorded), one
 * already recorded ('duplicate': acknowledged, ignored), or one it may not speak for ('refused':
 * never started, older than the current attempt, or run by another worker). The state machine
 * applies a report by it, and a node screens a worker's result by it before proposing anything
 * (src/api/result-screen.ts).
 */
export type ReportStanding =
  | { readonly kind: 'current' }
  | { readonly kind: 'duplicate' }
  | { readonly kind: 'refused'; readonly code: 'E_INVALID' | 'E_STALE_ATTEMPT'; readonly message: string };

export function classifyReport(wf: Workflow, report: AttemptReportRef): ReportStanding {
  const { actionIndex: i, attempt: n } = report;
  const status = wf.actions[i];
  if (status === undefined) {
    const message = `actionIndex: ${i} is out of range (workflow "${wf.id}" has ${wf.actions.length} actions)`;
    return { kind: 'refused', code: 'E_INVALID', message };
  }
  const what = `attempt ${n} of action ${i} of workflow "${wf.id}"`;
  if (n < 1 || n > status.attempt) {
    return stale(`${what} was never started (the latest is ${status.attempt})`);
  }
  if (n < status.attempt) return stale(`${what} is older than the current attempt ${status.attempt}`);
  if (status.workerId !== report.workerId) {
    return stale(`${what} ran on worker "${status.workerId}", not "${report.workerId}"`);
  }
  return status.state === 'RUNNING' ? { kind: 'current' } : { kind: 'duplicate' };
}

function stale(message: string): ReportStanding {
  return { kind: 'refused', code: 'E_STALE_ATTEMPT', message };
}

/** A result's message and output tail as the state records them. */
export interface KeptReport {
  /** Cut to attemptMessageBytesMax from the head. */
  readonly message: string;
  /** Cut to attemptOutputTailBytesMax from the end ("…" first). */
  readonly outputTail: string;
}

/**
 * The one cut of a result's message and output tail: the agent sends a result cut so (no result
 * is too large for the stream), the node's screen proposes it cut so (none is too large for the
 * log), and the state records it cut so.
 */
export function cutReport(report: KeptReport): KeptReport {
  return {
    message: headUtf8(report.message, attemptMessageBytesMax),
    outputTail: tailUtf8(report.outputTail, attemptOutputTailBytesMax),
  };
}

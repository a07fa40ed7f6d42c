// How long finished workflows stay in the replicated state (docs/decisions/0020-bounded-state.md).
// The setting is replicated, like the audit retention: a per-node one would let nodes keep
// different workflows. Apply never judges age: the leader's collector picks what is past the
// retention by its clock, archives it, and proposes workflow.gc naming exactly those workflows.
import {
  workflowFinishedDaysDefault,
  workflowFinishedMaxDefault,
  workflowRetentionDaysMax,
  workflowsMax,
} from '../../model/limits.js';

export interface WorkflowRetention {
  /** Keep at most this many finished workflows: the newest by finish time. */
  readonly finishedMax: number;
  /** Collect workflows finished more than this many days ago; 0: no age limit. */
  readonly finishedDays: number;
}

export const workflowRetentionDefault: WorkflowRetention = Object.freeze({
  finishedMax: workflowFinishedMaxDefault,
  finishedDays: workflowFinishedDaysDefault,
});

export function isDefaultWorkflowRetention(r: WorkflowRetention): boolean {
  return (
    r.finishedMax === workflowRetentionDefault.finishedMax &&
    r.finishedDays === workflowRetentionDefault.finishedDays
  );
}

/** What is wrong with a setting, naming the field, or undefined when it may be set. */
export function workflowRetentionProblem(r: WorkflowRetention): string | undefined {
  if (!Number.isSafeInteger(r.finishedMax) || r.finishedMax < 1 || r.finishedMax > workflowsMax) {
    return `finishedMax: must be 1-${workflowsMax}, got ${r.finishedMax}`;
  }
  if (
    !Number.isSafeInteger(r.finishedDays) ||
    r.finishedDays < 0 ||
    r.finishedDays > workflowRetentionDaysMax
  ) {
    return `finishedDays: must be 0 (no age limit) to ${workflowRetentionDaysMax}, got ${r.finishedDays}`;
  }
  return undefined;
}

/**
 * How long after the cluster reached state version 2 the default retention, while no operator
 * has set one, starts to remove workflows. Upgrading turns the retention on; this gives the
 * operator time to keep more (or to archive) before anything leaves. A week: an upgrade done
 * before a weekend is still noticed in time, and the state keeps, meanwhile, no more than it kept
 * before the upgrade (at most workflowsMax workflows).
 */
export const defaultRetentionGraceMs = 7 * 24 * 3600 * 1000;

/**
 * From when the retention in force removes workflows, by the leader's clock: undefined when it
 * does at once, because an operator set it (which clears `defaultSinceMs`) or the state has no
 * record of when the default came in (a cluster at version 2 before the record existed).
 * `defaultSinceMs` is ControlState.workflowRetentionDefaultSinceMs.
 */
export function retentionStartsMs(defaultSinceMs: number | undefined): number | undefined {
  return defaultSinceMs === undefined ? undefined : defaultSinceMs + defaultRetentionGraceMs;
}

/** A finished workflow as the collector weighs it. */
export interface FinishedWorkflow {
  readonly id: string;
  /** The leader-stamped time it finished. */
  readonly finishedMs: number;
}

const dayMs = 24 * 3600 * 1000;

/** Oldest finished first; ties by id, so every node would pick the same. */
export function byFinish(a: FinishedWorkflow, b: FinishedWorkflow): number {
  return a.finishedMs - b.finishedMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/**
 * The finished workflows past the retention at `nowMs`, oldest finished first, at most `limit`:
 * those beyond the newest `finishedMax`, and those finished more than `finishedDays` days
 * before `nowMs` (when it is not 0). Both are a prefix of the oldest-first order, so the
 * answer is the longer of the two prefixes. Pure: the collector calls it with the leader's clock.
 */
export function pastRetention<T extends FinishedWorkflow>(
  finished: readonly T[],
  retention: WorkflowRetention,
  nowMs: number,
  limit: number,
): T[] {
  const excess = Math.max(0, finished.length - retention.finishedMax);
  let old = 0;
  if (retention.finishedDays > 0) {
    const keptFromMs = nowMs - retention.finishedDays * dayMs;
    for (const wf of finished) if (wf.finishedMs < keptFromMs) old++;
  }
  const n = Math.min(Math.max(excess, old), Math.max(0, limit));
  if (n === 0) return [];
  return [...finished].sort(byFinish).slice(0, n);
}

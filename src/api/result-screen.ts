// Screening a worker's result against this node's applied state before anything is proposed
// (docs/decisions/0011-security.md, Limits). A forged, foreign or stale result is refused
// without a Raft write, a duplicate of a recorded result is acknowledged without one, and the
// message and output tail are cut to what the state records anyway, so no result is too large
// to propose and none is retried forever. Pure: the caller passes the workflow as applied here.
import type { ActionResult } from '../gen/worker.js';
import { controlIdLengthMax } from '../model/limits.js';
import type { Workflow } from '../model/records.js';
import { classifyReport, cutReport } from '../workflow/rules.js';

export type Screening =
  | {
      readonly verdict: 'propose';
      /** Cut to attemptMessageBytesMax from the head, as the state records it. */
      readonly message: string;
      /** Cut to attemptOutputTailBytesMax from the end ("…" first), as the state records it. */
      readonly outputTail: string;
      readonly cut: boolean;
    }
  | { readonly verdict: 'duplicate' }
  | {
      readonly verdict: 'refuse';
      readonly reason: string;
      /**
       * This node may only be behind: the workflow or the attempt may be committed but not yet
       * applied here. Screen again after a linearizable read before refusing.
       */
      readonly mayLag: boolean;
    };

export interface ResultScreenInput {
  /** The stream's worker (x-worker-id, authenticated). */
  readonly workerId: string;
  /** The workflow of the stream's per-boot credential, if it presented one. */
  readonly credentialOf: string | undefined;
  readonly result: ActionResult;
  /** The result's workflow as this node has applied it; undefined when unknown here. */
  readonly workflow: Workflow | undefined;
}

export function screenResult(input: ResultScreenInput): Screening {
  const { result, workflow } = input;
  const ref = result.attempt;
  if (ref === undefined) return refuse('the result names no attempt', false);
  if (ref.workflowId.length > controlIdLengthMax) {
    const what = `a workflow id of ${ref.workflowId.length} characters`;
    return refuse(`${what} is over the limit of ${controlIdLengthMax}`, false);
  }
  if (input.credentialOf !== undefined && ref.workflowId !== input.credentialOf) {
    const reason = `this stream's credential is for workflow ${input.credentialOf}, not ${ref.workflowId}`;
    return refuse(reason, false);
  }
  if (workflow === undefined) return refuse(`workflow "${ref.workflowId}" does not exist`, true);
  const report = { actionIndex: ref.actionIndex, attempt: ref.attempt, workerId: input.workerId };
  const standing = classifyReport(workflow, report);
  switch (standing.kind) {
    case 'current': {
      const kept = cutReport(result);
      const cut = kept.message !== result.message || kept.outputTail !== result.outputTail;
      return { verdict: 'propose', message: kept.message, outputTail: kept.outputTail, cut };
    }
    case 'duplicate':
      return { verdict: 'duplicate' };
    case 'refused': {
      // Only an attempt newer than the one applied here can be this node lagging: the leader may
      // have started it in the entry that recorded this worker's previous result.
      const applied = workflow.actions[ref.actionIndex]?.attempt ?? 0;
      return refuse(standing.message, ref.attempt > applied);
    }
  }
}

function refuse(reason: string, mayLag: boolean): Screening {
  return { verdict: 'refuse', reason, mayLag };
}

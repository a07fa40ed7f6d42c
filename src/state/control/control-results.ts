// The results of the control-plane commands (commands.ts) and their error codes: what apply
// gives back to the proposer, in the same entry, on every node alike.
import type {
  ActionState,
  Artifact,
  Hardware,
  GrantOutcome,
  Lease,
  OperatorToken,
  PowerJob,
  Template,
  Workflow,
  WorkflowState,
} from '../../model/records.js';
import type { AuditRetention } from './audit-log.js';
import type { WorkflowRetention } from './workflow-retention.js';
import type { Pool } from '../../fleet/pool.js';
import type { QuarantinePolicy } from '../../model/quarantine-policy.js';
import type { MemberApiAddr } from './member-api-addrs.js';

export type ControlErrorCode =
  | 'E_INVALID' // the command breaks a rule of the domain (names the field)
  | 'E_NOT_FOUND'
  | 'E_EXISTS'
  | 'E_VERSION' // expectVersion did not match
  | 'E_CONFLICT' // the state does not allow this now (e.g. delete hardware with a running workflow)
  | 'E_STALE_ATTEMPT' // a result or start for an attempt that is not the current one
  | 'E_NOT_DUE'; // a deadline or retry backoff has not passed by the command's stamp

export const controlErrorCodes: readonly ControlErrorCode[] = [
  'E_INVALID',
  'E_NOT_FOUND',
  'E_EXISTS',
  'E_VERSION',
  'E_CONFLICT',
  'E_STALE_ATTEMPT',
  'E_NOT_DUE',
];

/**
 * Where an attempt stands after attempt.start, attempt.result or attempt.lost. Kept small on
 * purpose: the dispatch path applies several of these per action on every node, so they do not
 * carry the whole workflow (read it from the state when needed).
 */
export interface AttemptOutcome {
  readonly workflowId: string;
  readonly actionIndex: number;
  readonly attempt: number;
  /** The action's state now: RUNNING after a start; SUCCESS, PENDING (a retry) or FAILED after a result. */
  readonly actionState: ActionState;
  readonly workflowState: WorkflowState;
  /** The running attempt's deadline, after a start. */
  readonly deadlineMs?: number;
  /** When the next attempt may start, after a failure that schedules a retry. */
  readonly notBeforeMs?: number;
  /**
   * attempt.result with startNext: the attempt the same entry started on the reporting worker,
   * so the node serving that worker can push it as soon as it learns the result committed.
   */
  readonly started?: StartedAttempt;
}

export interface StartedAttempt {
  readonly actionIndex: number;
  readonly attempt: number;
  readonly deadlineMs?: number;
}

export type ControlResult =
  | { readonly type: 'error'; readonly code: ControlErrorCode; readonly message: string }
  | { readonly type: 'hardware'; readonly hardware: Hardware }
  | { readonly type: 'template'; readonly template: Template }
  /** workflow.create, cancel, retry and deadline.expire: the whole record after the command. */
  | { readonly type: 'workflow'; readonly workflow: Workflow }
  /** attempt.start, attempt.result and attempt.lost that changed the state. */
  | ({ readonly type: 'attempt' } & AttemptOutcome)
  /** attempt.result or attempt.lost for an attempt already recorded: acknowledged, nothing changed. */
  | ({ readonly type: 'duplicate' } & AttemptOutcome)
  | { readonly type: 'token'; readonly token: OperatorToken }
  /** credential.issue: the workflow the credential is bound to and when it expires. */
  | { readonly type: 'credential'; readonly workflowId: string; readonly expiresMs: number }
  /** lease.grant: one outcome per grant, in order. */
  | { readonly type: 'grants'; readonly outcomes: readonly GrantOutcome[] }
  /** lease.release and lease.decline. */
  | { readonly type: 'lease'; readonly lease: Lease }
  /** power.request, power.claim and power.step: the job after the command. */
  | { readonly type: 'powerJob'; readonly job: PowerJob }
  /** power.step for a step already recorded: acknowledged, nothing changed. */
  | { readonly type: 'powerJobDuplicate'; readonly job: PowerJob }
  /** artifact.put: the record after the command (unchanged when the digest was the same). */
  | { readonly type: 'artifact'; readonly artifact: Artifact }
  /** audit.record: written to the trail. */
  | { readonly type: 'recorded' }
  /** audit.retention: the setting now in force. */
  | { readonly type: 'auditRetention'; readonly retention: AuditRetention }
  /** cluster.version: the effective version after the command. */
  | { readonly type: 'clusterVersion'; readonly version: number }
  /** workflow.retention: the setting now in force. */
  | { readonly type: 'workflowRetention'; readonly retention: WorkflowRetention }
  /** hardware.quarantinePolicy: the setting now in force. */
  | { readonly type: 'quarantinePolicy'; readonly policy: QuarantinePolicy }
  /** hardware.acceptRule: the rule now in force, canonical; absent when none is. */
  | { readonly type: 'acceptRule'; readonly selector?: string }
  /** member.drain: the drained members after the command, by id. */
  | { readonly type: 'drainedMembers'; readonly ids: readonly string[] }
  /** member.apiAddr: every recorded API address after the command, by id. */
  | { readonly type: 'memberApiAddrs'; readonly members: readonly MemberApiAddr[] }
  /** workflow.gc: the workflows it deleted, in the command's order. */
  | { readonly type: 'collected'; readonly ids: readonly string[] }
  /** pool.create, pool.scale and pool.allocate: the pool after the command. */
  | { readonly type: 'pool'; readonly pool: Pool }
  | { readonly type: 'deleted' };

// How a machine's lifecycle changes (docs/decisions/0028-machine-lifecycle.md): pure functions
// from a hardware record, a command or a workflow's change, and the leader's stamp to a new
// record and the transitions it made, or a refusal. Every transition is checked against the
// table (src/fleet/lifecycle.ts) and appended to the machine's bounded history; the control
// state stores the record, publishes the events and writes them into the audit trail.
// An operator's verbs and labels are machine-verbs.ts.
import type { ControlCommand, ControlErrorCode } from './commands.js';
import type { Hardware, Workflow } from '../../model/records.js';
import { isTerminal } from '../../model/records.js';
import type {
  AfterRelease,
  LifecycleTrigger,
  MachineEvent,
  MachineLifecycle,
  MachineState,
} from '../../model/machine-lifecycle.js';
import {
  lifecycleReasonBytesMax,
  machineHistoryMax,
  provisioningGraceMs,
  quarantineFailuresMax,
  releasingTimeoutSDefault,
} from '../../model/limits.js';
import { expiryReason, isAllowed, isTransitional, releaseTemplateOf } from '../../fleet/lifecycle.js';
import { applyLabelChange } from '../../fleet/labels.js';
import { actionPositions } from '../../workflow/rules.js';
import { headUtf8 } from '../../platform/utf8-text.js';
import { deepFreeze, record } from './immutable.js';
import { recordFailure, windowText, type QuarantinePolicy } from '../../model/quarantine-policy.js';

type Command<T extends ControlCommand['type']> = Extract<ControlCommand, { readonly type: T }>;

/** Who or what caused a transition, as its event and its audit entry name it. */
export interface Cause {
  readonly by: string;
  readonly workflowId?: string;
}

/** A machine after a change, and the transitions the change made (none for a deadline update). */
export interface Moved {
  readonly hardware: Hardware;
  readonly events: readonly MachineEvent[];
}

export type LifecycleOutcome =
  | { readonly kind: 'refused'; readonly code: ControlErrorCode; readonly message: string }
  | {
      readonly kind: 'moved';
      readonly moved: Moved;
      /** drain --now, or an expired provisioning: the owner workflow ends in the same entry. */
      readonly endOwner?: {
        readonly workflowId: string;
        readonly how: 'cancel' | 'timeout';
        readonly message: string;
      };
    };

/** The lifecycle fields a transition sets; the others are cleared. */
interface Fields {
  readonly reason?: string | undefined;
  readonly step?: string | undefined;
  readonly deadlineMs?: number | undefined;
  readonly owner?: string | undefined;
  readonly drainedFrom?: MachineState | undefined;
  readonly afterRelease?: AfterRelease | undefined;
  /** The failures kept from here; absent: those the machine had. */
  readonly failures?: readonly number[] | undefined;
}

export function refused(code: ControlErrorCode, message: string): LifecycleOutcome {
  return { kind: 'refused', code, message };
}

/** The record with its lifecycle replaced: a change, so it gets a new version. */
function revised(hw: Hardware, lifecycle: MachineLifecycle, nowMs: number): Hardware {
  return deepFreeze<Hardware>({ ...hw, lifecycle, updatedMs: nowMs, version: hw.version + 1 });
}

/** The lifecycle after one transition, with its event; throws on a move the table lacks (a bug). */
function transitioned(
  current: MachineLifecycle | undefined,
  to: MachineState,
  trigger: LifecycleTrigger,
  cause: Cause,
  fields: Fields,
  nowMs: number,
): { readonly lifecycle: MachineLifecycle; readonly event: MachineEvent } {
  const from = current?.state ?? null;
  if (!isAllowed(from, to, trigger)) {
    throw new Error(`lifecycle: ${from ?? '(none)'} → ${to} by ${trigger} is not in the table`);
  }
  const history = current?.history ?? [];
  const reason = fields.reason === undefined ? undefined : headUtf8(fields.reason, lifecycleReasonBytesMax);
  const event = record<MachineEvent>({
    seq: (history[history.length - 1]?.seq ?? 0) + 1,
    stampMs: nowMs,
    from: from ?? undefined,
    to,
    trigger,
    by: cause.by,
    reason,
    step: fields.step,
    workflowId: cause.workflowId,
  });
  const kept = [...history, event];
  const lifecycle = record<MachineLifecycle>({
    state: to,
    sinceMs: nowMs,
    reason,
    step: fields.step,
    deadlineMs: fields.deadlineMs,
    owner: fields.owner,
    drainedFrom: fields.drainedFrom,
    afterRelease: fields.afterRelease,
    history: Object.freeze(kept.slice(Math.max(0, kept.length - machineHistoryMax))),
    ...keptFailures(fields.failures ?? current?.failures),
  });
  return { lifecycle, event };
}

/** The failures field: left out when there are none. */
function keptFailures(failures: readonly number[] | undefined): { readonly failures?: readonly number[] } {
  return failures === undefined || failures.length === 0 ? {} : { failures };
}

/** One transition of a machine that has a lifecycle. */
export function move(
  hw: Hardware,
  to: MachineState,
  trigger: LifecycleTrigger,
  cause: Cause,
  fields: Fields,
  nowMs: number,
): Moved {
  const { lifecycle, event } = transitioned(hw.lifecycle, to, trigger, cause, fields, nowMs);
  return { hardware: revised(hw, lifecycle, nowMs), events: [event] };
}

/**
 * A failure of the machine's workflow (it failed or timed out, or its provisioning deadline
 * passed): counted, and once the policy's count is reached within its window, quarantined
 * instead of failed. `releaseVia` names the machine's pool when it has a release template: the
 * failure is kept (afterRelease) for the end of the release the pool's keeper starts (0036).
 */
function failOrQuarantine(
  hw: Hardware,
  trigger: 'fail' | 'expire',
  cause: Cause,
  fields: Fields,
  policy: QuarantinePolicy,
  releaseVia: string | undefined,
  nowMs: number,
): Moved {
  const { failures, quarantine } = recordFailure(hw.lifecycle?.failures, policy, nowMs);
  const counted = `failed ${failures.length} times within ${windowText(policy.windowS)}`;
  const state = quarantine ? 'quarantined' : 'failed';
  const reason = !quarantine
    ? fields.reason
    : fields.reason === undefined
      ? counted
      : `${counted}; last: ${fields.reason}`;
  if (releaseVia === undefined)
    return move(hw, state, trigger, cause, { ...fields, reason, failures }, nowMs);
  const afterRelease = record<AfterRelease>({ pool: releaseVia, state, reason, step: fields.step });
  const pending = `${reason ?? state}; released through pool ${releaseVia}'s release template next`;
  return move(hw, state, trigger, cause, { ...fields, reason: pending, failures, afterRelease }, nowMs);
}

/** A failed pool member's release ended: its failure as it was, the release's own failure named. */
function endOfFailedRelease(
  hw: Hardware,
  after: AfterRelease,
  wf: Workflow,
  cause: Cause,
  nowMs: number,
): Moved {
  const fields = { reason: after.reason, step: after.step };
  if (wf.state === 'SUCCESS') {
    const reason = `${after.reason ?? after.state} (released through workflow ${wf.id})`;
    return move(hw, after.state, 'released', cause, { ...fields, reason }, nowMs);
  }
  const { trigger, fields: release } = outcomeOf(wf);
  const reason = `release ${release.reason ?? ''}; before it: ${after.reason ?? after.state}`;
  return move(hw, 'failed', trigger, cause, { reason, step: release.step ?? after.step }, nowMs);
}

/** A further transition in the same entry (a release that completes at once). */
function andThen(first: Moved, next: Moved): Moved {
  return { hardware: next.hardware, events: [...first.events, ...next.events] };
}

/** The lifecycle of a machine created at state version 3: enrolled (registered, not inspected). */
export function registeredLifecycle(cause: Cause, nowMs: number, reason = 'registered'): MachineLifecycle {
  return transitioned(undefined, 'enrolled', 'register', cause, { reason }, nowMs).lifecycle;
}

/**
 * When a workflow's provisioning ends at the latest: its own deadline (once it started; else its
 * global timeout from now) plus a grace for the workflow's own timeout to come first.
 */
export function provisioningDeadline(wf: Workflow, nowMs: number): number {
  return (wf.deadlineMs ?? nowMs + wf.spec.globalTimeoutS * 1000) + provisioningGraceMs;
}

/** The action a finished workflow stopped at, as task/action. */
export function failedStep(wf: Workflow): string | undefined {
  const i = wf.actions.findIndex((s) => s.state !== 'SUCCESS');
  const position = i < 0 ? undefined : actionPositions(wf.spec)[i];
  return position === undefined ? undefined : `${position.task.name}/${position.action.name}`;
}

/** The state a workflow's end leaves its machine in, with the trigger and why. */
function outcomeOf(wf: Workflow): { trigger: LifecycleTrigger; to: MachineState; fields: Fields } {
  switch (wf.state) {
    case 'SUCCESS':
      return { trigger: 'succeed', to: 'deployed', fields: { reason: `workflow ${wf.id} succeeded` } };
    case 'CANCELLED':
      // A race's loser (0037): its rival succeeded first; the machine did nothing wrong.
      if (wf.race?.lostTo !== undefined) {
        const reason = `workflow ${wf.id} lost the race to workflow ${wf.race.lostTo}: released`;
        return { trigger: 'release', to: 'ready', fields: { reason } };
      }
      return {
        trigger: 'cancel',
        to: 'failed',
        fields: { reason: `workflow ${wf.id} cancelled: ${wf.message ?? ''}`, step: failedStep(wf) },
      };
    default:
      return {
        trigger: 'fail',
        to: 'failed',
        fields: {
          reason: `workflow ${wf.id} ${wf.state === 'TIMEOUT' ? 'timed out' : 'failed'}: ${wf.message ?? ''}`,
          step: failedStep(wf),
        },
      };
  }
}

/** The state a release workflow's end leaves its machine in: ready when it succeeded, else failed. */
function releaseOutcomeOf(wf: Workflow): { trigger: LifecycleTrigger; to: MachineState; fields: Fields } {
  if (wf.state === 'SUCCESS')
    return { trigger: 'released', to: 'ready', fields: { reason: `release workflow ${wf.id} succeeded` } };
  const { trigger, fields } = outcomeOf(wf);
  return { trigger, to: 'failed', fields: { ...fields, reason: `release ${fields.reason ?? ''}` } };
}

/** A pool's member released without a release template: releasing, then ready, in one entry. */
export function releasedAtOnce(hw: Hardware, cause: Cause, reason: string, nowMs: number): Moved {
  const releasing = move(hw, 'releasing', 'release', cause, { reason }, nowMs);
  const done = 'no release template: released at once';
  return andThen(releasing, move(releasing.hardware, 'ready', 'released', cause, { reason: done }, nowMs));
}

/** The machine kept as a pool's spare, or (undefined) no longer: no transition, a new version. */
export function withSpare(hw: Hardware, pool: string | undefined, nowMs: number): Hardware | undefined {
  const lc = hw.lifecycle;
  if (lc === undefined || lc.spareOf === pool) return undefined;
  const { spareOf: _spareOf, ...rest } = lc;
  return revised(hw, record<MachineLifecycle>(pool === undefined ? rest : { ...rest, spareOf: pool }), nowMs);
}

/** releasing, then, while no release template is known (the seam), ready at once. */
export function releaseMachine(
  hw: Hardware,
  reason: string,
  timeoutS: number,
  cause: Cause,
  nowMs: number,
): Moved {
  const deadlineMs = nowMs + timeoutS * 1000;
  const releasing = move(hw, 'releasing', 'release', cause, { reason, deadlineMs }, nowMs);
  // A release template would be a workflow that owns the machine from here, ending in released.
  if (releaseTemplateOf(hw.id) !== undefined) return releasing;
  const released = 'no release template: released at once';
  return andThen(
    releasing,
    move(releasing.hardware, 'ready', 'released', cause, { reason: released }, nowMs),
  );
}

/**
 * Claims the machine for a workflow that became active (created, or retried): provisioning,
 * owned by it. The caller has checked provisionRefusal first.
 */
export function claimFor(hw: Hardware, wf: Workflow, cause: Cause, nowMs: number): Moved {
  const tried = wf.alternate?.tried.length ?? 1;
  const alternate = tried > 1 ? `, machine ${tried} of ${wf.alternate?.attempts ?? tried}` : '';
  const how = wf.selector === undefined ? '' : `, allocated by selector ${wf.selector}${alternate}`;
  const reason = `workflow ${wf.id} (template ${wf.template}${how})`;
  const fields = { reason, owner: wf.id, deadlineMs: provisioningDeadline(wf, nowMs) };
  return move(hw, 'provisioning', 'provision', cause, fields, nowMs);
}

/**
 * Claims the machine for a release workflow: releasing, owned by it, until it ends. A failed pool
 * member keeps its failure (afterRelease) for the release's end.
 */
export function claimForRelease(hw: Hardware, wf: Workflow, cause: Cause, nowMs: number): Moved {
  const afterRelease = hw.lifecycle?.afterRelease;
  const of = afterRelease === undefined ? '' : ` of pool ${afterRelease.pool}'s ${afterRelease.state} member`;
  const reason = `release workflow ${wf.id} (template ${wf.template})${of}`;
  const fields = { reason, owner: wf.id, deadlineMs: provisioningDeadline(wf, nowMs), afterRelease };
  return move(hw, 'releasing', 'release', cause, fields, nowMs);
}

/**
 * The machine after its owner workflow changed: a deadline that follows the workflow's own once it
 * started, or, when it ended, the state its outcome gives (drained: only where undrain returns).
 * `next` is another active workflow for the machine, from before state version 3 (when several
 * could queue on one machine): it inherits the ownership. `releaseVia`: the machine's pool, when
 * it has a release template (a failure is released through it first). Undefined when nothing
 * changes.
 */
export function followOwner(
  hw: Hardware,
  wf: Workflow,
  next: Workflow | undefined,
  cause: Cause,
  policy: QuarantinePolicy,
  releaseVia: string | undefined,
  nowMs: number,
): Moved | undefined {
  const lc = hw.lifecycle;
  if (lc === undefined || lc.owner !== wf.id) return undefined;
  if (!isTerminal(wf.state)) {
    if ((lc.state !== 'provisioning' && lc.state !== 'releasing') || wf.deadlineMs === undefined)
      return undefined;
    const deadlineMs = wf.deadlineMs + provisioningGraceMs;
    if (lc.deadlineMs === deadlineMs) return undefined;
    return { hardware: revised(hw, record<MachineLifecycle>({ ...lc, deadlineMs }), nowMs), events: [] };
  }
  if (next !== undefined) {
    const deadlineMs = lc.state === 'provisioning' ? provisioningDeadline(next, nowMs) : undefined;
    const handed = record<MachineLifecycle>({ ...lc, owner: next.id, deadlineMs });
    return { hardware: revised(hw, handed, nowMs), events: [] };
  }
  const outcome = wf.release === true ? releaseOutcomeOf(wf) : outcomeOf(wf);
  if (lc.state === 'maintenance') {
    const drained = record<MachineLifecycle>({ ...lc, owner: undefined, drainedFrom: outcome.to });
    return { hardware: revised(hw, drained, nowMs), events: [] };
  }
  const withWorkflow = { ...cause, workflowId: wf.id };
  if (wf.release === true && lc.afterRelease !== undefined && lc.state === 'releasing') {
    return endOfFailedRelease(hw, lc.afterRelease, wf, withWorkflow, nowMs);
  }
  if (outcome.trigger === 'fail' && wf.release !== true) {
    return failOrQuarantine(hw, 'fail', withWorkflow, outcome.fields, policy, releaseVia, nowMs);
  }
  if (outcome.trigger === 'release') {
    return releaseMachine(hw, outcome.fields.reason ?? '', releasingTimeoutSDefault, withWorkflow, nowMs);
  }
  return move(hw, outcome.to, outcome.trigger, withWorkflow, outcome.fields, nowMs);
}

/**
 * The leader's expiry of a transitional deadline (hardware.expire): refused unless the machine
 * still has exactly that deadline and it passed by the stamp, so a late or repeated proposal
 * changes nothing. An owner workflow times out with it, and counts as its failure.
 */
export function expireMachine(
  hw: Hardware,
  command: Command<'hardware.expire'>,
  policy: QuarantinePolicy,
  releaseVia: string | undefined,
  nowMs: number,
): LifecycleOutcome {
  const lc = hw.lifecycle;
  if (lc === undefined || !isTransitional(lc.state) || lc.deadlineMs !== command.deadlineMs) {
    const has = lc?.deadlineMs === undefined ? 'none' : String(lc.deadlineMs);
    return refused(
      'E_NOT_DUE',
      `hardware "${hw.id}" is ${lc?.state ?? 'untracked'} with deadline ${has}, not ${command.deadlineMs}`,
    );
  }
  if (command.deadlineMs > nowMs) {
    return refused(
      'E_NOT_DUE',
      `hardware "${hw.id}": its deadline ${command.deadlineMs} has not passed at ${nowMs}`,
    );
  }
  const expired = expiryReason(lc.state);
  // A failed pool member's release that never ended: its failure is named too.
  const before = lc.afterRelease;
  const reason = before === undefined ? expired : `${expired}; before it: ${before.reason ?? before.state}`;
  const cause: Cause = {
    by: 'leader (deadline)',
    ...(lc.owner === undefined ? {} : { workflowId: lc.owner }),
  };
  const moved =
    lc.state === 'provisioning'
      ? failOrQuarantine(hw, 'expire', cause, { reason }, policy, releaseVia, nowMs)
      : move(hw, 'failed', 'expire', cause, { reason }, nowMs);
  if (lc.owner === undefined) return { kind: 'moved', moved };
  const message = `the machine's ${lc.state} deadline passed (hardware ${hw.id})`;
  return { kind: 'moved', moved, endOwner: { workflowId: lc.owner, how: 'timeout', message } };
}

/**
 * The machine's lifecycle when the cluster first tracks it (raised to state version 3), from its
 * workflows: the oldest active one owns it (provisioning); else the last to finish says deployed
 * or failed; else enrolled.
 */
export function adoptMachine(
  hw: Hardware,
  active: Workflow | undefined,
  last: Workflow | undefined,
  version: number,
  nowMs: number,
): Moved {
  const cause: Cause = { by: `upgrade to state version ${version}` };
  let to: MachineState = 'enrolled';
  let fields: Fields = { reason: 'no workflow yet' };
  if (active !== undefined) {
    to = 'provisioning';
    const deadlineMs = provisioningDeadline(active, nowMs);
    fields = { reason: `workflow ${active.id} (template ${active.template})`, owner: active.id, deadlineMs };
  } else if (last !== undefined) {
    const outcome = outcomeOf(last);
    to = outcome.to;
    fields = outcome.fields;
  }
  const workflowId = active?.id ?? last?.id;
  const withWorkflow = workflowId === undefined ? cause : { ...cause, workflowId };
  const { lifecycle, event } = transitioned(undefined, to, 'adopt', withWorkflow, fields, nowMs);
  return { hardware: revised(hw, lifecycle, nowMs), events: [event] };
}

/**
 * What is wrong with a stored machine's lifecycle and labels, for a cluster at `tracked` (state
 * version 3 or above) or not, or undefined. `ownerOf` finds an active workflow by id.
 */
export function lifecycleRecordProblem(
  hw: Hardware,
  tracked: boolean,
  activeWorkflow: (id: string) => Workflow | undefined,
): string | undefined {
  const lc = hw.lifecycle;
  const what = `hardware "${hw.id}"`;
  if (!tracked) {
    if (hw.inventory !== undefined || hw.inspection !== undefined || hw.reportedWith !== undefined)
      return `${what}: an inventory before state version 3`;
    return lc === undefined && hw.labels === undefined
      ? undefined
      : `${what}: a lifecycle or labels before state version 3`;
  }
  if (lc === undefined) return `${what}: no lifecycle at state version 3`;
  if (hw.labels !== undefined) {
    const checked = applyLabelChange({}, { set: hw.labels, remove: [] });
    if ('problem' in checked) return `${what}: ${checked.problem}`;
    if (Object.keys(hw.labels).length === 0) return `${what}: empty labels are left out`;
  }
  const last = lc.history[lc.history.length - 1];
  if (last === undefined || lc.history.length > machineHistoryMax)
    return `${what}: history of ${lc.history.length}`;
  if (last.to !== lc.state) return `${what}: is ${lc.state}, but its last event went to ${last.to}`;
  for (let i = 1; i < lc.history.length; i++) {
    if (lc.history[i]?.seq !== (lc.history[i - 1]?.seq ?? 0) + 1)
      return `${what}: history seqs are not dense`;
  }
  if (lc.spareOf !== undefined && (lc.state !== 'ready' || lc.owner !== undefined))
    return `${what}: a spare of pool ${lc.spareOf} must be ready and unowned, not ${lc.state}`;
  const after = lc.afterRelease;
  if (after !== undefined && lc.state !== 'releasing' && (lc.state !== after.state || lc.owner !== undefined))
    return `${what}: a failed member of pool ${after.pool} awaiting its release must be ${after.state} and unowned, not ${lc.state}`;
  const failures = lc.failures;
  if (failures !== undefined) {
    if (failures.length === 0 || failures.length > quarantineFailuresMax)
      return `${what}: ${failures.length} failures kept`;
    if (failures.some((t, i) => i > 0 && t < (failures[i - 1] ?? 0)))
      return `${what}: failures are not oldest first`;
  }
  if (isTransitional(lc.state) !== (lc.deadlineMs !== undefined)) {
    return `${what}: ${lc.state} ${lc.deadlineMs === undefined ? 'without' : 'with'} a deadline`;
  }
  if ((lc.state === 'maintenance') !== (lc.drainedFrom !== undefined)) {
    return `${what}: drainedFrom is kept exactly in maintenance`;
  }
  if (lc.state === 'provisioning' && lc.owner === undefined) return `${what}: provisioning without an owner`;
  if (lc.state === 'maintenance' && (lc.drainedFrom === 'provisioning') !== (lc.owner !== undefined)) {
    return `${what}: drained from provisioning exactly while its owner runs`;
  }
  if (lc.owner !== undefined) {
    const wf = activeWorkflow(lc.owner);
    // A release workflow (a pool's release template, 0036) owns its machine while it is releasing.
    const releasing = lc.state === 'releasing' && wf?.release === true;
    if (
      wf === undefined ||
      wf.hardwareId !== hw.id ||
      (lc.state !== 'provisioning' && lc.state !== 'maintenance' && !releasing)
    ) {
      return `${what}: owner "${lc.owner}" is not an active workflow for it`;
    }
  }
  return undefined;
}

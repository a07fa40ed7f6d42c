// An operator's verbs on a machine (hardware.lifecycle: inspect, accept, drain, undrain,
// release, quarantine, retire) and its labels (hardware.label), as pure functions like the
// rest of the lifecycle (hardware-lifecycle.ts, docs/decisions/0028-machine-lifecycle.md).
import { applyLabelChange } from '../../fleet/labels.js';
import { targetOf, verbRefusal } from '../../fleet/lifecycle.js';
import {
  inspectingTimeoutSDefault,
  lifecycleReasonBytesMax,
  lifecycleTimeoutSMax,
  releasingTimeoutSDefault,
} from '../../model/limits.js';
import type { MachineLifecycle } from '../../model/machine-lifecycle.js';
import { isTerminal, type Hardware, type Workflow } from '../../model/records.js';
import { headUtf8, utf8Length } from '../../platform/utf8-text.js';
import type { ControlCommand } from './commands.js';
import {
  move,
  provisioningDeadline,
  refused,
  releaseMachine,
  type Cause,
  type LifecycleOutcome,
  type Moved,
} from './hardware-lifecycle.js';
import { deepFreeze } from './immutable.js';

type Command<T extends ControlCommand['type']> = Extract<ControlCommand, { readonly type: T }>;

/**
 * An operator's verb (hardware.lifecycle). `owner` is the machine's owner workflow, if any: drain
 * --now ends it, and undrain back to provisioning takes its deadline.
 */
export function applyVerb(
  hw: Hardware,
  command: Command<'hardware.lifecycle'>,
  owner: Workflow | undefined,
  cause: Cause,
  nowMs: number,
): LifecycleOutcome {
  const lc = hw.lifecycle;
  if (lc === undefined) return refused('E_CONFLICT', `hardware "${hw.id}" has no lifecycle yet`);
  const problem = verbInputProblem(command);
  if (problem !== undefined) return refused('E_INVALID', problem);
  const refusal = verbRefusal(hw.id, lc, command.verb);
  if (refusal !== undefined) return refused('E_CONFLICT', refusal);
  const reason = command.reason;
  switch (command.verb) {
    case 'inspect': {
      const deadlineMs = nowMs + (command.timeoutS ?? inspectingTimeoutSDefault) * 1000;
      return {
        kind: 'moved',
        moved: move(hw, 'inspecting', 'inspect', cause, { reason, deadlineMs }, nowMs),
      };
    }
    case 'release':
      return { kind: 'moved', moved: release(hw, command, cause, nowMs) };
    case 'drain':
      return drain(hw, lc, command, cause, nowMs);
    case 'undrain':
      return { kind: 'moved', moved: undrain(hw, lc, owner, reason, cause, nowMs) };
    case 'accept':
    case 'quarantine':
    case 'retire': {
      const to = targetOf(lc.state, command.verb);
      if (to === undefined) throw new Error(`verbRefusal let ${command.verb} from ${lc.state} through`);
      // Accepting a quarantined machine forgives its failures: the policy counts afresh.
      const fields = lc.state === 'quarantined' && to === 'ready' ? { reason, failures: [] } : { reason };
      return { kind: 'moved', moved: move(hw, to, command.verb, cause, fields, nowMs) };
    }
  }
}

/** What is wrong with an operator's lifecycle command's fields, or undefined. */
function verbInputProblem(command: Command<'hardware.lifecycle'>): string | undefined {
  if (command.reason.trim() === '') return 'reason: say why (--reason TEXT)';
  if (utf8Length(command.reason) > lifecycleReasonBytesMax) {
    return `reason: at most ${lifecycleReasonBytesMax} bytes, got ${utf8Length(command.reason)}`;
  }
  if (command.now === true && command.verb !== 'drain')
    return `now: only drain takes it, not ${command.verb}`;
  const t = command.timeoutS;
  if (t !== undefined) {
    if (command.verb !== 'inspect' && command.verb !== 'release') {
      return `timeoutS: only inspect and release take a deadline, not ${command.verb}`;
    }
    if (!Number.isSafeInteger(t) || t < 1 || t > lifecycleTimeoutSMax) {
      return `timeoutS: must be 1-${lifecycleTimeoutSMax} seconds, got ${t}`;
    }
  }
  return undefined;
}

/** An operator's release: see releaseMachine. */
function release(hw: Hardware, command: Command<'hardware.lifecycle'>, cause: Cause, nowMs: number): Moved {
  return releaseMachine(hw, command.reason, command.timeoutS ?? releasingTimeoutSDefault, cause, nowMs);
}

/** maintenance: no new work; a running owner finishes (or, with --now, is cancelled). */
function drain(
  hw: Hardware,
  lc: MachineLifecycle,
  command: Command<'hardware.lifecycle'>,
  cause: Cause,
  nowMs: number,
): LifecycleOutcome {
  const fields = { reason: command.reason, owner: lc.owner, drainedFrom: lc.state };
  const moved = move(hw, 'maintenance', 'drain', cause, fields, nowMs);
  if (command.now !== true || lc.owner === undefined) return { kind: 'moved', moved };
  const message = headUtf8(`hardware ${hw.id} drained --now: ${command.reason}`, lifecycleReasonBytesMax);
  return { kind: 'moved', moved, endOwner: { workflowId: lc.owner, how: 'cancel', message } };
}

/** Back to where the drain found the machine, or to where its workflow's end left it. */
function undrain(
  hw: Hardware,
  lc: MachineLifecycle,
  owner: Workflow | undefined,
  reason: string,
  cause: Cause,
  nowMs: number,
): Moved {
  const back = lc.drainedFrom ?? 'ready';
  if (back === 'provisioning' && owner !== undefined && !isTerminal(owner.state)) {
    const deadlineMs = provisioningDeadline(owner, nowMs);
    return move(hw, 'provisioning', 'undrain', cause, { reason, owner: owner.id, deadlineMs }, nowMs);
  }
  // A drained-from provisioning always has its owner (its end updates drainedFrom); failed if not.
  const to = back === 'provisioning' ? 'failed' : back;
  return move(hw, to, 'undrain', cause, { reason }, nowMs);
}

/** hardware.label: the record with its labels changed (not a transition: no event). */
export function labelMachine(
  hw: Hardware,
  command: Command<'hardware.label'>,
  nowMs: number,
): { readonly hardware: Hardware } | { readonly problem: string } {
  const changed = applyLabelChange(hw.labels ?? {}, command);
  if ('problem' in changed) return changed;
  const labels = changed.labels;
  const { labels: _old, ...rest } = hw;
  const next = Object.keys(labels).length === 0 ? rest : { ...rest, labels };
  return { hardware: deepFreeze<Hardware>({ ...next, updatedMs: nowMs, version: hw.version + 1 }) };
}

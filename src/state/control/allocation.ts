// workflow.allocate at apply (docs/decisions/0030-allocation-at-apply.md): which offered machine a
// selector's workflow gets, decided from the state as this entry finds it, so two allocations in
// one log never get the same machine whatever the leader does (invariant 9). The workflow is then
// created as workflow.create would create it for that machine, and takes it in the same entry.
import type { AllocationCandidate, ControlCommand, ControlErrorCode } from './commands.js';
import type { Hardware, RenderedTemplate, Workflow } from '../../model/records.js';
import { failedStep } from './hardware-lifecycle.js';
import { chooseMachine, noMachineMessage, tallyOf } from '../../fleet/allocation.js';
import { parseSelector, SelectorError } from '../../fleet/selector.js';
import { formatSelector } from '../../fleet/selector-terms.js';

type Command<T extends ControlCommand['type']> = Extract<ControlCommand, { readonly type: T }>;

export type Allocation =
  | { readonly kind: 'refused'; readonly code: ControlErrorCode; readonly message: string }
  | {
      readonly kind: 'allocated';
      /** The workflow.create the allocation amounts to, for the machine chosen. */
      readonly create: Command<'workflow.create'>;
      /** The selector, canonical, for the workflow's record. */
      readonly selector: string;
    };

/**
 * The machine a workflow.allocate gets: the first candidate, in the command's order, that is
 * ready, unowned and matches the selector now. When none is: E_VERSION if other machines are
 * (the offer was overtaken; the API offers again), else E_CONFLICT saying what matched.
 */
export function allocate(
  command: Command<'workflow.allocate'>,
  hardware: (id: string) => Hardware | undefined,
  fleet: () => Iterable<Hardware>,
  /** A pool's allocation: its own spares may be taken. */
  forPool?: string,
): Allocation {
  const selector = parseSelector(command.selector);
  if (selector instanceof SelectorError)
    return { kind: 'refused', code: 'E_INVALID', message: `selector: ${selector.message}` };
  const text = formatSelector(selector);
  const offered: { readonly hw: Hardware; readonly candidate: AllocationCandidate }[] = [];
  for (const candidate of command.candidates) {
    const hw = hardware(candidate.hardwareId);
    if (hw !== undefined) offered.push({ hw, candidate });
  }
  const chosen = chooseMachine(
    selector,
    offered.map((o) => o.hw),
    forPool,
  );
  const candidate = offered.find((o) => o.hw === chosen)?.candidate;
  if (chosen === undefined || candidate === undefined) {
    const tally = tallyOf(selector, fleet());
    if (tally.selected > 0) {
      const ids = command.candidates.map((c) => c.hardwareId).join(', ');
      return {
        kind: 'refused',
        code: 'E_VERSION',
        message: `the machines offered (${ids || 'none'}) are no longer ready for "${text}", but ${tally.selected} other machines are: offer again`,
      };
    }
    return { kind: 'refused', code: 'E_CONFLICT', message: noMachineMessage(text, tally) };
  }
  const { type: _type, candidates: _candidates, selector: _selector, ...rest } = command;
  return {
    kind: 'allocated',
    create: { ...rest, type: 'workflow.create', hardwareId: chosen.id, spec: candidate.spec },
    selector: text,
  };
}

/** What a workflow.alternate does to its workflow: moves it to a machine, or gives up, or nothing. */
export type Alternation =
  | { readonly kind: 'refused'; readonly code: ControlErrorCode; readonly message: string }
  | {
      readonly kind: 'moved';
      readonly hardwareId: string;
      readonly spec: RenderedTemplate;
      readonly why: string;
    }
  | { readonly kind: 'gave-up'; readonly why: string };

/** Whether the leader should propose workflow.alternate for this workflow now. */
export function awaitsAlternate(wf: Workflow): boolean {
  const policy = wf.alternate;
  return (
    policy !== undefined && policy.gaveUp === undefined && (wf.state === 'FAILED' || wf.state === 'TIMEOUT')
  );
}

/** How the workflow ended on its machine, for the decision's reason. */
function endOn(wf: Workflow): string {
  const step = failedStep(wf);
  const how = wf.state === 'TIMEOUT' ? 'timed out' : 'failed';
  return `${how} on ${wf.hardwareId}${step === undefined ? '' : ` at ${step}`}: ${wf.message ?? ''}`;
}

/**
 * The leader's re-allocation of a failed workflow under its alternate policy: the first candidate
 * never tried that is ready, unowned and matching. Gives up, with why, when its attempts are used
 * up or no machine is left; E_VERSION when the offer was overtaken but others are ready.
 */
export function alternateOf(
  command: Command<'workflow.alternate'>,
  wf: Workflow,
  hardware: (id: string) => Hardware | undefined,
  fleet: () => Iterable<Hardware>,
): Alternation {
  const policy = wf.alternate;
  if (policy === undefined || wf.selector === undefined)
    return { kind: 'refused', code: 'E_CONFLICT', message: `workflow "${wf.id}" has no alternate policy` };
  if (!awaitsAlternate(wf) || wf.finishedMs !== command.finishedMs) {
    return {
      kind: 'refused',
      code: 'E_NOT_DUE',
      message: `workflow "${wf.id}" is ${wf.state}${policy.gaveUp === undefined ? '' : ' and its alternate policy gave up'}, finished at ${wf.finishedMs ?? 'no time'}, not ${command.finishedMs}`,
    };
  }
  const ended = endOn(wf);
  const tried = policy.tried.join(', ');
  if (policy.tried.length >= policy.attempts) {
    return {
      kind: 'gave-up',
      why: `${ended}; gave up: tried ${policy.tried.length} of ${policy.attempts} machines (${tried})`,
    };
  }
  const selector = parseSelector(wf.selector);
  if (selector instanceof SelectorError)
    throw new Error(`a stored selector does not parse: ${selector.message}`);
  const untried = (hw: Hardware): boolean => !policy.tried.includes(hw.id);
  const offered = command.candidates.filter((c) => !policy.tried.includes(c.hardwareId));
  const machines = offered.map((c) => hardware(c.hardwareId)).filter((hw) => hw !== undefined);
  const chosen = chooseMachine(selector, machines);
  const spec = offered.find((c) => c.hardwareId === chosen?.id)?.spec;
  if (chosen === undefined || spec === undefined) {
    const tally = tallyOf(selector, [...fleet()].filter(untried));
    if (tally.selected > 0) {
      return {
        kind: 'refused',
        code: 'E_VERSION',
        message: `the machines offered are no longer ready, but ${tally.selected} others are: offer again`,
      };
    }
    const none = noMachineMessage(wf.selector, tally).replace(/^no ready machine/, 'no other ready machine');
    return { kind: 'gave-up', why: `${ended}; gave up after ${tried}: ${none}` };
  }
  const n = policy.tried.length + 1;
  return {
    kind: 'moved',
    hardwareId: chosen.id,
    spec,
    why: `${ended}; machine ${n} of ${policy.attempts}: ${chosen.id}, ready and matching ${wf.selector} (tried ${tried})`,
  };
}

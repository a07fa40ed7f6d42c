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
      /** Under the race policy: the rival lane's workflow.create, on the second machine chosen. */
      readonly rival?: Command<'workflow.create'>;
    };

/** The rival lane's workflow id under the race policy (docs/decisions/0037). */
export function raceRivalId(requestId: string): string {
  return `${requestId}.rival`;
}

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
  const lanes = command.race === true ? 2 : 1;
  // Never the same machine twice: each lane takes the first qualifying one the others left.
  const chosen: { readonly hw: Hardware; readonly candidate: AllocationCandidate }[] = [];
  for (let lane = 0; lane < lanes; lane++) {
    const left = offered.filter((o) => !chosen.some((c) => c.hw === o.hw));
    const hw = chooseMachine(
      selector,
      left.map((o) => o.hw),
      forPool,
    );
    const found = left.find((o) => o.hw === hw);
    if (found !== undefined) chosen.push(found);
  }
  const [first, second] = chosen;
  if (first === undefined || (lanes === 2 && second === undefined)) {
    const tally = tallyOf(selector, fleet());
    if (tally.selected >= lanes) {
      const ids = command.candidates.map((c) => c.hardwareId).join(', ');
      return {
        kind: 'refused',
        code: 'E_VERSION',
        message: `the machines offered (${ids || 'none'}) are no longer ready for "${text}", but ${tally.selected} other machines are: offer again`,
      };
    }
    if (lanes === 2 && tally.selected === 1) {
      return { kind: 'refused', code: 'E_CONFLICT', message: raceNeedsTwoMessage(text) };
    }
    return { kind: 'refused', code: 'E_CONFLICT', message: noMachineMessage(text, tally) };
  }
  const {
    type: _type,
    candidates: _candidates,
    selector: _selector,
    alternateAttempts: _attempts,
    race: _race,
    ...rest
  } = command;
  const createOn = (o: { readonly hw: Hardware; readonly candidate: AllocationCandidate }, id: string) =>
    ({ ...rest, id, type: 'workflow.create', hardwareId: o.hw.id, spec: o.candidate.spec }) as const;
  return {
    kind: 'allocated',
    create: createOn(first, command.id),
    selector: text,
    ...(second === undefined ? {} : { rival: createOn(second, raceRivalId(command.id)) }),
  };
}

/** Why a race cannot start: one machine is ready for its selector, and it needs two. */
export function raceNeedsTwoMessage(selectorText: string): string {
  return (
    `the race policy starts the request on two machines, and only one ready machine matches "${selectorText}": ` +
    `ready another, or use --on-failure alternate`
  );
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
  /** Under the race policy: the machines both lanes took, in order (the request's race.tried). */
  raceTried?: readonly string[],
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
  const triedAll = raceTried ?? policy.tried;
  const tried = triedAll.join(', ');
  if (triedAll.length >= policy.attempts) {
    return {
      kind: 'gave-up',
      why: `${ended}; gave up: tried ${triedAll.length} of ${policy.attempts} machines (${tried})`,
    };
  }
  const selector = parseSelector(wf.selector);
  if (selector instanceof SelectorError)
    throw new Error(`a stored selector does not parse: ${selector.message}`);
  const untried = (hw: Hardware): boolean => !triedAll.includes(hw.id);
  const offered = command.candidates.filter((c) => !triedAll.includes(c.hardwareId));
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
  const n = triedAll.length + 1;
  return {
    kind: 'moved',
    hardwareId: chosen.id,
    spec,
    why: `${ended}; machine ${n} of ${policy.attempts}: ${chosen.id}, ready and matching ${wf.selector} (tried ${tried})`,
  };
}

// workflow.allocate at apply (docs/decisions/0030-allocation-at-apply.md): which offered machine a
// selector's workflow gets, decided from the state as this entry finds it, so two allocations in
// one log never get the same machine whatever the leader does (invariant 9). The workflow is then
// created as workflow.create would create it for that machine, and takes it in the same entry.
import type { AllocationCandidate, ControlCommand, ControlErrorCode } from './commands.js';
import type { Hardware } from '../../model/records.js';
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

// Which machine a selector allocates, and why the others are left out
// (docs/decisions/0030-allocation-at-apply.md). A workflow created with `--selector` takes one
// machine that is ready, has no owner and matches; the replicated state decides which when the
// command is applied, from the machines offered in the command, first in the order given (the
// API offers them by id), so two allocations in one log never get the same machine whatever the
// leader does. `hardware explain` reads the same rules, so what it says is what allocation does.
// Pure: machines in, answers out.
import type { MachineLifecycle, MachineState } from '../model/machine-lifecycle.js';
import { machineFacts, type FactSource } from './facts.js';
import { explain, type SelectorFailure } from './selector.js';
import type { Selector } from './selector-terms.js';

/** A machine as allocation reads it: its id, its facts' sources and its lifecycle. */
export interface Candidate extends FactSource {
  readonly id: string;
  /** Absent below state version 3: such a machine is never allocated. */
  readonly lifecycle?: MachineLifecycle | undefined;
}

/**
 * Why a machine that matches every term is still not allocated, or undefined when it may be. A
 * pool's spare is allocated to that pool only (`forPool`, docs/decisions/0036).
 */
export function notReadyReason(
  lifecycle: MachineLifecycle | undefined,
  forPool?: string,
): string | undefined {
  if (lifecycle === undefined) return 'not ready: the machine has no lifecycle (state version below 3)';
  if (lifecycle.state !== 'ready') return `not ready: state ${lifecycle.state}`;
  if (lifecycle.owner !== undefined) return `not ready: owned by workflow ${lifecycle.owner}`;
  if (lifecycle.spareOf !== undefined && lifecycle.spareOf !== forPool)
    return `not ready: a spare of pool ${lifecycle.spareOf}`;
  return undefined;
}

/** One machine's verdict: selected, or the first term it fails, or matched but not ready. */
export type Verdict =
  | { readonly kind: 'selected' }
  | { readonly kind: 'fails'; readonly failure: SelectorFailure }
  | { readonly kind: 'not-ready'; readonly reason: string };

export function verdictOf(selector: Selector, machine: Candidate, forPool?: string): Verdict {
  const failure = explain(selector, machineFacts(machine));
  if (failure !== undefined) return { kind: 'fails', failure };
  const reason = notReadyReason(machine.lifecycle, forPool);
  return reason === undefined ? { kind: 'selected' } : { kind: 'not-ready', reason };
}

/** The first machine, in the order given, that the selector allocates; undefined when none. */
export function chooseMachine<M extends Candidate>(
  selector: Selector,
  machines: Iterable<M>,
  forPool?: string,
): M | undefined {
  for (const m of machines) if (verdictOf(selector, m, forPool).kind === 'selected') return m;
  return undefined;
}

/** How a fleet answers a selector: how many are selectable, match but are not ready, fail. */
export interface Tally {
  readonly total: number;
  readonly selected: number;
  /** Machines matching every term, by the state that keeps them from being allocated. */
  readonly notReady: { readonly [state: string]: number };
  readonly failing: number;
}

export function tallyOf(selector: Selector, machines: Iterable<Candidate>): Tally {
  let total = 0;
  let selected = 0;
  let failing = 0;
  const notReady: { [state: string]: number } = {};
  for (const m of machines) {
    total += 1;
    const verdict = verdictOf(selector, m);
    if (verdict.kind === 'selected') selected += 1;
    else if (verdict.kind === 'fails') failing += 1;
    else {
      const lc = m.lifecycle;
      const state: MachineState | 'owned' | 'spare' | 'untracked' =
        lc === undefined
          ? 'untracked'
          : lc.state !== 'ready'
            ? lc.state
            : lc.owner === undefined && lc.spareOf !== undefined
              ? 'spare'
              : 'owned';
      notReady[state] = (notReady[state] ?? 0) + 1;
    }
  }
  return { total, selected, notReady, failing };
}

const plural = (n: number, one: string, many: string): string => `${n} ${n === 1 ? one : many}`;

/** The refusal when no machine can be allocated: what matched but was not ready, and what next. */
export function noMachineMessage(selectorText: string, tally: Tally): string {
  const states = Object.entries(tally.notReady).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const notReady = states.reduce((sum, [, n]) => sum + n, 0);
  const which = states.map(([state, n]) => `${n} ${state}`).join(', ');
  const matched =
    notReady === 0
      ? 'no machine matches it'
      : `${plural(notReady, 'machine matches it but is', 'machines match it but are')} not ready (${which})`;
  return (
    `no ready machine matches the selector "${selectorText}": ${matched}; ` +
    `${plural(tally.failing, 'machine fails', 'machines fail')} a term of it, of ${tally.total}; ` +
    `\`slipway hardware explain '${selectorText}'\` says why each is left out`
  );
}

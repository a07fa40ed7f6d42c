// Selectors at the API (docs/decisions/0030-allocation-at-apply.md): `hardware list --selector`
// filters on the server, so a large fleet is not shipped to the client, and `HardwareExplain`
// says for each machine why it is or is not selected, by the rules allocation applies.
import { status } from '@grpc/grpc-js';
import { HardwareExplainResponse, MachineExplanation } from '../gen/control.js';
import type { HardwareExplainRequest } from '../gen/control.js';
import type { Hardware } from '../model/records.js';
import { verdictOf, type Verdict } from '../fleet/allocation.js';
import { machineFacts } from '../fleet/facts.js';
import { matches, parseSelector, pointAt, SelectorError, type Selector } from '../fleet/selector.js';
import { formatSelector } from '../fleet/selector-terms.js';
import { ApiError } from './errors.js';
import { pageOf } from './pages.js';

/** The selector the text says; INVALID_ARGUMENT pointing at the term (column and caret) if not. */
export function selectorArgument(text: string): Selector {
  const parsed = parseSelector(text);
  if (parsed instanceof SelectorError) throw new ApiError(status.INVALID_ARGUMENT, pointAt(text, parsed));
  return parsed;
}

/** The machines a selector's terms select, whatever their state; all when `text` is empty. */
export function selectedBy(text: string, machines: readonly Hardware[]): readonly Hardware[] {
  if (text.trim() === '') return machines;
  const selector = selectorArgument(text);
  return machines.filter((hw) => matches(selector, machineFacts(hw)));
}

function explanation(hw: Hardware, verdict: Verdict): MachineExplanation {
  return MachineExplanation.fromPartial({
    id: hw.id,
    state: hw.lifecycle?.state ?? '',
    verdict: verdict.kind,
    term: verdict.kind === 'fails' ? verdict.failure.term : '',
    termIndex: verdict.kind === 'fails' ? verdict.failure.index : 0,
    reason:
      verdict.kind === 'fails'
        ? verdict.failure.reason
        : verdict.kind === 'not-ready'
          ? verdict.reason
          : 'selected',
  });
}

/** HardwareExplain: a page of machines by id with their verdicts, and counts over every machine. */
export function explainMachines(
  req: HardwareExplainRequest,
  machines: readonly Hardware[],
): HardwareExplainResponse {
  const selector = selectorArgument(req.selector);
  const all = machines.map((hw) => explanation(hw, verdictOf(selector, hw)));
  const count = (verdict: Verdict['kind']): number => all.filter((e) => e.verdict === verdict).length;
  const page = pageOf(
    all,
    req,
    (e) => [e.id],
    (e) => MachineExplanation.encode(e).finish().length,
  );
  return HardwareExplainResponse.fromPartial({
    selector: formatSelector(selector),
    machines: page.items,
    total: all.length,
    selected: count('selected'),
    notReady: count('not-ready'),
    failing: count('fails'),
    continue: page.continue,
  });
}

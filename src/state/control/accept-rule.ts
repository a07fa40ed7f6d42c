// The auto-accept rule (docs/decisions/0037-race-and-accept-rule.md): a selector, replicated, that
// makes an enrolled machine ready when its inventory report is applied and it matches then. One
// rule for the cluster, set and cleared by an admin; absent, every enrolled machine waits for
// `hardware accept`. Pure: the decision reads the record as the report leaves it.
import type { Hardware } from '../../model/records.js';
import { machineFacts } from '../../fleet/facts.js';
import { matches, parseSelector, SelectorError } from '../../fleet/selector.js';
import { formatSelector, type Selector } from '../../fleet/selector-terms.js';

/** The rule in force: its canonical text and the parsed selector. */
export interface AcceptRule {
  readonly selector: string;
  readonly parsed: Selector;
}

/** The rule for a selector's text, canonical; a string saying what is wrong when it does not parse. */
export function acceptRuleOf(text: string): AcceptRule | string {
  if (text.trim() === '')
    return 'selector: give one (an empty rule would accept every machine); clear the rule instead';
  const parsed = parseSelector(text);
  if (parsed instanceof SelectorError) return `selector: ${parsed.message}`;
  return Object.freeze({ selector: formatSelector(parsed), parsed });
}

/**
 * Whether a machine the report left enrolled, with its inventory, is accepted by the rule: it
 * must have an inventory (the rule is on facts) and match every term, labels included.
 */
export function acceptedByRule(hw: Hardware, rule: AcceptRule | undefined): boolean {
  if (rule === undefined || hw.lifecycle?.state !== 'enrolled' || hw.inventory === undefined) return false;
  return matches(rule.parsed, machineFacts(hw));
}

/** The reason the machine's transition gives. */
export function acceptedByRuleReason(rule: AcceptRule): string {
  return `accepted by rule ${rule.selector}`;
}

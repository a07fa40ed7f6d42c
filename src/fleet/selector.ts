// One selector language for `hardware list --selector`, `hardware explain`, pools, workflows and
// fleet operations: labels as Kubernetes selects them, and inventory facts with numbers and
// units, joined by commas (docs/decisions/0027-selectors-and-inventory.md). Pure: a selector and
// a machine's facts in, an answer out; the replicated state may call it when a command applies.
//   - A fact with one value per disk or NIC (disks.size, nics.speed) holds when some item
//     satisfies it; != and notin are the negations of = and in: no item has the value.
//   - A machine with no inventory yet fails every inventory term, negated ones too.
//   - A label missing satisfies != and notin (as in Kubernetes) and fails the others.
import { factSpecs, type MachineFacts } from './facts.js';
import { describeBytes, unitFamilyOf } from './quantity.js';
import {
  formatTerm,
  formatText,
  formatValue,
  isOrdering,
  type Selector,
  type Term,
} from './selector-terms.js';
import { isFactName, labelKeyProblem } from '../model/labels.js';

export { parseSelector, pointAt, SelectorError } from './selector-parse.js';
export {
  formatSelector,
  formatTerm,
  operators,
  type Operator,
  type Selector,
  type Term,
} from './selector-terms.js';
export { machineFacts, type FactSource, type MachineFacts } from './facts.js';

/** Whether `hardware label` may set this key, and why not: Kubernetes' syntax, no fact names. */
export function labelKeyAllowed(
  key: string,
): { readonly allowed: true } | { readonly allowed: false; readonly reason: string } {
  const reason = labelKeyProblem(key);
  return reason === undefined ? { allowed: true } : { allowed: false, reason };
}

const wholePattern = /^[0-9]{1,16}$/;

function labelOf(labels: MachineFacts['labels'], key: string): string | undefined {
  return Object.hasOwn(labels, key) ? labels[key] : undefined;
}

/** Whether one value satisfies a positive operator (= in > >= < <=) against the term's values. */
function satisfies(term: Term, actual: number | string): boolean {
  const wanted = term.values[0];
  switch (term.op) {
    case '=':
    case '!=':
      return actual === wanted;
    case 'in':
    case 'notin':
      return term.values.includes(actual);
    case '>':
      return wanted !== undefined && actual > wanted;
    case '>=':
      return wanted !== undefined && actual >= wanted;
    case '<':
      return wanted !== undefined && actual < wanted;
    case '<=':
      return wanted !== undefined && actual <= wanted;
    case 'exists':
    case 'absent':
      return false;
  }
}

const isNegated = (term: Term): boolean => term.op === '!=' || term.op === 'notin';

function labelHolds(term: Term, labels: MachineFacts['labels']): boolean {
  const value = labelOf(labels, term.key);
  if (term.op === 'exists') return value !== undefined;
  if (term.op === 'absent') return value === undefined;
  if (value === undefined) return isNegated(term);
  if (isOrdering(term.op)) return wholePattern.test(value) && satisfies(term, Number(value));
  return satisfies(term, value) !== isNegated(term);
}

function factValues(term: Term, facts: MachineFacts): readonly (number | string)[] | undefined {
  return isFactName(term.key) ? factSpecs[term.key].read(facts) : undefined;
}

function factHolds(term: Term, facts: MachineFacts): boolean {
  const values = factValues(term, facts);
  if (values === undefined) return false;
  const some = values.some((v) => satisfies(term, v));
  return isNegated(term) ? !some : some;
}

function holds(term: Term, facts: MachineFacts): boolean {
  return term.kind === 'label' ? labelHolds(term, facts.labels) : factHolds(term, facts);
}

/** True when the machine satisfies every term (an empty selector selects every machine). */
export function matches(selector: Selector, facts: MachineFacts): boolean {
  for (const term of selector.terms) if (!holds(term, facts)) return false;
  return true;
}

/** The first term a machine fails: its index, canonical text, the reason, and both as one line. */
export interface SelectorFailure {
  readonly index: number;
  readonly term: string;
  readonly reason: string;
  /** `memory>=64Gi: has 32Gi` */
  readonly text: string;
}

function labelReason(term: Term, labels: MachineFacts['labels']): string {
  const value = labelOf(labels, term.key);
  if (value === undefined) return `has no label ${term.key}`;
  const has = `has ${term.key}=${formatText(value)}`;
  return isOrdering(term.op) && !wholePattern.test(value) ? `${has}, not a whole number` : has;
}

const shownMax = 8;

function factReason(term: Term, facts: MachineFacts): string {
  if (!isFactName(term.key)) return `${term.key} is not a fact`;
  const spec = factSpecs[term.key];
  const values = spec.read(facts);
  if (values === undefined) return 'no inventory yet: the machine has not been inspected';
  const first = term.values.find((v) => typeof v === 'number');
  const family = typeof first === 'number' ? unitFamilyOf(first) : 'binary';
  const show = (v: number | string): string =>
    typeof v === 'number' && spec.kind === 'bytes' ? describeBytes(v, family) : formatValue(term, v);
  if (isNegated(term)) {
    const offending = values.find((v) => satisfies(term, v)) ?? '';
    return spec.item === undefined ? `has ${show(offending)}` : `a ${spec.item.noun} has ${show(offending)}`;
  }
  if (spec.item === undefined)
    return values.length === 0 ? `${term.key} is not reported` : `has ${show(values[0]!)}`;
  if (values.length === 0) return spec.item.empty;
  const distinct = [...new Set(values)];
  const shown = distinct.slice(0, shownMax).map(show).join(', ');
  return `no ${spec.item.noun} matches; ${spec.item.plural}: ${shown}${distinct.length > shownMax ? ', …' : ''}`;
}

/**
 * The first term the machine fails and why (`memory>=64Gi: has 32Gi`), or undefined when it is
 * selected: what `hardware explain` prints for each machine left out.
 */
export function explain(selector: Selector, facts: MachineFacts): SelectorFailure | undefined {
  const index = selector.terms.findIndex((term) => !holds(term, facts));
  const term = selector.terms[index];
  if (term === undefined) return undefined;
  const text = formatTerm(term);
  const reason = term.kind === 'label' ? labelReason(term, facts.labels) : factReason(term, facts);
  return { index, term: text, reason, text: `${text}: ${reason}` };
}

// A parsed selector: terms joined by commas, each a test on a label or an inventory fact. Plain
// JSON-shaped data; formatSelector writes the canonical text, which parseSelector reads back to
// an equal selector (docs/decisions/0027-selectors-and-inventory.md).
import { factSpecs } from './facts.js';
import { formatBytes } from './quantity.js';
import { isFactName } from '../model/labels.js';

export const operators = ['exists', 'absent', '=', '!=', 'in', 'notin', '>', '>=', '<', '<='] as const;
export type Operator = (typeof operators)[number];
export type Ordering = '>' | '>=' | '<' | '<=';

export interface Term {
  /** A label's key, or an inventory fact's name (src/model/labels.ts's factNames). */
  readonly kind: 'label' | 'fact';
  readonly key: string;
  /** `==` is read as `=`; exists and absent (`gpu`, `!gpu`) are for labels only. */
  readonly op: Operator;
  /**
   * None for exists and absent; one for = != and the orderings; one or more for in and notin.
   * Numbers for bytes and count facts and for a label compared by ordering; text otherwise.
   */
  readonly values: readonly (number | string)[];
}

/** Every term must hold; no terms selects every machine. */
export interface Selector {
  readonly terms: readonly Term[];
}

export function isOrdering(op: Operator): op is Ordering {
  return op === '>' || op === '>=' || op === '<' || op === '<=';
}

/** Letters, digits and . _ - stand bare; anything else (spaces, quotes, the empty text) is quoted. */
const barePattern = /^[A-Za-z0-9._-]+$/;

/** A text value as a selector writes it: bare when it can be, else in double quotes. */
export function formatText(text: string): string {
  return barePattern.test(text) ? text : `"${text.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
}

/** A value of a term on this key, as the canonical text writes it. */
export function formatValue(term: Pick<Term, 'kind' | 'key'>, value: number | string): string {
  if (typeof value === 'string') return formatText(value);
  const bytes = term.kind === 'fact' && isFactName(term.key) && factSpecs[term.key].kind === 'bytes';
  return bytes ? formatBytes(value) : String(value);
}

export function formatTerm(term: Term): string {
  const values = term.values.map((v) => formatValue(term, v));
  switch (term.op) {
    case 'exists':
      return term.key;
    case 'absent':
      return `!${term.key}`;
    case 'in':
    case 'notin':
      return `${term.key} ${term.op} (${values.join(',')})`;
    default:
      return `${term.key}${term.op}${values[0] ?? ''}`;
  }
}

/** The canonical text: terms in their order (explain names the first that fails), joined by ",". */
export function formatSelector(selector: Selector): string {
  return selector.terms.map(formatTerm).join(',');
}

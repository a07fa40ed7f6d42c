// Reading a selector's text: Kubernetes' label selector syntax (`rack=a`, `rack in (a,b)`, `!gpu`)
// extended with orderings, quoted values and inventory facts (`memory>=64Gi`). A refusal names
// the term as typed, the column (1-based, in the whole text) and what would be right:
//   memory>=64Gx: unknown unit "Gx" at column 9; units are Ki Mi Gi Ti Pi Ei (binary), ...
import { factSpecs } from './facts.js';
import { parseBytes, parseWhole, type QuantityProblem } from './quantity.js';
import { isOrdering, type Operator, type Selector, type Term } from './selector-terms.js';
import {
  factNames,
  isFactName,
  isFactNamespace,
  labelKeyProblem,
  labelValueProblem,
} from '../model/labels.js';
import { selectorBytesMax, selectorTermsMax, selectorValuesMax } from '../model/limits.js';
import { closestName } from '../platform/edit-distance.js';
import { utf8Length } from '../platform/utf8-text.js';

/** A selector refused: the term as typed, where, what is wrong and (often) how to write it. */
export class SelectorError extends Error {
  /** 1-based, counted in the whole selector's text. */
  readonly column: number;
  /** The term as typed (shortened past 60 characters); empty for the selector as a whole. */
  readonly term: string;
  readonly problem: string;
  readonly hint?: string;
  constructor(term: string, column: number, problem: string, hint?: string) {
    const where = term === '' ? 'selector' : term;
    super(`${where}: ${problem} at column ${column}${hint === undefined ? '' : `; ${hint}`}`);
    this.name = 'SelectorError';
    this.term = term;
    this.column = column;
    this.problem = problem;
    if (hint !== undefined) this.hint = hint;
  }
}

/** Thrown inside the reader; parseSelector turns it into a SelectorError about its term. */
class Refusal extends Error {
  readonly at: number;
  readonly problem: string;
  readonly hint: string | undefined;
  constructor(at: number, problem: string, hint?: string) {
    super(problem);
    this.at = at;
    this.problem = problem;
    this.hint = hint;
  }
}

interface Token {
  readonly text: string;
  readonly at: number;
}

const keyChar = /[A-Za-z0-9._/-]/;
const bareChar = /[A-Za-z0-9._-]/;
const operatorsHint = 'operators are = == != > >= < <= in notin';

class Reader {
  readonly text: string;
  at = 0;
  constructor(text: string) {
    this.text = text;
  }
  peek(): string {
    return this.text.charAt(this.at);
  }
  skipSpaces(): void {
    while (this.at < this.text.length && /\s/.test(this.text.charAt(this.at))) this.at += 1;
  }
  readWhile(pattern: RegExp): Token {
    const at = this.at;
    while (this.at < this.text.length && pattern.test(this.text.charAt(this.at))) this.at += 1;
    return { text: this.text.slice(at, this.at), at };
  }
  found(): string {
    const c = this.peek();
    return c === '' ? 'the end' : JSON.stringify(c);
  }
}

function readOperator(r: Reader, key: Token): { op: Operator; at: number } {
  const at = r.at;
  const c = r.peek();
  if (c === '' || c === ',') return { op: 'exists', at };
  const two = r.text.slice(at, at + 2);
  if (two === '==' || two === '!=' || two === '>=' || two === '<=') {
    r.at += 2;
    return { op: two === '==' ? '=' : two, at };
  }
  if (c === '=' || c === '>' || c === '<') {
    r.at += 1;
    return { op: c, at };
  }
  const word = r.readWhile(/[a-z]/);
  if (word.text === 'in' || word.text === 'notin') return { op: word.text, at };
  r.at = at;
  throw new Refusal(
    at,
    `expected an operator after ${JSON.stringify(key.text)}, found ${r.found()}`,
    operatorsHint,
  );
}

function readQuoted(r: Reader): Token {
  const at = r.at;
  let out = '';
  r.at += 1;
  for (;;) {
    const c = r.peek();
    if (c === '') throw new Refusal(at, 'the quoted value has no closing "');
    r.at += 1;
    if (c === '"') return { text: out, at };
    if (c.charCodeAt(0) < 0x20 || c === '\x7f')
      throw new Refusal(r.at - 1, 'a control character in a quoted value');
    if (c === '\\') {
      const next = r.peek();
      if (next !== '\\' && next !== '"')
        throw new Refusal(r.at - 1, 'unknown escape in a quoted value', 'only \\" and \\\\ are escapes');
      r.at += 1;
      out += next;
    } else out += c;
  }
}

function readValue(r: Reader, after: string): Token {
  r.skipSpaces();
  if (r.peek() === '"') return readQuoted(r);
  const value = r.readWhile(bareChar);
  if (value.text === '') {
    const hint =
      'quote a value that holds other characters than letters, digits, ".", "_" and "-"; "" is the empty value';
    throw new Refusal(r.at, `expected a value after ${after}, found ${r.found()}`, hint);
  }
  return value;
}

function readValueList(r: Reader, op: string): readonly Token[] {
  r.skipSpaces();
  if (r.peek() !== '(')
    throw new Refusal(r.at, `expected "(" after ${op}, found ${r.found()}`, `write e.g. rack ${op} (a,b)`);
  r.at += 1;
  const values: Token[] = [];
  for (;;) {
    const value = readValue(r, values.length === 0 ? '"("' : '","');
    if (values.length === selectorValuesMax) {
      throw new Refusal(value.at, `more than ${selectorValuesMax} values in one ${op} list`);
    }
    values.push(value);
    r.skipSpaces();
    const c = r.peek();
    r.at += 1;
    if (c === ')') return values;
    if (c !== ',')
      throw new Refusal(
        r.at - 1,
        `expected "," or ")" in the ${op} list, found ${c === '' ? 'the end' : JSON.stringify(c)}`,
      );
  }
}

function nearestFact(key: string): string | undefined {
  return closestName(key, factNames);
}

function checked(result: number | QuantityProblem, at: number): number {
  if (typeof result === 'number') return result;
  throw new Refusal(at, result.problem, result.hint);
}

function factTerm(key: Token, op: { op: Operator; at: number }, values: readonly Token[]): Term {
  if (!isFactName(key.text)) {
    const near = nearestFact(key.text);
    const known = `facts are ${factNames.join(', ')}`;
    throw new Refusal(
      key.at,
      `unknown fact ${JSON.stringify(key.text)}`,
      near === undefined ? known : `did you mean ${near}? ${known}`,
    );
  }
  const spec = factSpecs[key.text];
  if (op.op === 'exists' || op.op === 'absent') {
    throw new Refusal(
      key.at,
      `${key.text} is an inventory fact, and only a label can be tested for presence`,
      `compare it, e.g. ${key.text}${spec.kind === 'bytes' ? '>=64Gi' : '=VALUE'}`,
    );
  }
  if (isOrdering(op.op) && (spec.kind === 'text' || spec.kind === 'choice')) {
    throw new Refusal(
      op.at,
      `${key.text} is ${spec.kind === 'text' ? 'text' : 'a choice'}, not a number`,
      'compare it with = != in notin',
    );
  }
  const read = (value: Token): number | string => {
    switch (spec.kind) {
      case 'bytes':
        return checked(parseBytes(value.text), value.at);
      case 'count':
        return checked(
          parseWhole(value.text, `${key.text} counts ${spec.counts ?? 'items'}, so it`),
          value.at,
        );
      case 'choice':
        if (spec.choices?.includes(value.text)) return value.text;
        throw new Refusal(
          value.at,
          `unknown value ${JSON.stringify(value.text)}`,
          `${key.text} is ${(spec.choices ?? []).join(' or ')}`,
        );
      case 'text':
        if (value.text !== '') return value.text;
        throw new Refusal(
          value.at,
          `an empty value for ${key.text}`,
          'a fact is never empty; leave the term out',
        );
    }
  };
  return { kind: 'fact', key: key.text, op: op.op, values: values.map(read) };
}

function labelTerm(key: Token, op: { op: Operator; at: number }, values: readonly Token[]): Term {
  const keyProblem = labelKeyProblem(key.text);
  if (keyProblem !== undefined) throw new Refusal(key.at, keyProblem);
  const read = (value: Token): number | string => {
    if (isOrdering(op.op)) return checked(parseWhole(value.text, `a label compared with ${op.op}`), value.at);
    const problem = labelValueProblem(value.text);
    if (problem !== undefined) throw new Refusal(value.at, problem);
    return value.text;
  };
  return { kind: 'label', key: key.text, op: op.op, values: values.map(read) };
}

function readTerm(r: Reader): Term {
  const absent = r.peek() === '!';
  if (absent) {
    r.at += 1;
    r.skipSpaces();
  }
  const key = r.readWhile(keyChar);
  if (key.text === '') {
    throw new Refusal(
      key.at,
      `expected ${absent ? 'a label key after "!"' : 'a label key or a fact name'}, found ${r.found()}`,
    );
  }
  r.skipSpaces();
  const op = readOperator(r, key);
  if (absent && op.op !== 'exists')
    throw new Refusal(
      op.at,
      `"!${key.text}" tests that a label is absent and takes no operator`,
      `write ${key.text}!=VALUE to compare`,
    );
  const actual = absent ? ({ op: 'absent', at: op.at } as const) : op;
  const values =
    op.op === 'exists'
      ? []
      : op.op === 'in' || op.op === 'notin'
        ? readValueList(r, op.op)
        : [readValue(r, JSON.stringify(op.op))];
  return isFactNamespace(key.text) ? factTerm(key, actual, values) : labelTerm(key, actual, values);
}

function readSelector(r: Reader, termStarts: number[]): Selector {
  const terms: Term[] = [];
  r.skipSpaces();
  if (r.peek() === '') return { terms };
  for (;;) {
    r.skipSpaces();
    termStarts.push(r.at);
    if (r.peek() === ',' || r.peek() === '')
      throw new Refusal(r.at, 'an empty term', 'terms are joined by single commas');
    if (terms.length === selectorTermsMax) throw new Refusal(r.at, `more than ${selectorTermsMax} terms`);
    terms.push(readTerm(r));
    r.skipSpaces();
    const c = r.peek();
    if (c === '') return { terms };
    if (c !== ',')
      throw new Refusal(
        r.at,
        `expected "," or the end after the term, found ${r.found()}`,
        'quote a value with spaces',
      );
    r.at += 1;
  }
}

/** The term as typed that starts at `start`: up to a comma outside quotes and parentheses. */
function termTextAt(text: string, start: number): string {
  let depth = 0;
  let quoted = false;
  let end = start;
  for (; end < text.length; end++) {
    const c = text.charAt(end);
    if (quoted) {
      if (c === '\\') end += 1;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === '(') depth += 1;
    else if (c === ')') depth = Math.max(0, depth - 1);
    else if (c === ',' && depth === 0) break;
  }
  const term = text.slice(start, end).trim();
  return term.length > 60 ? `${term.slice(0, 60)}…` : term;
}

/** The selector the text says, or a SelectorError pointing at the term at fault. */
export function parseSelector(text: string): Selector | SelectorError {
  const bytes = utf8Length(text);
  if (bytes > selectorBytesMax)
    return new SelectorError('', 1, `is ${bytes} bytes; at most ${selectorBytesMax}`);
  const termStarts: number[] = [];
  try {
    return readSelector(new Reader(text), termStarts);
  } catch (error) {
    if (!(error instanceof Refusal)) throw error;
    const start = termStarts[termStarts.length - 1] ?? 0;
    return new SelectorError(termTextAt(text, start), error.at + 1, error.problem, error.hint);
  }
}

/** Characters of the selector shown on each side of the column a refusal points at. */
const shownAround = 36;

/**
 * The refusal with the selector under it and a caret at the column, for an operator's terminal:
 *   rack=a,memory>=64Gx: unknown unit "Gx" at column 16; ...
 *     rack=a,memory>=64Gx
 *                    ^
 * A long selector is shown around the column only.
 */
export function pointAt(text: string, error: SelectorError): string {
  const at = Math.min(Math.max(error.column - 1, 0), text.length);
  const from = Math.max(0, at - shownAround);
  const to = Math.min(text.length, at + shownAround);
  const head = from > 0 ? '…' : '';
  const shown = `${head}${text.slice(from, to)}${to < text.length ? '…' : ''}`.replace(/\s/g, ' ');
  return `${error.message}\n  ${shown}\n  ${' '.repeat(head.length + at - from)}^`;
}

// YAML text with a way back from a field path to the line it was written on, so a refusal can
// say "line 7: tasks[0].actions[1].timeout: ...". Shared by templates and hardware documents.
//
// Strict on purpose (invariant 7, bad input changes nothing): duplicate keys, several documents,
// unknown tags and unresolved aliases are refused rather than guessed at.
import {
  isAlias,
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  Scalar,
  visit,
  type Document,
  type Node,
} from 'yaml';

/** A field's place in a document: map keys and sequence indexes, outermost first. */
export type FieldPath = readonly (string | number)[];

/** A refusal of one field, before the line is known. */
export interface FieldProblem {
  readonly path: FieldPath;
  readonly message: string;
}

/** A refusal with the line it points at (1-based), when the text is YAML. */
export interface LocatedProblem extends FieldProblem {
  readonly line?: number;
}

export type YamlParse =
  | { readonly ok: true; readonly source: YamlSource }
  | { readonly ok: false; readonly problem: LocatedProblem };

/** Aliases expand in toJS; a small cap keeps "billion laughs" documents from exploding. */
const aliasExpansionsMax = 100;

/** `tasks[0].actions[1].timeout`; the empty path is the document itself. */
export function formatPath(path: FieldPath): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else text += text === '' ? segment : `.${segment}`;
  }
  return text === '' ? '(document)' : text;
}

/** `line 7: tasks[0].timeout: message`, leaving out what is unknown. */
export function formatProblem(problem: LocatedProblem): string {
  const where = problem.line === undefined ? '' : `line ${problem.line}: `;
  const field = problem.path.length === 0 ? '' : `${formatPath(problem.path)}: `;
  return `${where}${field}${problem.message}`;
}

/** A value for an error message: strings quoted, long ones cut, structures named. */
export function describeValue(value: unknown): string {
  if (value === null || value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  if (ArrayBuffer.isView(value)) return 'binary data';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') {
    const shown = value.length > 60 ? `${value.slice(0, 57)}...` : value;
    return JSON.stringify(shown);
  }
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  return typeof value;
}

/** The allowed name within two edits of a typo (`comand` → `command`), if one is that close. */
export { closestName } from '../platform/edit-distance.js';

export class YamlSource {
  /** The document as plain JSON-shaped values (maps as objects, sequences as arrays). */
  readonly value: unknown;
  readonly #doc: Document;
  readonly #lines: LineCounter;

  private constructor(value: unknown, doc: Document, lines: LineCounter) {
    this.value = value;
    this.#doc = doc;
    this.#lines = lines;
  }

  /**
   * `unquotedPlaceholders`: a value written as one unquoted placeholder (`DEST_DISK: {{ index
   * .Hardware.Disks 0 }}`, as Tinkerbell's examples write them, since Tinkerbell renders the text
   * before parsing it) is read as the string it spells instead of a flow mapping in a flow mapping.
   */
  static parse(text: string, options: { readonly unquotedPlaceholders?: boolean } = {}): YamlParse {
    const lines = new LineCounter();
    // logLevel 'error': warnings go to doc.warnings (refused below), not to process warnings.
    const doc = parseDocument(text, {
      lineCounter: lines,
      prettyErrors: true,
      uniqueKeys: true,
      logLevel: 'error',
    });
    const syntax = doc.errors[0] ?? doc.warnings[0];
    if (syntax !== undefined) {
      // yaml appends " at line L, column C:" and a code frame; the line goes in front instead.
      const reason = (syntax.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '');
      const line = syntax.linePos?.[0].line;
      const problem = { path: [], message: `YAML syntax: ${reason}` };
      return { ok: false, problem: line === undefined ? problem : { ...problem, line } };
    }
    if (options.unquotedPlaceholders === true) placeholdersAsStrings(doc, text);
    try {
      const value: unknown = doc.toJS({ maxAliasCount: aliasExpansionsMax });
      return { ok: true, source: new YamlSource(value, doc, lines) };
    } catch (error) {
      // Unresolved aliases and alias bombs surface only while converting.
      const reason = error instanceof Error ? error.message : String(error);
      return { ok: false, problem: { path: [], message: `YAML: ${reason}` } };
    }
  }

  /**
   * The line of the field at `path`: the key's line for a map entry (where `field:` is written),
   * the item's line for a sequence item. A path that does not exist gives the line of its
   * longest existing prefix, so a missing field points at the mapping that lacks it.
   */
  lineOf(path: FieldPath): number | undefined {
    let node: unknown = this.#doc.contents;
    let offset = this.#startOf(node);
    for (const segment of path) {
      node = this.#resolve(node);
      if (isMap(node) && typeof segment === 'string') {
        const pair = node.items.find((item) => isScalar(item.key) && String(item.key.value) === segment);
        if (pair === undefined) break;
        offset = this.#startOf(pair.key) ?? this.#startOf(pair.value) ?? offset;
        node = pair.value;
      } else if (isSeq(node) && typeof segment === 'number') {
        const item: unknown = node.items[segment];
        if (item === undefined) break;
        offset = this.#startOf(item) ?? offset;
        node = item;
      } else {
        break;
      }
    }
    return offset === undefined ? undefined : this.#lines.linePos(offset).line;
  }

  /**
   * Where the text of the value at `path` begins, following aliases to where it was written:
   * `first` is the source line of the value's first line. `aligned` says whether each later line
   * of the value is also the next line of the source, as in a literal block (`|`); a quoted or
   * folded value joins lines, so only its first line is known.
   */
  valueLines(path: FieldPath): { readonly first: number; readonly aligned: boolean } | undefined {
    let node: unknown = this.#doc.contents;
    for (const segment of path) {
      node = this.#resolve(node);
      if (isMap(node) && typeof segment === 'string') {
        node = node.items.find((item) => isScalar(item.key) && String(item.key.value) === segment)?.value;
      } else if (isSeq(node) && typeof segment === 'number') {
        node = node.items[segment];
      } else {
        return undefined;
      }
    }
    node = this.#resolve(node);
    const start = this.#startOf(node);
    if (start === undefined) return undefined;
    const line = this.#lines.linePos(start).line;
    // A block scalar starts at its `|` header; its text starts on the next line.
    const literal = isScalar(node) && node.type === 'BLOCK_LITERAL';
    return literal ? { first: line + 1, aligned: true } : { first: line, aligned: false };
  }

  locate(problem: FieldProblem): LocatedProblem {
    const line = this.lineOf(problem.path);
    return line === undefined ? problem : { ...problem, line };
  }

  /** Every problem with its line, in document order (stable for problems on one line). */
  locateAll(problems: readonly FieldProblem[]): LocatedProblem[] {
    return problems.map((problem) => this.locate(problem)).sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
  }

  #resolve(node: unknown): unknown {
    return isAlias(node) ? node.resolve(this.#doc) : node;
  }

  #startOf(node: unknown): number | undefined {
    if (node === null || typeof node !== 'object' || !('range' in node)) return undefined;
    const range = (node as Node).range;
    return range?.[0];
  }
}

/** Every flow mapping whose whole text is `{{ ... }}` on one line becomes that text, as a string. */
function placeholdersAsStrings(doc: Document, text: string): void {
  visit(doc, {
    Map(_key, node) {
      if (node.flow !== true || node.range === undefined || node.range === null) return undefined;
      const written = text.slice(node.range[0], node.range[1]);
      if (!/^\{\{[^\n]*\}\}$/.test(written)) return undefined;
      const scalar = new Scalar(written);
      scalar.range = node.range;
      return scalar;
    },
  });
}

/** An input document refused for one or more problems, each with its field path and line. */
export class LocatedError extends Error {
  /** Every problem found, in document order; `message` lists them one per line. */
  readonly problems: readonly LocatedProblem[];

  constructor(problems: readonly LocatedProblem[]) {
    super(problems.map(formatProblem).join('\n'));
    this.problems = problems;
  }

  /** The line of the first problem, when the text is YAML. */
  get line(): number | undefined {
    return this.problems[0]?.line;
  }
}

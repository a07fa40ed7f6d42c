// Placeholders in one string value of a template: Handlebars, with Tinkerbell's Go-template
// spelling accepted. The YAML is parsed first (template-render.ts); only the text of a string
// value is ever rendered here, so whatever a variable holds, the value stays one string.
//
// Tinkerbell templates are Go templates: `{{.device_1}}`, `{{ index .Hardware.Disks 0 }}`,
// `{{ formatPartition (index .Hardware.Disks 0) 1 }}`. Before compiling, template-go.ts rewrites
// the forms Tinkerbell's docs write into the Handlebars that gives the same value, and refuses
// every other Go form naming it and its line (docs/decisions/0042). Rewrites never add or remove
// a line, so error lines still point into the operator's text.
//
// Rendering is strict (a missing variable is an error, never an empty string), unescaped (the
// output is a value, not HTML), and limited to the built-in helpers and Tinkerbell's
// formatPartition and netmaskToPrefixLength; partials and decorators are refused, since a
// template must be self-contained.
//
// A shell command line is rendered differently: every `{{ ... }}` that prints becomes a piece of
// its own, so template-shell.ts can put the value in the environment and only a reference to it
// in the script. The authored text is never mixed with a value here.
import Handlebars from 'handlebars';
import { parseIpv4 } from '../platform/addresses.js';
import { goHelperNames, goRefusalMessage, rewriteGoForms, writtenAt, type GoRewrite } from './template-go.js';
import type { ScriptPiece } from './template-shell.js';
import type { LocatedProblem } from './template-yaml.js';

const handlebars = Handlebars.create();
// `{{log}}` would write to the server's console from operator input.
handlebars.unregisterHelper('log');
handlebars.registerHelper('formatPartition', formatPartition);
handlebars.registerHelper('netmaskToPrefixLength', netmaskToPrefixLength);

/** Where a string sits decides how it renders: as a value, or as a shell command line. */
export type PlaceholderUse = 'value' | 'shell';

/**
 * The helper each printing mustache of a shell command line is routed through. The space makes
 * it a name no template can write (Handlebars identifiers have none).
 */
const shellValueHelper = 'slipway shell value';
const shellNulRefusal = 'a shell command line cannot contain a NUL character';
const goHelpers = Object.fromEntries(goHelperNames.map((name) => [name, true]));
const compileOptions = {
  value: { strict: true, noEscape: true, knownHelpersOnly: true, knownHelpers: goHelpers },
  shell: {
    strict: true,
    noEscape: true,
    knownHelpersOnly: true,
    knownHelpers: { ...goHelpers, [shellValueHelper]: true },
  },
} as const;

/** Object.prototype names: Handlebars denies them at run time with a console warning instead. */
const prototypeNames = new Set(Object.getOwnPropertyNames(Object.prototype));
const unsupportedNodes = new Map([
  ['PartialStatement', 'partials ({{> name}}) are not supported'],
  ['PartialBlockStatement', 'partials ({{#> name}}) are not supported'],
  ['Decorator', 'decorators ({{* name}}) are not supported'],
  ['DecoratorBlock', 'decorators ({{#* name}}) are not supported'],
]);

/** Thrown while rendering; `line` is 1-based when Handlebars knows it. */
export class PlaceholderError extends Error {
  readonly line: number | undefined;

  constructor(message: string, line?: number) {
    super(message);
    this.name = 'PlaceholderError';
    this.line = line;
  }
}

/**
 * What a mapping or list among the variables prints as: a NUL-delimited marker, found again after
 * rendering so the refusal can name the line.
 */
export function structureMarker(kind: 'list' | 'mapping', path: string): string {
  return `\u0000slipway:${kind}:${path}\u0000`;
}

// eslint-disable-next-line no-control-regex
const structureMarkerPattern = /\u0000slipway:(list|mapping):([^\u0000]*)\u0000/;

/** The string as Handlebars reads it: `{{ .device_1 }}` → `{{ device_1 }}`, Go forms rewritten. */
export function rewriteGoStylePaths(source: string): string {
  return rewriteGoForms(source).text;
}

/**
 * Tinkerbell's formatPartition: the device path of partition N of a disk, as Linux names it
 * (/dev/sda → /dev/sda1, /dev/nvme0n1 → /dev/nvme0n1p1, /dev/disk/by-id/X → X-part1).
 */
function formatPartition(device: unknown, partition: unknown, options: Handlebars.HelperOptions): string {
  if (typeof device !== 'string' || device === '' || !Number.isInteger(partition)) {
    throw new PlaceholderError(
      `formatPartition takes a disk's device path and a partition number, got ${typeof device === 'string' ? JSON.stringify(device) : 'a structure'} and ${String(partition)}`,
      helperLine(options),
    );
  }
  const number = String(partition);
  if (device.startsWith('/dev/disk/')) return `${device}-part${number}`;
  return /\d$/.test(device) ? `${device}p${number}` : `${device}${number}`;
}

/** Tinkerbell's netmaskToPrefixLength: 255.255.255.0 → "24". */
function netmaskToPrefixLength(netmask: unknown, options: Handlebars.HelperOptions): string {
  const value = typeof netmask === 'string' ? parseIpv4(netmask) : undefined;
  const ones = value?.toString(2).padStart(32, '0');
  if (ones === undefined || !/^1*0*$/.test(ones)) {
    throw new PlaceholderError(
      `netmaskToPrefixLength: ${typeof netmask === 'string' ? JSON.stringify(netmask) : 'the value'} is not an IPv4 netmask`,
      helperLine(options),
    );
  }
  return String(ones.replace(/0+$/, '').length);
}

function helperLine(options: Handlebars.HelperOptions): number | undefined {
  const loc = (options as { loc?: { start?: { line?: unknown } } }).loc;
  return typeof loc?.start?.line === 'number' ? loc.start.line : undefined;
}

type CompiledTemplate = ReturnType<typeof handlebars.compile>;

/**
 * Compiled strings, the most recent few hundred: a burst of workflows from one template compiles
 * each of its placeholder values once (Handlebars compiles on the first call and keeps it).
 */
const compiledTemplates = new Map<string, CompiledTemplate>();
const compiledTemplatesMax = 256;

function compiled(rewritten: string, use: PlaceholderUse): CompiledTemplate {
  const key = `${use}:${rewritten}`;
  let template = compiledTemplates.get(key);
  if (template !== undefined) return template;
  const program = use === 'shell' ? shellProgram(rewritten) : handlebars.parse(rewritten);
  template = handlebars.compile(strictHelperParams(program), compileOptions[use]);
  if (compiledTemplates.size >= compiledTemplatesMax) {
    const oldest = compiledTemplates.keys().next();
    if (oldest.done !== true) compiledTemplates.delete(oldest.value);
  }
  compiledTemplates.set(key, template);
  return template;
}

/** The first problem with the placeholder syntax of one string, its line counted in the string. */
export function checkPlaceholderSyntax(text: string, use: PlaceholderUse): LocatedProblem | undefined {
  if (use === 'shell' && text.includes('\u0000')) return { path: [], line: 1, message: shellNulRefusal };
  const rewrite = rewriteGoForms(text);
  const [refused] = rewrite.refusals;
  if (refused !== undefined) return { path: [], line: refused.line, message: goRefusalMessage(refused) };
  const rewritten = rewrite.text;
  let program: hbs.AST.Program;
  try {
    program = handlebars.parse(rewritten);
  } catch (error) {
    return withBlockHint(rewritten, syntaxProblem(error));
  }
  const unsupported = findUnsupported(program);
  if (unsupported !== undefined) return unsupported;
  try {
    handlebars.precompile(
      strictHelperParams(use === 'shell' ? shellProgram(rewritten) : program),
      compileOptions[use],
    );
  } catch (error) {
    return syntaxProblem(error);
  }
  return undefined;
}

/** A variable a placeholder names from the root, as written: `hardware.interfaces.[0].mac`. */
export interface NamedVariable {
  readonly parts: readonly string[];
  readonly line: number | undefined;
}

/** Helpers whose block reads its paths relative to a new context (each item, the with value). */
const contextHelpers = new Set(['each', 'with']);

/**
 * Every variable one string names from the root, for checking names before anything renders.
 * Helper names, `this`, `@data` and paths inside an `{{#each}}` or `{{#with}}` block (relative to
 * the block's context) are left out; `../x` is too, since its meaning depends on the block.
 */
export function namedVariables(text: string): NamedVariable[] {
  const found: NamedVariable[] = [];
  const visit = (node: unknown, relative: boolean): void => {
    if (typeof node !== 'object' || node === null) return;
    if (Array.isArray(node)) {
      for (const item of node as unknown[]) visit(item, relative);
      return;
    }
    const fields = node as Record<string, unknown>;
    const type = fields['type'];
    if (type === 'PathExpression') {
      const parts = fields['parts'] as string[];
      if (!relative && fields['data'] !== true && fields['depth'] === 0 && parts.length > 0)
        found.push({ parts, line: lineOfNode(fields) });
      return;
    }
    const callsHelper =
      type === 'BlockStatement' ||
      ((type === 'MustacheStatement' || type === 'SubExpression') &&
        Array.isArray(fields['params']) &&
        (fields['params'] as unknown[]).length > 0);
    const helper = callsHelper ? helperName(fields['path']) : undefined;
    for (const [key, value] of Object.entries(fields)) {
      if (key === 'loc' || (callsHelper && key === 'path')) continue;
      const inContext = type === 'BlockStatement' && key === 'program' && contextHelpers.has(helper ?? '');
      visit(value, relative || inContext);
    }
  };
  visit(handlebars.parse(rewriteGoStylePaths(text)), false);
  return found;
}

function helperName(path: unknown): string | undefined {
  const original = (path as { original?: unknown } | undefined)?.original;
  return typeof original === 'string' ? original : undefined;
}

/**
 * A block opened in one string and closed in another: the template wrapped YAML structure (list
 * items, several values) in `{{#each}}` or `{{#if}}`. Each value renders on its own, so the
 * parser's "expecting ..." gets the reason added.
 */
function withBlockHint(rewritten: string, problem: LocatedProblem): LocatedProblem {
  const opened = rewritten.match(/\{\{~?\s*[#^](?![>*])/g)?.length ?? 0;
  const closed = rewritten.match(/\{\{~?\s*\//g)?.length ?? 0;
  if (opened === closed) return problem;
  return {
    ...problem,
    message:
      `${problem.message}; a placeholder block ({{#if}}, {{#each}}, ...) must open and close ` +
      'inside one value, around neither several values nor YAML structure',
  };
}

/**
 * Fills the placeholders of one string value. `variables` should come from templateVariables()
 * so that structures refuse to print as "[object Object]". Throws PlaceholderError.
 */
export function renderPlaceholders(text: string, variables: object): string {
  const rendered = run(text, 'value', variables, {});
  refuseStructure(rendered, (index) => lineAt(rendered, index));
  return rendered;
}

/**
 * Fills the placeholders of a shell command line, keeping them apart: the authored text as
 * written, and each printed value as a piece of its own. Throws PlaceholderError.
 */
export function renderShellPieces(text: string, variables: object): ScriptPiece[] {
  if (text.includes('\u0000')) throw new PlaceholderError(shellNulRefusal, 1);
  const values: string[] = [];
  const helpers = {
    [shellValueHelper]: (value: unknown): string => {
      // null prints as nothing, as it does in a value; a mapping or a list prints as its
      // structure marker (template-variables.ts), refused below.
      // eslint-disable-next-line @typescript-eslint/no-base-to-string
      values.push(value === null || value === undefined ? '' : String(value));
      return `\u0000${values.length - 1}\u0000`;
    },
  };
  const rendered = run(text, 'shell', variables, helpers);
  const pieces: ScriptPiece[] = [];
  rendered.split('\u0000').forEach((part, index) => {
    // Odd parts are the markers' indexes: the authored text itself holds no NUL (refused).
    if (index % 2 === 0) {
      if (part !== '') pieces.push({ text: part });
      return;
    }
    const value = values[Number(part)] ?? '';
    refuseStructure(value, () => lineAt(rendered, rendered.indexOf(`\u0000${part}\u0000`)));
    pieces.push({ value });
  });
  return pieces;
}

/**
 * The pieces of a shell command line without rendering it: each printing mustache stands for an
 * empty value, and both branches of a block are kept. Enough to check, before any workflow, that
 * every placeholder sits where the shell will expand it.
 */
export function outlineShellPieces(text: string): ScriptPiece[] {
  const pieces: ScriptPiece[] = [];
  const visit = (program: hbs.AST.Program | undefined): void => {
    for (const statement of program?.body ?? []) {
      if (statement.type === 'ContentStatement') {
        pieces.push({ text: (statement as hbs.AST.ContentStatement).value });
      } else if (statement.type === 'MustacheStatement') {
        pieces.push({ value: '' });
      } else if (statement.type === 'BlockStatement') {
        const block = statement as hbs.AST.BlockStatement;
        visit(block.program);
        visit(block.inverse);
      }
    }
  };
  visit(handlebars.parse(rewriteGoStylePaths(text)));
  return pieces;
}

function run(
  text: string,
  use: PlaceholderUse,
  variables: object,
  helpers: Record<string, (value: unknown) => string>,
): string {
  const rewrite = rewriteGoForms(text);
  const [refused] = rewrite.refusals;
  if (refused !== undefined) throw new PlaceholderError(goRefusalMessage(refused), refused.line);
  const rewritten = rewrite.text;
  try {
    return compiled(rewritten, use)(variables, { helpers });
  } catch (error) {
    if (error instanceof PlaceholderError) throw error;
    const line = lineNumberOf(error);
    const missing = /^"(.*)" not defined in /.exec(errorMessage(error));
    const goForm = goFormAt(rewrite, error);
    if (missing !== null && line !== undefined && goForm !== undefined) {
      const named = expressionAt(rewritten, error) ?? missing[1] ?? '';
      throw new PlaceholderError(`${JSON.stringify(goForm)}: ${missingGoValue(named)}`, line);
    }
    if (missing !== null && line !== undefined) {
      const written = expressionAt(rewritten, error) ?? missing[1];
      const known = Object.keys(variables).sort().join(', ');
      throw new PlaceholderError(
        `template variable "${written}" is not defined; defined at the top level: ${known}`,
        line,
      );
    }
    // Strict mode names a missing last name; a missing name above it (hardware.inventory before
    // the machine reported one) fails as reading a property of nothing.
    const above = /^Cannot read properties of (?:undefined|null) \(reading '(.*)'\)/.exec(
      errorMessage(error),
    );
    if (above !== null) {
      throw new PlaceholderError(
        `a template variable names "${above[1] ?? ''}" below a name that is not defined (hardware.inventory is defined once the machine has reported its inventory)`,
        line,
      );
    }
    throw new PlaceholderError(`placeholder: ${stripLocation(errorMessage(error))}`, line);
  }
}

/** How the Go form an exception points into was written, when it was one. */
function goFormAt(rewrite: GoRewrite, error: unknown): string | undefined {
  const line = lineNumberOf(error);
  const column = (error as { column?: unknown }).column;
  if (line === undefined || typeof column !== 'number') return undefined;
  const lineStart = rewrite.text
    .split('\n')
    .slice(0, line - 1)
    .reduce((sum, text) => sum + text.length + 1, 0);
  return writtenAt(rewrite, lineStart + column);
}

/** `Hardware.Disks.[0]` missing, in words; disks get where they come from. */
function missingGoValue(named: string): string {
  const disks = named.startsWith('Hardware.Disks')
    ? " (.Hardware.Disks lists an imported Tinkerbell Hardware's disks, else the disks of the machine's inventory)"
    : '';
  return `${named} is not defined for this machine${disks}`;
}

/**
 * A helper's arguments looked up as strictly as a mustache's own path: `formatPartition
 * Hardware.Disks.[0] 1` fails naming Hardware.Disks.[0] when the machine has no such disk,
 * instead of handing the helper nothing.
 */
function strictHelperParams(program: hbs.AST.Program): hbs.AST.Program {
  const stack: unknown[] = [program];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (typeof node !== 'object' || node === null) continue;
    const fields = node as Record<string, unknown>;
    const isCall = fields['type'] === 'MustacheStatement' || fields['type'] === 'SubExpression';
    if (isCall && goHelperNames.includes(helperName(fields['path']) ?? '')) {
      for (const param of fields['params'] as Record<string, unknown>[]) {
        if (param['type'] === 'PathExpression') param['strict'] = true;
      }
    }
    for (const [key, value] of Object.entries(fields)) {
      if (key !== 'loc' && typeof value === 'object') stack.push(value);
    }
  }
  return program;
}

/** A mapping or list printed as a value left its marker: refuse it, at the line it landed on. */
function refuseStructure(printed: string, lineOf: (index: number) => number): void {
  const structure = structureMarkerPattern.exec(printed);
  if (structure === null) return;
  const [, kind, path] = structure;
  throw new PlaceholderError(
    `template variable "${path ?? ''}" is a ${kind ?? ''}, not a single value; name one of its entries`,
    lineOf(structure.index),
  );
}

function lineAt(text: string, index: number): number {
  return text.slice(0, index).split('\n').length;
}

/**
 * The parsed string with every printing mustache routed through the shell value helper:
 * `{{ x }}` becomes `{{ (helper) x }}`, `{{ lookup a b }}` becomes `{{ (helper) (lookup a b) }}`.
 * The value is looked up as strictly as the mustache would have been (a missing one is an error
 * at its own line and column).
 */
function shellProgram(rewritten: string): hbs.AST.Program {
  const route = (program: hbs.AST.Program): hbs.AST.Program => ({
    ...program,
    body: program.body.map((statement): hbs.AST.Statement => {
      if (statement.type === 'BlockStatement') {
        const block = statement as hbs.AST.BlockStatement;
        return {
          ...block,
          program: route(block.program),
          ...(block.inverse === undefined ? {} : { inverse: route(block.inverse) }),
        } as hbs.AST.BlockStatement;
      }
      if (statement.type !== 'MustacheStatement') return statement;
      const mustache = statement as hbs.AST.MustacheStatement;
      const helper: hbs.AST.PathExpression = {
        type: 'PathExpression',
        data: false,
        depth: 0,
        parts: [shellValueHelper],
        original: shellValueHelper,
        loc: mustache.loc,
      };
      return { ...mustache, path: helper, params: [shellValueOf(mustache)], hash: undefined } as never;
    }),
  });
  return route(handlebars.parseWithoutProcessing(rewritten));
}

function shellValueOf(mustache: hbs.AST.MustacheStatement): hbs.AST.Expression {
  const { path, params, hash, loc } = mustache;
  if (params.length > 0 || (hash as hbs.AST.Hash | undefined) !== undefined) {
    return { type: 'SubExpression', path, params, hash, loc } as hbs.AST.SubExpression;
  }
  // `strict` is what the compiler sets on a mustache's own path: a missing value is an error.
  if (path.type === 'PathExpression') return { ...(path as hbs.AST.PathExpression), strict: true } as never;
  // `{{ "name" }}` looks up "name", as Handlebars treats a literal in a mustache's place.
  const original = String((path as hbs.AST.Literal & { original: unknown }).original);
  return {
    type: 'PathExpression',
    data: false,
    depth: 0,
    parts: [original],
    original,
    loc,
    strict: true,
  } as never;
}

function syntaxProblem(error: unknown): LocatedProblem {
  const message = errorMessage(error);
  // Parser errors: "Parse error on line 2:\n<excerpt>\n----^\nExpecting ..., got 'EOF'".
  const parse = /^Parse error on line (\d+):\n(.*)\n.*\n(.*)$/s.exec(message);
  if (parse !== null) {
    const [, line, excerpt, expectation] = parse;
    return { path: [], line: Number(line), message: parseErrorMessage(excerpt ?? '', expectation ?? '') };
  }
  const line = lineNumberOf(error);
  const problem = { path: [], message: `placeholder: ${stripLocation(message)}` };
  return line === undefined ? problem : { ...problem, line };
}

/** Handlebars' parser tokens, as an operator would name them. */
const tokenWords: Readonly<Record<string, string>> = {
  ID: 'a name',
  CLOSE: '"}}"',
  CLOSE_UNESCAPED: '"}}}"',
  OPEN: '"{{"',
  EOF: 'the end of the value',
  INVALID: 'a character a placeholder cannot hold',
  STRING: 'a quoted string',
  NUMBER: 'a number',
  BOOLEAN: 'true or false',
  SEP: '"." or "/"',
  OPEN_SEXPR: '"("',
  CLOSE_SEXPR: '")"',
  OPEN_ENDBLOCK: '"{{/"',
  CLOSE_RAW_BLOCK: '"}}}}"',
  EQUALS: '"="',
  DATA: 'an @name',
  UNDEFINED: 'undefined',
  NULL: 'null',
};

/**
 * The parser's "Expecting 'ID', got 'INVALID'" in words: what was found, and for the common
 * slips (a placeholder left open, a stray character) what to write instead.
 */
function parseErrorMessage(excerpt: string, expectation: string): string {
  const near = excerpt.trim();
  const opened = near.lastIndexOf('{{');
  if (opened >= 0 && near.indexOf('}}', opened) < 0 && /got 'EOF'|got 'INVALID'/.test(expectation)) {
    return `the placeholder ${JSON.stringify(near.slice(opened))} is not closed: end it with }}`;
  }
  const got = /got '(\w+)'/.exec(expectation)?.[1];
  const expecting = [...expectation.matchAll(/'(\w+)'/g)]
    .map((m) => m[1] ?? '')
    .filter((token) => token !== got)
    .map((token) => tokenWords[token] ?? token);
  const found = got === undefined ? 'something else' : (tokenWords[got] ?? got);
  const wanted = [...new Set(expecting)].slice(0, 4).join(', ');
  return `placeholder syntax error near ${JSON.stringify(near)}: found ${found}${wanted === '' ? '' : `, expected ${wanted}`}`;
}

function findUnsupported(root: unknown): LocatedProblem | undefined {
  // The AST is a plain tree of objects; an explicit stack keeps deep nesting off the call stack.
  const stack: unknown[] = [root];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (typeof node !== 'object' || node === null) continue;
    if (Array.isArray(node)) {
      stack.push(...(node as unknown[]));
      continue;
    }
    const fields = node as Record<string, unknown>;
    const type = fields['type'];
    const line = lineOfNode(fields);
    const unsupported = typeof type === 'string' ? unsupportedNodes.get(type) : undefined;
    if (unsupported !== undefined) return withLine({ path: [], message: unsupported }, line);
    if (type === 'PathExpression' && Array.isArray(fields['parts'])) {
      const forbidden = (fields['parts'] as unknown[]).find(
        (part) => typeof part === 'string' && prototypeNames.has(part),
      );
      if (typeof forbidden === 'string') {
        return withLine({ path: [], message: `placeholder name "${forbidden}" is reserved` }, line);
      }
    }
    for (const [key, value] of Object.entries(fields)) {
      if (key !== 'loc' && typeof value === 'object') stack.push(value);
    }
  }
  return undefined;
}

function lineOfNode(fields: Record<string, unknown>): number | undefined {
  const loc = fields['loc'] as { start?: { line?: unknown } } | undefined;
  const line = loc?.start?.line;
  return typeof line === 'number' ? line : undefined;
}

function withLine(problem: LocatedProblem, line: number | undefined): LocatedProblem {
  return line === undefined ? problem : { ...problem, line };
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Handlebars exceptions carry `lineNumber`, `column` and `endColumn` when they know them. */
function lineNumberOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null || !('lineNumber' in error)) return undefined;
  return typeof error.lineNumber === 'number' ? error.lineNumber : undefined;
}

/** The path expression the exception points at, e.g. "hardware.hostname". */
function expressionAt(source: string, error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { lineNumber, column, endColumn, endLineNumber } = error as Record<string, unknown>;
  if (typeof lineNumber !== 'number' || typeof column !== 'number' || typeof endColumn !== 'number') {
    return undefined;
  }
  if (endLineNumber !== lineNumber) return undefined;
  const text = source.split('\n')[lineNumber - 1]?.slice(column, endColumn);
  return text === undefined || text === '' ? undefined : text;
}

/** Handlebars appends " - LINE:COLUMN"; the line is reported separately. */
function stripLocation(message: string): string {
  return message.replace(/ - \d+:\d+$/, '');
}

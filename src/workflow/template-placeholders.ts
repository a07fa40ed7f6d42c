// Placeholders in template text: Handlebars, with Tinkerbell's Go-template spelling accepted.
//
// Tinkerbell templates write `{{.device_1}}` or `{{ .device_1 }}` (Go's field access on the
// root). Handlebars reads a leading "." as a parse error, so before compiling, a "." that starts
// a path inside a mustache is dropped: `{{ .device_1 }}` means `{{ device_1 }}`. "./x", "../x"
// and "{{.}}" keep their Handlebars meaning, and string literals are left alone. Only deletions
// happen, so lines stay where they were and error lines still point into the operator's text.
//
// Rendering is strict (a missing variable is an error, never an empty string), unescaped (the
// output is YAML, not HTML), and limited to the built-in helpers; partials and decorators are
// refused, since a template must be self-contained.
import Handlebars from 'handlebars';
import type { LocatedProblem } from './template-yaml.js';

const handlebars = Handlebars.create();
// `{{log}}` would write to the server's console from operator input.
handlebars.unregisterHelper('log');

const compileOptions = { strict: true, noEscape: true, knownHelpersOnly: true } as const;

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
 * What a mapping or list among the variables prints as: a NUL-delimited marker that no YAML
 * text can contain, found again after rendering so the refusal can name the line.
 */
export function structureMarker(kind: 'list' | 'mapping', path: string): string {
  return `\u0000slipway:${kind}:${path}\u0000`;
}

// eslint-disable-next-line no-control-regex
const structureMarkerPattern = /\u0000slipway:(list|mapping):([^\u0000]*)\u0000/;

/** `{{ .device_1 }}` → `{{ device_1 }}` in every mustache; everything else unchanged. */
export function rewriteGoStylePaths(source: string): string {
  let output = '';
  let position = 0;
  for (;;) {
    const open = source.indexOf('{{', position);
    if (open < 0) break;
    if (source[open - 1] === '\\') {
      // `\{{` is Handlebars' escape for literal braces: copy it through untouched.
      output += source.slice(position, open + 2);
      position = open + 2;
      continue;
    }
    const isLongComment = source.startsWith('{{!--', open);
    const closing = isLongComment ? '--}}' : '}}';
    const close = source.indexOf(closing, open + 2);
    if (close < 0) break; // unterminated: the parser reports it with its line
    const end = close + closing.length;
    const isComment = source[open + 2] === '!';
    const inner = source.slice(open + 2, close);
    output +=
      source.slice(position, open + 2) +
      (isComment ? inner : dropLeadingDots(inner)) +
      source.slice(close, end);
    position = end;
  }
  return output + source.slice(position);
}

/** Drops a "." that begins a path: preceded by a delimiter, followed by a name character. */
function dropLeadingDots(inner: string): string {
  let output = '';
  let quote: string | undefined;
  for (let index = 0; index < inner.length; index += 1) {
    const char = inner.charAt(index);
    if (quote !== undefined) {
      if (char === quote) quote = undefined;
      output += char;
      continue;
    }
    if (char === '"' || char === "'") quote = char;
    const startsPath = index === 0 || /[\s(=~#^/&{]/.test(inner.charAt(index - 1));
    if (char === '.' && startsPath && /[A-Za-z_]/.test(inner.charAt(index + 1))) continue;
    output += char;
  }
  return output;
}

type CompiledTemplate = ReturnType<typeof handlebars.compile>;

/**
 * Compiled templates by their rewritten text, the most recent few: a burst of workflows from one
 * template compiles it once (Handlebars compiles on the first call and keeps the result).
 */
const compiledTemplates = new Map<string, CompiledTemplate>();
const compiledTemplatesMax = 16;

function compiled(rewritten: string): CompiledTemplate {
  let template = compiledTemplates.get(rewritten);
  if (template !== undefined) return template;
  template = handlebars.compile(rewritten, compileOptions);
  if (compiledTemplates.size >= compiledTemplatesMax) {
    const oldest = compiledTemplates.keys().next();
    if (oldest.done !== true) compiledTemplates.delete(oldest.value);
  }
  compiledTemplates.set(rewritten, template);
  return template;
}

/** The first problem with the placeholder syntax, or undefined when the text compiles. */
export function checkPlaceholderSyntax(source: string): LocatedProblem | undefined {
  const rewritten = rewriteGoStylePaths(source);
  let program: hbs.AST.Program;
  try {
    program = handlebars.parse(rewritten);
  } catch (error) {
    return syntaxProblem(error);
  }
  const unsupported = findUnsupported(program);
  if (unsupported !== undefined) return unsupported;
  try {
    handlebars.precompile(rewritten, compileOptions);
  } catch (error) {
    return syntaxProblem(error);
  }
  return undefined;
}

/**
 * Fills the placeholders. `variables` should come from templateVariables() so that structures
 * refuse to print as "[object Object]". Throws PlaceholderError.
 */
export function renderPlaceholders(source: string, variables: object): string {
  const rewritten = rewriteGoStylePaths(source);
  const known = Object.keys(variables).sort().join(', ');
  let rendered: string;
  try {
    rendered = compiled(rewritten)(variables);
  } catch (error) {
    if (error instanceof PlaceholderError) throw error;
    const line = lineNumberOf(error);
    const missing = /^"(.*)" not defined in /.exec(errorMessage(error));
    if (missing !== null && line !== undefined) {
      const written = expressionAt(rewritten, error) ?? missing[1];
      throw new PlaceholderError(
        `template variable "${written}" is not defined; defined at the top level: ${known}`,
        line,
      );
    }
    throw new PlaceholderError(`placeholder: ${stripLocation(errorMessage(error))}`, line);
  }
  const structure = structureMarkerPattern.exec(rendered);
  if (structure !== null) {
    const [, kind, path] = structure;
    const line = rendered.slice(0, structure.index).split('\n').length;
    throw new PlaceholderError(
      `template variable "${path ?? ''}" is a ${kind ?? ''}, not a single value; name one of its entries`,
      line,
    );
  }
  return rendered;
}

function syntaxProblem(error: unknown): LocatedProblem {
  const message = errorMessage(error);
  // Parser errors: "Parse error on line 2:\n<excerpt>\n----^\nExpecting ..., got 'EOF'".
  const parse = /^Parse error on line (\d+):\n(.*)\n.*\n(.*)$/s.exec(message);
  if (parse !== null) {
    const [, line, excerpt, expectation] = parse;
    return {
      path: [],
      line: Number(line),
      message: `placeholder syntax error near ${JSON.stringify(excerpt)}: ${expectation}`,
    };
  }
  const line = lineNumberOf(error);
  const problem = { path: [], message: `placeholder: ${stripLocation(message)}` };
  return line === undefined ? problem : { ...problem, line };
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

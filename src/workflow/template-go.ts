// Tinkerbell's Go-template spelling, read into Handlebars before a string is parsed
// (docs/decisions/0042-go-template-forms.md). Tinkerbell renders templates with Go's
// text/template; Slipway renders them with Handlebars. The forms Tinkerbell's docs and examples
// write are rewritten into the Handlebars that gives the same value:
//
//   {{ .device_1 }}                          → {{ device_1 }}
//   {{ index .Hardware.Disks 0 }}            → {{ Hardware.Disks.[0] }}   (also inside parens)
//   {{ (index .Hardware.Interfaces 0).DHCP.MAC }} → {{ Hardware.Interfaces.[0].DHCP.MAC }}
//   {{ index .Hardware.Metadata "key" }}     → {{ Hardware.Metadata.[key] }}
//   {{ formatPartition (index .Hardware.Disks 0) 1 }} → {{ formatPartition Hardware.Disks.[0] 1 }}
//   {{ netmaskToPrefixLength X }}            → the helper of that name
//   {{- x -}}                                → {{~ x ~}}   (Go's trim markers)
//   {{/* comment */}}                        → {{!-- comment --}}
//
// Every other Go form (pipelines, variables, if/range/with/end, other functions, method calls) is
// refused with the expression as written and its line, before Handlebars' parser sees it.
// Mustaches that are Handlebars' own ({{#each}}, {{/if}}, {{lookup ...}}, {{! ...}}, {{{ x }}})
// only lose a leading dot. A rewrite never adds or removes a line, so every line number found in
// the rewritten text is the operator's.

/** A Go form Slipway does not render, as written, with its line (1-based) in the string. */
export interface GoRefusal {
  readonly line: number;
  readonly written: string;
  readonly reason: string;
}

/** A mustache that was rewritten: where it sits in the rewritten text, and how it was written. */
export interface GoTranslation {
  readonly start: number;
  readonly end: number;
  readonly written: string;
}

export interface GoRewrite {
  /** Handlebars source, line for line the operator's. */
  readonly text: string;
  readonly refusals: readonly GoRefusal[];
  readonly translations: readonly GoTranslation[];
}

/** Tinkerbell's functions that Slipway renders, as Handlebars helpers (template-placeholders.ts). */
export const goHelperNames: readonly string[] = ['formatPartition', 'netmaskToPrefixLength'];

/** Handlebars' own helpers, whose mustaches are left as Handlebars reads them. */
const handlebarsHelpers = new Set(['lookup', 'each', 'with', 'if', 'unless']);

const keywordReasons: Readonly<Record<string, string>> = {
  if: 'write a Handlebars block instead: {{#if x}}...{{else}}...{{/if}}, inside one value',
  range: 'write a Handlebars block instead: {{#each x}}{{this}}{{/each}}, inside one value',
  with: 'write a Handlebars block instead: {{#with x}}...{{/with}}, inside one value',
  end: 'Handlebars closes a block with {{/if}}, {{/each}} or {{/with}}',
  define: 'a template must be self-contained: named templates are not supported',
  template: 'a template must be self-contained: named templates are not supported',
  block: 'a template must be self-contained: named templates are not supported',
  break: 'loops are Handlebars blocks ({{#each}}), which have no break',
  continue: 'loops are Handlebars blocks ({{#each}}), which have no continue',
};

const refusedMessage = (written: string, reason: string): string =>
  `${JSON.stringify(written)} is a Go template form Slipway does not render: ${reason}`;

/** The message for a refusal, as `template create` prints it after "line N: ". */
export function goRefusalMessage(refusal: GoRefusal): string {
  return refusedMessage(refusal.written, refusal.reason);
}

/** How the mustache around `index` of `rewrite.text` was written, when it was translated. */
export function writtenAt(rewrite: GoRewrite, index: number): string | undefined {
  return rewrite.translations.find((t) => index >= t.start && index < t.end)?.written;
}

/** Every mustache of `source` read as Handlebars; Go forms translated or refused. */
export function rewriteGoForms(source: string): GoRewrite {
  let text = '';
  let position = 0;
  const refusals: GoRefusal[] = [];
  const translations: GoTranslation[] = [];
  // Lines counted as the scan moves forward: once over the text, however many mustaches.
  let line = 1;
  let counted = 0;
  const lineAt = (index: number): number => {
    for (let at = source.indexOf('\n', counted); at >= 0 && at < index; at = source.indexOf('\n', at + 1)) {
      line += 1;
    }
    counted = Math.max(counted, index);
    return line;
  };
  for (;;) {
    const open = source.indexOf('{{', position);
    if (open < 0) break;
    if (source[open - 1] === '\\') {
      // `\{{` is Handlebars' escape for literal braces: copy it through untouched.
      text += source.slice(position, open + 2);
      position = open + 2;
      continue;
    }
    const comment = goComment(source, open);
    if (comment !== undefined) {
      text += source.slice(position, open) + comment.text;
      if (comment.refusal !== undefined) refusals.push({ ...comment.refusal, line: lineAt(open) });
      position = comment.end;
      continue;
    }
    const isLongComment = source.startsWith('{{!--', open);
    const closing = isLongComment ? '--}}' : '}}';
    const close = source.indexOf(closing, open + 2);
    if (close < 0) break; // unterminated: the parser reports it with its line
    const end = close + closing.length;
    const inner = source.slice(open + 2, close);
    const written = source.slice(open, end);
    const action = source[open + 2] === '!' ? { inner } : readAction(inner);
    text += source.slice(position, open);
    const start = text.length;
    text += `{{${action.inner}${source.slice(close, end)}`;
    if ('reason' in action) refusals.push({ line: lineAt(open), written, reason: action.reason });
    else if ('translated' in action) translations.push({ start, end: text.length, written });
    position = end;
  }
  return { text: text + source.slice(position), refusals, translations };
}

/** `{{/* ... *\/}}`, with Go's trim markers, as a Handlebars comment; undefined for anything else. */
function goComment(
  source: string,
  open: number,
): { text: string; end: number; refusal?: Omit<GoRefusal, 'line'> } | undefined {
  const head = /^\{\{(-\s+)?\/\*/.exec(source.slice(open, open + 64));
  if (head === null) return undefined;
  const bodyStart = open + head[0].length;
  const close = /\*\/(\s+-)?\}\}/.exec(source.slice(bodyStart));
  if (close === null) return undefined; // unterminated: Handlebars' parser reports it
  const body = source.slice(bodyStart, bodyStart + close.index);
  const end = bodyStart + close.index + close[0].length;
  const trimOpen = head[1] === undefined ? '' : '~';
  const trimClose = close[1] === undefined ? '' : '~';
  if (body.includes('--}}')) {
    const written = source.slice(open, end);
    // Refused, yet its line breaks stay, so the lines after it keep their numbers.
    const text = written.replace(/[^\n]/g, '');
    return { text, end, refusal: { written, reason: 'a comment cannot hold "--}}"' } };
  }
  return { text: `{{${trimOpen}!--${body}--${trimClose}}}`, end };
}

type Action =
  | { readonly inner: string }
  | { readonly inner: string; readonly translated: true }
  | { readonly inner: string; readonly reason: string };

/**
 * One mustache's inside: Go's trim markers become Handlebars' `~`, then the action is kept as
 * Handlebars (with leading dots dropped), translated, or refused.
 */
function readAction(inner: string): Action {
  const trimOpen = /^-\s/.test(inner);
  const trimClose = /\s-$/.test(inner);
  const body = inner.slice(trimOpen ? 1 : 0, trimClose ? -1 : undefined);
  const marked = (text: string): string => `${trimOpen ? '~' : ''}${text}${trimClose ? '~' : ''}`;
  const core = body.trim();
  const first = core.charAt(0);
  if (core === '' || '#/^>&{*!~'.includes(first) || /^else\b/.test(core)) {
    return { inner: marked(dropLeadingDots(body)) };
  }
  const reason = goFormReason(core);
  if (reason !== undefined) return { inner: marked(dropLeadingDots(body)), reason };
  const tokens = tokenize(core);
  if (tokens === undefined) return { inner: marked(dropLeadingDots(body)) };
  const head = tokens[0];
  if (head?.kind === 'word' && head.text === 'lookup') return { inner: marked(dropLeadingDots(body)) };
  const isGoCall = head?.kind === '(' || (head?.kind === 'word' && tokens.length > 1);
  if (!isGoCall) return { inner: marked(dropLeadingDots(body)) };
  const parsed = parseAction(tokens);
  if ('reason' in parsed) return { inner: marked(dropLeadingDots(body)), reason: parsed.reason };
  // Lines stay where they were: an action written over several lines keeps its newlines.
  const newlines = '\n'.repeat(body.split('\n').length - 1);
  return { inner: marked(` ${parsed.text}${newlines} `), translated: true };
}

/** Why the action, by its shape alone, is a Go form Slipway does not render. */
function goFormReason(core: string): string | undefined {
  const outside = withoutStrings(core);
  if (outside.includes('`')) return 'raw strings (`...`) are not supported; use "..."';
  if (/(^|[\s(])\$/.test(outside) || outside.includes(':=')) {
    return 'template variables ($x) are not supported; name the value itself, e.g. .Hardware.Disks';
  }
  if (outside.includes('|')) {
    return 'pipelines (|) are not supported; name the value itself, or write it out in the template';
  }
  // A keyword is a whole word: `end` is one, `end_time` and `range.x` are names.
  const keyword = /^([a-z]+)(?![.\w])/.exec(core)?.[1];
  if (keyword !== undefined && Object.hasOwn(keywordReasons, keyword)) return keywordReasons[keyword];
  return undefined;
}

/** The text with every quoted string emptied, so operators inside strings are not seen. */
function withoutStrings(text: string): string {
  return text.replace(/"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'/g, '""');
}

type Token =
  | { readonly kind: '(' | ')' }
  | { readonly kind: 'word'; readonly text: string; readonly attached: boolean }
  | { readonly kind: 'string'; readonly text: string };

/**
 * Words, quoted strings and parentheses; `attached` marks a word written right after `)`.
 * Undefined when the text does not split (an unterminated string): Handlebars reports it.
 */
function tokenize(core: string): Token[] | undefined {
  const tokens: Token[] = [];
  const pattern = /\s+|\(|\)|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|[^\s()"']+/y;
  while (pattern.lastIndex < core.length) {
    const at = pattern.lastIndex;
    const match = pattern.exec(core);
    if (match === null) return undefined;
    const text = match[0];
    if (/^\s/.test(text)) continue;
    if (text === '(' || text === ')') tokens.push({ kind: text });
    else if (text.startsWith('"') || text.startsWith("'")) tokens.push({ kind: 'string', text });
    else tokens.push({ kind: 'word', text, attached: core[at - 1] === ')' });
  }
  return tokens;
}

/** A translated expression: a Handlebars path, a literal, or a helper call (top level only). */
type Expression =
  | { readonly kind: 'path'; readonly text: string }
  | { readonly kind: 'literal'; readonly text: string; readonly integer: boolean }
  | { readonly kind: 'call'; readonly text: string };

type Parsed = { readonly text: string } | { readonly reason: string };

/** A whole action: a call (`index ...`, `formatPartition ...`) or a parenthesized one. */
function parseAction(tokens: readonly Token[]): Parsed {
  const reader = { tokens, at: 0 };
  const head = tokens[0];
  const expression =
    head?.kind === 'word' && !head.text.startsWith('.') ? call(reader) : operand(reader, true);
  if ('reason' in expression) return expression;
  if (reader.at < tokens.length) {
    return {
      reason:
        head?.kind === 'word' && head.text.startsWith('.')
          ? 'method calls with arguments are not supported; name a field'
          : 'one expression per placeholder',
    };
  }
  return { text: expression.text };
}

interface Reader {
  readonly tokens: readonly Token[];
  at: number;
}

/** `NAME ARG...` up to the end or the closing parenthesis. */
function call(reader: Reader): Expression | { readonly reason: string } {
  const name = reader.tokens[reader.at];
  if (name?.kind !== 'word') return { reason: 'expected a function name' };
  reader.at += 1;
  const args: Expression[] = [];
  for (let token = reader.tokens[reader.at]; token !== undefined && token.kind !== ')';) {
    const argument = operand(reader, false);
    if ('reason' in argument) return argument;
    args.push(argument);
    token = reader.tokens[reader.at];
  }
  return applyFunction(name.text, args);
}

/** A field chain, a literal, or `( call )` with an optional `.Field` chain right after it. */
function operand(reader: Reader, topLevel: boolean): Expression | { readonly reason: string } {
  const token = reader.tokens[reader.at];
  if (token === undefined) return { reason: 'an expression is missing' };
  reader.at += 1;
  if (token.kind === 'string') {
    return { kind: 'literal', text: token.text, integer: false };
  }
  if (token.kind === ')') return { reason: 'unbalanced parentheses' };
  if (token.kind === 'word') {
    if (/^-?\d+$/.test(token.text)) return { kind: 'literal', text: token.text, integer: true };
    const path = fieldPath(token.text);
    if (path !== undefined) return { kind: 'path', text: path };
    return {
      reason: /^[A-Za-z_]\w*$/.test(token.text)
        ? unknownFunction(token.text)
        : `${JSON.stringify(token.text)} is not a field such as .Hardware.Disks`,
    };
  }
  const inner = reader.tokens[reader.at]?.kind === '(' ? operand(reader, false) : call(reader);
  if ('reason' in inner) return inner;
  if (reader.tokens[reader.at]?.kind !== ')') return { reason: 'unbalanced parentheses' };
  reader.at += 1;
  const suffix = reader.tokens[reader.at];
  if (suffix?.kind === 'word' && suffix.attached) {
    reader.at += 1;
    const chain = /^(\.[A-Za-z_]\w*)+$/.test(suffix.text) ? suffix.text : undefined;
    if (chain === undefined) return { reason: `${JSON.stringify(suffix.text)} is not a field chain` };
    if (inner.kind !== 'path') return { reason: 'only a list entry or a field has fields' };
    return { kind: 'path', text: `${inner.text}${chain}` };
  }
  if (inner.kind === 'call' && !topLevel) {
    return { reason: `${inner.text.split(' ')[0] ?? ''} inside another function is not supported` };
  }
  return inner;
}

/** `.Hardware.Disks` → `Hardware.Disks`; a Slipway path (`hardware.metadata.x`) as it is. */
function fieldPath(word: string): string | undefined {
  if (/^\.?[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$/.test(word)) return word.replace(/^\./, '');
  return undefined;
}

function applyFunction(name: string, args: readonly Expression[]): Expression | { reason: string } {
  switch (name) {
    case 'index': {
      const [target, ...keys] = args;
      if (target?.kind !== 'path' || keys.length === 0) {
        return {
          reason: 'index takes a list or mapping and at least one index, e.g. index .Hardware.Disks 0',
        };
      }
      let text = target.text;
      for (const key of keys) {
        const segment = indexSegment(key);
        if (segment === undefined) {
          return { reason: 'an index is a whole number or a quoted key without "]"' };
        }
        text += `.[${segment}]`;
      }
      return { kind: 'path', text };
    }
    case 'formatPartition': {
      const [device, partition] = args;
      if (
        args.length !== 2 ||
        device?.kind === 'call' ||
        partition?.kind !== 'literal' ||
        !partition.integer
      ) {
        return {
          reason:
            'formatPartition takes a disk and a partition number, e.g. formatPartition (index .Hardware.Disks 0) 1',
        };
      }
      return { kind: 'call', text: `formatPartition ${device?.text ?? ''} ${partition.text}` };
    }
    case 'netmaskToPrefixLength': {
      const [netmask] = args;
      if (args.length !== 1 || netmask?.kind === 'call') {
        return { reason: 'netmaskToPrefixLength takes one netmask' };
      }
      return { kind: 'call', text: `netmaskToPrefixLength ${netmask?.text ?? ''}` };
    }
    default:
      if (name === 'lookup') return { reason: 'lookup inside a function is not supported; use index' };
      if (handlebarsHelpers.has(name))
        return { reason: `${name} is a Handlebars block helper here: {{#${name} ...}}...{{/${name}}}` };
      return /^[A-Za-z_]\w*$/.test(name)
        ? { reason: unknownFunction(name) }
        : { reason: 'a value followed by arguments is not an expression Slipway renders' };
  }
}

function unknownFunction(name: string): string {
  return `${name} is a Go template function Slipway does not render (it renders index, formatPartition and netmaskToPrefixLength)`;
}

function indexSegment(key: Expression): string | undefined {
  if (key.kind === 'literal' && key.integer && !key.text.startsWith('-')) return key.text;
  if (key.kind !== 'literal' || key.integer) return undefined;
  const unquoted = key.text.slice(1, -1);
  return /^[^\]\\"']+$/.test(unquoted) ? unquoted : undefined;
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

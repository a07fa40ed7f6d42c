// A shell command line whose placeholder values stay data.
//
// A string `command` runs as `/bin/sh -c SCRIPT`. A value pasted into SCRIPT would be shell code:
// a hardware field holding `$(reboot)` or `"; wipefs -a /dev/sda; "` would run. So no value ever
// enters the script. Each placeholder becomes a reference to an environment variable
// (SLIPWAY_VALUE_1, SLIPWAY_VALUE_2, ... in order) and the action's environment carries the value.
// The shell never parses the result of an expansion as code (only `eval` in the script itself
// would), so this holds whatever the value is: the script is the template's text and references.
//
// The reference is written for the quoting in force where the placeholder stands, so that the
// value also arrives whole, neither split into words nor globbed:
//   echo {{x}}            echo "${SLIPWAY_VALUE_1}"
//   echo "a {{x}} b"      echo "a ${SLIPWAY_VALUE_1} b"
//   echo 'a {{x}} b'      echo 'a '"${SLIPWAY_VALUE_1}"' b'
//   a here-document       ${SLIPWAY_VALUE_1} (the body expands like double quotes)
//   # a comment {{x}}     dropped with the comment
// Inside `$(...)` quoting starts afresh, as it does for the shell. Backquotes are not followed:
// inside them a value is split into words like any unquoted expansion (still data, never code).
// Refused: a placeholder right after a backslash (the backslash would escape the reference),
// as a here-document's delimiter, or inside a here-document whose delimiter is quoted (the
// shell would print the reference, not the value); a value no environment can carry (a NUL, or
// longer than any other field); more values than an environment may have.
import { environmentEntriesMax, fieldBytesMax } from './template-limits.js';

/** A shell command line after rendering: text the template author wrote, and values. */
export type ScriptPiece = { readonly text: string } | { readonly value: string };

/** Environment names the references take; a template may not define them itself. */
export const shellValuePrefix = 'SLIPWAY_VALUE_';

export interface ShellScript {
  /** What `/bin/sh -c` runs: the authored text, with references where the values were. */
  readonly script: string;
  /** SLIPWAY_VALUE_n → the n-th value the script refers to, exactly as rendered. */
  readonly env: Readonly<Record<string, string>>;
}

/** A placeholder the shell would not expand where it stands; `line` counts in the script. */
export class ShellScriptError extends Error {
  readonly line: number;

  constructor(message: string, line: number) {
    super(message);
    this.name = 'ShellScriptError';
    this.line = line;
  }
}

/** Where the lexer is: which quoting applies to the next character. */
type Quoting =
  | { readonly kind: 'plain'; readonly substitution: boolean; parens: number }
  | { readonly kind: 'single' | 'double' | 'comment' };

interface HereDocument {
  readonly delimiter: string;
  readonly stripTabs: boolean;
  readonly quoted: boolean;
}

/** Stands for a value in the lexer's text; authored text never holds one (NUL is refused). */
const valueMark = '\u0000';
const wordBreaks = new Set([' ', '\t', '\n', ';', '&', '|', '(', ')', '<', '>']);

export function shellScript(pieces: readonly ScriptPiece[]): ShellScript {
  const values = pieces.flatMap((piece) => ('value' in piece ? [piece.value] : []));
  for (const piece of pieces) {
    if ('text' in piece && piece.text.includes(valueMark)) {
      throw new ShellScriptError('a shell command line cannot contain a NUL character', 1);
    }
  }
  const text = pieces.map((piece) => ('text' in piece ? piece.text : valueMark)).join('');
  return new ScriptWriter(text, values).write();
}

/** One pass over the script, copying the authored text and writing a reference per value. */
class ScriptWriter {
  readonly #text: string;
  readonly #values: readonly string[];
  readonly #stack: Quoting[] = [{ kind: 'plain', substitution: false, parens: 0 }];
  readonly #hereDocuments: HereDocument[] = [];
  readonly #env: Record<string, string> = {};
  #script = '';
  #position = 0;
  #valuesSeen = 0;
  #escaped = false;
  #wordStart = true;

  constructor(text: string, values: readonly string[]) {
    this.#text = text;
    this.#values = values;
  }

  write(): ShellScript {
    while (this.#position < this.#text.length) {
      const char = this.#text.charAt(this.#position);
      const quoting = this.#stack.at(-1) ?? { kind: 'plain', substitution: false, parens: 0 };
      if (quoting.kind === 'plain') this.#plain(char, quoting);
      else if (quoting.kind === 'double') this.#double(char);
      else if (quoting.kind === 'single') this.#single(char);
      else this.#comment(char);
    }
    return { script: this.#script, env: this.#env };
  }

  #plain(char: string, quoting: Quoting & { kind: 'plain' }): void {
    if (this.#escaped) return this.#escapedChar(char);
    const wordStart = this.#wordStart;
    this.#wordStart = wordBreaks.has(char);
    if (char === valueMark) return this.#reference((name) => `"\${${name}}"`);
    if (
      char === '<' &&
      this.#text.startsWith('<<', this.#position) &&
      this.#text[this.#position + 2] !== '<'
    ) {
      return this.#hereDocumentOperator();
    }
    this.#copy(char);
    if (char === '\\') this.#escaped = true;
    else if (char === "'") this.#stack.push({ kind: 'single' });
    else if (char === '"') this.#stack.push({ kind: 'double' });
    else if (char === '#' && wordStart) this.#stack.push({ kind: 'comment' });
    else if (char === '$' && this.#text[this.#position] === '(') this.#openSubstitution();
    else if (char === '(' && quoting.substitution) quoting.parens += 1;
    else if (char === ')' && quoting.substitution && quoting.parens === 0) this.#stack.pop();
    else if (char === ')' && quoting.substitution) quoting.parens -= 1;
    else if (char === '\n') this.#hereDocumentBodies();
  }

  #double(char: string): void {
    if (this.#escaped) return this.#escapedChar(char);
    if (char === valueMark) return this.#reference((name) => `\${${name}}`);
    this.#copy(char);
    if (char === '\\') this.#escaped = true;
    else if (char === '"') this.#stack.pop();
    else if (char === '$' && this.#text[this.#position] === '(') this.#openSubstitution();
  }

  #single(char: string): void {
    if (char === valueMark) return this.#reference((name) => `'"\${${name}}"'`);
    this.#copy(char);
    if (char === "'") this.#stack.pop();
  }

  #comment(char: string): void {
    if (char === '\n') {
      // The newline ends the comment and is then read as the plain text it belongs to.
      this.#stack.pop();
      return;
    }
    if (char === valueMark) {
      this.#valuesSeen += 1; // a value in a comment is never used: no reference, no variable
      this.#position += 1;
      return;
    }
    this.#copy(char);
  }

  #escapedChar(char: string): void {
    this.#escaped = false;
    this.#wordStart = false;
    if (char === valueMark) this.#refuse('a placeholder right after a backslash would not be expanded');
    this.#copy(char);
  }

  #copy(char: string): void {
    this.#script += char;
    this.#position += 1;
  }

  #openSubstitution(): void {
    this.#copy('(');
    this.#stack.push({ kind: 'plain', substitution: true, parens: 0 });
    this.#wordStart = true;
  }

  #reference(spell: (name: string) => string): void {
    const value = this.#values[this.#valuesSeen] ?? '';
    this.#valuesSeen += 1;
    const count = Object.keys(this.#env).length + 1;
    const name = `${shellValuePrefix}${count}`;
    if (count > environmentEntriesMax) {
      this.#refuse(`a shell command may refer to at most ${environmentEntriesMax} placeholder values`);
    }
    if (value.includes('\u0000')) {
      this.#refuse(`the value for ${name} contains a NUL character, which no environment value can hold`);
    }
    const bytes = Buffer.byteLength(value);
    if (bytes > fieldBytesMax) {
      this.#refuse(`the value for ${name} is ${bytes} bytes; at most ${fieldBytesMax} are allowed`);
    }
    this.#env[name] = value;
    this.#script += spell(name);
    this.#position += 1;
  }

  /** `<<WORD` or `<<-WORD`: the body starts after the end of this line. */
  #hereDocumentOperator(): void {
    const operator = /^<<(-?)[ \t]*([^ \t\n;&|()<>]*)/.exec(this.#text.slice(this.#position));
    const [written = '<<', dash, word = ''] = operator ?? [];
    if (word.includes(valueMark)) this.#refuse("a placeholder cannot be a here-document's delimiter");
    this.#hereDocuments.push({
      delimiter: word.replace(/["'\\]/g, ''),
      stripTabs: dash === '-',
      quoted: /["'\\]/.test(word),
    });
    this.#script += written;
    this.#position += written.length;
  }

  /** After the newline that ends a here-document's operator line: its body, up to the delimiter. */
  #hereDocumentBodies(): void {
    for (let document = this.#hereDocuments.shift(); document !== undefined;) {
      const end = this.#text.indexOf('\n', this.#position);
      const lineEnd = end < 0 ? this.#text.length : end;
      const line = this.#text.slice(this.#position, lineEnd);
      const last = (document.stripTabs ? line.replace(/^\t+/, '') : line) === document.delimiter;
      if (!last && document.quoted && line.includes(valueMark)) {
        this.#refuse('a placeholder in a here-document with a quoted delimiter is never expanded');
      }
      if (last || document.quoted) this.#copyLine(line);
      else this.#hereDocumentLine(line);
      if (end < 0) return;
      this.#copy('\n');
      if (last) document = this.#hereDocuments.shift();
    }
  }

  #copyLine(line: string): void {
    this.#script += line;
    this.#position += line.length;
  }

  /** A body line expands as double quotes do, but quote characters are plain text. */
  #hereDocumentLine(line: string): void {
    let escaped = false;
    for (const char of line) {
      if (char === valueMark) {
        if (escaped) this.#refuse('a placeholder right after a backslash would not be expanded');
        this.#reference((name) => `\${${name}}`);
      } else {
        this.#copy(char);
      }
      escaped = !escaped && char === '\\';
    }
  }

  #refuse(message: string): never {
    throw new ShellScriptError(message, this.#text.slice(0, this.#position).split('\n').length);
  }
}

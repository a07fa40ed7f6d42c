// Placeholders across a parsed template, one string value at a time.
//
// The YAML is parsed as the operator wrote it, placeholders and all; only then is each string
// value holding a `{{` rendered, on its own. A value is spliced into nothing but the string it
// replaces, so whatever a variable holds (quotes, newlines, `- name:`, `{{`), it stays one string
// in the place the template gave it: no variable can add, remove or rename a field, a task or an
// action. Keys are never rendered, and a placeholder in one is refused.
//
// A string `command` is a shell command line: its values go to the action's environment and the
// script refers to them (template-shell.ts). Everything else, including list commands, args and
// environment values, receives the rendered string as it is.
import { renderedTemplateBytesMax } from './template-limits.js';
import {
  checkPlaceholderSyntax,
  namedVariables,
  outlineShellPieces,
  PlaceholderError,
  renderPlaceholders,
  renderShellPieces,
  type PlaceholderUse,
} from './template-placeholders.js';
import { shellScript, ShellScriptError, type ShellScript } from './template-shell.js';
import { unknownVariableProblem } from './template-variables.js';
import { LocatedError, type FieldPath, type LocatedProblem, type YamlSource } from './template-yaml.js';

export interface RenderedValues {
  /** The parsed template with every placeholder filled in. */
  readonly value: unknown;
  /** The environment each action's shell command line refers to, by actionKey(). */
  readonly shellEnv: ReadonlyMap<string, Readonly<Record<string, string>>>;
}

/** Enough to act on; more would bury the first one. */
const problemsMax = 20;

export function actionKey(taskIndex: number, actionIndex: number): string {
  return `${taskIndex}/${actionIndex}`;
}

/**
 * Every problem with the placeholders as written, before any rendering: a placeholder in a key,
 * a syntax error, a block across values, a shell placeholder the shell would not expand.
 */
export function checkPlaceholders(yaml: YamlSource): LocatedProblem[] {
  const problems: LocatedProblem[] = [];
  mapStrings(yaml.value, [], {
    key: (key, path) => {
      if (!key.includes('{{') || problems.length >= problemsMax) return;
      problems.push(
        yaml.locate({ path, message: 'a placeholder cannot be a key; only values are rendered' }),
      );
    },
    value: (text, path) => {
      if (!text.includes('{{') || problems.length >= problemsMax) return text;
      const use = placeholderUse(path);
      const problem =
        checkPlaceholderSyntax(text, use) ??
        checkVariableNames(text) ??
        (use === 'shell' ? checkShell(text, path) : undefined);
      if (problem !== undefined) problems.push(atSourceLine(yaml, path, problem));
      return text;
    },
  });
  return problems.sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
}

/** The first variable one string names that no machine or workflow can ever have. */
function checkVariableNames(text: string): LocatedProblem | undefined {
  for (const variable of namedVariables(text)) {
    const message = unknownVariableProblem(variable.parts);
    if (message !== undefined)
      return { path: [], message, ...(variable.line === undefined ? {} : { line: variable.line }) };
  }
  return undefined;
}

/**
 * Fills every placeholder. `sourceBytes` is the template's size: the rendered size grows from it
 * by what each value adds, and is refused past renderedTemplateBytesMax. Throws LocatedError.
 */
export function renderValues(yaml: YamlSource, variables: object, sourceBytes: number): RenderedValues {
  const shellEnv = new Map<string, Readonly<Record<string, string>>>();
  let renderedBytes = sourceBytes;
  const value = mapStrings(yaml.value, [], {
    value: (text, path) => {
      if (!text.includes('{{')) return text;
      let rendered: string;
      try {
        if (placeholderUse(path) === 'shell') {
          const shell = shellScript(renderShellPieces(text, variables));
          shellEnv.set(actionKey(Number(path[1]), Number(path[3])), shell.env);
          rendered = shell.script;
          renderedBytes += environmentBytes(shell);
        } else {
          rendered = renderPlaceholders(text, variables);
        }
      } catch (error) {
        throw locatedRefusal(yaml, path, error);
      }
      renderedBytes += Buffer.byteLength(rendered) - Buffer.byteLength(text);
      if (renderedBytes > renderedTemplateBytesMax) {
        const message = `the rendered template is ${renderedBytes} bytes; at most ${renderedTemplateBytesMax} are allowed`;
        throw new LocatedError([{ path: [], message }]);
      }
      return rendered;
    },
  });
  return { value, shellEnv };
}

/** A refusal while rendering the string at `path`, at its line in the template. */
function locatedRefusal(yaml: YamlSource, path: FieldPath, error: unknown): unknown {
  // Placeholder errors keep the messages they always had, without a field path.
  if (error instanceof PlaceholderError) {
    const problem = withLine({ path: [], message: error.message }, error.line);
    return new LocatedError([atSourceLine(yaml, path, problem)]);
  }
  if (error instanceof ShellScriptError) {
    const problem = { path, message: error.message, line: error.line };
    return new LocatedError([atSourceLine(yaml, path, problem)]);
  }
  return error;
}

/** `tasks[i].actions[j].command` written as a string is a shell command line. */
function placeholderUse(path: FieldPath): PlaceholderUse {
  const [tasks, task, actions, action, command] = path;
  const isCommand =
    path.length === 5 &&
    tasks === 'tasks' &&
    typeof task === 'number' &&
    actions === 'actions' &&
    typeof action === 'number' &&
    command === 'command';
  return isCommand ? 'shell' : 'value';
}

function checkShell(text: string, path: FieldPath): LocatedProblem | undefined {
  try {
    shellScript(outlineShellPieces(text));
    return undefined;
  } catch (error) {
    if (error instanceof ShellScriptError) return { path, message: error.message, line: error.line };
    throw error;
  }
}

function environmentBytes(shell: ShellScript): number {
  return Object.entries(shell.env).reduce(
    (sum, [name, value]) => sum + Buffer.byteLength(name) + Buffer.byteLength(value),
    0,
  );
}

/**
 * A problem whose line counts within the string at `path`, moved to the template's lines: exact
 * in a literal block (`|`), where the string's lines are the source's; otherwise the line the
 * value starts on.
 */
function atSourceLine(yaml: YamlSource, path: FieldPath, problem: LocatedProblem): LocatedProblem {
  const lines = yaml.valueLines(path);
  if (lines === undefined) return problem;
  const line = lines.aligned && problem.line !== undefined ? lines.first + problem.line - 1 : lines.first;
  return { ...problem, line };
}

function withLine(problem: LocatedProblem, line: number | undefined): LocatedProblem {
  return line === undefined ? problem : { ...problem, line };
}

interface StringVisitor {
  readonly key?: (key: string, path: FieldPath) => void;
  readonly value: (text: string, path: FieldPath) => string;
}

/**
 * A copy of a parsed document with each string value replaced by `visitor.value`. Parsed YAML is
 * plain objects, arrays and scalars; an alias appears as its target's value, so each place it is
 * used is rendered for that place.
 */
function mapStrings(value: unknown, path: FieldPath, visitor: StringVisitor): unknown {
  if (typeof value === 'string') return visitor.value(value, path);
  if (Array.isArray(value)) {
    return value.map((item: unknown, index) => mapStrings(item, [...path, index], visitor));
  }
  if (typeof value !== 'object' || value === null || ArrayBuffer.isView(value)) return value;
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    visitor.key?.(key, [...path, key]);
    // defineProperty: a key such as "__proto__" stays an ordinary key, as the parser made it.
    Object.defineProperty(copy, key, {
      value: mapStrings(item, [...path, key], visitor),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return copy;
}

// The structure of a template: which fields exist, what each may hold, and the defaults. Pure:
// it reads plain values (parsed YAML) and returns the checked template plus every problem found,
// each naming its field path so the caller can add the line.
//
// The same rules run twice. Before rendering ('unrendered'), a string holding a placeholder
// stands for a value not yet known, so it passes any scalar field; the structure around it is
// still checked. After rendering ('rendered') every value must be final.
import {
  actionsMax,
  actionTimeoutSDefault,
  commandPartsMax,
  environmentEntriesMax,
  fieldBytesMax,
  nameLengthMax,
  retriesMax,
  tasksMax,
  timeoutSMax,
  volumesMax,
} from './template-limits.js';
import {
  builtinActions,
  builtinCommandProblems,
  builtinForImage,
  builtinRequiredSettings,
  builtinSettingProblems,
  isBuiltinAction,
  type BuiltinAction,
} from './builtin-actions.js';
import { shellValuePrefix } from './template-shell.js';
import { closestName, describeValue, type FieldPath, type FieldProblem } from './template-yaml.js';

export type PlaceholderMode = 'unrendered' | 'rendered';

export interface CheckedAction {
  readonly name: string;
  readonly image?: string;
  readonly command: readonly string[];
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly volumes: readonly string[];
  readonly timeoutS: number;
  readonly retries: number;
  /** From `action:`, or from a Tinkerbell hub image that has a built-in counterpart. */
  readonly builtin?: BuiltinAction;
}

export interface CheckedTask {
  readonly name: string;
  /** As written (after rendering): a hardware id or a MAC. Absent: the workflow's hardware. */
  readonly worker?: string;
  readonly env: Readonly<Record<string, string>>;
  readonly volumes: readonly string[];
  readonly actions: readonly CheckedAction[];
}

export interface CheckedTemplate {
  readonly version: string;
  readonly name: string;
  readonly globalTimeoutS: number;
  readonly tasks: readonly CheckedTask[];
}

export interface StructureCheck {
  /** Meaningful only when `problems` is empty and the mode was 'rendered'. */
  readonly template: CheckedTemplate;
  readonly problems: readonly FieldProblem[];
}

export const templateVersion = '0.1';
/** A string `command` is a shell command line, as Docker's shell form of CMD treats it. */
export const shellCommandPrefix: readonly string[] = ['/bin/sh', '-c'];

const templateFields = ['version', 'name', 'global_timeout', 'tasks'] as const;
const taskFields = ['name', 'worker', 'environment', 'volumes', 'actions'] as const;
const actionFields = [
  'name',
  'image',
  'command',
  'args',
  'timeout',
  'environment',
  'volumes',
  'retries',
  'action',
  // Tinkerbell's reboot and kexec examples ask for the host's PID namespace. Slipway runs no
  // containers, so it means nothing here; it is accepted (as a string) so they run unchanged.
  'pid',
] as const;

const templateNamePattern = new RegExp(`^[A-Za-z0-9._-]{1,${nameLengthMax}}$`);
const environmentNamePattern = /^[A-Za-z_][A-Za-z0-9_]*$/;
// Names show up in events and `workflow get` tables: no control characters.
// eslint-disable-next-line no-control-regex
const controlCharacters = /[\u0000-\u001f\u007f]/;
/** Enough to act on; more would bury the first one. */
const problemsMax = 20;
/** execve takes C strings: a NUL would end an argument or an environment value early. */
const nulRefusal = 'must not contain a NUL character (no process argument or environment value can hold one)';

type Fields = Readonly<Record<string, unknown>>;

export function checkTemplateStructure(value: unknown, mode: PlaceholderMode): StructureCheck {
  const checker = new StructureChecker(mode);
  const template = checker.template(value);
  return { template, problems: checker.problems };
}

class StructureChecker {
  readonly problems: FieldProblem[] = [];
  readonly #mode: PlaceholderMode;

  constructor(mode: PlaceholderMode) {
    this.#mode = mode;
  }

  template(value: unknown): CheckedTemplate {
    const fields = this.#mapping(value, [], 'the template');
    if (fields === undefined) return { version: templateVersion, name: '', globalTimeoutS: 1, tasks: [] };
    this.#knownFields(fields, [], templateFields);
    const version = this.#version(fields['version']);
    const name = this.#templateName(fields['name']);
    const globalTimeoutS = this.#seconds(fields['global_timeout'], ['global_timeout'], undefined);
    const tasks = this.#tasks(fields['tasks']);
    return { version, name, globalTimeoutS, tasks };
  }

  #report(path: FieldPath, message: string): void {
    if (this.problems.length < problemsMax) this.problems.push({ path, message });
  }

  /** A placeholder not yet filled in: its value is checked after rendering. */
  #isPlaceholder(value: unknown): value is string {
    return this.#mode === 'unrendered' && typeof value === 'string' && value.includes('{{');
  }

  #mapping(value: unknown, path: FieldPath, what: string): Fields | undefined {
    if (isFields(value)) return value;
    this.#report(path, `${what} must be a mapping, got ${describeValue(value)}`);
    return undefined;
  }

  #knownFields(fields: Fields, path: FieldPath, allowed: readonly string[]): void {
    for (const key of Object.keys(fields)) {
      if (allowed.includes(key)) continue;
      const guess = closestName(key, allowed);
      const hint = guess === undefined ? '' : ` (did you mean "${guess}"?)`;
      this.#report([...path, key], `unknown field${hint}; allowed here: ${allowed.join(', ')}`);
    }
  }

  #version(value: unknown): string {
    // `version: 0.1` unquoted is a YAML number; it means the same thing.
    const text = typeof value === 'number' ? String(value) : value;
    if (text !== templateVersion) {
      this.#report(['version'], `must be "${templateVersion}", got ${describeValue(value)}`);
    }
    return templateVersion;
  }

  #templateName(value: unknown): string {
    if (typeof value === 'string' && templateNamePattern.test(value)) return value;
    const rule = `1-${nameLengthMax} letters, digits, ".", "_" or "-"`;
    const extra =
      typeof value === 'string' && value.includes('{{') ? ' (placeholders are not allowed here)' : '';
    this.#report(['name'], `must be ${rule}, got ${describeValue(value)}${extra}`);
    return '';
  }

  /** A task or action name: free text, but present, bounded and printable. */
  #label(value: unknown, path: FieldPath): string {
    if (this.#isPlaceholder(value)) return value;
    if (typeof value !== 'string' || value.trim() === '') {
      this.#report(path, `is required: a non-empty name, got ${describeValue(value)}`);
      return '';
    }
    if (value.length > nameLengthMax || controlCharacters.test(value)) {
      this.#report(
        path,
        `must be at most ${nameLengthMax} printable characters, got ${describeValue(value)}`,
      );
    }
    return value;
  }

  /** A positive whole number of seconds; `fallback` undefined means required. */
  #seconds(value: unknown, path: FieldPath, fallback: number | undefined): number {
    if (value === undefined && fallback !== undefined) return fallback;
    if (this.#isPlaceholder(value)) return fallback ?? 1;
    const seconds = wholeNumber(value);
    if (seconds === undefined || seconds < 1) {
      this.#report(
        path,
        `must be a positive integer number of seconds, got ${describeValue(value)}${quoteHint(value)}`,
      );
      return fallback ?? 1;
    }
    if (seconds > timeoutSMax) {
      this.#report(
        path,
        `must be at most ${timeoutSMax} seconds (${timeoutSMax / 86_400} days), got ${seconds}`,
      );
    }
    return seconds;
  }

  #retries(value: unknown, path: FieldPath): number {
    if (value === undefined) return 0;
    if (this.#isPlaceholder(value)) return 0;
    const retries = wholeNumber(value);
    if (retries === undefined || retries > retriesMax) {
      this.#report(
        path,
        `must be an integer from 0 to ${retriesMax}, got ${describeValue(value)}${quoteHint(value)}`,
      );
      return 0;
    }
    return retries;
  }

  #text(value: unknown, path: FieldPath, what: string): string | undefined {
    if (typeof value === 'string' && value !== '') {
      if (Buffer.byteLength(value) > fieldBytesMax) {
        this.#report(path, `must be at most ${fieldBytesMax} bytes long`);
      }
      return value;
    }
    this.#report(path, `must be ${what}, got ${describeValue(value)}${quoteHint(value)}`);
    return undefined;
  }

  /** A scalar in a list or map: numbers and booleans become their YAML spelling. */
  #scalarText(value: unknown, path: FieldPath): string | undefined {
    if (typeof value === 'string') {
      if (Buffer.byteLength(value) > fieldBytesMax) {
        this.#report(path, `must be at most ${fieldBytesMax} bytes long`);
      }
      if (value.includes('\u0000')) this.#report(path, nulRefusal);
      return value;
    }
    if (typeof value === 'number' || typeof value === 'boolean') return String(value);
    this.#report(path, `must be a string, number or boolean, got ${describeValue(value)}${quoteHint(value)}`);
    return undefined;
  }

  #list(value: unknown, path: FieldPath, itemsMax: number): readonly unknown[] | undefined {
    if (value === undefined) return [];
    if (!Array.isArray(value)) {
      this.#report(path, `must be a list, got ${describeValue(value)}${quoteHint(value)}`);
      return undefined;
    }
    if (value.length > itemsMax) {
      this.#report(path, `has ${value.length} entries; at most ${itemsMax} are allowed`);
      return undefined;
    }
    return value as readonly unknown[];
  }

  #textList(value: unknown, path: FieldPath, itemsMax: number): string[] {
    const items = this.#list(value, path, itemsMax) ?? [];
    const texts: string[] = [];
    items.forEach((item, index) => {
      const text = this.#scalarText(item, [...path, index]);
      if (text !== undefined) texts.push(text);
    });
    return texts;
  }

  #volumes(value: unknown, path: FieldPath): string[] {
    const items = this.#list(value, path, volumesMax) ?? [];
    const volumes: string[] = [];
    items.forEach((item, index) => {
      const volume = this.#text(item, [...path, index], 'a non-empty string such as /dev:/dev');
      if (volume !== undefined) volumes.push(volume);
    });
    return volumes;
  }

  #environment(value: unknown, path: FieldPath): Record<string, string> {
    const env: Record<string, string> = {};
    if (value === undefined) return env;
    const fields = this.#mapping(value, path, 'environment');
    if (fields === undefined) return env;
    const entries = Object.entries(fields);
    if (entries.length > environmentEntriesMax) {
      this.#report(path, `has ${entries.length} variables; at most ${environmentEntriesMax} are allowed`);
      return env;
    }
    for (const [name, entry] of entries) {
      // "__proto__" would pass the pattern yet is no variable anyone means.
      if (!environmentNamePattern.test(name) || name === '__proto__') {
        this.#report(
          [...path, name],
          'is not a valid environment variable name (letters, digits, "_"; not a digit first)',
        );
        continue;
      }
      if (name.startsWith(shellValuePrefix)) {
        this.#report(
          [...path, name],
          `is reserved: ${shellValuePrefix}1, 2, ... carry the placeholder values of a shell command`,
        );
        continue;
      }
      const text = this.#scalarText(entry, [...path, name]);
      if (text !== undefined) env[name] = text;
    }
    return env;
  }

  #command(value: unknown, path: FieldPath): string[] {
    if (value === undefined) return [];
    if (typeof value === 'string') {
      if (value.trim() === '') {
        this.#report(path, 'must not be empty');
        return [];
      }
      if (value.includes('\u0000')) this.#report(path, nulRefusal);
      return this.#isPlaceholder(value) ? [value] : [...shellCommandPrefix, value];
    }
    const parts = this.#textList(value, path, commandPartsMax);
    if (Array.isArray(value) && value.length === 0) this.#report(path, 'must not be an empty list');
    else if (parts[0] === '') this.#report([...path, 0], 'the program to run must not be empty');
    return parts;
  }

  #tasks(value: unknown): CheckedTask[] {
    if (!Array.isArray(value) || value.length === 0) {
      this.#report(['tasks'], `must be a list of at least one task, got ${describeValue(value)}`);
      return [];
    }
    if (value.length > tasksMax) {
      this.#report(['tasks'], `has ${value.length} tasks; at most ${tasksMax} are allowed`);
      return [];
    }
    const tasks = value.map((task: unknown, index) => this.#task(task, ['tasks', index]));
    const actionCount = tasks.reduce((sum, task) => sum + task.actions.length, 0);
    if (actionCount > actionsMax) {
      this.#report(['tasks'], `has ${actionCount} actions in all; at most ${actionsMax} are allowed`);
    }
    this.#uniqueNames(tasks, (index) => ['tasks', index, 'name'], 'task');
    return tasks;
  }

  #task(value: unknown, path: FieldPath): CheckedTask {
    const fields = this.#mapping(value, path, 'a task') ?? {};
    this.#knownFields(fields, path, taskFields);
    const name = this.#label(fields['name'], [...path, 'name']);
    const worker =
      fields['worker'] === undefined
        ? undefined
        : this.#text(fields['worker'], [...path, 'worker'], 'a hardware id or MAC address');
    const env = this.#environment(fields['environment'], [...path, 'environment']);
    const volumes = this.#volumes(fields['volumes'], [...path, 'volumes']);
    const actions = this.#actions(fields['actions'], [...path, 'actions']);
    this.#builtinSettings(fields, env, actions, [...path, 'actions']);
    return worker === undefined ? { name, env, volumes, actions } : { name, worker, env, volumes, actions };
  }

  #actions(value: unknown, path: FieldPath): CheckedAction[] {
    if (!Array.isArray(value) || value.length === 0) {
      this.#report(path, `must be a list of at least one action, got ${describeValue(value)}`);
      return [];
    }
    if (value.length > actionsMax) {
      this.#report(path, `has ${value.length} actions; at most ${actionsMax} are allowed`);
      return [];
    }
    const actions = value.map((action: unknown, index) => this.#action(action, [...path, index]));
    this.#uniqueNames(actions, (index) => [...path, index, 'name'], 'action in this task');
    return actions;
  }

  #action(value: unknown, path: FieldPath): CheckedAction {
    const fields = this.#mapping(value, path, 'an action') ?? {};
    this.#knownFields(fields, path, actionFields);
    const name = this.#label(fields['name'], [...path, 'name']);
    const image =
      fields['image'] === undefined
        ? undefined
        : this.#text(fields['image'], [...path, 'image'], 'an image reference');
    const command = this.#command(fields['command'], [...path, 'command']);
    const named = this.#builtin(fields['action'], [...path, 'action']);
    if (fields['action'] !== undefined) {
      // One way to say what runs: a built-in takes its settings from `environment` only.
      for (const other of ['image', 'command', 'args'] as const) {
        if (fields[other] === undefined) continue;
        this.#report(
          [...path, other],
          'is not used by a built-in action ("action:"); remove it, or remove "action" to run it',
        );
      }
    } else if (fields['image'] === undefined && fields['command'] === undefined) {
      this.#report(
        path,
        'needs "image" (a container to run), "command" (a process to run) ' +
          `or "action" (built in: ${builtinActions.join(', ')})`,
      );
    }
    if (fields['pid'] !== undefined) this.#text(fields['pid'], [...path, 'pid'], 'a string such as host');
    const builtin = named ?? (image === undefined ? undefined : builtinForImage(image));
    const action = {
      name,
      command,
      args: this.#textList(fields['args'], [...path, 'args'], commandPartsMax),
      env: this.#environment(fields['environment'], [...path, 'environment']),
      volumes: this.#volumes(fields['volumes'], [...path, 'volumes']),
      timeoutS: this.#seconds(fields['timeout'], [...path, 'timeout'], actionTimeoutSDefault),
      retries: this.#retries(fields['retries'], [...path, 'retries']),
    };
    const withImage = image === undefined ? action : { ...action, image };
    return builtin === undefined ? withImage : { ...withImage, builtin };
  }

  #builtin(value: unknown, path: FieldPath): BuiltinAction | undefined {
    if (value === undefined || this.#isPlaceholder(value)) return undefined;
    if (typeof value === 'string' && isBuiltinAction(value)) return value;
    const guess = typeof value === 'string' ? closestName(value, builtinActions) : undefined;
    const hint = guess === undefined ? '' : ` (did you mean "${guess}"?)`;
    this.#report(
      path,
      `must name a built-in action, one of ${builtinActions.join(', ')}; got ${describeValue(value)}${hint}`,
    );
    return undefined;
  }

  /**
   * A built-in's settings the agent would refuse (an unknown FS_TYPE, a CHROOT that is not y) are
   * refused here, in the template as written (values with a placeholder wait for rendering) and
   * once rendered; and after rendering its required settings must be in its environment (the
   * task's and its own): a workflow that would fail on the machine for want of one never starts.
   */
  #builtinSettings(
    task: Fields,
    taskEnv: Readonly<Record<string, string>>,
    actions: readonly CheckedAction[],
    path: FieldPath,
  ): void {
    actions.forEach((action, index) => {
      if (action.builtin === undefined) return;
      for (const problem of builtinSettingProblems(action.builtin, { ...taskEnv, ...action.env })) {
        this.#report([...path, index, 'environment'], `${action.builtin}: ${problem}`);
      }
      for (const problem of builtinCommandProblems(action.builtin, action.command, {
        ...taskEnv,
        ...action.env,
      })) {
        this.#report([...path, index, 'command'], `${action.builtin}: ${problem}`);
      }
      if (this.#mode !== 'rendered') return;
      const taskFields = isFields(task['environment']) ? task['environment'] : {};
      const missing = builtinRequiredSettings[action.builtin].filter(
        (setting) => action.env[setting] === undefined && taskFields[setting] === undefined,
      );
      if (missing.length === 0) return;
      this.#report(
        [...path, index, 'environment'],
        `${action.builtin} needs ${missing.join(', ')} in the action's or the task's environment`,
      );
    });
  }

  #uniqueNames(items: readonly { name: string }[], pathOf: (index: number) => FieldPath, what: string): void {
    const firstIndex = new Map<string, number>();
    items.forEach((item, index) => {
      // Empty names are already reported; placeholders may still differ once rendered.
      if (item.name === '' || this.#isPlaceholder(item.name)) return;
      const earlier = firstIndex.get(item.name);
      if (earlier === undefined) firstIndex.set(item.name, index);
      else
        this.#report(
          pathOf(index),
          `${describeValue(item.name)} is already the name of another ${what} (#${earlier})`,
        );
    });
  }
}

function isFields(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !ArrayBuffer.isView(value);
}

/** A whole number from a YAML number or, since placeholders are quoted, a string of digits. */
function wholeNumber(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  if (typeof value === 'string' && /^[0-9]{1,15}$/.test(value.trim())) return Number(value.trim());
  return undefined;
}

/**
 * `worker: {{.device_1}}` unquoted parses as a YAML flow mapping `{ "{ .device_1 }": null }`;
 * say so instead of leaving the operator puzzled by "got a mapping".
 */
function quoteHint(value: unknown): string {
  if (!isFields(value)) return '';
  const keys = Object.keys(value);
  if (keys.length !== 1 || !keys[0]?.startsWith('{')) return '';
  return ' (a placeholder must be quoted: "{{ .device_1 }}")';
}

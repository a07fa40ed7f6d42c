// The default boot entry of a grub.cfg: its kernel, initrds and command line, for kexec without
// KERNEL_PATH (Tinkerbell's kexec reads them from /boot/grub/grub.cfg the same way). Pure.
//
// What is read of the script, as grub-mkconfig writes it (Debian, Ubuntu):
//   - `menuentry TITLE [--id ID | $menuentry_id_option ID] ... {` ... `}` and `submenu` likewise;
//     the entry's `linux`/`linux16`/`linuxefi` line (kernel path and arguments) and `initrd` line
//     (one or more paths); a leading `(hd0,gpt2)` or `($root)` device on a path is dropped;
//   - `set NAME=VALUE` and `NAME=VALUE` outside entries, in the if/elif/else branches that run
//     (`[ STR ]`, `[ -n|-z STR ]`, `[ A = B ]`, `[ A != B ]`; any other test counts as true), with
//     grubenv's `NAME=VALUE` lines read first (load_env) and GRUB's feature_* variables set: of
//     Debian's `if [ "${next_entry}" ]; then set default="${next_entry}" else set default="0" fi`
//     the "0" holds unless grubenv names a next_entry, and GRUB_DEFAULT=saved reads saved_entry;
//     an assignment of an empty value is skipped (the variable keeps what it had);
//   - `default`: "N" (the Nth top-level entry, submenus counted), an id or title, or a path
//     through submenus "1>2" / "gnulinux-advanced-ID>gnulinux-6.1.0-advanced-ID"; absent: 0.
// `$NAME` and `${NAME}` in arguments expand to those variables, unknown ones to nothing, as GRUB
// expands an unset variable. `function` bodies are skipped.

export interface GrubBoot {
  /** The entry's titles from the top, e.g. ["Advanced options for Debian", "Debian, with Linux 6.1"]. */
  readonly entry: readonly string[];
  /** Paths inside the filesystem grub.cfg was read from. */
  readonly kernel: string;
  readonly initrds: readonly string[];
  readonly cmdLine: string;
}

/** No default entry could be read; the message says what was looked for. */
export class GrubConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GrubConfigError';
  }
}

interface Entry {
  readonly kind: 'menuentry';
  readonly title: string;
  readonly id?: string;
  /** Its lines, as raw text (expanded when read). */
  readonly lines: string[];
}

interface Submenu {
  readonly kind: 'submenu';
  readonly title: string;
  readonly id?: string;
  readonly items: (Entry | Submenu)[];
}

type Item = Entry | Submenu;

const linesMax = 100_000;
const kernelCommands = new Set(['linux', 'linux16', 'linuxefi']);
const initrdCommands = new Set(['initrd', 'initrd16', 'initrdefi']);

/** The default entry's boot files; throws GrubConfigError. */
export function defaultBootEntry(config: string, grubenv = ''): GrubBoot {
  const variables = new Map<string, string>();
  for (const line of grubenv.split('\n')) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (m?.[2] !== undefined && m[2] !== '') variables.set(m[1]!, m[2]);
  }
  const top = readItems(config, variables);
  if (top.length === 0)
    throw new GrubConfigError('no menuentry in it (looked for `menuentry TITLE ... {` lines)');
  const wanted = variables.get('default') ?? '0';
  const titles: string[] = [];
  let items = top;
  let found: Item | undefined;
  for (const part of wanted.split('>')) {
    found = pick(items, part);
    if (found === undefined)
      throw new GrubConfigError(
        `default "${wanted}" names no entry: "${part}" is neither an index below ${items.length} nor the id or title of one of ${describe(items)}`,
      );
    titles.push(found.title);
    if (found.kind === 'submenu') items = found.items;
  }
  if (found?.kind !== 'menuentry')
    throw new GrubConfigError(
      `default "${wanted}" names the submenu "${titles.join('>')}", not an entry in it`,
    );
  return bootFiles(found, titles, variables, wanted);
}

function pick(items: readonly Item[], part: string): Item | undefined {
  if (/^[0-9]+$/.test(part)) return items[Number(part)];
  return items.find((i) => i.id === part) ?? items.find((i) => i.title === part);
}

function describe(items: readonly Item[]): string {
  return items.map((i) => `${i.kind} "${i.title}"${i.id === undefined ? '' : ` (id ${i.id})`}`).join(', ');
}

function bootFiles(
  entry: Entry,
  titles: string[],
  variables: ReadonlyMap<string, string>,
  wanted: string,
): GrubBoot {
  let kernel: string[] | undefined;
  let initrds: string[] = [];
  for (const line of entry.lines) {
    const words = splitWords(line, variables);
    const [command, ...args] = words;
    if (command !== undefined && kernelCommands.has(command)) kernel = args;
    if (command !== undefined && initrdCommands.has(command)) initrds = args.map(withoutDevice);
  }
  const path = kernel?.[0];
  if (kernel === undefined || path === undefined)
    throw new GrubConfigError(
      `the default entry "${titles.join('>')}" (default "${wanted}") has no linux line (looked for linux, linux16 or linuxefi)`,
    );
  return { entry: titles, kernel: withoutDevice(path), initrds, cmdLine: kernel.slice(1).join(' ') };
}

/** `(hd0,gpt2)/vmlinuz` → `/vmlinuz`: paths are read inside the filesystem mounted. */
function withoutDevice(path: string): string {
  return path.replace(/^\([^)]*\)/, '');
}

/** What GRUB itself sets before the script runs: the features grub-mkconfig's scripts test. */
const grubFeatures = [
  'feature_menuentry_id',
  'feature_all_video_module',
  'feature_platform_search_hint',
  'feature_default_font_path',
  'feature_timeout_style',
];

/** An if/elif/else/fi level: whether its current branch runs, and whether one branch did. */
interface Branch {
  readonly outerActive: boolean;
  active: boolean;
  taken: boolean;
}

/**
 * `[ ... ]` as GRUB's test reads it; true when it cannot tell (a command, a file test), so a
 * `then` branch runs and its `else` does not.
 */
export function condition(text: string, variables: ReadonlyMap<string, string>): boolean {
  const words = splitWords(text, variables);
  if (words[0] !== '[' || words[words.length - 1] !== ']') return true;
  const args = words.slice(1, -1);
  const [a, op, b] = args;
  if (args.length === 0) return false;
  if (args.length === 1) return a !== '';
  if (args.length === 2 && a === '-n') return op !== '';
  if (args.length === 2 && a === '-z') return op === '';
  if (args.length === 3 && (op === '=' || op === '==')) return a === b;
  if (args.length === 3 && op === '!=') return a !== b;
  return true;
}

/** Follows if/elif/else/fi outside entries; true when the line was one of them. */
function followBranch(line: string, branches: Branch[], variables: ReadonlyMap<string, string>): boolean {
  const opened = /^if\s+(.*?)\s*;?\s*(?:then)?$/.exec(line);
  const top = branches[branches.length - 1];
  const outer = top === undefined || top.active;
  if (opened !== null && !/;\s*fi$/.test(line)) {
    const holds = condition(opened[1] ?? '', variables);
    branches.push({ outerActive: outer, active: outer && holds, taken: holds });
    return true;
  }
  if (opened !== null) return true; // a one-line if … fi: nothing it sets is read
  const elif = /^elif\s+(.*?)\s*;?\s*(?:then)?$/.exec(line);
  if (top !== undefined && elif !== null) {
    const holds = !top.taken && condition(elif[1] ?? '', variables);
    top.active = top.outerActive && holds;
    top.taken ||= holds;
    return true;
  }
  if (top !== undefined && line === 'else') {
    top.active = top.outerActive && !top.taken;
    return true;
  }
  if (line === 'fi') {
    branches.pop();
    return true;
  }
  return false;
}

/**
 * The top-level items, reading assignments outside entries into `variables` on the way, in the
 * branches of if/elif/else that would run. Entries count wherever they are (the firmware decides
 * some conditions, and entries after the kernels' do not move theirs).
 */
function readItems(config: string, variables: Map<string, string>): Item[] {
  for (const feature of grubFeatures) if (!variables.has(feature)) variables.set(feature, 'y');
  const top: Item[] = [];
  const stack: { items: Item[] }[] = [{ items: top }];
  const branches: Branch[] = [];
  let entry: Entry | undefined;
  let depth = 0; // braces open inside the current entry, or in a skipped function
  let skipping = false;
  const lines = config.split('\n');
  if (lines.length > linesMax) throw new GrubConfigError(`it has more than ${linesMax} lines`);
  for (const raw of lines) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const opens = line.endsWith('{');
    const closes = line === '}';
    if (entry !== undefined || skipping) {
      if (opens) depth += 1;
      if (closes && depth-- === 0) {
        entry = undefined;
        skipping = false;
        depth = 0;
      } else if (entry !== undefined) entry.lines.push(line);
      continue;
    }
    if (followBranch(line, branches, variables)) continue;
    const words = splitWords(line, variables, { keepIdOption: true });
    const command = words[0];
    if ((command === 'menuentry' || command === 'submenu') && opens) {
      const item = newItem(command, words);
      stack[stack.length - 1]!.items.push(item);
      if (item.kind === 'menuentry') entry = item;
      else stack.push(item);
    } else if (command === 'function' && opens) skipping = true;
    else if (closes && stack.length > 1) stack.pop();
    else if (branches.every((b) => b.active)) assign(words, variables);
  }
  return top;
}

function newItem(command: 'menuentry' | 'submenu', words: readonly string[]): Item {
  const title = words[1] ?? '';
  const idAt = words.findIndex((w, i) => i > 1 && (w === '--id' || w === '$menuentry_id_option'));
  const id = idAt < 0 ? undefined : words[idAt + 1];
  const base = { title, ...(id === undefined ? {} : { id }) };
  return command === 'menuentry'
    ? { kind: 'menuentry', ...base, lines: [] }
    : { kind: 'submenu', ...base, items: [] };
}

/** `set NAME=VALUE` or `NAME=VALUE`: kept when the value is not empty. */
function assign(words: readonly string[], variables: Map<string, string>): void {
  const assignment = words[0] === 'set' ? words[1] : words.length === 1 ? words[0] : undefined;
  const m = assignment === undefined ? null : /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(assignment);
  if (m?.[2] !== undefined && m[2] !== '') variables.set(m[1]!, m[2]);
}

/**
 * A line split into words as GRUB's script reader does: blanks separate, '…' is literal, "…"
 * expands variables (and is a word even when empty), an unquoted unset variable is no word, a
 * backslash escapes the next character, `#` at a word's start comments.
 * With keepIdOption, `$menuentry_id_option` stays a word (an entry's id follows it).
 */
export function splitWords(
  line: string,
  variables: ReadonlyMap<string, string>,
  options: { keepIdOption?: boolean } = {},
): string[] {
  const words: string[] = [];
  let word: string | undefined;
  let i = 0;
  const add = (text: string): void => {
    word = (word ?? '') + text;
  };
  while (i < line.length) {
    const c = line.charAt(i);
    if (c === ' ' || c === '\t') {
      if (word !== undefined) words.push(word);
      word = undefined;
      i += 1;
    } else if (c === '#' && word === undefined) break;
    else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      add(line.slice(i + 1, end < 0 ? line.length : end));
      i = end < 0 ? line.length : end + 1;
    } else if (c === '"') {
      const end = line.indexOf('"', i + 1);
      add(expand(line.slice(i + 1, end < 0 ? line.length : end), variables));
      i = end < 0 ? line.length : end + 1;
    } else if (c === '\\') {
      add(line.charAt(i + 1));
      i += 2;
    } else if (c === '$') {
      const m = /^\$(?:\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))/.exec(line.slice(i));
      const name = m?.[1] ?? m?.[2];
      if (options.keepIdOption === true && name === 'menuentry_id_option') add('$menuentry_id_option');
      else if (name === undefined) add('$');
      else if ((variables.get(name) ?? '') !== '') add(variables.get(name) ?? '');
      i += m === null ? 1 : m[0].length;
    } else {
      add(c);
      i += 1;
    }
  }
  if (word !== undefined) words.push(word);
  return words;
}

function expand(text: string, variables: ReadonlyMap<string, string>): string {
  return text.replace(
    /\$(?:\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))/g,
    (_all, braced: string | undefined, bare: string | undefined) => variables.get(braced ?? bare ?? '') ?? '',
  );
}

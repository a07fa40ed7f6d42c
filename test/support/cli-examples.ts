// Checks that a `slipway ...` command line is one the CLI takes, without running it: its commands
// exist and its flags are flags of theirs (or global ones), read from the real CLI's hidden
// `__manual`, which prints every command's help with its options and subcommands.
import assert from 'node:assert/strict';
import { runSlipway } from './process-cluster.js';

export interface ManualPage {
  readonly path: string;
  readonly help: string;
  readonly options: readonly string[];
  readonly valueOptions: readonly string[];
  readonly commands: readonly string[];
}

/** Every command's page, from the real `slipway __manual`. */
export async function readManual(): Promise<ManualPage[]> {
  const r = await runSlipway(['__manual']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as ManualPage[];
}

/** The words of a shell command line (quotes kept together, not expanded). */
export function shellWords(line: string): string[] {
  return [...line.matchAll(/'[^']*'|"[^"]*"|\S+/g)].map((m) => m[0].replace(/^['"]|['"]$/g, ''));
}

/** What is wrong with a `slipway ...` command line, or undefined. */
export function commandLineProblem(pages: readonly ManualPage[], line: string): string | undefined {
  const byPath = (path: string): ManualPage | undefined => pages.find((p) => p.path === path);
  const root = byPath('')!;
  const words = shellWords(line).slice(1);
  let page = root;
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    if (w === '\\' || w === '...' || w.startsWith('#') || w === '&&' || w === '|' || w === '>') break;
    if (w.startsWith('-')) {
      const flag = w.split('=')[0]!;
      const owner = [page, root].find((p) => p.options.includes(flag));
      if (owner === undefined) return `${flag} is not a flag of "slipway ${page.path}"`;
      if (!w.includes('=') && owner.valueOptions.includes(flag)) i++;
      continue;
    }
    if (page.commands.includes(w)) {
      const next = byPath(page.path === '' ? w : `${page.path} ${w}`);
      if (next === undefined) return `"${w}" is an alias the manual does not list`;
      page = next;
    } else if (page.commands.length > 0 && page === root) return `"${w}" is not a command`;
    else if (page.commands.length > 0) return `"${w}" is not a command of "slipway ${page.path}"`;
  }
  return undefined;
}

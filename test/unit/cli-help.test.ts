// Goal: every command's help follows the same rules, so a new command cannot leave them out: the
// global options in every command's help, examples in every command group's (and each example a
// command line the CLI takes: its commands exist and its flags are flags of theirs), durations
// named <duration> and taking units, the exit codes in the program's help; the man page made from
// the same help holds every command; and shell completion offers the commands and flags there are.
// Method: the real `slipway` (its hidden __manual prints every command's help with its options
// and subcommands; __complete is what the completion scripts call), and bash/zsh syntax checks of
// the completion scripts.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { before, describe, test } from 'node:test';
import { runSlipway, slipwayBin } from '../support/process-cluster.js';
import { commandLineProblem, readManual, type ManualPage } from '../support/cli-examples.js';

const run = promisify(execFile);

let pages: ManualPage[];
const byPath = (path: string): ManualPage | undefined => pages.find((p) => p.path === path);

before(async () => {
  pages = await readManual();
});

describe('every command help', () => {
  test('shows the global options, and the program names the exit codes', () => {
    const without = pages.filter((p) => p.path !== '' && !/^Global Options:/m.test(p.help));
    assert.deepEqual(
      without.map((p) => p.path),
      [],
    );
    assert.match(byPath('')!.help, /^Exit codes:\n {2}0 .*\n {2}1 .*\n {2}2 /m);
  });

  test('every command group has examples, and every example is a command line the CLI takes', () => {
    const groups = pages.filter((p) => p.path !== '' && !p.path.includes(' '));
    assert.ok(groups.length >= 20, `${groups.length} groups`);
    assert.deepEqual(
      groups.filter((p) => !/^Examples:/m.test(p.help)).map((p) => p.path),
      [],
    );
    const problems: string[] = [];
    let checked = 0;
    for (const p of pages) {
      const section = (p.help.split(/^Examples:\n/m)[1] ?? '').split('\n\n')[0] ?? '';
      for (const raw of section.split('\n')) {
        const at = raw.indexOf('slipway ');
        if (!/^ {2}\S/.test(raw) || at < 0) continue;
        const line = raw.slice(at).replace(/\).*$/, '');
        checked++;
        const problem = commandLineProblem(pages, line);
        if (problem !== undefined) problems.push(`${p.path}: ${line.trim()}: ${problem}`);
      }
    }
    assert.ok(checked > 60, `${checked} examples checked`);
    assert.deepEqual(problems, []);
  });

  test('a duration is a <duration> that takes units, and bare numbers in the unit the help names', () => {
    const durationFlag =
      /^ {2}(?:-\w, )?(--[a-z-]*(?:timeout|interval|grace|wait|deadline|lease-time|window|tick-ms|max-age)[a-z-]*) <(\w+)>/gm;
    const bad: string[] = [];
    let seen = 0;
    for (const p of pages) {
      for (const m of p.help.matchAll(durationFlag)) {
        seen++;
        if (m[2] !== 'duration') bad.push(`${p.path} ${m[1]} <${m[2]}>`);
      }
    }
    assert.ok(seen >= 10, `${seen} duration flags`);
    assert.deepEqual(bad, []);
  });

  test('one verb grammar: reads are get or list, a target is the argument, old forms still parse', async () => {
    const problems: string[] = [];
    // Commands that read the state (they take --local) are get (one record) or list (many); a view
    // with a verb of its own is named here. Other names for these verbs are aliases, not names.
    const views = new Set(['hardware explain']);
    const synonyms = new Set([
      'add',
      'del',
      'rm',
      'remove',
      'show',
      'ls',
      'range',
      'describe',
      'new',
      'jobs',
    ]);
    // A member joins and leaves the raft membership (as etcd's `member add|remove`): not a record.
    const synonymsAllowed = new Set(['member add', 'member remove']);
    // One setting for the whole cluster: there is no target to name.
    const settings = new Set(['hardware accept-rule get']);
    // A flag that names another group's record is a filter (list) or an input (create), never the
    // command's target, which is its argument (`upgrade check n2`, not `--member n2`).
    const targetFlags = /^ {2}(?:-\w, )?(--(?:to|member|hardware|template|workflow|pool|artifact|token)) /gm;
    const argumentsOf = (p: ManualPage): { required: number; optional: number } => {
      const usage = /^Usage: slipway (.*)$/m.exec(p.help)?.[1] ?? '';
      const words = usage.slice(p.path.length).split(/\s+/);
      return {
        required: words.filter((w) => /^<.*>$/.test(w)).length,
        optional: words.filter((w) => /^\[.*\]$/.test(w) && w !== '[options]' && w !== '[command]').length,
      };
    };
    for (const p of pages) {
      const words = p.path.split(' ');
      const verb = words.at(-1) ?? '';
      if (words.length < 2) continue;
      if (p.options.includes('--local') && verb !== 'get' && verb !== 'list' && !views.has(p.path))
        problems.push(`${p.path} reads the state: name it get or list`);
      if (synonyms.has(verb) && !synonymsAllowed.has(p.path))
        problems.push(`${p.path}: name it create, get, list or delete (keep "${verb}" as an alias)`);
      const args = argumentsOf(p);
      const targetless = settings.has(p.path);
      if (
        (verb === 'get' || verb === 'delete') &&
        !targetless &&
        (args.required !== 1 || args.optional !== 0)
      )
        problems.push(`${p.path} takes its target as its one argument`);
      if (verb === 'list' && args.required !== 0) problems.push(`${p.path} takes filters as flags`);
      if (verb !== 'create' && verb !== 'list')
        for (const m of p.help.matchAll(targetFlags))
          problems.push(`${p.path} ${m[1]}: make it the argument`);
    }
    // One name per idea: whatever a retention keeps, --keep N and --max-age <duration> bound it.
    const retentions = pages.filter((p) => p.path.endsWith(' retention'));
    assert.ok(retentions.length >= 2, retentions.map((p) => p.path).join(', '));
    for (const p of retentions) {
      const flags = [...p.help.split(/^Global Options:/m)[0]!.matchAll(/^ {2}(--[a-z-]+ <\w+>)/gm)].map(
        (m) => m[1],
      );
      if (flags.join(' ') !== '--keep <n> --max-age <duration>')
        problems.push(`${p.path}: ${flags.join(' ')}`);
    }
    assert.deepEqual(problems, []);
    // The forms before the grammar still parse: aliases and hidden commands and flags.
    const commandsOf = (path: string): readonly string[] => byPath(path)?.commands ?? [];
    for (const [group, old] of [
      ['kv', 'del'],
      ['kv', 'range'],
      ['artifact', 'add'],
      ['power', 'jobs'],
    ] as const)
      assert.ok(commandsOf(group).includes(old), `${group} ${old}`);
    assert.ok(byPath('leader transfer')!.options.includes('--to'));
    assert.ok(byPath('upgrade check')!.options.includes('--member'));
    const refused = async (args: string[], message: RegExp): Promise<void> => {
      const r = await runSlipway(['--server', '127.0.0.1:1', ...args]);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message, args.join(' '));
    };
    // Refused before any call, each by the code of the canonical form it reaches.
    await refused(['power', 'jobs', 'm1', '--limit', '0'], /--limit must be a whole number from 1/);
    await refused(['power', 'job', 'list', '--limit', '0'], /--limit must be a whole number from 1/);
    await refused(['power', 'job', 'j1', '--limit', '1'], /unknown option '--limit'/);
    await refused(['leader', 'transfer'], /name the member to lead/);
    await refused(['leader', 'transfer', 'n1', '--to', 'n2'], /give it once/);
    await refused(['upgrade', 'check', 'n1', '--member', 'n2'], /give it once/);
  });

  test('the man page holds every command', async () => {
    const r = await runSlipway(['__manual', '--format', 'man']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^\.TH SLIPWAY 1 /);
    const missing = pages.filter((p) => p.path !== '' && !r.stdout.includes(`\n.SS\nslipway ${p.path}\n`));
    assert.deepEqual(
      missing.map((p) => p.path),
      [],
    );
    const dir = mkdtempSync(join(tmpdir(), 'slipway-man-'));
    try {
      writeFileSync(join(dir, 'slipway.1'), r.stdout);
      // groff renders it without a warning (man's own checker).
      const { stderr } = await run('groff', ['-man', '-Tutf8', '-ww', '-z', join(dir, 'slipway.1')]);
      assert.equal(stderr, '');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a reader that stops reading', () => {
  test('ends the CLI quietly with exit 0, not a stack trace for EPIPE', async () => {
    // Every command's help is some 200 KB: more than a pipe holds, so the write is still under
    // way when the reader goes, as with `slipway __manual | head`.
    const child = spawn(process.execPath, [slipwayBin, '__manual'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    child.stdout.destroy();
    assert.equal(await exited, 0, stderr);
    assert.equal(stderr, '');
  });
});

describe('shell completion', () => {
  const complete = async (...words: string[]): Promise<string[]> => {
    const r = await runSlipway(['__complete', '--', ...words]);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout.split('\n').filter((w) => w !== '');
  };

  test('offers the commands and the flags there are where the cursor is', async () => {
    assert.deepEqual(await complete('hardware', 'l'), ['label', 'list']);
    assert.ok((await complete('')).includes('workflow'));
    assert.ok(!(await complete('')).some((w) => w.startsWith('__')), 'hidden commands stay hidden');
    assert.deepEqual(await complete('--server', '127.0.0.1:7001', 'kv', 'de'), ['delete']);
    assert.deepEqual(await complete('power', 'j'), ['job'], 'forms kept for old scripts stay hidden');
    const flags = await complete('workflow', 'create', '--');
    assert.ok(flags.includes('--template') && flags.includes('--selector'), flags.join(' '));
    assert.ok(flags.includes('--server'), 'global flags too');
    assert.deepEqual(await complete('nosuch', 'x'), []);
  });

  test('the scripts parse in their shells, and an unknown shell is bad usage', async () => {
    for (const shell of ['bash', 'zsh', 'fish']) {
      const r = await runSlipway(['completion', shell]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /slipway __complete/);
      if (shell === 'bash') await run('bash', ['-n', '-c', r.stdout]);
    }
    const bad = await runSlipway(['completion', 'tcsh']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /bash, zsh or fish, got "tcsh"/);
  });
});

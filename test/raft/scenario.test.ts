// Goal: the raft core behaves as the scenario files in test/raft/testdata say, message by
// message, and never breaks election safety, log matching on committed entries or state
// machine safety along the way.
// Method: etcd-style datadriven tests. Each testdata/*.txt file is a script of commands, each
// followed by `----` and its expected output; a fresh InteractionEnv (in-process nodes with
// in-memory disks, seeded randomness) runs the script and the output must match exactly. The
// invariants are checked after every command. UPDATE_GOLDEN=1 rewrites the files with the
// actual output instead; review the diff before keeping it, since the files are the spec.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseScenario, renderScenario } from './datadriven.js';
import { InteractionEnv, runCommand } from './interaction-commands.js';

const dir = join(import.meta.dirname, 'testdata');
const update = process.env['UPDATE_GOLDEN'] === '1';
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.txt'))
  .sort();

function diff(expected: readonly string[], actual: readonly string[]): string {
  const out: string[] = [];
  for (let i = 0; i < Math.max(expected.length, actual.length); i++) {
    const e = expected[i];
    const a = actual[i];
    if (e === a) out.push(`  ${e}`);
    else {
      if (e !== undefined) out.push(`- ${e}`);
      if (a !== undefined) out.push(`+ ${a}`);
    }
  }
  return out.join('\n');
}

void test('there are scenario files', () => {
  assert.ok(files.length >= 14, `only ${files.length} scenario files`);
});

for (const file of files) {
  void test(file, () => {
    const path = join(dir, file);
    const items = parseScenario(readFileSync(path, 'utf8'), file);
    const env = new InteractionEnv();
    const actual: string[][] = [];
    for (const item of items) {
      if (item.kind !== 'case') continue;
      const where = `${file}:${item.line}: ${item.command}`;
      let out: string[];
      try {
        out = runCommand(env, item.command);
        env.checkInvariants();
      } catch (err) {
        throw new Error(`${where}\n${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      }
      assert.ok(
        out.every((l) => l.trim() !== ''),
        `${where}: output has a blank line`,
      );
      actual.push(out);
      if (!update && out.join('\n') !== item.expected.join('\n')) {
        assert.fail(`${where}\noutput differs (- expected, + actual):\n${diff(item.expected, out)}`);
      }
    }
    if (update) writeFileSync(path, renderScenario(items, actual));
  });
}

// Goal: prove that the files which take their time from a passed-in Clock (src/platform/clock.ts,
// docs/decisions/0043-one-clock.md) fail `npx eslint .` when they reach for Node's timers or the
// wall clock directly, so that the simulation's virtual time cannot be bypassed unnoticed; and
// that the same code passes in a file outside that list (the rule is scoped, not global).
// Method: the repository's own ESLint configuration (eslint.config.js) linting violating text as
// if it were each file, through ESLint's API.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ESLint } from 'eslint';
import { clockSeamFiles } from '../../eslint/clock-seam.js';

const clocked = clockSeamFiles;

const violations: Record<string, string> = {
  'no-restricted-globals': 'export const t = setTimeout(() => undefined, 5);\n',
  'no-restricted-properties': 'export const now = Date.now();\n',
  'no-restricted-imports': "export { setTimeout } from 'node:timers/promises';\n",
};

/** The rules that fire on `code` linted as `file`, through eslint.config.js (no type checking). */
async function firing(eslint: ESLint, file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: file });
  assert.ok(result !== undefined);
  return result.messages.map((m) => m.ruleId ?? `fatal: ${m.message}`);
}

describe('the clock seam lint rule', () => {
  // Type-aware rules off: these checks are syntactic, and loading the program would take seconds.
  const eslint = new ESLint({
    overrideConfig: { languageOptions: { parserOptions: { projectService: false, project: null } } },
    ruleFilter: ({ ruleId }) => ruleId in violations,
  });

  for (const file of clocked) {
    it(`refuses Node's timers and Date.now in ${file}`, async () => {
      for (const [rule, code] of Object.entries(violations)) {
        assert.deepEqual(await firing(eslint, file, code), [rule], `${rule} in ${file}`);
      }
      assert.deepEqual(await firing(eslint, file, 'export const n = 1;\n'), []);
    });
  }

  it('names files that exist, so a renamed one cannot drop out of the rule unnoticed', () => {
    for (const file of clocked) assert.ok(existsSync(file), `${file} (eslint/clock-seam.js) does not exist`);
  });

  it('lets the same code through elsewhere (src/node/start-node.ts wires the real clock)', async () => {
    for (const code of Object.values(violations)) {
      assert.deepEqual(await firing(eslint, 'src/node/start-node.ts', code), []);
    }
  });
});

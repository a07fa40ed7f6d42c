// Goal: prove that the import-boundaries lint rule refuses the arrows the layering forbids and
// lets the others through, so that a wrong-way import fails `npx eslint .` (docs/decisions/0026).
// Method: ESLint's RuleTester on one-line modules placed in the folders of the repository.
import { describe, it } from 'node:test';
import path from 'node:path';
import { RuleTester } from 'eslint';
import { importBoundaries } from '../../eslint/import-boundaries.js';

RuleTester.describe = describe;
RuleTester.it = it;

const zones = {
  'src/platform': [],
  'src/model': ['src/platform'],
  'src/raft': ['src/platform'],
  'src/state': ['src/platform', 'src/model', 'src/raft'],
  'src/cli': ['src/platform', 'src/model', 'src/raft', 'src/state'],
  bench: ['src/platform', 'src/model', 'src/raft', 'src/state', 'src/cli'],
  test: ['*'],
};
const options = [{ zones, entryOnly: ['bench'], open: ['src/platform', 'src/model'] }];
const at = (file: string): string => path.join(process.cwd(), file);
const tester = new RuleTester({ languageOptions: { ecmaVersion: 2022, sourceType: 'module' } });

tester.run('import-boundaries', importBoundaries, {
  valid: [
    { filename: at('src/state/kv-store.ts'), code: "import { x } from '../raft/state-machine.js';", options },
    { filename: at('src/state/kv-store.ts'), code: "import { x } from './binary.js';", options },
    { filename: at('src/raft/node.ts'), code: "import { x } from 'node:fs';", options },
    { filename: at('bench/state.ts'), code: "import { KvStore } from '../src/state/index.js';", options },
    { filename: at('bench/state.ts'), code: "import { x } from '../src/model/records.js';", options },
    { filename: at('test/unit/x.test.ts'), code: "import { x } from '../../src/state/binary.js';", options },
    { filename: at('src/cli/main.ts'), code: "const m = await import('../state/kv-store.js');", options },
  ],
  invalid: [
    {
      // Consensus depending on the domain: the arrow this rule was written to stop.
      filename: at('src/raft/node.ts'),
      code: "import { StateMachine } from '../state/machine.js';",
      options,
      errors: [{ messageId: 'layer' }],
    },
    {
      filename: at('src/platform/grpc-call-guard.ts'),
      code: "export { headUtf8 } from '../state/control/text.js';",
      options,
      errors: [{ messageId: 'layer' }],
    },
    {
      filename: at('src/state/kv-store.ts'),
      code: "const m = await import('../cli/client.js');",
      options,
      errors: [{ messageId: 'layer' }],
    },
    {
      // A benchmark reaching past a subsystem's entry into its internals.
      filename: at('bench/state.ts'),
      code: "import { KvStore } from '../src/state/kv-store.js';",
      options,
      errors: [{ messageId: 'entry' }],
    },
    {
      filename: at('bench/flood-load.ts'),
      code: "import { RawH2Connection } from '../test/support/h2-raw.js';",
      options,
      errors: [{ messageId: 'layer' }],
    },
  ],
});

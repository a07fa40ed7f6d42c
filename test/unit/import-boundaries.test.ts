// Goal: prove that the import-boundaries lint rule refuses the arrows the layering forbids and
// lets the others through, so that a wrong-way import fails `npx eslint .` (docs/decisions/0026):
// first the rule's mechanics on a small table, then each rule of the repository's own table
// (eslint/import-table.js) against a deliberate violation of it, and that every folder and entry
// the table names exists.
// Method: ESLint's RuleTester (with typescript-eslint's parser, for `import type`) on one-line
// modules placed in the folders of the repository.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it, test } from 'node:test';
import path from 'node:path';
import { RuleTester } from 'eslint';
import tseslint from 'typescript-eslint';
import { importBoundaries } from '../../eslint/import-boundaries.js';
import { importBoundaryOptions } from '../../eslint/import-table.js';

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
    {
      filename: at('src/state/replicated-state.ts'),
      code: "import { x } from '../raft/state-machine.js';",
      options,
    },
    { filename: at('src/state/replicated-state.ts'), code: "import { x } from './binary.js';", options },
    { filename: at('src/raft/node.ts'), code: "import { x } from 'node:fs';", options },
    {
      filename: at('bench/state.ts'),
      code: "import { ReplicatedState } from '../src/state/index.js';",
      options,
    },
    { filename: at('bench/state.ts'), code: "import { x } from '../src/model/records.js';", options },
    { filename: at('test/unit/x.test.ts'), code: "import { x } from '../../src/state/binary.js';", options },
    {
      filename: at('src/cli/main.ts'),
      code: "const m = await import('../state/replicated-state.js');",
      options,
    },
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
      filename: at('src/state/replicated-state.ts'),
      code: "const m = await import('../cli/client.js');",
      options,
      errors: [{ messageId: 'layer' }],
    },
    {
      // A benchmark reaching past a subsystem's entry into its internals.
      filename: at('bench/state.ts'),
      code: "import { ReplicatedState } from '../src/state/replicated-state.js';",
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

// The repository's table, each rule against a deliberate violation.
const table = [importBoundaryOptions];
const typed = new RuleTester({ languageOptions: { parser: tseslint.parser } });
const ok = (file: string, code: string) => ({ filename: at(file), code, options: table });
const refused = (file: string, code: string, messageId: 'layer' | 'entry' | 'lazy') => ({
  ...ok(file, code),
  errors: [{ messageId }],
});

typed.run('import-boundaries: the repository table', importBoundaries, {
  valid: [
    // The CLI: the wire, the ground and the model, statically.
    ok('src/cli/client.ts', "import { isServiceError } from '../wire/contract.js';"),
    ok('src/cli/commands/node.ts', "import { memberIdProblem } from '../../model/member-id.js';"),
    ok('src/cli/commands/kv.ts', "import { Role } from '../../gen/kv.js';"),
    // ... and each other subsystem through its one entry, lazily, or for types alone.
    ok('src/cli/commands/server.ts', "const node = await import('../../node/index.js');"),
    ok('src/cli/commands/server.ts', "import type { ServerConfig } from '../../node/index.js';"),
    ok('src/cli/commands/snapshot.ts', "const seed = await import('../../node/snapshot-seed.js');"),
    ok('src/cli/commands/lab.ts', "const lab = await import('../../../cluster/index.js');"),
    ok('src/cli/commands/balancer.ts', "const lb = await import('../../../lb/index.js');"),
    // lb renders what the model describes.
    ok('lb/haproxy.ts', "import { validBalancerSpec } from '../src/model/balancer-spec.js';"),
    ok('lb/xds/resources.ts', "import { Listener } from '../../src/gen/xds.js';"),
    // A folder reaches its own subfolders, and those of a folder it may import.
    ok('src/raft/node.ts', "import { RaftCore } from './core/raft-core.js';"),
    ok('src/state/replicated-state.ts', "import type { Entry } from '../raft/core/types.js';"),
    ok('src/node/snapshot-seed.ts', "import { openLogStore } from '../raft/storage/level-log-store.js';"),
  ],
  invalid: [
    // The CLI importing server code at all, or statically, or past its entry.
    refused('src/cli/commands/upgrade.ts', "import { x } from '../../state/versions.js';", 'layer'),
    refused('src/cli/commands/server.ts', "import { startNode } from '../../node/index.js';", 'lazy'),
    refused('src/cli/commands/server.ts', "const n = await import('../../node/start-node.js');", 'layer'),
    refused('src/cli/snapshot.ts', "import { seedDataDir } from '../node/snapshot-seed.js';", 'lazy'),
    refused(
      'src/cli/commands/balancer.ts',
      "import { renderHaproxyConfig } from '../../../lb/haproxy.js';",
      'layer',
    ),
    refused(
      'src/cli/commands/balancer.ts',
      "export { runFollowDaemon } from '../../../lb/index.js';",
      'lazy',
    ),
    refused('src/cli/commands/lab.ts', "const l = await import('../../../cluster/machine-lab.js');", 'layer'),
    refused(
      'src/cli/commands/artifact.ts',
      "const v = await import('../../state/control/validate.js');",
      'layer',
    ),
    refused('src/cli/commands/worker.ts', "const a = await import('../../worker/agent.js');", 'layer'),
    // lb: platform, gen and model only.
    refused('lb/haproxy.ts', "import { x } from '../src/node/config.js';", 'layer'),
    refused('lb/haproxy.ts', "import { x } from '../src/state/index.js';", 'layer'),
    refused('lb/follow.ts', "import type { ClusterClient } from '../src/cli/index.js';", 'layer'),
    // The consensus core imports nothing of ours outside itself.
    refused('src/raft/core/raft-core.ts', "import { x } from '../storage/level-log-store.js';", 'layer'),
    refused('src/raft/core/raft-core.ts', "import { x } from '../transport/codec.js';", 'layer'),
    refused('src/raft/core/raft-core.ts', "import { x } from '../../platform/prng.js';", 'layer'),
    // The wire and the model stay below everything that shares them.
    refused('src/wire/contract.ts', "import { x } from '../model/limits.js';", 'layer'),
    refused('src/model/member-id.ts', "import { x } from '../wire/contract.js';", 'layer'),
    refused('src/node/start-node.ts', "import { x } from '../cli/client.js';", 'layer'),
    // Outside src/, through a subsystem's index.ts, even into a subfolder of it.
    refused('bench/raft.ts', "import { x } from '../src/raft/core/types.js';", 'entry'),
  ],
});

test('every folder and lazy entry the table names exists', () => {
  const names = [
    ...Object.keys(importBoundaryOptions.zones),
    ...Object.values(importBoundaryOptions.zones).flat(),
    ...importBoundaryOptions.entryOnly,
    ...importBoundaryOptions.open,
  ].filter((z) => z !== '*');
  for (const name of new Set(names))
    assert.ok(existsSync(name), `the table names ${name}, which does not exist`);
  for (const entry of Object.values(importBoundaryOptions.lazy).flat())
    assert.ok(existsSync(entry), `the lazy entry ${entry} does not exist`);
});

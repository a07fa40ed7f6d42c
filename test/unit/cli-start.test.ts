// Goal: the CLI starts at once because each command loads only what it uses: `--version` no
// command group and no gRPC, `kv get` and `workflow list` the client and their own service's
// generated code but no state, raft, server or validation code, while `--help` still lists every
// command group (loading every group's module, and through them nothing but the CLI, the wire,
// platform and model) and `slipway GROUP --help` works.
// Method: the CLI runs from the sources (tsx) in a child process with a loader hook that records
// every module it loads (ES modules through the hook, CommonJS ones from require.cache at exit).
// The client commands dial a port where nothing listens, so they load all they would and fail.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { after, describe, test } from 'node:test';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const main = join(repoRoot, 'src', 'cli', 'main.ts');
const dir = mkdtempSync(join(tmpdir(), 'slipway-cli-start-'));
const hooks = join(dir, 'hooks.mjs');
const preload = join(dir, 'preload.mjs');
writeFileSync(
  hooks,
  "import { appendFileSync } from 'node:fs';\n" +
    'export async function load(url, context, next) {\n' +
    "  if (url.startsWith('file:')) appendFileSync(process.env.SLIPWAY_TEST_MODULES, url + '\\n');\n" +
    '  return next(url, context);\n' +
    '}\n',
);
writeFileSync(
  preload,
  "import { appendFileSync } from 'node:fs';\n" +
    "import { createRequire, register } from 'node:module';\n" +
    "import { pathToFileURL } from 'node:url';\n" +
    `register(${JSON.stringify(pathToFileURL(hooks).href)});\n` +
    'const cache = createRequire(import.meta.url).cache;\n' +
    "process.on('exit', () => {\n" +
    '  const urls = Object.keys(cache).map((f) => pathToFileURL(f).href);\n' +
    "  appendFileSync(process.env.SLIPWAY_TEST_MODULES, urls.join('\\n') + '\\n');\n" +
    '});\n',
);
after(() => rmSync(dir, { recursive: true, force: true }));

let runs = 0;
interface Traced {
  readonly code: number;
  readonly stdout: string;
  /** Each module's path: under src/ or lb/ relative to the repository, else from node_modules/ on. */
  readonly modules: ReadonlySet<string>;
}

async function traced(args: string[]): Promise<Traced> {
  const list = join(dir, `modules-${String(++runs)}.txt`);
  writeFileSync(list, '');
  const { code, stdout } = await new Promise<{ code: number; stdout: string }>((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', '--import', pathToFileURL(preload).href, main, ...args],
      { env: { ...process.env, SLIPWAY_TEST_MODULES: list }, timeout: 60_000 },
      (err, out) => resolve({ code: typeof err?.code === 'number' ? err.code : err ? -1 : 0, stdout: out }),
    );
  });
  const modules = new Set<string>();
  for (const url of readFileSync(list, 'utf8').split('\n')) {
    if (!url.startsWith('file:')) continue;
    const file = fileURLToPath(url);
    const at = file.lastIndexOf('/node_modules/');
    if (at >= 0) modules.add(file.slice(at + 1));
    else if (file.startsWith(repoRoot)) modules.add(file.slice(repoRoot.length));
  }
  return { code, stdout, modules };
}

const ours = (t: Traced): string[] => [...t.modules].filter((m) => /^(src|lb)\//.test(m)).sort();
const loads = (t: Traced, pkg: string): boolean =>
  [...t.modules].some((m) => m.startsWith(`node_modules/${pkg}/`));

/** What a client command may load of slipway's own code: the CLI, its wire facts, one service. */
// model/limits.ts is constants alone (no imports): the CLI checks flags against the state's limits.
const clientAllowed =
  /^src\/(cli\/[^/]+|cli\/commands\/(kv|workflow|selector-flag)|wire\/contract|platform\/(config-error|host-port|pages|plaintext-policy|package-file|xds-target)|gen\/(kv|control)|model\/limits)\.ts$/;
const heavyPackages = ['zod', 'yaml', 'pino', 'level', 'classic-level', 'prom-client', 'handlebars'];

describe('what each command loads', () => {
  test('--version loads no command group and no gRPC', async () => {
    const t = await traced(['--version']);
    assert.equal(t.code, 0);
    assert.match(t.stdout, /^\d+\.\d+\.\d+/);
    assert.deepEqual(ours(t), [
      'src/cli/main.ts',
      'src/cli/output.ts',
      'src/platform/config-error.ts',
      'src/platform/host-port.ts',
      'src/platform/package-file.ts',
      'src/platform/plaintext-policy.ts',
    ]);
    assert.ok(!loads(t, '@grpc/grpc-js'), 'grpc-js loaded');
  });

  test('kv get loads the client and the Kv service only: no state, raft or server code', async () => {
    const t = await traced(['--server', '127.0.0.1:1', '--timeout', '300', 'kv', 'get', 'k']);
    assert.equal(t.code, 1, 'nothing listens there: the call fails');
    assert.deepEqual(
      ours(t).filter((m) => !clientAllowed.test(m)),
      [],
    );
    assert.ok(ours(t).includes('src/gen/kv.ts'));
    assert.ok(!ours(t).includes('src/gen/control.ts'), 'the Control service loaded for a Kv call');
    for (const pkg of heavyPackages) assert.ok(!loads(t, pkg), `${pkg} loaded`);
    assert.ok(!loads(t, '@grpc/grpc-js-xds'), 'grpc-js-xds loaded without an xds:/// server');
  });

  test('kv get through xds:/// loads grpc-js-xds, and still no state, raft or server code', async () => {
    const t = await traced([
      ...['--server', 'xds:///slipway', '--xds-server', '127.0.0.1:1', '--timeout', '300'],
      ...['kv', 'get', 'k'],
    ]);
    assert.equal(t.code, 1, 'no xDS server listens there: the call fails');
    assert.ok(loads(t, '@grpc/grpc-js-xds'), 'grpc-js-xds not loaded');
    assert.deepEqual(
      ours(t).filter((m) => !clientAllowed.test(m)),
      [],
    );
  });

  test('workflow list loads the client and the Control service only', async () => {
    const t = await traced(['--server', '127.0.0.1:1', '--timeout', '300', 'workflow', 'list']);
    assert.equal(t.code, 1, 'nothing listens there: the call fails');
    assert.deepEqual(
      ours(t).filter((m) => !clientAllowed.test(m)),
      [],
    );
    assert.ok(ours(t).includes('src/gen/control.ts'));
    assert.ok(!ours(t).includes('src/gen/kv.ts'), 'the Kv service loaded for a Control call');
    for (const pkg of heavyPackages) assert.ok(!loads(t, pkg), `${pkg} loaded`);
  });

  test('node drain loads the client, its services and the id check only', async () => {
    const t = await traced(['--server', '127.0.0.1:1', '--timeout', '300', 'node', 'drain', 'n1']);
    assert.equal(t.code, 1, 'nothing listens there: the call fails');
    const allowed = (m: string): boolean =>
      clientAllowed.test(m) || m === 'src/cli/commands/node.ts' || m === 'src/model/member-id.ts';
    assert.deepEqual(
      ours(t).filter((m) => !allowed(m)),
      [],
    );
    for (const pkg of heavyPackages) assert.ok(!loads(t, pkg), `${pkg} loaded`);
  });

  test('--help lists every command group; a group has its own help', async () => {
    const t = await traced(['--help']);
    assert.equal(t.code, 0);
    const groups = [
      'server',
      'bootstrap',
      'bootos',
      'lab',
      'balancer',
      'kv',
      'member',
      'leader',
      'node',
      'hardware',
      'lease',
      'template',
      'workflow',
      'import',
      'pool',
      'power',
      'artifact',
      'token',
      'audit',
      'snapshot',
      'worker',
      'cluster',
      'upgrade',
      'completion',
    ];
    const listed = [...t.stdout.matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => m[1]);
    assert.deepEqual(
      listed.filter((name) => name !== 'help'),
      groups,
    );
    // Help names the groups without running them: nothing of the node is loaded. Every group's
    // module loads, and none of them imports more than the wire, the ground and the model: the
    // CLI is a client (docs/decisions/0026).
    assert.ok(!ours(t).includes('src/node/start-node.ts'), 'the node loaded for --help');
    assert.ok(ours(t).includes('src/cli/commands/server.ts'), 'the server group did not load');
    assert.deepEqual(
      ours(t).filter((m) => !/^src\/(cli|platform|gen|wire|model)\//.test(m)),
      [],
    );
    for (const pkg of ['zod', 'level', 'pino']) assert.ok(!loads(t, pkg), `${pkg} loaded for --help`);

    const server = await traced(['server', '--help']);
    assert.equal(server.code, 0);
    assert.match(server.stdout, /--data-dir <dir>/);
    assert.ok(!ours(server).includes('src/node/start-node.ts'), 'the node loaded for server --help');
    const kv = await traced(['--server', '127.0.0.1:1', 'kv', '--help']);
    assert.equal(kv.code, 0);
    assert.match(kv.stdout, /^ {2}get \[options\] <key>/m);
  });
});

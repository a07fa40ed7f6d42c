// Goal: `slipway server --config FILE` reads a file whose keys are exactly the command's long
// flags, flags override it, unknown keys are refused with the nearest valid key, and
// `--print-config` shows the effective configuration in the same form (so its output is itself
// a valid file that gives the same configuration back).
// Method: the real CLI (bin/slipway.js) with --print-config, which validates everything a start
// would and exits before starting anything; one node started from a file for real; the key
// matcher on its own.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { nearestKey } from '../../src/cli/commands/server-config.js';
import { nextPort, runSlipway, slipwayBin } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

const example = fileURLToPath(new URL('../../examples/server.yaml', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'slipway-config-file-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function writeConfig(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

/** The long flags `slipway server --help` lists, without their dashes. */
async function serverFlagKeys(): Promise<Set<string>> {
  const help = await runSlipway(['server', '--help']);
  assert.equal(help.code, 0, help.stderr);
  return new Set([...help.stdout.matchAll(/--([a-z][a-z0-9-]+)/g)].map((m) => m[1] ?? ''));
}

test('the example production file is valid, and every printed key is a flag of the command', async () => {
  const printed = await runSlipway(['server', '--config', example, '--print-config']);
  assert.equal(printed.code, 0, printed.stderr);
  const doc = parseYaml(printed.stdout) as Record<string, unknown>;
  assert.equal(doc['id'], 'n1');
  assert.equal(doc['data-dir'], '/var/lib/slipway');
  assert.deepEqual(doc['peers'], ['n1=10.0.0.1:7011', 'n2=10.0.0.2:7011', 'n3=10.0.0.3:7011']);
  assert.equal(doc['drain-grace'], '10s');
  assert.equal(doc['bootos-dir'], '/var/lib/slipway/bootos');
  // Defaults the file left out are shown too.
  assert.equal(doc['tick-ms'], 50);
  assert.equal(doc['heartbeat-ticks'], 1);
  const flags = await serverFlagKeys();
  for (const key of Object.keys(doc)) assert.ok(flags.has(key), `printed key ${key} is not a flag`);
});

test('the printed configuration is a file that gives the same configuration back', async () => {
  const first = await runSlipway(['server', '--config', example, '--print-config']);
  assert.equal(first.code, 0, first.stderr);
  const again = await runSlipway([
    'server',
    '--config',
    writeConfig('printed.yaml', first.stdout),
    '--print-config',
  ]);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.stdout, first.stdout);
});

test('flags given on the command line override the file; peers may be the flag string', async () => {
  const file = writeConfig(
    'string-peers.yaml',
    [
      'id: n1',
      'data-dir: /tmp/x',
      'raft-addr: 127.0.0.1:7011',
      'api-addr: 127.0.0.1:7001',
      'peers: n1=127.0.0.1:7011,n2=127.0.0.1:7012',
      'insecure: true',
      'kernel-arg: console=ttyS0',
      '',
    ].join('\n'),
  );
  const r = await runSlipway([
    'server',
    '--config',
    file,
    '--id',
    'n2',
    '--api-addr',
    '127.0.0.1:7002',
    '--print-config',
  ]);
  assert.equal(r.code, 0, r.stderr);
  const doc = parseYaml(r.stdout) as Record<string, unknown>;
  assert.equal(doc['id'], 'n2');
  assert.equal(doc['api-addr'], '127.0.0.1:7002');
  assert.equal(doc['raft-addr'], '127.0.0.1:7011');
  assert.deepEqual(doc['peers'], ['n1=127.0.0.1:7011', 'n2=127.0.0.1:7012']);
  assert.deepEqual(doc['kernel-arg'], ['console=ttyS0']);
});

test('unknown keys and values of the wrong shape are refused together, naming the nearest key', async () => {
  const file = writeConfig(
    'bad.yaml',
    [
      'id: n1',
      'dataDir: /tmp/x',
      'bootosDir: /tmp/b',
      'dhcpPools: [10.0.0.100-10.0.0.199/24]',
      'insecure: yes-please',
      'tick-ms: [1, 2]',
      'frobnicate: 1',
      '',
    ].join('\n'),
  );
  const r = await runSlipway(['server', '--config', file, '--print-config']);
  assert.equal(r.code, 2, r.stdout);
  assert.match(r.stderr, /dataDir: not a setting; did you mean data-dir\?/);
  assert.match(r.stderr, /bootosDir: not a setting; did you mean bootos-dir\?/);
  assert.match(r.stderr, /dhcpPools: not a setting; did you mean dhcp-pool\?/);
  assert.match(r.stderr, /insecure: must be true or false/);
  assert.match(r.stderr, /tick-ms: takes one value, not a list/);
  assert.match(r.stderr, /frobnicate: not a setting\n/);
  assert.match(r.stderr, /long flags of `slipway server --help`/);
});

test('a file that is not a mapping, or cannot be read, is refused with exit 2', async () => {
  const list = await runSlipway([
    'server',
    '--config',
    writeConfig('list.yaml', '- a\n- b\n'),
    '--print-config',
  ]);
  assert.equal(list.code, 2);
  assert.match(list.stderr, /must hold a mapping of settings/);
  const missing = await runSlipway(['server', '--config', join(dir, 'absent.yaml'), '--print-config']);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /cannot read config file/);
});

test('a node starts from a configuration file and serves its API', async () => {
  const apiAddr = `127.0.0.1:${String(nextPort())}`;
  const raftAddr = `127.0.0.1:${String(nextPort())}`;
  const file = writeConfig(
    'node.yaml',
    [
      'id: c1',
      `data-dir: ${join(dir, 'data')}`,
      `raft-addr: ${raftAddr}`,
      `api-addr: ${apiAddr}`,
      `peers: [c1=${raftAddr}]`,
      'insecure: true',
      'drain-grace: 0',
      '',
    ].join('\n'),
  );
  const node = spawn(process.execPath, [slipwayBin, 'server', '--config', file], { stdio: 'ignore' });
  try {
    await waitFor(
      'a write to the node started from its file',
      async () => (await runSlipway(['--server', apiAddr, 'kv', 'put', 'from-file', 'yes'])).code === 0,
      60_000,
      200,
    );
    const read = await runSlipway(['--server', apiAddr, 'kv', 'get', 'from-file']);
    assert.equal(read.stdout.trim(), 'yes');
  } finally {
    node.kill('SIGKILL');
  }
});

test('the nearest key: camelCase and near misses are matched, unrelated words are not', () => {
  const keys = ['data-dir', 'bootos-dir', 'dhcp-pool', 'api-addr', 'peers', 'vip'];
  assert.equal(nearestKey('dataDir', keys), 'data-dir');
  assert.equal(nearestKey('data_dir', keys), 'data-dir');
  assert.equal(nearestKey('bootOsDir', keys), 'bootos-dir');
  assert.equal(nearestKey('peer', keys), 'peers');
  assert.equal(nearestKey('frobnicate', keys), undefined);
});

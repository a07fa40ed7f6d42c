// Goal: proxyless gRPC and Envoy's xDS bootstrap work on a TLS cluster, failing closed. A TLS
// node's ADS answers give Envoy TLS on both sides through the secrets that `balancer config
// --proxy envoy --tls-dir` defines (all valid by Envoy's protos), and give gRPC clients none; the
// CLI through `xds:///slipway` with the CA writes, reads and reports the cluster's status; a
// worker through `xds:///slipway` holds its stream over TLS; a CA that did not sign the nodes, and
// an --xds-server where nothing listens, fail at once with an error naming the server and the fix,
// for the CLI and the worker alike.
// Method: `slipway bootstrap` (the real CLI) for the cluster's CA and a foreign one; three real
// `slipway server --tls-dir` processes (test/support/process-cluster.ts); the CLI and `slipway
// worker` as child processes, whose xDS stream goes through the TLS tunnel and whose calls reach
// the nodes' TLS-only API ports; a raw ADS stream over TLS, checked against Envoy's own protos
// (test/support/envoy-protos.ts). Every process is stopped by PID at the end.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { credentials } from '@grpc/grpc-js';
import { adsAnswers } from '../support/ads-answers.js';
import { checkEnvoyBytes, checkEnvoyJson, envoyType } from '../support/envoy-protos.js';
import { ProcessCluster, runSlipway, slipwayBin, type CliResult } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

const cluster = new ProcessCluster(3, []);
const pki = join(cluster.dir, 'pki');
const foreign = join(cluster.dir, 'foreign');
let worker: ChildProcess | undefined;

const cli = (args: string[], timeoutMs = 90_000): Promise<CliResult> => runSlipway(args, { timeoutMs });
const xdsServers = (): string => cluster.apiAddrs().join(',');
/** The CLI through xds:///slipway with the cluster's CA and the admin token. */
const viaXds = (ca = join(pki, 'ca', 'ca.crt'), xds = xdsServers()): string[] => [
  ...['--server', 'xds:///slipway', '--xds-server', xds, '--ca', ca],
  ...['--token-file', join(pki, 'admin.token'), '--timeout', '20000'],
];
const direct = (): string[] => [
  ...['--server', cluster.apiAddrs().join(','), '--ca', join(pki, 'ca', 'ca.crt')],
  ...['--token-file', join(pki, 'admin.token')],
];

before(async () => {
  const nodes = cluster.nodes.flatMap((n) => ['--node', `${n.id}=127.0.0.1`]);
  const made = await cli(['bootstrap', '--dir', pki, ...nodes]);
  assert.equal(made.code, 0, made.stderr);
  const other = await cli(['bootstrap', '--dir', foreign, '--node', 'x1=127.0.0.1']);
  assert.equal(other.code, 0, other.stderr);
  for (const n of cluster.nodes) cluster.nodeArgs.set(n.id, ['--tls-dir', join(pki, n.id)]);
  cluster.startAll();
  // Over TLS the support code's plaintext status calls cannot ask: wait through the CLI.
  await waitFor(
    'the TLS cluster to take a write',
    async () => (await cli([...direct(), '--timeout', '3000', 'kv', 'put', 'ready', 'yes'])).code === 0,
    60_000,
    200,
  );
  // xDS names a member once its probe finds it serving, in the cluster's first seconds: until
  // then its answers hold no endpoint, and a client through it has nowhere to go.
  await waitFor(
    'xDS to name a serving member',
    async () => (await cli([...viaXds(), '--timeout', '3000', 'cluster', 'status'])).code === 0,
    60_000,
    200,
  );
});

after(async () => {
  if (worker !== undefined && worker.exitCode === null && worker.signalCode === null) {
    const exited = new Promise((r) => worker?.once('exit', r));
    worker.kill('SIGKILL');
    await exited;
  }
  await cluster.destroy();
});

type Plain = Record<string, unknown>;

/** Every secret name a decoded message names (SdsSecretConfig.name), at any depth, Any bytes included. */
function secretNames(typeName: string, bytes: Uint8Array): string[] {
  const type = envoyType(typeName);
  const names: string[] = [];
  const walk = (v: unknown, key = ''): void => {
    if (Array.isArray(v)) for (const x of v) walk(x, key);
    else if (typeof v === 'object' && v !== null) {
      const o = v as Plain;
      if (typeof o['type_url'] === 'string' && o['value'] instanceof Uint8Array) {
        names.push(...secretNames(o['type_url'], o['value']));
        return;
      }
      if (/sds_secret_config/.test(key) && typeof o['name'] === 'string') names.push(o['name']);
      for (const [k, x] of Object.entries(o)) walk(x, k);
    }
  };
  walk(type.toObject(type.decode(bytes)));
  return names;
}

test("a TLS node's ADS answers: TLS on both sides for Envoy, by the secrets its TLS bootstrap defines; none for gRPC", async () => {
  const response = envoyType('envoy.service.discovery.v3.DiscoveryResponse');
  const named = (answers: Buffer[]): string[] =>
    answers.flatMap((b) => {
      assert.deepEqual(checkEnvoyBytes(response, b), []);
      const r = response.decode(b) as unknown as { resources: { type_url: string; value: Uint8Array }[] };
      return r.resources.flatMap((any) => secretNames(any.type_url, any.value));
    });
  // Over TLS, checked against the cluster's CA.
  const ask = (names: string[], listen?: string): Promise<Buffer[]> =>
    adsAnswers(
      cluster.nodes[0]!.apiAddr,
      credentials.createSsl(readFileSync(join(pki, 'ca', 'ca.crt'))),
      'xds-tls-test',
      names,
      listen,
    );
  const envoyNames = named(await ask([], '127.0.0.1:1'));
  assert.deepEqual([...new Set(envoyNames)].sort(), ['slipway_ca', 'slipway_cert']);
  assert.deepEqual(named(await ask(['slipway'])), [], 'a gRPC client is given no TLS settings');

  const printed = await cli([
    ...['balancer', 'config', '--proxy', 'envoy', '--listen', '127.0.0.1:7000'],
    ...['--nodes', cluster.nodes.map((n) => `${n.id}=${n.apiAddr}`).join(',')],
    ...['--tls-dir', join(pki, 'n1'), '--id', 'n1'],
  ]);
  assert.equal(printed.code, 0, printed.stderr);
  const doc = JSON.parse(printed.stdout) as { static_resources: { secrets: { name: string }[] } };
  assert.deepEqual(checkEnvoyJson(envoyType('envoy.config.bootstrap.v3.Bootstrap'), doc), []);
  const defined = doc.static_resources.secrets.map((s) => s.name);
  for (const name of envoyNames) assert.ok(defined.includes(name), `the bootstrap defines ${name}`);
  for (const s of JSON.stringify(doc.static_resources.secrets).match(/"\/[^"]+"/g) ?? [])
    assert.ok(existsSync(JSON.parse(s) as string), `${s} exists`);
});

test('the CLI through xds:///slipway with the CA writes, reads and reports the cluster', async () => {
  const put = await cli([...viaXds(), 'kv', 'put', 'xds/tls', 'sealed']);
  assert.equal(put.code, 0, put.stderr);
  const get = await cli([...viaXds(), 'kv', 'get', 'xds/tls']);
  assert.equal(get.code, 0, get.stderr);
  assert.equal(get.stdout.trim(), 'sealed');
  const st = await cli([...viaXds(), '-o', 'json', 'cluster', 'status']);
  assert.equal(st.code, 0, st.stderr);
  const rows = (JSON.parse(st.stdout) as { nodes: { node: string; health: string }[] }).nodes;
  // The node the call reached relays the others' Status: every member, each ok.
  assert.deepEqual(rows.map((r) => `${r.node} ${r.health}`).sort(), ['n1 ok', 'n2 ok', 'n3 ok']);
});

test('a worker through xds:///slipway holds its stream over TLS', async () => {
  const hw = await cli([
    ...direct(),
    ...['hardware', 'create', '--id', 'm1', '--mac', '02:00:00:00:11:01', '--ip', '10.1.1.2/24'],
  ]);
  assert.equal(hw.code, 0, hw.stderr);
  const token = await cli([...direct(), 'hardware', 'token', 'm1']);
  assert.equal(token.code, 0, token.stderr);
  const tokenFile = join(cluster.dir, 'm1.token');
  writeFileSync(tokenFile, token.stdout.trim());
  const log = join(cluster.dir, 'm1.worker.log');
  worker = spawn(
    process.execPath,
    [
      ...[slipwayBin, 'worker', '--id', 'm1', '--server', 'xds:///slipway', '--xds-server', xdsServers()],
      ...['--ca', join(pki, 'ca', 'ca.crt'), '--token-file', tokenFile],
      ...['--journal-dir', join(cluster.dir, 'm1-journal')],
    ],
    { stdio: ['ignore', openSync(log, 'a'), openSync(log, 'a')] },
  );
  const connected = (): boolean =>
    cluster.nodes.some((n) => {
      const file = join(cluster.dir, `${n.id}.log`);
      return (
        existsSync(file) &&
        readFileSync(file, 'utf8')
          .split('\n')
          .some((l) => l.includes('"worker connected"') && l.includes('"workerId":"m1"'))
      );
    });
  await waitFor(`worker m1 to connect (its log: ${log})`, connected, 60_000, 200);
  assert.equal(worker.exitCode, null, 'the worker runs on');
  // Stopped, it closes its tunnel and its process ends by itself.
  const exited = new Promise<number | null>((r) => worker?.once('exit', (code) => r(code)));
  worker.kill('SIGTERM');
  assert.equal(await exited, 0);
});

test('a worker whose xDS servers do not answer yet keeps trying, and says so', async () => {
  const log = join(cluster.dir, 'm2.worker.log');
  worker = spawn(
    process.execPath,
    [
      ...[slipwayBin, 'worker', '--id', 'm1', '--server', 'xds:///slipway', '--xds-server', '127.0.0.1:1'],
      ...['--ca', join(pki, 'ca', 'ca.crt'), '--token-file', join(cluster.dir, 'm1.token')],
      ...['--journal-dir', join(cluster.dir, 'm2-journal')],
    ],
    { stdio: ['ignore', openSync(log, 'a'), openSync(log, 'a')] },
  );
  const tries = (): number =>
    readFileSync(log, 'utf8')
      .split('\n')
      .filter((l) => l.includes('no xDS server over TLS; trying again') && l.includes('ECONNREFUSED')).length;
  // Once at start, then for grpc-js-xds's own attempt through the tunnel.
  await waitFor(
    `the worker to report two failed attempts (its log: ${log})`,
    () => tries() >= 2,
    60_000,
    100,
  );
  assert.equal(worker.exitCode, null, 'the worker runs on');
  const exited = new Promise((r) => worker?.once('exit', r));
  worker.kill('SIGKILL');
  await exited;
});

test('a CA that did not sign the nodes fails at once, naming the xDS server and --ca: CLI and worker', async () => {
  const wrongCa = join(foreign, 'ca', 'ca.crt');
  const started = Date.now();
  const get = await cli([...viaXds(wrongCa), 'kv', 'get', 'xds/tls']);
  assert.equal(get.code, 1, get.stderr);
  assert.match(get.stderr, /no xDS server could be reached over TLS: 127\.0\.0\.1:\d+: .*certificate/);
  assert.match(get.stderr, /--ca \(or SLIPWAY_CA\) is the cluster's ca\.crt/);
  assert.equal(get.stdout, '');
  assert.ok(Date.now() - started < 20_000, 'well within --timeout');
  const w = await cli([
    ...['worker', '--id', 'm1', '--server', 'xds:///slipway', '--xds-server', xdsServers()],
    ...['--ca', wrongCa, '--token-file', join(cluster.dir, 'm1.token')],
    ...['--journal-dir', join(cluster.dir, 'm1-journal-wrong-ca')],
  ]);
  assert.equal(w.code, 1, w.stderr);
  assert.match(w.stderr, /no xDS server could be reached over TLS: .*--ca \(or SLIPWAY_CA\)/);
});

test('an --xds-server where nothing listens fails within --timeout, naming it and --xds-server', async () => {
  const started = Date.now();
  const r = await cli([...viaXds(undefined, '127.0.0.1:1'), 'kv', 'get', 'xds/tls']);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /127\.0\.0\.1:1: connect ECONNREFUSED/);
  assert.match(r.stderr, /Check --xds-server/);
  assert.ok(Date.now() - started < 20_000, 'well within --timeout');
});

// Goal: Slipway fails closed. A node with TLS requires tokens whether or not it has the bootstrap
// admin token: a new one without it refuses to start, and one restarted after admin.token was
// deleted refuses every call without a named token (never "everyone is an admin"), saying why
// when no token could pass. --insecure listens on loopback only unless --insecure-allow-network
// says otherwise, and then the node's iPXE scripts tell booted workers so. The CLI and the worker
// refuse to send a token or credential in plaintext to a server beyond loopback.
// Method: `slipway bootstrap` and real `slipway server` processes (one node, restarted on the same
// data dir), the CLI and `slipway worker` as children, the boot HTTP server fetched as a machine
// would. The refused sends target 10.0.0.1, which nothing needs to answer: they never dial.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { httpRequest } from '../support/http-fetch.js';
import { nextPort, ProcessCluster, runSlipway, type CliResult } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

const cli = (args: string[]): Promise<CliResult> => runSlipway(args);

describe('a node with TLS always requires tokens', () => {
  let cluster: ProcessCluster;
  let pki: string;
  const n1 = (): ProcessCluster['nodes'][number] => cluster.nodes[0]!;
  const retired = (): string => join(cluster.dir, 'retired-admin.token');
  const asCaller = (tokenFile: string | undefined, args: string[]): Promise<CliResult> =>
    cli([
      ...['--server', n1().apiAddr, '--ca', join(pki, 'ca', 'ca.crt'), '--timeout', '5000'],
      ...(tokenFile === undefined ? [] : ['--token-file', tokenFile]),
      ...args,
    ]);
  /**
   * Restarts n1 on its data dir and waits until its API answers (with anything). A refused
   * connection is no answer: the CLI starts faster than the node opens its port.
   */
  const restart = async (): Promise<void> => {
    await cluster.kill(n1(), 'SIGTERM');
    cluster.start(n1());
    await waitFor(
      'n1 to answer over TLS',
      async () =>
        !/UNAVAILABLE|DEADLINE|No connection established|no Slipway node answered/.test(
          (await asCaller(undefined, ['kv', 'get', 'x'])).stderr,
        ),
      30_000,
      200,
    );
  };

  before(async () => {
    cluster = new ProcessCluster(1, []);
    // restart() stops n1 with SIGTERM: what it runs on its way out is counted.
    cluster.coverage = true;
    pki = join(cluster.dir, 'pki');
    const made = await cli(['bootstrap', '--dir', pki, '--node', 'n1=127.0.0.1']);
    assert.equal(made.code, 0, made.stderr);
    cluster.nodeArgs.set('n1', ['--tls-dir', join(pki, 'n1')]);
  });

  after(async () => {
    await cluster.destroy();
  });

  test('a new node with TLS and no bootstrap admin token refuses to start, naming the fix', async () => {
    renameSync(join(pki, 'n1', 'admin.token'), retired());
    try {
      const r = await cli([
        ...['server', '--id', 'n1', '--data-dir', n1().dataDir, '--tls-dir', join(pki, 'n1')],
        ...['--raft-addr', n1().raftAddr, '--api-addr', n1().apiAddr, '--peers', cluster.peers()],
      ]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /holds no admin\.token and no --admin-token-file is given/);
    } finally {
      renameSync(retired(), join(pki, 'n1', 'admin.token'));
    }
  });

  test('after admin.token is deleted, calls need a named token: none is an admin by default', async () => {
    cluster.start(n1());
    const admin = join(pki, 'admin.token');
    await waitFor(
      'the new node to accept the bootstrap token',
      async () => (await asCaller(admin, ['kv', 'put', 'k', 'v'])).code === 0,
      30_000,
      200,
    );
    const log = readFileSync(join(cluster.dir, 'n1.log'), 'utf8');
    assert.match(log, /"auth":"tokens","tls":true,"tokenSource":"tls-dir"/);

    // Retired before any named token exists: nobody can call, and the node says why.
    renameSync(join(pki, 'n1', 'admin.token'), retired());
    await restart();
    for (const token of [undefined, admin]) {
      const r = await asCaller(token, ['kv', 'get', 'k']);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /knows no operator token/);
    }
    assert.match(
      readFileSync(join(cluster.dir, 'n1.log'), 'utf8'),
      /"auth":"tokens","tls":true,"tokenSource":"replicated-tokens-only"/,
    );

    // The bootstrap token back to create a named one, then retired for good.
    renameSync(retired(), join(pki, 'n1', 'admin.token'));
    await restart();
    const created = await asCaller(admin, ['token', 'create', '--name', 'ops', '--role', 'viewer']);
    assert.equal(created.code, 0, created.stderr);
    const ops = join(cluster.dir, 'ops.token');
    writeFileSync(ops, created.stdout.trim());
    rmSync(join(pki, 'n1', 'admin.token'));
    await restart();

    assert.equal((await asCaller(ops, ['kv', 'get', 'k'])).stdout.trim(), 'v', 'the named token works');
    const anonymous = await asCaller(undefined, ['kv', 'get', 'k']);
    assert.equal(anonymous.code, 1);
    assert.match(anonymous.stderr, /an operator token is required/);
    const bootstrap = await asCaller(admin, ['kv', 'get', 'k']);
    assert.equal(bootstrap.code, 1);
    assert.match(bootstrap.stderr, /the operator token is not valid/);
    const viewerWrites = await asCaller(ops, ['kv', 'put', 'k', 'w']);
    assert.equal(viewerWrites.code, 1);
    assert.match(viewerWrites.stderr, /has role viewer; this needs operator/);
  });
});

describe('--insecure stays on loopback unless --insecure-allow-network says otherwise', () => {
  const serverArgs = (api: string, raft: string): string[] => [
    ...['server', '--insecure', '--id', 'n1', '--data-dir', '/nonexistent/slipway-refused'],
    ...['--api-addr', api, '--raft-addr', raft, '--peers', `n1=${raft}`],
  ];

  test('an API or raft address beyond loopback is a config error naming the address and the flag', async () => {
    for (const [api, raft, refused] of [
      ['0.0.0.0:7001', '127.0.0.1:7000', '0.0.0.0:7001'],
      ['127.0.0.1:7001', '10.0.0.1:7000', '10.0.0.1:7000'],
    ] as const) {
      const r = await cli(serverArgs(api, raft));
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, new RegExp(`${refused.replaceAll('.', '\\.')} is not a loopback address`));
      assert.match(r.stderr, /--insecure-allow-network/);
    }
  });

  test('the flag alone, without --insecure, is refused', async () => {
    const tls = ['--tls-dir', '/nonexistent', '--insecure-allow-network'];
    const r = await cli([
      ...serverArgs('127.0.0.1:7001', '127.0.0.1:7000').filter((a) => a !== '--insecure'),
      ...tls,
    ]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--insecure-allow-network goes with --insecure/);
  });

  test('with the flag the node serves on 0.0.0.0, warns, and tells booted workers', async () => {
    const cluster = new ProcessCluster(1, ['--insecure-allow-network']);
    try {
      const node = cluster.nodes[0]!;
      const apiPort = nextPort();
      const httpPort = nextPort();
      cluster.nodeArgs.set('n1', [
        ...['--api-addr', `0.0.0.0:${apiPort}`, '--vip', '127.0.0.1'],
        ...['--http-addr', `127.0.0.1:${httpPort}`],
      ]);
      cluster.start(node);
      const server = ['--server', `127.0.0.1:${apiPort}`];
      await waitFor(
        'the node to serve',
        async () => (await cli([...server, 'kv', 'put', 'k', 'v'])).code === 0,
        30_000,
        200,
      );
      const log = readFileSync(join(cluster.dir, 'n1.log'), 'utf8');
      assert.match(log, /"level":40.*--insecure-allow-network: plaintext gRPC beyond loopback/);
      assert.match(log, /"auth":"off","tls":false,"tokenSource":"none"/);
      const mac = '52:54:00:7a:00:01';
      const hw = await cli([
        ...server,
        'hardware',
        'create',
        '--id',
        'm1',
        '--mac',
        mac,
        '--ip',
        '10.9.0.2/24',
      ]);
      assert.equal(hw.code, 0, hw.stderr);
      const script = (await httpRequest('127.0.0.1', httpPort, `/ipxe/${mac}`)).body.toString();
      assert.match(script, /^kernel .* slipway\.insecure_allow_network=1/m);
    } finally {
      await cluster.destroy();
    }
  });
});

describe('no token or credential in plaintext beyond loopback', () => {
  let dir: string;
  let tokenFile: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'slipway-plaintext-'));
    tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'a-token-of-at-least-16-characters');
  });

  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  test('the CLI refuses to send its token to 10.0.0.1 without --ca, naming the server and the fixes', async () => {
    for (const env of [{}, { SLIPWAY_TOKEN: 'from-the-environment' }]) {
      const args = [
        '--server',
        '127.0.0.1:7001,10.0.0.1:7001',
        ...('SLIPWAY_TOKEN' in env ? [] : ['--token-file', tokenFile]),
      ];
      const r = await runSlipway([...args, 'kv', 'get', 'k'], { env });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /refusing to send the operator token in plaintext to 10\.0\.0\.1:7001/);
      assert.match(r.stderr, /--ca FILE.*--insecure-allow-network/s);
    }
  });

  test('the CLI with --insecure-allow-network sends it (and fails only to connect)', async () => {
    const r = await cli([
      ...['--server', '10.0.0.1:7001', '--token-file', tokenFile, '--timeout', '300'],
      ...['--insecure-allow-network', 'kv', 'get', 'k'],
    ]);
    assert.equal(r.code, 1);
    assert.doesNotMatch(r.stderr, /refusing/);
  });

  test('the worker refuses to present a worker token or to claim a credential for a server beyond loopback', async () => {
    const journal = ['--journal-dir', join(dir, 'journal')];
    const withToken = await cli([
      'worker',
      '--id',
      'm1',
      '--server',
      '10.0.0.1:7001',
      '--token-file',
      tokenFile,
      ...journal,
    ]);
    assert.equal(withToken.code, 2, withToken.stderr);
    assert.match(
      withToken.stderr,
      /refusing to send the machine's worker token in plaintext to 10\.0\.0\.1:7001/,
    );
    const claim = ['--claim-url', 'http://10.0.0.1:8080/credential', '--mac', '52:54:00:7a:00:02'];
    const withCredential = await cli([
      'worker',
      '--id',
      'm1',
      '--server',
      '10.0.0.1:7001',
      ...claim,
      ...journal,
    ]);
    assert.equal(withCredential.code, 2, withCredential.stderr);
    assert.match(
      withCredential.stderr,
      /refusing to send the machine's per-boot credential in plaintext to 10\.0\.0\.1:7001/,
    );
  });
});

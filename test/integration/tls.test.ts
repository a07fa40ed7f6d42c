// Goal: a cluster made with `slipway bootstrap` speaks only TLS on its API and mutual TLS between
// nodes, and requires tokens: the CLI and a worker with the CA and a token work end to end;
// a plaintext client, a client without the CA, and a peer without a node certificate fail;
// HAProxy configured by `balancer config --tls-dir` serves the CLI with TLS on both sides, and
// `balancer follow --tls-dir` adds a node that joins to it, checked over TLS, and removes it.
// Method: `slipway bootstrap` (the real CLI) writes the CA, node certificates and admin token;
// three real `slipway server --tls-dir` processes; the CLI and `slipway worker` as children.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { KvClient } from '../../src/gen/kv.js';
import { findHaproxy, startHaproxy, stopHaproxy } from '../../lb/haproxy-process.js';
import { renderHaproxyConfig } from '../../lb/haproxy.js';
import { haproxyServerStates, waitForAllServing } from '../support/haproxy-stats.js';
import { waitFor } from '../support/wait.js';
import {
  nextPort,
  ProcessCluster,
  runSlipway,
  slipwayBin,
  type CliResult,
  type ProcNode,
} from '../support/process-cluster.js';

const cli = (args: string[]): Promise<CliResult> => runSlipway(args);

let cluster: ProcessCluster;
let pki: string;
let worker: ChildProcess | undefined;
/** HAProxy in front of the TLS nodes, and `balancer follow` beside it, until the membership test ends. */
let tlsBalancer: { pid: number; configFile: string; statsAddr: string; socket: string } | undefined;
let follower: ChildProcess | undefined;

const secure = (): string[] => [
  '--server',
  cluster.apiAddrs().join(','),
  '--ca',
  join(pki, 'ca', 'ca.crt'),
  '--token-file',
  join(pki, 'admin.token'),
];

before(async () => {
  cluster = new ProcessCluster(3, []);
  pki = join(cluster.dir, 'pki');
  // n4: a node that joins later (see the membership test).
  const nodes = [...cluster.nodes.map((n) => n.id), 'n4'].flatMap((id) => ['--node', `${id}=127.0.0.1`]);
  const made = await cli(['bootstrap', '--dir', pki, ...nodes]);
  assert.equal(made.code, 0, made.stderr);
  // Each node gets only its own directory; the CA's key stays in pki/ca/.
  for (const n of cluster.nodes) cluster.nodeArgs.set(n.id, ['--tls-dir', join(pki, n.id)]);
  cluster.startAll();
  // Status over TLS: the support code speaks plaintext, so wait through the CLI.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await cli([...secure(), 'kv', 'put', 'ready', 'yes']);
    if (r.code === 0) break;
    if (Date.now() > deadline) throw new Error(`cluster never served TLS: ${r.stderr}`);
    await new Promise((res) => setTimeout(res, 200));
  }
});

/** The follower, then HAProxy: each by PID, once. */
async function stopBalancer(): Promise<void> {
  if (follower !== undefined && follower.exitCode === null && follower.signalCode === null) {
    const exited = new Promise((r) => follower?.once('exit', r));
    follower.kill('SIGTERM');
    await exited;
  }
  if (tlsBalancer !== undefined) await stopHaproxy(tlsBalancer.pid, tlsBalancer.configFile);
  tlsBalancer = undefined;
}

after(async () => {
  await stopBalancer();
  if (worker !== undefined && worker.exitCode === null) {
    const exited = new Promise((r) => worker?.once('exit', r));
    worker.kill('SIGKILL');
    await exited;
  }
  await cluster.destroy();
});

test('a second bootstrap into the same directory is refused', async () => {
  const r = await cli(['bootstrap', '--dir', pki, '--node', 'n1=127.0.0.1']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /already holds a cluster CA/);
});

test("bootstrap keeps the CA's key out of every node's directory; a node given it refuses to start", () => {
  assert.deepEqual(readdirSync(join(pki, 'ca')).sort(), ['ca.crt', 'ca.key']);
  for (const n of cluster.nodes) {
    const files = readdirSync(join(pki, n.id)).sort();
    assert.deepEqual(files, ['admin.token', 'ca.crt', `${n.id}.crt`, `${n.id}.key`, `${n.id}.pem`]);
  }
});

test('a node whose --tls-dir holds ca.key refuses to start, naming the file', async () => {
  const dir = join(cluster.dir, 'n1-with-ca-key');
  cpSync(join(pki, 'n1'), dir, { recursive: true });
  copyFileSync(join(pki, 'ca', 'ca.key'), join(dir, 'ca.key'));
  const n1 = cluster.nodes[0]!;
  const dataDir = join(cluster.dir, 'never-created');
  const r = await cli([
    ...['server', '--id', 'n1', '--data-dir', dataDir, '--tls-dir', dir],
    ...['--raft-addr', n1.raftAddr, '--api-addr', n1.apiAddr, '--peers', `n1=${n1.raftAddr}`],
  ]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /holds the cluster CA's private key \(ca\.key\)/);
  assert.equal(existsSync(dataDir), false, 'nothing was created');
});

test('the CLI with the CA and the admin token works; without either it fails', async () => {
  const put = await cli([...secure(), 'kv', 'put', 'k', 'v']);
  assert.equal(put.code, 0, put.stderr);
  const get = await cli([...secure(), 'kv', 'get', 'k']);
  assert.equal(get.stdout.trim(), 'v');
  const noCa = await cli(['--server', cluster.apiAddrs().join(','), '--timeout', '3000', 'kv', 'get', 'k']);
  assert.equal(noCa.code, 1);
  const noToken = await cli([
    '--server',
    cluster.apiAddrs().join(','),
    '--ca',
    join(pki, 'ca', 'ca.crt'),
    'kv',
    'get',
    'k',
  ]);
  assert.equal(noToken.code, 1);
  assert.match(noToken.stderr, /token/);
});

test('plaintext to the API and a peer without a node certificate are refused', async () => {
  const node = cluster.nodes[0];
  assert.ok(node);
  const attempt = (addr: string, creds: ReturnType<typeof credentials.createInsecure>): Promise<number> => {
    const c = new KvClient(addr, creds);
    return new Promise<number>((resolve) => {
      c.status({}, new Metadata(), { deadline: Date.now() + 3000 }, (err: ServiceError | null) => {
        c.close();
        resolve(err === null ? status.OK : err.code);
      });
    });
  };
  assert.notEqual(await attempt(node.apiAddr, credentials.createInsecure()), status.OK);
  // The raft address serves Kv for forwarding; with TLS but no client certificate: refused.
  const ca = readFileSync(join(pki, 'ca', 'ca.crt'));
  assert.notEqual(await attempt(node.raftAddr, credentials.createSsl(ca)), status.OK);
  // With a node certificate it is accepted (this is how followers forward).
  const peer = credentials.createSsl(
    ca,
    readFileSync(join(pki, 'n2', 'n2.key')),
    readFileSync(join(pki, 'n2', 'n2.crt')),
  );
  assert.equal(await attempt(node.raftAddr, peer), status.OK);
});

test('a workflow runs over TLS: worker with the CA and its machine token', async () => {
  const tpl = join(cluster.dir, 'tls.yaml');
  const out = join(cluster.dir, 'tls.out');
  const { writeFileSync } = await import('node:fs');
  writeFileSync(
    tpl,
    `version: "0.1"\nname: tls\nglobal_timeout: 60\ntasks:\n  - name: t\n    actions:\n      - name: a\n        command: ["sh", "-c", "echo ran >> ${out}"]\n`,
  );
  assert.equal((await cli([...secure(), 'template', 'create', '-f', tpl])).code, 0);
  const hw = await cli([
    ...secure(),
    'hardware',
    'create',
    '--id',
    'm1',
    '--mac',
    '02:00:00:00:10:01',
    '--ip',
    '10.1.0.2/24',
  ]);
  assert.equal(hw.code, 0, hw.stderr);
  const token = (await cli([...secure(), 'hardware', 'token', 'm1'])).stdout.trim();
  const tokenFile = join(cluster.dir, 'm1.token');
  writeFileSync(tokenFile, token);
  const wf = await cli([
    ...secure(),
    '-o',
    'json',
    'workflow',
    'create',
    '--template',
    'tls',
    '--hardware',
    'm1',
  ]);
  assert.equal(wf.code, 0, wf.stderr);
  const id = (JSON.parse(wf.stdout) as { id: string }).id;
  const log = openSync(join(cluster.dir, 'tls-worker.log'), 'a');
  worker = spawn(
    process.execPath,
    [
      slipwayBin,
      'worker',
      '--id',
      'm1',
      '--server',
      cluster.apiAddrs().join(','),
      '--ca',
      join(pki, 'ca', 'ca.crt'),
      '--token-file',
      tokenFile,
      '--journal-dir',
      join(cluster.dir, 'tls-journal'),
    ],
    { stdio: ['ignore', log, log] },
  );
  const deadline = Date.now() + 60_000;
  for (;;) {
    const st = await cli([...secure(), '-o', 'json', 'workflow', 'state', id]);
    if (st.code === 0 && (JSON.parse(st.stdout) as { state: string }).state === 'SUCCESS') break;
    if (Date.now() > deadline) throw new Error(`workflow did not finish: ${st.stdout}${st.stderr}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(readFileSync(out, 'utf8'), 'ran\n');
});

test('HAProxy with TLS on both sides (balancer config --tls-dir): nodes pass their checks, the CLI works through it', async () => {
  const bin = findHaproxy();
  assert.ok(bin !== undefined, 'haproxy is installed (.ci/run installs it)');
  const listenAddr = `127.0.0.1:${nextPort()}`;
  const statsAddr = `127.0.0.1:${nextPort()}`;
  const nodes = cluster.nodes.map((n) => ({ id: n.id, apiAddr: n.apiAddr }));
  const tls = {
    certFile: join(pki, 'n1', 'n1.crt'),
    keyFile: join(pki, 'n1', 'n1.key'),
    pemFile: join(pki, 'n1', 'n1.pem'),
    caFile: join(pki, 'n1', 'ca.crt'),
  };
  const runtimeSocket = join(cluster.dir, 'haproxy.sock');
  const spec = {
    listenAddr,
    statsAddr,
    nodes,
    tls,
    runtimeSocket,
    healthCheck: { intervalMs: 200, fall: 2, rise: 2 },
  };
  // What the operator's command prints is what runs here.
  const printed = await cli([
    ...['balancer', 'config', '--listen', listenAddr, '--stats', statsAddr, '--check-interval', '200'],
    ...[
      '--nodes',
      nodes.map((n) => `${n.id}=${n.apiAddr}`).join(','),
      '--tls-dir',
      join(pki, 'n1'),
      '--id',
      'n1',
      '--haproxy-socket',
      runtimeSocket,
    ],
  ]);
  assert.equal(printed.code, 0, printed.stderr);
  assert.equal(printed.stdout, renderHaproxyConfig(spec));

  const balancer = await startHaproxy({ bin, spec, dir: cluster.dir, detached: false });
  tlsBalancer = { ...balancer, statsAddr, socket: runtimeSocket };
  let keep = false;
  try {
    await waitForAllServing(statsAddr, 3, 'HAProxy to find every node SERVING over TLS');
    const through = [
      '--server',
      listenAddr,
      '--ca',
      join(pki, 'ca', 'ca.crt'),
      '--token-file',
      join(pki, 'admin.token'),
    ];
    const put = await cli([...through, 'kv', 'put', 'via', 'the-balancer']);
    assert.equal(put.code, 0, put.stderr);
    const get = await cli([...through, 'kv', 'get', 'via']);
    assert.equal(get.stdout.trim(), 'the-balancer');
    const plaintext = await cli(['--server', listenAddr, '--timeout', '3000', 'kv', 'get', 'via']);
    assert.equal(plaintext.code, 1, 'a plaintext client gets nothing from the TLS balancer');
    // The membership test adds a node: the follower adds it here, over TLS.
    const log = openSync(join(cluster.dir, 'follow.log'), 'a');
    follower = spawn(
      process.execPath,
      [slipwayBin, ...secure(), 'balancer', 'follow', '--haproxy-socket', runtimeSocket].concat([
        '--tls-dir',
        join(pki, 'n1'),
        '--interval',
        '200',
        '--check-interval',
        '200',
      ]),
      { stdio: ['ignore', log, log] },
    );
    keep = true;
  } finally {
    if (!keep) await stopBalancer();
  }
});

test('a node added with member add joins over mutual TLS, serves, and is removed', async () => {
  const joiner: ProcNode = {
    id: 'n4',
    raftAddr: `127.0.0.1:${nextPort()}`,
    apiAddr: `127.0.0.1:${nextPort()}`,
    metricsAddr: `127.0.0.1:${nextPort()}`,
    dataDir: join(cluster.dir, 'n4'),
    proc: null,
  };
  cluster.nodeArgs.set('n4', ['--tls-dir', join(pki, 'n4'), '--join']);
  cluster.nodes.push(joiner);
  try {
    // It is stopped with SIGTERM: what it runs on its way out is counted.
    cluster.coverage = true;
    cluster.start(joiner);
    const added = await cli([
      ...[...secure(), '-o', 'json', 'member', 'add', 'n4', joiner.raftAddr],
      ...['--api-addr', joiner.apiAddr],
    ]);
    assert.equal(added.code, 0, added.stderr);
    const members = (JSON.parse(added.stdout) as { members: { id: string; role: string }[] }).members;
    assert.equal(members.find((m) => m.id === 'n4')?.role, 'voter');
    // The follower added it to HAProxy with the file's TLS options: its check, over TLS and
    // verified against the cluster CA, passes.
    const statsAddr = tlsBalancer?.statsAddr ?? '';
    await waitFor(
      'HAProxy to run n4 with a passed grpc.health.v1 check over TLS',
      async () => {
        const s = (await haproxyServerStates(statsAddr)).get('n4');
        return s?.status === 'UP' && s.check === 'L7OK';
      },
      20_000,
    );
    const onJoiner = ['--server', joiner.apiAddr, '--ca', join(pki, 'ca', 'ca.crt')];
    const get = await cli([
      ...onJoiner,
      '--token-file',
      join(pki, 'admin.token'),
      'kv',
      'get',
      'k',
      '--local',
    ]);
    assert.equal(get.stdout.trim(), 'v', get.stderr);
    await cluster.kill(joiner, 'SIGTERM');
    const rm = await cli([...secure(), 'member', 'remove', 'n4']);
    assert.equal(rm.code, 0, rm.stderr);
    await waitFor(
      'HAProxy to drop n4',
      async () => !(await haproxyServerStates(tlsBalancer?.statsAddr ?? '')).has('n4'),
      20_000,
    );
  } finally {
    await stopBalancer();
    await cluster.kill(joiner);
    cluster.nodes.pop();
  }
});

test('the nodes accepted each other all along: no call on the raft address was refused', () => {
  for (const n of cluster.nodes) {
    const log = readFileSync(join(cluster.dir, `${n.id}.log`), 'utf8');
    assert.doesNotMatch(log, /refused a call on the raft address|refused a raft stream|refusing a snapshot/);
  }
});

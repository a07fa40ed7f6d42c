// Goal: `slipway balancer follow` keeps a running HAProxy's servers in step with the membership
// through its runtime socket (docs/decisions/0013, "Following the membership"): after `member
// add` HAProxy lists the new node and new calls reach it; after `member remove` the node's server
// is drained, then deleted, and leaves HAProxy's list; and no stream already open to a node that
// stays is dropped at any step: a stream opened before each change stays open and still
// receives afterwards. A missing socket or an unknown backend is a clear error.
// Method: 3 real `slipway server` processes (test/support/process-cluster.ts), real HAProxy with
// its runtime socket (lb/haproxy-process.ts), and the follower as the real `slipway balancer
// follow` process. Long-lived streams are WorkflowEvents follows through HAProxy, spread over
// the nodes by their x-worker-id (the node a worker id lands on is the id in a Status answer
// through HAProxy with that header); a workflow's cancellation is the event each must still
// receive. A fourth node joins (`--join`) and is added, then removed. Every process is stopped
// by PID at the end.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { credentials } from '@grpc/grpc-js';
import type { RunningHaproxy } from '../../lb/haproxy-process.js';
import { findHaproxy, startHaproxy, stopHaproxy } from '../../lb/haproxy-process.js';
import { ClusterClient } from '../../src/cli/client.js';
import { ControlClient } from '../../src/gen/control.js';
import { KvClient } from '../../src/gen/kv.js';
import {
  BalancerStreams,
  listedServers,
  waitingTemplateYaml,
  type HeldStream,
} from '../support/balancer-streams.js';
import { haproxyServerStates } from '../support/haproxy-stats.js';
import type { ProcNode } from '../support/process-cluster.js';
import { nextPort, ProcessCluster, runSlipway, slipwayBin } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

const cluster = new ProcessCluster(3);
const listenAddr = `127.0.0.1:${nextPort()}`;
const statsAddr = `127.0.0.1:${nextPort()}`;
const socket = join(cluster.dir, 'haproxy.sock');
let balancer: RunningHaproxy | undefined;
let follower: ChildProcess | undefined;
let admin: ClusterClient;
let kv: KvClient;
let control: ControlClient;
let streams: BalancerStreams;
let joiner: ProcNode | undefined;

before(async () => {
  cluster.startAll();
  await cluster.waitForLeader(60_000);
  const bin = findHaproxy();
  assert.ok(bin !== undefined, 'haproxy is not installed: apt-get install haproxy');
  balancer = await startHaproxy({
    bin,
    dir: cluster.dir,
    detached: false,
    spec: {
      listenAddr,
      statsAddr,
      runtimeSocket: socket,
      nodes: cluster.nodes.map((n) => ({ id: n.id, apiAddr: n.apiAddr })),
      healthCheck: { intervalMs: 200, fall: 2, rise: 2 },
    },
  });
  const log = openSync(join(cluster.dir, 'follow.log'), 'a');
  follower = spawn(
    process.execPath,
    [
      slipwayBin,
      '--server',
      cluster.apiAddrs().join(','),
      'balancer',
      'follow',
      '--haproxy-socket',
      socket,
      '--interval',
      '200',
      '--drain-grace',
      '3000',
      '--check-interval',
      '200',
    ],
    { stdio: ['ignore', log, log] },
  );
  admin = new ClusterClient(cluster.apiAddrs(), 20_000);
  kv = new KvClient(listenAddr, credentials.createInsecure());
  control = new ControlClient(listenAddr, credentials.createInsecure());
  streams = new BalancerStreams({ kv, control, admin });
  await admin.control('templateCreate', { source: waitingTemplateYaml, replace: true });
  await waitFor(
    'HAProxy to find every node SERVING',
    async () =>
      [...(await haproxyServerStates(statsAddr)).values()].filter((s) => s.status === 'UP').length === 3,
    15_000,
  );
  await waitFor(
    'the follower to start',
    () => readFileSync(join(cluster.dir, 'follow.log'), 'utf8').includes('following the membership'),
    20_000,
    50,
  );
});

after(async () => {
  streams?.close();
  kv?.close();
  control?.close();
  admin?.close();
  if (follower?.exitCode === null && follower.signalCode === null) {
    const exited = new Promise((resolve) => follower?.once('exit', resolve));
    follower.kill('SIGTERM');
    await exited;
  }
  if (balancer !== undefined) await stopHaproxy(balancer.pid, balancer.configFile);
  await cluster.destroy();
});

describe('HAProxy follows the membership', () => {
  let beforeAdd: HeldStream[] = [];
  let beforeRemove: HeldStream[] = [];
  let onJoiner: HeldStream[] = [];
  let wfAdd = '';
  let wfRemove = '';

  test('member add: HAProxy lists the new node and new calls reach it; no open stream is dropped', async () => {
    wfAdd = await streams.createWorkflow('hw-add', '02:00:00:00:03:01', '10.79.1.11/24');
    wfRemove = await streams.createWorkflow('hw-remove', '02:00:00:00:03:02', '10.79.1.12/24');
    beforeAdd = await streams.onEveryNode(wfAdd, 'a', ['n1', 'n2', 'n3'], 2);
    beforeRemove = await streams.onEveryNode(wfRemove, 'r', ['n1', 'n2', 'n3'], 2);
    assert.deepEqual(await listedServers(socket), ['n1', 'n2', 'n3']);

    const node: ProcNode = {
      id: 'n4',
      raftAddr: `127.0.0.1:${nextPort()}`,
      apiAddr: `127.0.0.1:${nextPort()}`,
      metricsAddr: `127.0.0.1:${nextPort()}`,
      dataDir: join(cluster.dir, 'n4'),
      proc: null,
    };
    joiner = node;
    cluster.nodeArgs.set('n4', ['--join']);
    cluster.start(node);
    cluster.nodes.push(node);
    await admin.call('memberAdd', {
      id: 'n4',
      raftAddr: node.raftAddr,
      apiAddr: node.apiAddr,
      learner: false,
    });

    await waitFor('HAProxy to list n4', async () => (await listedServers(socket)).includes('n4'), 15_000);
    await waitFor(
      'n4 UP in HAProxy with a passed grpc.health.v1 check',
      async () => {
        const s = (await haproxyServerStates(statsAddr)).get('n4');
        return s?.status === 'UP' && s.check === 'L7OK';
      },
      15_000,
    );
    // New calls reach it: some worker id now lands on n4, and sticks there.
    const toJoiner = await streams.workerOn('n4', 'new');
    assert.ok(toJoiner !== undefined, 'no worker id of 60 reached n4 through HAProxy');
    assert.equal(await streams.servedBy(toJoiner), 'n4');
    onJoiner = [await streams.hold(toJoiner, wfRemove)];
    assert.equal(onJoiner[0]!.node, 'n4');

    streams.assertOpen([...beforeAdd, ...beforeRemove], 'by member add');
    await streams.assertStillReceiving(beforeAdd, wfAdd);
  });

  test('member remove: its server is drained, then deleted; streams to the others stay open', async () => {
    assert.ok(joiner !== undefined, 'runs after member add');
    await admin.call('memberRemove', { id: 'n4' });
    await waitFor(
      'HAProxy to drop n4 from its list',
      async () => !(await listedServers(socket)).includes('n4'),
      20_000,
    );
    assert.deepEqual(await listedServers(socket), ['n1', 'n2', 'n3']);
    const followLog = (): string => readFileSync(join(cluster.dir, 'follow.log'), 'utf8');
    // Its log line follows the deletion.
    await waitFor('the follower to log the deletion', () =>
      followLog().includes('"server":"n4","change":"delete"'),
    );
    const log = followLog();
    assert.match(log, /"server":"n4","change":"drain"/, 'drained before it was deleted');
    assert.ok(log.indexOf('"change":"drain"') < log.indexOf('"change":"delete"'));
    // Its streams ended (their clients reconnect elsewhere), and new calls go to the others.
    await waitFor('the stream on n4 to end', () => onJoiner.every((h) => h.ended !== undefined), 10_000);
    for (let i = 0; i < 20; i++) assert.notEqual(await streams.servedBy(`new-${i}`), 'n4');

    streams.assertOpen(beforeRemove, 'by member remove');
    await streams.assertStillReceiving(beforeRemove, wfRemove);
    await cluster.kill(joiner);
  });
});

describe('bad input', () => {
  test('a missing socket is a clear error, exit 1', async () => {
    const missing = join(cluster.dir, 'no-such.sock');
    const r = await runSlipway([
      '--server',
      cluster.apiAddrs().join(','),
      'balancer',
      'follow',
      '--haproxy-socket',
      missing,
    ]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`no HAProxy runtime socket at ${missing.replace(/[/.]/g, '\\$&')}`));
    assert.match(r.stderr, /stats socket PATH level admin/);
  });

  test('an unknown backend is a clear error, exit 1', async () => {
    const r = await runSlipway([
      '--server',
      cluster.apiAddrs().join(','),
      'balancer',
      'follow',
      '--haproxy-socket',
      socket,
      '--backend',
      'nodes_typo',
    ]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /has no backend "nodes_typo".*name it with --backend/);
  });

  test('a bad interval is bad usage, exit 2', async () => {
    const r = await runSlipway(['balancer', 'follow', '--haproxy-socket', socket, '--interval', '5']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--interval must be 100 to 60000 ms, got 5/);
  });
});

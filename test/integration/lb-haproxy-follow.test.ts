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
import { credentials, Metadata } from '@grpc/grpc-js';
import type { ClientReadableStream } from '@grpc/grpc-js';
import { stickyHeader } from '../../lb/balancer-spec.js';
import type { RunningHaproxy } from '../../lb/haproxy-process.js';
import { findHaproxy, startHaproxy, stopHaproxy } from '../../lb/haproxy-process.js';
import { runtimeCommand } from '../../lb/haproxy-runtime.js';
import { ClusterClient } from '../../src/cli/client.js';
import type { WorkflowEventsResponse } from '../../src/gen/control.js';
import { ControlClient } from '../../src/gen/control.js';
import { KvClient } from '../../src/gen/kv.js';
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
let joiner: ProcNode | undefined;

const templateYaml = `version: "0.1"
name: waits
global_timeout: 600
tasks:
  - name: t
    worker: "{{ hardware.id }}"
    actions:
      - name: one
        command: ["true"]
        timeout: 600
`;

/** A WorkflowEvents follow through HAProxy, and what became of it. */
interface HeldStream {
  readonly worker: string;
  /** The node it was sent to. */
  readonly node: string;
  readonly call: ClientReadableStream<WorkflowEventsResponse>;
  readonly types: string[];
  /** Why it ended, once it did. */
  ended: string | undefined;
}
const streams: HeldStream[] = [];

function withWorker(worker: string): Metadata {
  const md = new Metadata();
  md.set(stickyHeader, worker);
  return md;
}

/** The node that answers a Status call through HAProxy with this worker id. */
function servedBy(worker: string): Promise<string> {
  return new Promise((resolve, reject) => {
    kv.status({}, withWorker(worker), { deadline: Date.now() + 5000 }, (err, res) =>
      err === null ? resolve(res.id) : reject(err),
    );
  });
}

/** Opens a follow of `workflowId` as `worker` and waits for its first event (the backlog). */
async function holdStream(worker: string, workflowId: string): Promise<HeldStream> {
  const node = await servedBy(worker);
  const call = control.workflowEvents({ workflowId, fromSeq: 0, follow: true }, withWorker(worker));
  const held: HeldStream = { worker, node, call, types: [], ended: undefined };
  call.on('data', (r: WorkflowEventsResponse) => held.types.push(r.event?.type ?? '?'));
  call.on('error', (err) => (held.ended ??= `error: ${err.message}`));
  call.on('end', () => (held.ended ??= 'end'));
  streams.push(held);
  await waitFor(`the stream of ${worker} to deliver its backlog`, () => held.types.length > 0, 10_000);
  return held;
}

/** Streams of `workflowId`, one per worker id, covering every node in `nodes`. */
async function streamsOnEveryNode(
  workflowId: string,
  prefix: string,
  nodes: string[],
): Promise<HeldStream[]> {
  const held: HeldStream[] = [];
  for (let i = 0; i < 60 && !nodes.every((n) => held.some((h) => h.node === n)); i++) {
    const worker = `${prefix}-${i}`;
    const node = await servedBy(worker);
    if (held.filter((h) => h.node === node).length < 2) held.push(await holdStream(worker, workflowId));
  }
  assert.deepEqual([...new Set(held.map((h) => h.node))].sort(), [...nodes].sort(), 'streams on every node');
  return held;
}

async function createWorkflow(hardwareId: string, mac: string, ip: string): Promise<string> {
  const hw = { id: hardwareId, interfaces: [{ mac, ip }] };
  await admin.control('hardwareCreate', { documentJson: JSON.stringify(hw), replace: false });
  const created = await admin.control('workflowCreate', {
    template: 'waits',
    hardwareId,
    hardwareMap: {},
    netboot: false,
  });
  const id = created.workflow?.id ?? '';
  assert.notEqual(id, '');
  return id;
}

/** Cancels the workflow; every stream following it must receive that, and end with it. */
async function assertStillReceiving(held: readonly HeldStream[], workflowId: string): Promise<void> {
  await admin.control('workflowCancel', { id: workflowId });
  await waitFor(
    'every stream opened before to receive the cancellation',
    () => held.every((h) => h.types.includes('workflow.cancelled')),
    10_000,
  );
  for (const h of held) assert.equal(h.ended ?? 'end', 'end', `${h.worker} on ${h.node}: ${h.ended}`);
}

function assertOpen(held: readonly HeldStream[], step: string): void {
  const dropped = held
    .filter((h) => h.ended !== undefined)
    .map((h) => `${h.worker} on ${h.node}: ${h.ended}`);
  assert.deepEqual(dropped, [], `streams dropped ${step}`);
}

/** The servers HAProxy's runtime API lists in the backend. */
async function listed(): Promise<string[]> {
  const state = await runtimeCommand(socket, 'show servers state slipway_nodes');
  return state
    .split('\n')
    .filter((l) => /^\d+ slipway_nodes /.test(l))
    .map((l) => l.split(' ')[3]!)
    .sort();
}

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
  await admin.control('templateCreate', { source: templateYaml, replace: true });
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
  for (const h of streams) h.call.cancel();
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
    wfAdd = await createWorkflow('hw-add', '02:00:00:00:03:01', '10.79.1.11/24');
    wfRemove = await createWorkflow('hw-remove', '02:00:00:00:03:02', '10.79.1.12/24');
    beforeAdd = await streamsOnEveryNode(wfAdd, 'a', ['n1', 'n2', 'n3']);
    beforeRemove = await streamsOnEveryNode(wfRemove, 'r', ['n1', 'n2', 'n3']);
    assert.deepEqual(await listed(), ['n1', 'n2', 'n3']);

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

    await waitFor('HAProxy to list n4', async () => (await listed()).includes('n4'), 15_000);
    await waitFor(
      'n4 UP in HAProxy with a passed grpc.health.v1 check',
      async () => {
        const s = (await haproxyServerStates(statsAddr)).get('n4');
        return s?.status === 'UP' && s.check === 'L7OK';
      },
      15_000,
    );
    // New calls reach it: some worker id now lands on n4, and sticks there.
    let toJoiner: string | undefined;
    for (let i = 0; i < 60 && toJoiner === undefined; i++) {
      if ((await servedBy(`new-${i}`)) === 'n4') toJoiner = `new-${i}`;
    }
    assert.ok(toJoiner !== undefined, 'no worker id of 60 reached n4 through HAProxy');
    assert.equal(await servedBy(toJoiner), 'n4');
    onJoiner = [await holdStream(toJoiner, wfRemove)];
    assert.equal(onJoiner[0]!.node, 'n4');

    assertOpen([...beforeAdd, ...beforeRemove], 'by member add');
    await assertStillReceiving(beforeAdd, wfAdd);
  });

  test('member remove: its server is drained, then deleted; streams to the others stay open', async () => {
    assert.ok(joiner !== undefined, 'runs after member add');
    await admin.call('memberRemove', { id: 'n4' });
    await waitFor('HAProxy to drop n4 from its list', async () => !(await listed()).includes('n4'), 20_000);
    assert.deepEqual(await listed(), ['n1', 'n2', 'n3']);
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
    for (let i = 0; i < 20; i++) assert.notEqual(await servedBy(`new-${i}`), 'n4');

    assertOpen(beforeRemove, 'by member remove');
    await assertStillReceiving(beforeRemove, wfRemove);
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

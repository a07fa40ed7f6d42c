// Goal: draining a node (docs/decisions/0022-node-drain.md) moves work off it without losing or
// repeating any. `slipway node drain ID` on a node that serves worker streams ends them, the
// workers reconnect to other nodes and their workflows complete with every action attempt run
// once; the drained node answers health checks NOT_SERVING, refuses a new worker stream with
// UNAVAILABLE naming the drain, and `cluster status` shows it; the drain survives the node's
// restart and `node undrain` makes it SERVING again. Draining the leader moves leadership, and a
// drained node handed leadership gives it away again. Draining an unknown member fails with
// exit 2 naming the members, and drains nothing. SIGTERM on a node with worker streams moves
// them within the drain grace, and the process exits 0. Through real HAProxy (which checks
// grpc.health.v1), a drained node is taken out: the worker ids that hashed to it go to others.
// Method: 3 real `slipway server` processes with tokens required, real `slipway worker`
// processes (each a machine) whose server list begins with the node under test, and the real
// CLI. Each action appends a line naming its workflow and action to the machine's file, so the
// test counts executions. Health through grpc.health.v1 Check; Status through Kv.Status.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { ClusterClient } from '../../src/cli/client.js';
import { HealthCheckResponse_ServingStatus as Serving, HealthClient } from '../../src/gen/health.js';
import { KvClient, Role } from '../../src/gen/kv.js';
import { WorkerClient } from '../../src/gen/worker.js';
import {
  nextPort,
  ProcessCluster,
  runSlipway,
  slipwayBin,
  type CliResult,
  type ProcNode,
} from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';
import { haproxyServerStates, waitForAllServing } from '../support/haproxy-stats.js';
import { stickyHeader } from '../../src/model/balancer-spec.js';
import { findHaproxy, startHaproxy, stopHaproxy } from '../../lb/haproxy-process.js';

const adminToken = 'admin-token-for-the-node-drain-test';
const actionsPerWorkflow = 5;

let cluster: ProcessCluster;
let admin: ClusterClient;
const workers: ChildProcess[] = [];
const tokens = new Map<string, string>();
let hardwareCount = 0;

const cli = (args: string[], timeoutMs = 90_000): Promise<CliResult> =>
  runSlipway(
    ['--server', cluster.apiAddrs().join(','), '--token-file', join(cluster.dir, 'admin.token'), ...args],
    { timeoutMs },
  );

const templateYaml = (outDir: string): string => `version: "0.1"
name: steps
global_timeout: 600
tasks:
  - name: provision
    worker: "{{ hardware.id }}"
    actions:
${Array.from(
  { length: actionsPerWorkflow },
  (_, a) => `      - name: step-${String(a + 1)}
        command: ["sh", "-c", "echo \\"$WF step-${String(a + 1)}\\" >> \\"$OUT\\"; sleep 0.4"]
        timeout: 60
        environment:
          WF: "{{ workflow.id }}"
          OUT: "${outDir}/{{ hardware.id }}.out"`,
).join('\n')}
`;

async function stopProcess(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise<void>((r) => p.once('exit', () => r()));
  p.kill('SIGKILL');
  await exited;
}

before(async () => {
  cluster = new ProcessCluster(3, []);
  // A node stopped with SIGTERM moves its worker streams on its way out: that is counted.
  cluster.coverage = true;
  cluster.requireToken(adminToken);
  cluster.startAll();
  const leader = await cluster.waitForLeader();
  // member.drain needs state version 2, which the leader raises by itself soon after it leads.
  for (const n of cluster.nodes) await cluster.waitForClusterVersion(n, 2);
  admin = new ClusterClient(cluster.apiAddrs(), { timeoutMs: 20_000, token: adminToken });
  await admin.control('templateCreate', { source: templateYaml(cluster.dir), replace: false });
  assert.ok(leader);
});

after(async () => {
  admin.close();
  for (const w of workers) await stopProcess(w);
  await cluster.destroy();
});

/** A new machine with a worker agent whose server list begins with `first`. */
async function startMachine(first: ProcNode): Promise<string> {
  const i = ++hardwareCount;
  const id = `hw-${String(i)}`;
  const mac = `02:00:00:00:03:${i.toString(16).padStart(2, '0')}`;
  const doc = JSON.stringify({ id, interfaces: [{ mac, ip: `10.80.0.${String(10 + i)}/24` }] });
  await admin.control('hardwareCreate', { documentJson: doc, replace: false });
  const token = (await admin.control('hardwareToken', { id })).token;
  tokens.set(id, token);
  const tokenFile = join(cluster.dir, `${id}.token`);
  writeFileSync(tokenFile, token);
  const addrs = [first, ...cluster.nodes.filter((n) => n !== first)].map((n) => n.apiAddr);
  const log = openSync(join(cluster.dir, `${id}.worker.log`), 'a');
  workers.push(
    spawn(
      process.execPath,
      [
        slipwayBin,
        'worker',
        '--id',
        id,
        '--server',
        addrs.join(','),
        '--token-file',
        tokenFile,
        '--journal-dir',
        join(cluster.dir, 'journal', id),
        '--work-dir',
        cluster.dir,
      ],
      { stdio: ['ignore', log, log] },
    ),
  );
  return id;
}

async function createWorkflow(hardwareId: string): Promise<string> {
  const res = await admin.control('workflowCreate', {
    template: 'steps',
    hardwareId,
    hardwareMap: {},
    netboot: false,
  });
  assert.ok(res.workflow);
  return res.workflow.id;
}

async function workerStreams(node: ProcNode): Promise<number> {
  return (await cluster.status(node, 3000))?.workerStreams ?? -1;
}

async function health(node: ProcNode, service = ''): Promise<number> {
  const client = new HealthClient(node.apiAddr, credentials.createInsecure());
  try {
    return await new Promise<number>((resolve, reject) => {
      client.check({ service }, new Metadata(), { deadline: Date.now() + 3000 }, (err, res) =>
        err === null ? resolve(res.status) : reject(err),
      );
    });
  } finally {
    client.close();
  }
}

/** Every workflow succeeded, and each (workflow, action) line appears once in its machine's file. */
async function assertRanOnce(workflows: ReadonlyMap<string, string>): Promise<void> {
  await waitFor(
    'every workflow to succeed',
    async () => {
      const states = await Promise.all(
        [...workflows.keys()].map(
          async (id) => (await admin.control('workflowGet', { id, local: false })).workflow?.state,
        ),
      );
      assert.ok(
        !states.some((s) => s === 'FAILED' || s === 'TIMEOUT' || s === 'CANCELLED'),
        states.join(','),
      );
      return states.every((s) => s === 'SUCCESS');
    },
    120_000,
    200,
  );
  const machines = new Set(workflows.values());
  for (const hw of machines) {
    const lines = readFileSync(join(cluster.dir, `${hw}.out`), 'utf8')
      .trim()
      .split('\n');
    const counts = new Map<string, number>();
    for (const l of lines) counts.set(l, (counts.get(l) ?? 0) + 1);
    const mine = [...workflows].filter(([, h]) => h === hw).length;
    assert.equal(counts.size, mine * actionsPerWorkflow, `${hw} ran every action`);
    for (const [line, n] of counts) assert.equal(n, 1, `"${line}" ran ${String(n)} times on ${hw}`);
  }
}

/** Starts `count` machines on `node`, one workflow each, and waits until they run there. */
async function workOn(node: ProcNode, count: number): Promise<Map<string, string>> {
  const before = await workerStreams(node);
  const workflows = new Map<string, string>();
  for (let i = 0; i < count; i++) {
    const hw = await startMachine(node);
    workflows.set(await createWorkflow(hw), hw);
  }
  await waitFor(
    'the workers to connect to the node',
    async () => (await workerStreams(node)) >= before + count,
    30_000,
    100,
  );
  // Each has started its first action there.
  await waitFor(
    'the first actions to run',
    () => [...workflows.values()].every((hw) => existsSync(join(cluster.dir, `${hw}.out`))),
    30_000,
    100,
  );
  return workflows;
}

describe('node drain', () => {
  test('an unknown member or a malformed id is refused with exit 2, and nothing is drained', async () => {
    const unknown = await cli(['node', 'drain', 'n9']);
    assert.equal(unknown.code, 2, unknown.stderr);
    assert.match(unknown.stderr, /no member "n9" in the cluster \(members: n1, n2, n3\)/);
    const malformed = await cli(['node', 'drain', 'bad/id']);
    assert.equal(malformed.code, 2, malformed.stderr);
    assert.match(malformed.stderr, /member id "bad\/id" must be 1-63 letters/);
    const undrainUnknown = await cli(['node', 'undrain', 'n9']);
    assert.equal(undrainUnknown.code, 2, undrainUnknown.stderr);
    for (const n of cluster.nodes) {
      assert.equal((await cluster.status(n))?.drained, false, `${n.id} is not drained`);
      assert.equal(await health(n), Serving.SERVING);
    }
  });

  test('a drain whose node does not answer ends at the deadline with exit 1; the node comes up drained', async () => {
    const leader = await cluster.waitForLeader();
    const target = cluster.nodes.find((n) => n.id !== leader.id)!;
    // Another member's Status is read through any node; one that names no member is NOT_FOUND.
    const other = await admin.call('status', { member: target.id });
    assert.equal(other.id, target.id);
    await assert.rejects(
      admin.call('status', { member: 'n9' }),
      (e: ServiceError) => e.code === status.NOT_FOUND,
    );
    await cluster.kill(target);
    try {
      const r = await cli(['--timeout', '5s', 'node', 'drain', target.id]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stdout, new RegExp(`node ${target.id}: drained \\(not complete\\)`));
      // Why its state is unknown (its address refused, or a node could not reach it) is named.
      assert.match(r.stderr, /worker stream\(s\) left; .+\); it stays drained/);
      assert.match(r.stderr, new RegExp(`it stays drained: run \`slipway node drain ${target.id}\` again`));
    } finally {
      cluster.start(target);
    }
    await waitFor(
      'the node to come up drained',
      async () => (await cluster.status(target))?.drained === true,
      30_000,
      100,
    );
    assert.equal(await health(target), Serving.NOT_SERVING);
    const u = await cli(['node', 'undrain', target.id]);
    assert.equal(u.code, 0, u.stderr);
    await waitFor(
      'the node to serve again',
      async () => (await health(target)) === Serving.SERVING,
      10_000,
      100,
    );
  });

  test('draining a follower moves its worker streams; their workflows complete, each action once', async () => {
    const leader = await cluster.waitForLeader();
    const target = cluster.nodes.find((n) => n.id !== leader.id)!;
    const workflows = await workOn(target, 3);
    const r = await cli(['-o', 'json', '--timeout', '30s', 'node', 'drain', target.id]);
    assert.equal(r.code, 0, r.stderr);
    const report = JSON.parse(r.stdout) as Record<string, unknown>;
    assert.equal(report['complete'], true);
    assert.equal(report['wasLeader'], false);
    assert.equal(report['workerStreamsLeft'], 0);
    assert.ok(Number(report['workerStreamsMoved']) >= 3, r.stdout);
    // The drained node: NOT_SERVING for the node and its services, no worker streams.
    assert.equal(await health(target), Serving.NOT_SERVING);
    assert.equal(await health(target, 'slipway.kv.v1.Kv'), Serving.NOT_SERVING);
    assert.equal(await workerStreams(target), 0);
    const metrics = await (await fetch(`http://${target.metricsAddr}/metrics`)).text();
    assert.match(metrics, /^slipway_node_drained 1$/m);
    assert.match(metrics, /^slipway_connected_workers 0$/m);
    // The workers went to the other nodes, and every action ran once.
    const others = cluster.nodes.filter((n) => n !== target);
    await waitFor(
      'the workers to reconnect to the other nodes',
      async () => (await Promise.all(others.map(workerStreams))).reduce((a, b) => a + b, 0) >= 3,
      30_000,
      100,
    );
    await assertRanOnce(workflows);
    assert.equal(await workerStreams(target), 0, 'no worker came back to the drained node');
    // A new stream there is refused, saying why.
    const hw = [...workflows.values()][0]!;
    const refused = await new Promise<ServiceError>((resolve) => {
      const client = new WorkerClient(target.apiAddr, credentials.createInsecure());
      const md = new Metadata();
      md.set('x-worker-id', hw);
      md.set('authorization', `Bearer ${tokens.get(hw) ?? ''}`);
      const stream = client.connect(md);
      stream.on('data', () => undefined);
      stream.on('error', (err: ServiceError) => {
        client.close();
        resolve(err);
      });
    });
    assert.equal(refused.code, status.UNAVAILABLE);
    assert.match(refused.details, new RegExp(`node ${target.id} is drained`));
    // cluster status shows it.
    const st = await cli(['-o', 'json', 'cluster', 'status']);
    assert.equal(st.code, 0, st.stderr);
    const rows = (JSON.parse(st.stdout) as { nodes: { node: string; drained: boolean; workers: number }[] })
      .nodes;
    assert.deepEqual(
      rows.filter((row) => row.drained).map((row) => row.node),
      [target.id],
    );

    // The drain is replicated: it survives the node's restart.
    await cluster.kill(target);
    cluster.start(target);
    await waitFor(
      'the restarted node to answer',
      async () => (await cluster.status(target)) !== null,
      30_000,
      100,
    );
    await waitFor(
      'the restarted node to apply its drain',
      async () => (await cluster.status(target))?.drained === true,
      30_000,
      100,
    );
    assert.equal(await health(target), Serving.NOT_SERVING);

    // Undrain: SERVING again.
    const u = await cli(['node', 'undrain', target.id]);
    assert.equal(u.code, 0, u.stderr);
    assert.match(u.stdout, new RegExp(`node ${target.id}: serving \\(drained members: none\\)`));
    await waitFor(
      'the node to serve again',
      async () => (await health(target)) === Serving.SERVING,
      10_000,
      100,
    );
    assert.equal((await cluster.status(target))?.drained, false);
  });

  test('draining the leader moves leadership, and a drained node handed leadership gives it away', async () => {
    const leader = await cluster.waitForLeader();
    try {
      await drainLeader(leader);
    } finally {
      const u = await cli(['node', 'undrain', leader.id]);
      assert.equal(u.code, 0, u.stderr);
    }
  });

  async function drainLeader(leader: ProcNode): Promise<void> {
    const r = await cli(['-o', 'json', 'node', 'drain', leader.id]);
    assert.equal(r.code, 0, r.stderr);
    const report = JSON.parse(r.stdout) as Record<string, unknown>;
    assert.equal(report['wasLeader'], true);
    assert.equal(report['leaderBefore'], leader.id);
    assert.notEqual(report['leaderAfter'], leader.id);
    assert.notEqual(report['leaderAfter'], '');
    const next = await cluster.waitForLeader();
    assert.notEqual(next.id, leader.id);
    const st = await cluster.status(leader);
    assert.equal(st?.drained, true);
    assert.notEqual(st?.role, Role.ROLE_LEADER);
    // Handed leadership anyway, it gives it away again.
    const t = await cli(['leader', 'transfer', '--to', leader.id]);
    assert.equal(t.code, 0, t.stderr);
    await waitFor(
      'the drained node to hand leadership away again',
      async () => {
        const s = await cluster.status(next);
        return s !== null && s.leader !== '' && s.leader !== leader.id;
      },
      15_000,
      100,
    );
  }

  test('SIGTERM on a node with worker streams moves them within the grace, and it exits 0', async () => {
    const leader = await cluster.waitForLeader();
    const target = cluster.nodes.find((n) => n.id !== leader.id)!;
    await waitFor('the node to serve', async () => (await health(target)) === Serving.SERVING, 10_000, 100);
    const others = cluster.nodes.filter((n) => n !== target);
    const elsewhere = async (): Promise<number> =>
      (await Promise.all(others.map(workerStreams))).reduce((a, b) => a + b, 0);
    const before = await elsewhere();
    const workflows = await workOn(target, 2);
    const proc = target.proc!;
    const startedMs = Date.now();
    await cluster.kill(target, 'SIGTERM');
    const tookMs = Date.now() - startedMs;
    assert.equal(proc.exitCode, 0, 'the node exits 0 after its drain');
    // The default grace is 5 s; the streams end at once, so it is well within it.
    assert.ok(tookMs < 10_000, `the stop took ${String(tookMs)} ms`);
    const log = readFileSync(join(cluster.dir, `${target.id}.log`), 'utf8');
    assert.match(log, /worker streams moved before stopping/);
    await waitFor(
      'the workers to reconnect elsewhere',
      async () => (await elsewhere()) >= before + 2,
      30_000,
      100,
    );
    await assertRanOnce(workflows);
    cluster.start(target);
    await cluster.waitForLeader();
  });

  test('through HAProxy, a drained node is taken out and its worker ids go to the other nodes', async () => {
    const bin = findHaproxy();
    assert.ok(bin !== undefined, 'haproxy is not installed: apt-get install haproxy');
    const statsAddr = `127.0.0.1:${nextPort()}`;
    const listenAddr = `127.0.0.1:${nextPort()}`;
    const balancer = await startHaproxy({
      bin,
      dir: cluster.dir,
      detached: false,
      spec: {
        listenAddr,
        statsAddr,
        nodes: cluster.nodes.map((n) => ({ id: n.id, apiAddr: n.apiAddr })),
        healthCheck: { intervalMs: 200, fall: 2, rise: 2 },
      },
    });
    const kv = new KvClient(listenAddr, credentials.createInsecure());
    /** The node that answers a Status call through the balancer for this worker id. */
    const servedBy = (workerId: string): Promise<string> => {
      const md = new Metadata();
      md.set(stickyHeader, workerId);
      md.set('authorization', `Bearer ${adminToken}`);
      return new Promise((resolve, reject) => {
        kv.status({}, md, { deadline: Date.now() + 5000 }, (err, res) =>
          err === null ? resolve(res.id) : reject(err),
        );
      });
    };
    try {
      await waitForAllServing(statsAddr, 3, 'HAProxy to find every node SERVING');
      const leader = await cluster.waitForLeader();
      const target = cluster.nodes.find((n) => n.id !== leader.id)!;
      const ids = Array.from({ length: 24 }, (_, i) => `lb-${String(i)}`);
      const before = await Promise.all(ids.map(servedBy));
      const onTarget = ids.filter((_, i) => before[i] === target.id);
      assert.ok(onTarget.length > 0, 'some worker ids hash to the node before the drain');
      const r = await cli(['--timeout', '20s', 'node', 'drain', target.id]);
      assert.equal(r.code, 0, r.stderr);
      await waitFor(
        'HAProxy to take the drained node out',
        async () => {
          const states = await haproxyServerStates(statsAddr);
          return [...states].every(([id, st]) =>
            id === target.id ? st.status === 'DOWN' : st.status === 'UP',
          );
        },
        15_000,
        100,
      );
      const after = await Promise.all(ids.map(servedBy));
      assert.ok(!after.includes(target.id), `the drained node still got calls: ${after.join(',')}`);
      // Only the ids that were on the drained node moved.
      ids.forEach((id, i) => {
        if (before[i] !== target.id) assert.equal(after[i], before[i], `${id} stayed where it was`);
      });
      const u = await cli(['node', 'undrain', target.id]);
      assert.equal(u.code, 0, u.stderr);
      await waitForAllServing(statsAddr, 3, 'HAProxy to take the undrained node back');
    } finally {
      kv.close();
      await stopHaproxy(balancer.pid, balancer.configFile);
    }
  });
});

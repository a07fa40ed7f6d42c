// Goal: HAProxy from lb/ in front of real nodes serves the gRPC API: writes and reads go through
// it; calls with the same x-worker-id land on the same node while different ids, and calls
// without one, spread over the nodes; and when a node is SIGKILLed, writes through the balancer
// carry on, its health checks take the node out, and only the workers of that node move.
// Method: 3 `slipway server` processes (test/support/process-cluster.ts) and HAProxy started by
// lb/haproxy-process.ts with fast health checks. The client calls the Kv service through the
// balancer's address; the node that served a call is the id in its Status answer; HAProxy's
// view of each node comes from its status page (CSV). The node killed is the leader, the
// hardest case: writes wait for an election. Every process is stopped by PID at the end.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { credentials, Metadata } from '@grpc/grpc-js';
import { stickyHeader } from '../../src/model/balancer-spec.js';
import type { RunningHaproxy } from '../../lb/haproxy-process.js';
import { findHaproxy, startHaproxy, stopHaproxy } from '../../lb/haproxy-process.js';
import { ClusterClient } from '../../src/cli/client.js';
import { KvClient } from '../../src/gen/kv.js';
import { nextPort, ProcessCluster } from '../support/process-cluster.js';
import { haproxyServerStates, waitForAllServing } from '../support/haproxy-stats.js';
import { waitFor } from '../support/wait.js';

const cluster = new ProcessCluster(3);
const listenAddr = `127.0.0.1:${nextPort()}`;
const statsAddr = `127.0.0.1:${nextPort()}`;
const workers = Array.from({ length: 20 }, (_, i) => `w-${i}`);
/** Which node served each worker id before the kill. */
const placement = new Map<string, string>();
let balancer: RunningHaproxy | undefined;
let kv: KvClient;

function serverStates(): ReturnType<typeof haproxyServerStates> {
  return haproxyServerStates(statsAddr);
}

/** The id of the node that answered a Status call through the balancer. */
function servedBy(workerId?: string): Promise<string> {
  const md = new Metadata();
  if (workerId !== undefined) md.set(stickyHeader, workerId);
  return new Promise((resolve, reject) => {
    kv.status({}, md, { deadline: Date.now() + 5000 }, (err, res) => {
      if (err === null) resolve(res.id);
      else reject(err);
    });
  });
}

/** The nodes that served `calls` calls with this worker id (one, when it sticks). */
async function nodesServing(workerId: string | undefined, calls: number): Promise<Set<string>> {
  const ids = new Set<string>();
  for (let i = 0; i < calls; i++) ids.add(await servedBy(workerId));
  return ids;
}

before(async () => {
  cluster.startAll();
  await cluster.waitForLeader();
  const bin = findHaproxy();
  assert.ok(bin !== undefined, 'haproxy is not installed: apt-get install haproxy');
  balancer = await startHaproxy({
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
  kv = new KvClient(listenAddr, credentials.createInsecure());
  await waitForAllServing(statsAddr, 3, 'HAProxy to find every node SERVING');
});

after(async () => {
  kv.close();
  if (balancer !== undefined) await stopHaproxy(balancer.pid, balancer.configFile);
  await cluster.destroy();
});

describe('through the balancer', () => {
  test('a write and a linearizable read go through', async () => {
    const client = new ClusterClient([listenAddr]);
    try {
      const put = await client.call('put', { key: 'lb/greeting', value: Buffer.from('hello') });
      assert.ok(put.revision >= 1);
      const got = await client.call('get', { key: 'lb/greeting', local: false });
      assert.equal(got.value.toString(), 'hello');
    } finally {
      client.close();
    }
  });

  test('a worker id sticks to one node; ids, and calls without one, spread over the nodes', async () => {
    for (const w of workers) {
      const served = await nodesServing(w, 5);
      assert.equal(served.size, 1, `${w} was served by ${[...served].join(', ')}`);
      placement.set(w, [...served][0]!);
    }
    // The hash is a function of the ids alone, so this spread is the same on every run.
    assert.deepEqual(new Set(placement.values()), new Set(['n1', 'n2', 'n3']));
    const withoutHeader = await nodesServing(undefined, 9);
    assert.ok(
      withoutHeader.size > 1,
      `calls without ${stickyHeader} all went to ${[...withoutHeader].join()}`,
    );
  });

  test('after SIGKILL of the leader, writes carry on and only its workers move', async () => {
    assert.equal(placement.size, workers.length, 'runs after the stickiness test');
    const leader = await cluster.waitForLeader();
    const moved = workers.filter((w) => placement.get(w) === leader.id);
    const stayed = workers.filter((w) => placement.get(w) !== leader.id);
    await cluster.kill(leader);

    const client = new ClusterClient([listenAddr], 5000);
    const acknowledged: string[] = [];
    let seq = 0;
    const write = async (): Promise<boolean> => {
      const key = `lb/after-kill/${seq++}`;
      try {
        await client.call('put', { key, value: Buffer.from(key) });
        acknowledged.push(key);
        return true;
      } catch {
        return false; // the election is not over yet
      }
    };
    try {
      await waitFor('a write through the balancer once a new leader is elected', write, 20_000);
      for (let i = 0; i < 20; i++) assert.ok(await write(), `write ${i} after recovery failed`);

      await waitFor('HAProxy to take the dead node out and keep the others', async () => {
        const states = await serverStates();
        return [...states].every(([id, s]) => (id === leader.id ? s.status === 'DOWN' : s.status === 'UP'));
      });
      for (const w of stayed) assert.equal(await servedBy(w), placement.get(w), `${w} moved`);
      for (const w of moved) {
        const served = await nodesServing(w, 3);
        assert.equal(served.size, 1, `${w} was served by ${[...served].join(', ')}`);
        assert.notEqual([...served][0], leader.id);
      }
      for (const key of acknowledged) {
        const got = await client.call('get', { key, local: false });
        assert.equal(got.value.toString(), key, `acknowledged write ${key} is readable`);
      }
    } finally {
      client.close();
    }
  });
});

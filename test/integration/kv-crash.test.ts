// Goal: acknowledged means durable, and reads are linearizable, with real processes.
// Method: three `slipway server` processes on loopback take concurrent writes and reads from
// several clients while the test SIGKILLs leaders and followers at random moments and
// SIGSTOPs/SIGCONTs nodes, restarting killed nodes on their data directories. Afterwards every
// acknowledged write must be on every node, and the recorded history of the shared keys must
// be linearizable (unknown outcomes, from timeouts and lost connections, may or may not apply).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, test } from 'node:test';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import type { RequestOf, ResponseOf } from '../../src/cli/client.js';
import { ClusterClient } from '../../src/cli/client.js';
import type { ServiceError } from '@grpc/grpc-js';
import { KvClient } from '../../src/gen/kv.js';
import type { Op } from '../support/linearizability.js';
import { checkLinearizable } from '../support/linearizability.js';
import type { ProcNode } from '../support/process-cluster.js';
import { ProcessCluster } from '../support/process-cluster.js';

const rounds = Number(process.env['CRASH_ROUNDS'] ?? 20);
const sharedKeys = ['s0', 's1', 's2'];
const clientsCount = 4;

let cluster: ProcessCluster;
before(async () => {
  cluster = new ProcessCluster(3, ['--snapshot-entries', '200']);
  cluster.startAll();
  await cluster.waitForLeader();
});
after(async () => {
  await cluster.destroy();
});

/** A tiny seeded generator, so a failing run's choices can be replayed from its seed. */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

/**
 * Fault timing, not synchronization: how long the workload runs between two faults (or how
 * long a node stays paused) is drawn at random so that faults land at varied moments.
 */
function chaosDelay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

const definitelyFailed = new Set<number>([
  status.INVALID_ARGUMENT,
  status.FAILED_PRECONDITION,
  status.NOT_FOUND,
]);

class Worker {
  private readonly client: ClusterClient;
  readonly history: Op[] = [];
  readonly acked: string[] = [];
  private seq = 0;
  readonly n: number;

  constructor(n: number, addrs: string[]) {
    this.n = n;
    // Each worker starts on a different node; the client moves on when one is unreachable.
    const rotated = [...addrs.slice(n % addrs.length), ...addrs.slice(0, n % addrs.length)];
    this.client = new ClusterClient(rotated, 2000);
  }

  close(): void {
    this.client.close();
  }

  private async unary<M extends 'put' | 'get'>(
    method: M,
    req: RequestOf<M>,
  ): Promise<{ ok: true; res: ResponseOf<M> } | { ok: false; err: ServiceError }> {
    try {
      return { ok: true, res: await this.client.call(method, req) };
    } catch (err) {
      return { ok: false, err: err as ServiceError };
    }
  }

  async run(until: () => boolean, random: () => number): Promise<void> {
    while (!until()) {
      const seq = ++this.seq;
      const roll = random();
      if (roll < 0.4) {
        // A unique key: checked for durability on every node at the end.
        const key = `w/${this.n}/${seq}`;
        const r = await this.unary('put', { key, value: Buffer.from('x') });
        if (r.ok) this.acked.push(key);
        else if (definitelyFailed.has(r.err.code)) assert.fail(`put ${key}: ${r.err.message}`);
      } else {
        const key = sharedKeys[Math.floor(random() * sharedKeys.length)]!;
        const call = performance.now();
        if (roll < 0.7) {
          const value = `${this.n}-${seq}`;
          const r = await this.unary('put', { key, value: Buffer.from(value) });
          if (r.ok)
            this.history.push({
              client: this.n,
              kind: 'put',
              key,
              input: { value },
              output: { ok: true },
              call,
              ret: performance.now(),
            });
          else
            this.history.push({
              client: this.n,
              kind: 'put',
              key,
              input: { value },
              output: undefined,
              call,
              ret: Infinity,
            });
        } else {
          const r = await this.unary('get', { key, local: false });
          if (r.ok) {
            const value = r.res.found ? r.res.value.toString() : undefined;
            this.history.push({
              client: this.n,
              kind: 'get',
              key,
              input: undefined,
              output: { value },
              call,
              ret: performance.now(),
            });
          }
        }
      }
    }
  }
}

async function waitCaughtUp(nodes: ProcNode[], timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const sts = await Promise.all(nodes.map((n) => cluster.status(n)));
    const commits = sts.map((s) => s?.commit ?? -1);
    const applied = sts.map((s) => s?.applied ?? -2);
    const leaderCommit = Math.max(...commits);
    if (applied.every((a) => a === leaderCommit) && commits.every((c) => c === leaderCommit)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('nodes did not converge on the same applied index');
}

async function localKeys(node: ProcNode, prefix: string): Promise<Set<string>> {
  const c = new KvClient(node.apiAddr, credentials.createInsecure());
  try {
    return await new Promise((resolve, reject) => {
      c.range(
        { prefix, limit: 0, local: true },
        new Metadata(),
        { deadline: Date.now() + 5000 },
        (err, res) => {
          if (err !== null) reject(err);
          else resolve(new Set(res.kvs.map((kv) => kv.key)));
        },
      );
    });
  } finally {
    c.close();
  }
}

test(
  `acknowledged writes survive ${rounds} rounds of SIGKILL and SIGSTOP, and the history is linearizable`,
  { timeout: 240_000 },
  async () => {
    const seed = Number(process.env['CRASH_SEED'] ?? Date.now() % 1_000_000);
    const random = rng(seed);
    let done = false;
    const workers = Array.from({ length: clientsCount }, (_, i) => new Worker(i, cluster.apiAddrs()));
    const running = workers.map((w) => w.run(() => done, rng(seed + w.n + 1)));
    try {
      for (let round = 0; round < rounds; round++) {
        const leader = await cluster.waitForLeader();
        const victim = random() < 0.5 ? leader : cluster.nodes[Math.floor(random() * cluster.nodes.length)]!;
        await chaosDelay(100 + random() * 300);
        if (round % 4 === 3) {
          // A pause: the node wakes up believing it still leads, and must not serve stale reads.
          cluster.pause(victim);
          await chaosDelay(300 + random() * 700);
          cluster.resume(victim);
        } else {
          await cluster.kill(victim);
          await chaosDelay(random() * 300);
          cluster.start(victim);
        }
      }
      await cluster.waitForLeader();
      // Let the clients complete some operations against the recovered cluster.
      await chaosDelay(300);
    } finally {
      done = true;
      await Promise.all(running);
      for (const w of workers) w.close();
    }

    await waitCaughtUp(cluster.nodes);
    const acked = workers.flatMap((w) => w.acked);
    assert.ok(
      acked.length > 50,
      `the workload made progress (${acked.length} acknowledged writes, seed ${seed})`,
    );
    for (const node of cluster.nodes) {
      const keys = await localKeys(node, 'w/');
      const missing = acked.filter((k) => !keys.has(k));
      assert.deepEqual(missing, [], `node ${node.id} lost acknowledged writes (seed ${seed})`);
    }
    // The run crossed snapshots (taken in slices while writes went on), so the checks above
    // covered compaction and restarts from a snapshot too.
    const snapshots = cluster.nodes.map(
      (n) => (readFileSync(join(cluster.dir, `${n.id}.log`), 'utf8').match(/took a snapshot/g) ?? []).length,
    );
    assert.ok(
      snapshots.reduce((a, b) => a + b, 0) >= 3,
      `snapshots taken per node: ${snapshots.join(', ')} (seed ${seed})`,
    );
    const history = workers.flatMap((w) => w.history);
    const result = checkLinearizable(history);
    assert.ok(result.ok, `history not linearizable (seed ${seed}): ${result.ok ? '' : result.explanation}`);
  },
);

// Goal: when two of three members are lost for good, `slipway server --force-new-cluster`
// restarts the third as a one-node cluster that keeps every acknowledged write, takes new ones
// and can be grown again with `member add`; on an empty data directory the flag is refused.
// Method: three `slipway server` processes on loopback (small --snapshot-entries, so the
// survivor restarts from a snapshot plus a log tail) take writes; two are SIGKILLed and their
// data directories deleted; the third is SIGKILLed and restarted with --force-new-cluster.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ClusterClient } from '../../src/cli/client.js';
import { nextPort, ProcessCluster, runSlipway } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

let cluster: ProcessCluster;

before(async () => {
  cluster = new ProcessCluster(3, ['--snapshot-entries', '200']);
  cluster.startAll();
  await cluster.waitForLeader();
});
after(async () => {
  await cluster.destroy();
});

test('--force-new-cluster on an empty data directory is refused', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'slipway-fnc-'));
  try {
    const r = await runSlipway([
      'server',
      '--id',
      'x1',
      '--data-dir',
      join(dir, 'x1'),
      '--raft-addr',
      `127.0.0.1:${nextPort()}`,
      '--api-addr',
      `127.0.0.1:${nextPort()}`,
      '--insecure',
      '--force-new-cluster',
    ]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--force-new-cluster restarts an existing member, but .* holds no raft log/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('lose two of three for good, recover from the third, carry on and grow again', async () => {
  const client = new ClusterClient(cluster.apiAddrs(), 5000);
  const acked: string[] = [];
  try {
    const writers = Array.from({ length: 3 }, async (_, w) => {
      for (let i = 0; i < 250; i++) {
        const key = `k/w${w}/${String(i).padStart(4, '0')}`;
        await client.call('put', { key, value: Buffer.from(`v-${key}`) });
        acked.push(key);
      }
    });
    await Promise.all(writers);
  } finally {
    client.close();
  }
  const leader = await cluster.waitForLeader();
  // The survivor is a follower: what the leader acknowledged must have reached it through the
  // log, not be served from the leader's own state.
  const survivor = cluster.nodes.find((n) => n !== leader)!;
  const lost = cluster.nodes.filter((n) => n !== survivor);
  for (const n of lost) {
    await cluster.kill(n);
    rmSync(n.dataDir, { recursive: true, force: true });
  }
  await cluster.kill(survivor);
  cluster.nodeArgs.set(survivor.id, ['--force-new-cluster']);
  cluster.start(survivor);
  await waitFor(
    `${survivor.id} to lead a one-node cluster`,
    async () => {
      const st = await cluster.status(survivor);
      return st !== null && st.leader === survivor.id && st.members.length === 1;
    },
    30_000,
    100,
  );

  const one = new ClusterClient([survivor.apiAddr], 10_000);
  try {
    const kvs = (await one.call('range', { prefix: 'k/', limit: 0, local: false })).kvs;
    const present = new Map(kvs.map((kv) => [kv.key, kv.value.toString()]));
    for (const key of acked) assert.equal(present.get(key), `v-${key}`, `${key} is missing`);
    await one.call('put', { key: 'after/recovery', value: Buffer.from('yes') });

    // Grow again: a lost member's id and addresses, on a new empty data directory, joins.
    const joiner = lost[0]!;
    cluster.nodeArgs.set(joiner.id, ['--join']);
    cluster.start(joiner);
    await one.call('memberAdd', {
      id: joiner.id,
      raftAddr: joiner.raftAddr,
      apiAddr: joiner.apiAddr,
      learner: false,
    });
    const members = (await one.call('memberList', { local: false })).members;
    assert.deepEqual(members.map((m) => m.id).sort(), [joiner.id, survivor.id].sort());
    await one.call('put', { key: 'after/grow', value: Buffer.from('yes') });
    const local = new ClusterClient([joiner.apiAddr], 5000);
    try {
      await waitFor(
        `${joiner.id} to hold the recovered state`,
        async () => {
          const got = await local.call('get', { key: 'after/grow', local: true }).catch(() => null);
          return got?.found === true;
        },
        30_000,
        100,
      );
      const theirs = (await local.call('range', { prefix: 'k/', limit: 0, local: true })).kvs;
      assert.equal(theirs.length, kvs.length);
    } finally {
      local.close();
    }

    // The flag left on would drop the member just added: the node refuses to start with it.
    await cluster.kill(survivor);
    // It exits by itself: its refusal is counted.
    cluster.coverage = true;
    cluster.start(survivor);
    const proc = survivor.proc!;
    const code = await new Promise<number | null>((resolve) => {
      if (proc.exitCode !== null) resolve(proc.exitCode);
      else proc.once('exit', (c) => resolve(c));
    });
    survivor.proc = null;
    assert.equal(code, 2);
    assert.match(
      readFileSync(join(cluster.dir, `${survivor.id}.log`), 'utf8'),
      /--force-new-cluster was already applied to .*start the node without it/,
    );
    cluster.nodeArgs.set(survivor.id, []);
    cluster.start(survivor);
    await waitFor(
      'the two members to agree on a leader again',
      async () => {
        const sts = await Promise.all([survivor, joiner].map((n) => cluster.status(n)));
        return sts.every((st) => st !== null && st.leader !== '' && st.members.length === 2);
      },
      30_000,
      100,
    );
  } finally {
    one.close();
  }
});

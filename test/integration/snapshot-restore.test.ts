// Goal: `slipway snapshot save` takes a consistent backup of a cluster under load, and
// `slipway snapshot restore` seeds a new cluster from it that holds every write acknowledged
// before the save began, agrees on its state on every member, and takes new writes.
// Method: three `slipway server` processes on loopback (small --snapshot-entries, so the log is
// compacted while the load runs); writers put unique keys in a bounded loop through the CLI's
// client while `snapshot save` runs through a follower (which relays the leader's stream) and
// then again through the leader. The file is restored into three new data directories with new
// ports and started as a new cluster. Bad paths, an existing file without --force, a corrupt or
// truncated file and a non-empty data directory are refused with a clear message and leave
// nothing behind.
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ClusterClient } from '../../src/cli/client.js';
import { ProcessCluster, runSlipway, type ProcNode } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

let source: ProcessCluster;
let restored: ProcessCluster | undefined;

before(async () => {
  source = new ProcessCluster(3, ['--snapshot-entries', '200']);
  source.startAll();
  await source.waitForLeader();
});
after(async () => {
  await restored?.destroy();
  await source.destroy();
});

/** Writers putting unique keys until stopped (at most `perWriter` each); acked keys in order. */
function startLoad(
  addrs: string[],
  writers: number,
  perWriter: number,
): { acked: string[]; stop: () => Promise<number> } {
  const acked: string[] = [];
  let stopped = false;
  let attempted = 0;
  const runs = Array.from({ length: writers }, async (_, w) => {
    const client = new ClusterClient(
      [...addrs.slice(w % addrs.length), ...addrs.slice(0, w % addrs.length)],
      5000,
    );
    try {
      for (let i = 0; i < perWriter && !stopped; i++) {
        const key = `load/w${w}/${String(i).padStart(5, '0')}`;
        attempted++;
        try {
          await client.call('put', { key, value: Buffer.from(`v-${key}`) });
          acked.push(key);
        } catch {
          // An unknown outcome: may or may not be in the snapshot.
        }
      }
    } finally {
      client.close();
    }
  });
  return {
    acked,
    stop: async () => {
      stopped = true;
      await Promise.all(runs);
      return attempted;
    },
  };
}

async function followerOf(cluster: ProcessCluster): Promise<{ leader: ProcNode; follower: ProcNode }> {
  const leader = await cluster.waitForLeader();
  const follower = cluster.nodes.find((n) => n !== leader);
  assert.ok(follower !== undefined);
  return { leader, follower };
}

function noLeftovers(dir: string): void {
  assert.deepEqual(
    readdirSync(dir).filter((f) => f.includes('.partial')),
    [],
    'no temporary file is left behind',
  );
}

test('save under load, restore into a new 3-node cluster: every acknowledged write is there', async () => {
  const dir = join(source.dir, 'backups');
  mkdirSync(dir);
  const file = join(dir, 'state.snap');
  const load = startLoad(source.apiAddrs(), 3, 4_000);
  // Let the load build up some state (and snapshots of the log) first.
  await waitFor('600 writes acknowledged under load', () => load.acked.length >= 600, 60_000, 20);
  const { leader, follower } = await followerOf(source);
  const ackedBeforeSave = [...load.acked];
  const saved = await runSlipway(['--server', follower.apiAddr, '-o', 'json', 'snapshot', 'save', file]);
  const ackedDuringSave = load.acked.length;
  assert.equal(saved.code, 0, saved.stderr);
  const doc = JSON.parse(saved.stdout) as { index: number; term: number; bytes: number; sha256: string };
  assert.ok(doc.index > 0 && doc.term > 0 && doc.bytes > 0, saved.stdout);
  assert.ok(ackedDuringSave > ackedBeforeSave.length, 'the load went on while the snapshot was saved');
  noLeftovers(dir);

  // The header line names what the file holds.
  const raw = readFileSync(file);
  const lines = raw.toString('latin1').split('\n', 2);
  assert.equal(lines[0], 'SLIPWAY-SNAPSHOT');
  const header = JSON.parse(lines[1] ?? '') as Record<string, unknown>;
  assert.equal(header['format'], 1);
  assert.equal(header['index'], doc.index);
  assert.equal(header['sha256'], doc.sha256);
  assert.deepEqual((header['voters'] as { id: string }[]).map((v) => v.id).sort(), ['n1', 'n2', 'n3']);

  // An existing file needs --force; a missing directory is a clear error.
  const again = await runSlipway(['--server', leader.apiAddr, 'snapshot', 'save', file]);
  assert.equal(again.code, 2);
  assert.match(again.stderr, /exists; pass --force/);
  assert.ok(readFileSync(file).equals(raw), 'the refused save left the file as it was');
  const nowhere = await runSlipway([
    '--server',
    leader.apiAddr,
    'snapshot',
    'save',
    join(dir, 'no/such/dir/x.snap'),
  ]);
  assert.equal(nowhere.code, 2);
  assert.match(nowhere.stderr, /is not a directory/);
  const forced = await runSlipway([
    '--server',
    leader.apiAddr,
    'snapshot',
    'save',
    '--force',
    join(dir, 'second.snap'),
  ]);
  assert.equal(forced.code, 0, forced.stderr);
  noLeftovers(dir);
  const attempted = await load.stop();

  // Files that are not whole are refused before anything is written.
  const corrupt = join(dir, 'corrupt.snap');
  const flipped = Buffer.from(raw);
  flipped[flipped.length - 10] = (flipped[flipped.length - 10] ?? 0) ^ 0xff;
  writeFileSync(corrupt, flipped);
  const truncated = join(dir, 'truncated.snap');
  writeFileSync(truncated, raw.subarray(0, raw.length - 100));
  const scratch = join(dir, 'scratch');
  for (const [bad, why] of [
    [corrupt, /checksum mismatch/],
    [truncated, /truncated/],
    [join(dir, 'missing.snap'), /cannot read/],
  ] as const) {
    const r = await runSlipway([
      'snapshot',
      'restore',
      bad,
      '--data-dir',
      scratch,
      '--id',
      'n1',
      '--peers',
      'n1=127.0.0.1:1',
    ]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, why);
  }
  assert.deepEqual(readdirSync(dir).includes('scratch'), false, 'a refused restore writes nothing');

  // A new cluster on new ports, each member seeded from the same file with the same --peers.
  const target = new ProcessCluster(3);
  restored = target;
  for (const n of target.nodes) {
    const r = await runSlipway([
      'snapshot',
      'restore',
      file,
      '--data-dir',
      n.dataDir,
      '--id',
      n.id,
      '--peers',
      target.peers(),
    ]);
    assert.equal(r.code, 0, r.stderr);
  }
  const full = await runSlipway([
    'snapshot',
    'restore',
    file,
    '--data-dir',
    target.nodes[0]!.dataDir,
    '--id',
    'n1',
    '--peers',
    target.peers(),
  ]);
  assert.equal(full.code, 2);
  assert.match(full.stderr, /not empty/);
  target.startAll();
  await target.waitForLeader(30_000);

  const client = new ClusterClient(target.apiAddrs(), 10_000);
  try {
    const kvs = (await client.call('range', { prefix: 'load/', limit: 0, local: false })).kvs;
    const present = new Map(kvs.map((kv) => [kv.key, kv.value.toString()]));
    for (const key of ackedBeforeSave) assert.equal(present.get(key), `v-${key}`, `${key} is missing`);
    for (const [key, value] of present) assert.equal(value, `v-${key}`);
    assert.ok(present.size <= attempted);
    assert.ok(present.size >= ackedBeforeSave.length);
    // New writes work, and every member ends with the same state.
    await client.call('put', { key: 'after/restore', value: Buffer.from('yes') });
    const st = await client.call('status', {});
    assert.ok(st.commit > doc.index, 'the new cluster carries on from the snapshot index');
    const wanted = JSON.stringify((await client.call('range', { prefix: '', limit: 0, local: false })).kvs);
    for (const n of target.nodes) {
      const local = new ClusterClient([n.apiAddr], 5000);
      try {
        let same = false;
        for (let i = 0; i < 100 && !same; i++) {
          const got = JSON.stringify((await local.call('range', { prefix: '', limit: 0, local: true })).kvs);
          same = got === wanted;
          if (!same) await new Promise((r) => setTimeout(r, 50));
        }
        assert.ok(same, `${n.id} holds the same state`);
      } finally {
        local.close();
      }
    }
  } finally {
    client.close();
  }
});

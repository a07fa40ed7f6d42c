// Goal: no divergence across versions (docs/decisions/0019-version-gates.md). A cluster whose
// voters all run this build raises its effective state version by itself, and `slipway cluster
// version` shows each member's build and that version; `slipway upgrade check` says a node may
// be restarted only while every voter answers. A node that finds a committed entry newer than its
// build stops applying at that entry (its state stays as it was before it), reports why in
// Status, answers NOT_SERVING to health checks, and stops there again after a restart, instead
// of answering the entry with an error the other members did not give. Members at the same
// applied index give the same state digest (Status with digest), and a write changes it. The
// machine lifecycle (docs/decisions/0028) is refused while a voter cannot say it runs this build,
// and once the cluster reaches state version 3 every machine's state is derived from its
// workflows (workflows queued on one machine before it are owned in turn).
// Method: real `slipway server` processes. For the newer entry, a raw raft stream plays the
// leader n2 of a two-member cluster whose other member, n1, is real: it appends a key-value put
// and then a control command written at a state version above this build's, and commits both.
// For the lifecycle's gate, a three-voter cluster runs two nodes first (a quorum, but not every
// voter answers), then the third.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client, credentials, Metadata } from '@grpc/grpc-js';
import { ClusterClient } from '../../src/cli/client.js';
import { HealthClient, HealthCheckResponse_ServingStatus } from '../../src/gen/health.js';
import { KvClient, type StatusResponse } from '../../src/gen/kv.js';
import { RaftService, type StreamAck } from '../../src/gen/raft.js';
import { message, type Entry } from '../../src/raft/core/types.js';
import { encodeMessageFrame } from '../../src/raft/transport/codec.js';
import { encodeCommand } from '../../src/state/store-command.js';
import { stateVersionFleet, stateVersionOfThisBuild } from '../../src/state/versions.js';
import { ProcessCluster, runSlipway, type ProcNode } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

describe('a cluster of this build', () => {
  let cluster: ProcessCluster;
  const cli = (args: string[]) =>
    runSlipway(['--server', cluster.apiAddrs().join(','), '--timeout', '5000', ...args]);

  before(async () => {
    cluster = new ProcessCluster(3);
    cluster.startAll();
    await cluster.waitForLeader();
  });

  after(async () => {
    await cluster.destroy();
  });

  test('raises its cluster version once every voter supports it, and says so', async () => {
    const v = stateVersionOfThisBuild;
    await waitFor(
      `every node to apply cluster version ${v}`,
      async () =>
        (await Promise.all(cluster.nodes.map((n) => cluster.status(n)))).every(
          (s) => s?.clusterVersion === v,
        ),
      20_000,
      100,
    );
    const shown = await cli(['-o', 'json', 'cluster', 'version']);
    assert.equal(shown.code, 0, shown.stderr);
    const doc = JSON.parse(shown.stdout) as {
      clusterVersion: number;
      votersSupport: number;
      members: { member: string; build: string; stateVersion: number; applied: number }[];
    };
    assert.equal(doc.clusterVersion, v);
    assert.equal(doc.votersSupport, v);
    assert.deepEqual(doc.members.map((m) => [m.member, m.build, m.stateVersion, m.applied]).sort(), [
      ['n1', '0.2.0', v, v],
      ['n2', '0.2.0', v, v],
      ['n3', '0.2.0', v, v],
    ]);
    const table = await cli(['cluster', 'version']);
    assert.match(table.stdout, new RegExp(`cluster version: ${v}; every voter supports: ${v}`));
  });

  test('state digests: equal on every member at the same applied index, changed by a write', async () => {
    /** Every member's applied index and digest, once all three answer at the same index. */
    const agreed = async (what: string): Promise<StatusResponse[]> => {
      let seen: StatusResponse[] = [];
      await waitFor(
        what,
        async () => {
          const all = await Promise.all(cluster.nodes.map((n) => cluster.status(n, 5000, true)));
          if (all.some((s) => s === null)) return false;
          seen = all as StatusResponse[];
          return new Set(seen.map((s) => s.applied)).size === 1;
        },
        20_000,
        100,
      );
      return seen;
    };
    const client = new ClusterClient(cluster.apiAddrs(), { timeoutMs: 10_000 });
    const put = (key: string, value: string) =>
      client.call('put', { key, value: Buffer.from(value), session: undefined });
    for (let i = 0; i < 20; i++) await put(`digest-${i}`, `v${i}`);
    const first = await agreed('the members to reach the same applied index after 20 writes');
    for (const s of first) assert.match(s.stateDigest, /^[0-9a-f]{64}$/, s.id);
    assert.equal(new Set(first.map((s) => s.stateDigest)).size, 1, JSON.stringify(first));
    // Without asking, no digest.
    assert.equal((await cluster.status(cluster.nodes[0]!))?.stateDigest, '');

    await put('digest-0', 'changed');
    client.close();
    const second = await agreed('the members to reach the same applied index after one more write');
    assert.ok(second[0]!.applied > first[0]!.applied);
    assert.equal(new Set(second.map((s) => s.stateDigest)).size, 1, JSON.stringify(second));
    assert.notEqual(second[0]!.stateDigest, first[0]!.stateDigest);

    const shown = await cli(['-o', 'json', 'cluster', 'status', '--digest']);
    assert.equal(shown.code, 0, shown.stderr);
    const rows = (JSON.parse(shown.stdout) as { nodes: { node: string; digest: string }[] }).nodes;
    assert.deepEqual(rows.map((r) => r.node).sort(), ['n1', 'n2', 'n3']);
    for (const r of rows) assert.match(r.digest, /^[0-9a-f]{64}$/, r.node);
  });

  test('upgrade check: yes while every voter answers; no, naming it, once one is down', async () => {
    const ok = await cli(['upgrade', 'check', 'n2']);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /n2 may be restarted now/);
    const n3 = cluster.nodes[2]!;
    await cluster.kill(n3);
    const no = await cli(['upgrade', 'check', 'n2']);
    assert.equal(no.code, 1, no.stdout + no.stderr);
    assert.match(no.stdout, /NO +voter\(s\) not answering: n3/);
    assert.match(no.stdout, /wait: n2 should not be restarted yet/);
  });
});

describe('the machine lifecycle behind its gate (state version 3)', () => {
  let cluster: ProcessCluster;
  const cli = (args: string[]) =>
    runSlipway(['--server', cluster.apiAddrs().join(','), '--timeout', '10000', ...args]);

  before(async () => {
    // Two of three voters: a quorum, but the third cannot say it supports version 3 (nor 2), so
    // the cluster stays at version 1 until it starts.
    cluster = new ProcessCluster(3);
    cluster.start(cluster.nodes[0]!);
    cluster.start(cluster.nodes[1]!);
    await cluster.waitForLeader();
  });

  after(async () => {
    await cluster.destroy();
  });

  test('refused until every voter runs this build; then each machine is adopted from its workflows', async () => {
    const template = join(cluster.dir, 'gate.yaml');
    writeFileSync(
      template,
      'version: "0.1"\nname: gate\nglobal_timeout: 600\ntasks:\n  - name: os\n    worker: "{{ hardware.id }}"\n' +
        '    actions:\n      - name: install\n        command: ["true"]\n        timeout: 60\n',
    );
    const ok = async (args: string[]): Promise<string> => {
      const r = await cli(args);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      return r.stdout.trim();
    };
    await ok(['template', 'create', '-f', template]);
    await ok(['hardware', 'create', '--id', 'm1', '--mac', '02:00:00:00:0a:01', '--ip', '10.70.0.1/24']);
    await ok(['hardware', 'create', '--id', 'm2', '--mac', '02:00:00:00:0a:02', '--ip', '10.70.0.2/24']);
    // Below version 3 a machine may still queue workflows, as builds of version 2 let it.
    const first = await ok(['workflow', 'create', '--template', 'gate', '--hardware', 'm1']);
    await ok(['workflow', 'create', '--template', 'gate', '--hardware', 'm1']);
    for (const args of [
      ['hardware', 'accept', 'm2', '--reason', 'racked'],
      ['hardware', 'label', 'm2', 'rack=a'],
      ['hardware', 'list', '--state', 'ready'],
    ]) {
      const r = await cli(args);
      assert.equal(r.code, 1, `${args.join(' ')} below version 3: ${r.stdout}${r.stderr}`);
      assert.match(
        r.stderr,
        new RegExp(`needs cluster version ${stateVersionFleet}, and the cluster runs at version 1`),
      );
    }
    assert.equal((await cluster.status(cluster.nodes[0]!))?.clusterVersion, 1);

    cluster.start(cluster.nodes[2]!);
    for (const n of cluster.nodes) await cluster.waitForClusterVersion(n, stateVersionFleet, 30_000);
    const m1 = JSON.parse(await ok(['-o', 'json', 'hardware', 'get', 'm1'])) as {
      lifecycle: { state: string; owner: string };
    };
    assert.deepEqual([m1.lifecycle.state, m1.lifecycle.owner], ['provisioning', first]);
    const history = JSON.parse(await ok(['-o', 'json', 'hardware', 'history', 'm1'])) as {
      events: { trigger: string; by: string; to: string }[];
    };
    assert.deepEqual(
      history.events.map((e) => [e.trigger, e.by, e.to]),
      [['adopt', `upgrade to state version ${stateVersionFleet}`, 'provisioning']],
    );
    await ok(['hardware', 'accept', 'm2', '--reason', 'racked']);
    assert.match(await ok(['hardware', 'list', '--state', 'ready']), /^m2 .* ready/m);
    const taken = await cli(['workflow', 'create', '--template', 'gate', '--hardware', 'm1']);
    assert.equal(taken.code, 1, taken.stderr);
    assert.match(taken.stderr, new RegExp(`owned by workflow "${first}": one workflow at a time`));
  });
});

describe('a committed entry from a newer build', () => {
  let cluster: ProcessCluster;
  let n1: ProcNode;
  let fakeLeader: Client | undefined;

  const put = encodeCommand({
    type: 'put',
    stampMs: 1_000,
    ns: 'kv',
    key: 'before',
    value: Buffer.from('kept'),
  });
  const tooNew = encodeCommand({
    type: 'control',
    stampMs: 1_001,
    command: { type: 'cluster.version', version: stateVersionOfThisBuild + 1 },
  });

  /** Plays n2, leader of term 5: appends `entries` after n1's bootstrap entry and commits them. */
  async function appendAsLeader(entries: Entry[]): Promise<void> {
    fakeLeader = new Client(n1.raftAddr, credentials.createInsecure());
    const md = new Metadata();
    md.set('x-raft-from', 'n2');
    const call = fakeLeader.makeBidiStreamRequest(
      RaftService.stream.path,
      (frames: Buffer) => frames,
      RaftService.stream.responseDeserialize,
      md,
      {},
    );
    call.on('error', () => undefined);
    await new Promise<void>((resolve) => {
      call.once('data', (_ack: StreamAck) => resolve());
    });
    const last = entries[entries.length - 1]!.index;
    call.write(
      Buffer.from(
        encodeMessageFrame(
          message({
            type: 'app',
            from: 'n2',
            to: 'n1',
            term: 5,
            index: 1,
            logTerm: 1,
            commit: last,
            entries,
          }),
        ),
      ),
    );
  }

  /** n1's Status once it says it stopped applying. */
  async function stoppedStatus(what: string): Promise<StatusResponse> {
    let seen: StatusResponse | null = null;
    await waitFor(
      what,
      async () => {
        seen = await cluster.status(n1);
        return seen !== null && seen.stopped !== '';
      },
      20_000,
      100,
    );
    return seen!;
  }

  before(() => {
    cluster = new ProcessCluster(2);
    n1 = cluster.nodes[0]!;
    cluster.start(n1);
  });

  after(async () => {
    fakeLeader?.close();
    await cluster.destroy();
  });

  test('stops applying at it, says why, and stays stopped there after a restart', async () => {
    await waitFor('n1 to answer', async () => (await cluster.status(n1)) !== null, 20_000, 100);
    await appendAsLeader([
      { term: 5, index: 2, type: 'normal', data: put },
      { term: 5, index: 3, type: 'normal', data: tooNew },
    ]);
    const stopped = await stoppedStatus('n1 to report that it stopped');
    assert.ok(
      stopped.stopped.includes(
        `needs state version ${stateVersionOfThisBuild + 1}, but this build (0.2.0) applies up to ${stateVersionOfThisBuild}: run a newer build`,
      ),
      stopped.stopped,
    );
    assert.equal(stopped.applied, 2, 'the put before it was applied, the newer entry was not');
    assert.match(
      readFileSync(join(cluster.dir, 'n1.log'), 'utf8'),
      /entry 3 cannot be applied; this node stops applying/,
    );
    assert.equal(await servingStatus(n1.apiAddr), HealthCheckResponse_ServingStatus.NOT_SERVING);
    assert.equal(await localGet(n1.apiAddr, 'before'), 'kept');

    fakeLeader?.close();
    fakeLeader = undefined;
    await cluster.kill(n1);
    cluster.start(n1);
    const again = await stoppedStatus('n1 to stop at the same entry after a restart');
    assert.equal(again.applied, 2);
    assert.ok(again.stopped.includes(`needs state version ${stateVersionOfThisBuild + 1}`), again.stopped);
  });
});

async function servingStatus(addr: string): Promise<number> {
  const c = new HealthClient(addr, credentials.createInsecure());
  try {
    return await new Promise<number>((resolve, reject) => {
      c.check({ service: '' }, new Metadata(), { deadline: Date.now() + 3000 }, (err, res) => {
        if (err !== null) reject(err);
        else resolve(res.status);
      });
    });
  } finally {
    c.close();
  }
}

async function localGet(addr: string, key: string): Promise<string> {
  const c = new KvClient(addr, credentials.createInsecure());
  try {
    return await new Promise<string>((resolve, reject) => {
      c.get({ key, local: true }, new Metadata(), { deadline: Date.now() + 3000 }, (err, res) => {
        if (err !== null) reject(err);
        else resolve(Buffer.from(res.value).toString());
      });
    });
  } finally {
    c.close();
  }
}

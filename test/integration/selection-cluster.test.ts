// Goal: selection on a real cluster with the CLI (docs/decisions/0030-allocation-at-apply.md). An
// operator labels machines; `hardware list --selector` (with and without --state) shows the ones
// the terms select, filtered by the cluster; a selector that does not parse exits 2 pointing at the
// term with a caret; `hardware explain` says for each machine the first term it fails and why, or
// that it matches but is not ready, in a table and in JSON. Two `workflow create --selector` sent at
// once through different nodes, for a selector that matches exactly two ready machines, get one
// machine each (provisioning, owned, the selector in the machine's history and the workflow); a
// third is refused with exit 1 naming how many matched but were not ready and pointing at explain.
// Method: 3 real `slipway server` processes on loopback (plaintext, no tokens), the real CLI.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stateVersionFleet } from '../../src/state/versions.js';
import { ProcessCluster } from '../support/process-cluster.js';
import { ClusterCli } from '../support/cluster-cli.js';

let cluster: ProcessCluster;
const c = new ClusterCli(() => cluster);
const cli = (args: readonly string[], servers?: readonly string[]): ReturnType<ClusterCli['cli']> =>
  c.cli(args, servers);
const ok = (args: readonly string[], servers?: readonly string[]): Promise<string> => c.ok(args, servers);

interface Explained {
  selector: string;
  total: number;
  selected: number;
  notReady: number;
  failing: number;
  machines: { id: string; state: string; verdict: string; term: string; reason: string }[];
}

async function explain(selector: string): Promise<Explained> {
  return JSON.parse(await ok(['-o', 'json', 'hardware', 'explain', selector])) as Explained;
}

async function listed(args: readonly string[]): Promise<string[]> {
  const doc = JSON.parse(await ok(['-o', 'json', 'hardware', 'list', ...args])) as {
    hardware: { id: string }[];
  };
  return doc.hardware.map((h) => h.id);
}

const selector = 'rack=a,!gpu';

before(async () => {
  cluster = new ProcessCluster(3);
  cluster.startAll();
  await cluster.waitForLeader();
  for (const n of cluster.nodes) await cluster.waitForClusterVersion(n, stateVersionFleet, 30_000);
  const template = join(cluster.dir, 'os.yaml');
  writeFileSync(
    template,
    'version: "0.1"\nname: os\nglobal_timeout: 600\ntasks:\n  - name: os\n    worker: "{{ hardware.id }}"\n' +
      '    actions:\n      - name: install\n        command: ["true"]\n        timeout: 60\n',
  );
  await ok(['template', 'create', '-f', template]);
  // m1, m2: rack a, ready. m3: rack b. m4: rack a with a GPU. m5: rack a, never accepted.
  const labels: Record<string, string[]> = {
    m1: ['rack=a'],
    m2: ['rack=a'],
    m3: ['rack=b'],
    m4: ['rack=a', 'gpu=true'],
    m5: ['rack=a'],
  };
  for (const [n, [id, set]] of Object.entries(labels).entries()) {
    await ok([
      'hardware',
      'create',
      '--id',
      id,
      '--mac',
      `02:00:00:00:0c:0${n + 1}`,
      '--ip',
      `10.72.0.${n + 1}/24`,
    ]);
    await ok(['hardware', 'label', id, ...set]);
    if (id !== 'm5') await ok(['hardware', 'accept', id, '--reason', 'racked']);
  }
});

after(async () => {
  await c.stopWorkers();
  await cluster.destroy();
});

const startWorker = (id: string): Promise<void> => c.startWorker(id);

interface WorkflowDoc {
  state: string;
  hardwareId: string;
  onFailure: string;
  attempts: number;
  machinesTried: string[];
  gaveUp: string;
}

describe('selection with the CLI', () => {
  test('hardware list --selector filters on the cluster, with --state too; a bad one is pointed at', async () => {
    assert.deepEqual(await listed(['--selector', selector]), ['m1', 'm2', 'm5']);
    assert.deepEqual(await listed(['--selector', selector, '--state', 'ready']), ['m1', 'm2']);
    assert.deepEqual(await listed(['--selector', 'rack in (b),arch=x86_64']), ['m3']);
    const table = await ok(['hardware', 'list', '--selector', 'gpu']);
    assert.match(table, /^m4 /m);
    assert.doesNotMatch(table, /^m1 /m);
    const bad = await cli(['hardware', 'list', '--selector', 'rack=a,memory>=64Gx']);
    assert.equal(bad.code, 2, bad.stderr);
    const lines = bad.stderr.split('\n');
    const at = lines.findIndex((l) => /memory>=64Gx: unknown unit "Gx" at column 16/.test(l));
    assert.ok(at >= 0, bad.stderr);
    assert.equal(lines[at + 1], '  rack=a,memory>=64Gx');
    assert.equal(lines[at + 2], `  ${' '.repeat(15)}^`);
  });

  test('hardware explain names the first term each machine fails, or why it is not ready', async () => {
    const doc = await explain(selector);
    assert.deepEqual(
      [doc.selector, doc.total, doc.selected, doc.notReady, doc.failing],
      [selector, 5, 2, 1, 2],
    );
    const by = new Map(doc.machines.map((m) => [m.id, m]));
    assert.deepEqual([by.get('m1')?.verdict, by.get('m2')?.verdict], ['selected', 'selected']);
    assert.deepEqual([by.get('m3')?.term, by.get('m3')?.reason], ['rack=a', 'has rack=b']);
    assert.deepEqual([by.get('m4')?.term, by.get('m4')?.reason], ['!gpu', 'has gpu=true']);
    assert.deepEqual(
      [by.get('m5')?.verdict, by.get('m5')?.reason],
      ['not-ready', 'not ready: state enrolled'],
    );
    const facts = await explain('rack=a,memory>=64Gi');
    assert.match(facts.machines.find((m) => m.id === 'm1')?.reason ?? '', /no inventory yet/);
    const table = await ok(['hardware', 'explain', selector]);
    assert.match(table, /^m3 +ready +fails +rack=a +has rack=b$/m);
    assert.match(
      table,
      /^selector rack=a,!gpu: 2 selected, 1 match but are not ready, 2 fail a term, of 5$/m,
    );
    const bad = await cli(['hardware', 'explain', 'rack in (a']);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /column \d+/);
  });

  test('two allocations at once get the two ready machines; a third is refused clearly', async () => {
    const addrs = cluster.apiAddrs();
    const create = (server: string): Promise<string> =>
      ok(['-o', 'json', 'workflow', 'create', '--template', 'os', '--selector', selector], [server]);
    const made = (await Promise.all([create(addrs[0]!), create(addrs[1]!)])).map(
      (out) => JSON.parse(out) as { id: string; hardwareId: string },
    );
    assert.deepEqual(made.map((w) => w.hardwareId).sort(), ['m1', 'm2'], 'one machine each');
    for (const wf of made) {
      const hw = JSON.parse(await ok(['-o', 'json', 'hardware', 'get', wf.hardwareId])) as {
        lifecycle: { state: string; owner: string; reason: string };
      };
      assert.deepEqual([hw.lifecycle.state, hw.lifecycle.owner], ['provisioning', wf.id]);
      assert.match(hw.lifecycle.reason, /allocated by selector rack=a,!gpu/);
      const got = JSON.parse(await ok(['-o', 'json', 'workflow', 'get', wf.id])) as { selector: string };
      assert.equal(got.selector, selector);
    }
    const third = await cli(['workflow', 'create', '--template', 'os', '--selector', selector]);
    assert.equal(third.code, 1, third.stderr);
    assert.match(
      third.stderr,
      /no ready machine matches the selector "rack=a,!gpu": 3 machines match it but are not ready \(1 enrolled, 2 provisioning\); 2 machines fail a term of it, of 5; `slipway hardware explain 'rack=a,!gpu'`/,
    );
    const after = await explain(selector);
    assert.equal(after.selected, 0);
    assert.equal(after.machines.find((m) => m.id === 'm1')?.reason, 'not ready: state provisioning');
    const both = await cli([
      'workflow',
      'create',
      '--template',
      'os',
      '--selector',
      selector,
      '--hardware',
      'm3',
    ]);
    assert.equal(both.code, 2, both.stderr);
    // --hardware keeps working beside it.
    await ok(['workflow', 'create', '--template', 'os', '--hardware', 'm3']);
  });

  test('--on-failure alternate: a failed machine stays failed, the workflow moves on, never twice; a second failure quarantines', async () => {
    // The action fails on b1 and b2 and succeeds on b3: three machines tried in order.
    const template = join(cluster.dir, 'alt.yaml');
    writeFileSync(
      template,
      'version: "0.1"\nname: alt\nglobal_timeout: 120\ntasks:\n  - name: os\n    worker: "{{ hardware.id }}"\n' +
        '    actions:\n      - name: install\n        command: ["sh", "-c", "test {{ hardware.id }} = b3"]\n        timeout: 30\n',
    );
    await ok(['template', 'create', '-f', template]);
    for (const [n, id] of ['b1', 'b2', 'b3'].entries()) {
      await ok([
        'hardware',
        'create',
        '--id',
        id,
        '--mac',
        `02:00:00:00:0d:0${n + 1}`,
        '--ip',
        `10.73.0.${n + 1}/24`,
      ]);
      await ok(['hardware', 'label', id, 'pool=alt']);
      await ok(['hardware', 'accept', id, '--reason', 'racked']);
      await startWorker(id);
    }
    const bad = await cli([
      'workflow',
      'create',
      '--template',
      'alt',
      '--hardware',
      'b1',
      '--on-failure',
      'alternate',
    ]);
    assert.equal(bad.code, 2, bad.stderr);
    const id = (
      await ok([
        'workflow',
        'create',
        '--template',
        'alt',
        '--selector',
        'pool=alt',
        '--on-failure',
        'alternate',
        '--attempts',
        '3',
      ])
    ).trim();
    // One `workflow wait` (it follows the workflow's events to its end) instead of a CLI run per
    // poll: it ends once, on the third machine, not at each machine's failure.
    const waited = await cli(['workflow', 'wait', id]);
    assert.equal(
      waited.code,
      0,
      `the workflow to succeed on its third machine: ${waited.stdout}${waited.stderr}`,
    );
    const doc = JSON.parse(await ok(['-o', 'json', 'workflow', 'get', id])) as WorkflowDoc;
    assert.deepEqual(
      [doc.onFailure, doc.attempts, doc.machinesTried, doc.hardwareId],
      ['alternate', 3, ['b1', 'b2', 'b3'], 'b3'],
    );
    const states = async (hw: string): Promise<{ state: string; reason: string; step: string }> =>
      (
        JSON.parse(await ok(['-o', 'json', 'hardware', 'get', hw])) as {
          lifecycle: { state: string; reason: string; step: string };
        }
      ).lifecycle;
    for (const hw of ['b1', 'b2']) {
      const lc = await states(hw);
      assert.deepEqual([lc.state, lc.step], ['failed', 'os/install']);
      assert.match(lc.reason, new RegExp(`workflow ${id} failed`));
    }
    assert.equal((await states('b3')).state, 'deployed');
    const table = await ok(['workflow', 'get', id]);
    assert.match(table, /on failure: alternate, machines tried 3 of 3: b1 → b2 → b3/);
    const events = (await ok(['-o', 'json', 'workflow', 'events', id]))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { type: string; message: string })
      .filter((e) => e.type === 'workflow.alternate');
    assert.equal(events.length, 2, JSON.stringify(events));
    assert.match(
      events[0]?.message ?? '',
      /^failed on b1 at os\/install: .*; machine 2 of 3: b2, ready and matching pool=alt/,
    );
    assert.match(events[1]?.message ?? '', /^failed on b2 at os\/install: .*; machine 3 of 3: b3/);

    // A second failure of b1 within the policy's window (2 in 24h) quarantines it.
    assert.match(await ok(['hardware', 'quarantine-policy']), /^FAILURES\s+WINDOW\n2\s+24h$/m);
    const again = (await ok(['workflow', 'create', '--template', 'alt', '--hardware', 'b1'])).trim();
    const failed = await cli(['workflow', 'wait', again]);
    assert.equal(failed.code, 1, `the second workflow on b1 to fail: ${failed.stdout}${failed.stderr}`);
    assert.match(failed.stdout, /^FAILED/);
    assert.equal(
      (JSON.parse(await ok(['-o', 'json', 'workflow', 'get', again])) as WorkflowDoc).state,
      'FAILED',
    );
    const quarantined = await states('b1');
    assert.equal(quarantined.state, 'quarantined');
    assert.match(
      quarantined.reason,
      new RegExp(`^failed 2 times within 24h; last: workflow ${again} failed`),
    );
    const failures = async (): Promise<number | undefined> =>
      (
        JSON.parse(await ok(['-o', 'json', 'hardware', 'get', 'b1'])) as {
          lifecycle: { failures?: number[] };
        }
      ).lifecycle.failures?.length;
    assert.equal(await failures(), 2);
    await ok(['hardware', 'accept', 'b1', '--reason', 'cable reseated']);
    assert.deepEqual([(await states('b1')).state, await failures()], ['ready', undefined]);
  });
});

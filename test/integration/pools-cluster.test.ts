// Goal: pools on a real cluster with the CLI (docs/decisions/0035, 0036). A pool of 2 spread by
// rack with 1 spare fills one member per rack and keeps the spare reserved; a member whose
// installation fails is replaced from the spare at once, and a new spare is kept, while the
// failed member runs the pool's release template (the replacement deploys while the release is
// held) and then ends failed with its original reason and step, each step in `hardware history`
// (issue 23 item 5's alternate policy, docs/decisions/0036); a pool larger
// than the matching machines says in `pool get` how many it lacks and why, and is not given the
// other pool's spare; `pool taint` replaces both members through the release template, the spare
// first, deployed members never seen below size - maxUnavailable, still one per rack; deleting
// the pool releases its members through its release template, each going releasing → ready, and
// frees its spare. The times of the replacement and of the taint are printed.
// Method: 3 real `slipway server` processes on loopback (plaintext, no tokens), the real CLI, and
// a real worker agent per machine; every install waits for a file the test makes, so the spare is
// seen kept before the failure.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stateVersionFleet } from '../../src/state/versions.js';
import { ProcessCluster } from '../support/process-cluster.js';
import { ClusterCli } from '../support/cluster-cli.js';
import { waitFor } from '../support/wait.js';

let cluster: ProcessCluster;
const c = new ClusterCli(() => cluster);
const cli = (args: readonly string[]): ReturnType<ClusterCli['cli']> => c.cli(args);
const ok = (args: readonly string[]): Promise<string> => c.ok(args);

interface PoolDoc {
  size: number;
  deployed: number;
  provisioning: number;
  sparesReady: number;
  failed: number;
  lacking: number;
  why: string;
  deleting: boolean;
  spread: { value: string; members: number; available: number }[];
  members: { id: string; state: string; spare: boolean; tainted: boolean; spreadValue: string }[];
}

async function pool(name: string): Promise<PoolDoc> {
  return JSON.parse(await ok(['-o', 'json', 'pool', 'get', name])) as PoolDoc;
}

const memberIds = (p: PoolDoc, spare: boolean): string[] =>
  p.members.filter((m) => m.spare === spare).map((m) => m.id);

async function lifecycle(
  id: string,
): Promise<{ state: string; spareOf?: string; history: { to: string }[] }> {
  const hw = JSON.parse(await ok(['-o', 'json', 'hardware', 'get', id])) as {
    lifecycle: { state: string; spareOf?: string; history: { to: string }[] };
  };
  return hw.lifecycle;
}

function template(file: string, name: string, command: string): string {
  const path = join(cluster.dir, file);
  writeFileSync(
    path,
    `version: "0.1"\nname: ${name}\nglobal_timeout: 120\ntasks:\n  - name: os\n    worker: "{{ hardware.id }}"\n` +
      `    actions:\n      - name: run\n        command: ["sh", "-c", ${JSON.stringify(command)}]\n        timeout: 60\n`,
  );
  return path;
}

before(async () => {
  cluster = new ProcessCluster(3);
  cluster.startAll();
  await cluster.waitForLeader();
  for (const n of cluster.nodes) await cluster.waitForClusterVersion(n, stateVersionFleet, 30_000);
  const go = join(cluster.dir, 'go');
  // Every install waits for the go file; a1's then fails.
  const install = `while [ ! -e ${go} ]; do sleep 0.1; done; test {{ hardware.id }} != a1`;
  await ok(['template', 'create', '-f', template('web.yaml', 'web', install)]);
  // Every release waits for the wipe file, so the replacement is seen not to wait for a release.
  const wipe = `while [ ! -e ${join(cluster.dir, 'wipe')} ]; do sleep 0.1; done`;
  await ok(['template', 'create', '-f', template('wipe.yaml', 'wipe', wipe)]);
  // a1, a2 in rack a; b1, b2 in rack b.
  for (const [n, id] of ['a1', 'a2', 'b1', 'b2'].entries()) {
    const mac = `02:00:00:00:0e:0${n + 1}`;
    await ok(['hardware', 'create', '--id', id, '--mac', mac, '--ip', `10.74.0.${n + 1}/24`]);
    await ok(['hardware', 'label', id, `rack=${id.slice(0, 1)}`]);
    await ok(['hardware', 'accept', id, '--reason', 'racked']);
    await c.startWorker(id);
  }
});

after(async () => {
  await c.stopWorkers();
  await cluster.destroy();
});

describe('pools with the CLI', () => {
  test('spread by rack with a spare; a failed member replaced from the spare; lacks-why; delete releases', async (t) => {
    const bad = await cli([
      'pool',
      'create',
      'web',
      '--selector',
      'rack',
      '--template',
      'web',
      '--size',
      'x',
    ]);
    assert.equal(bad.code, 2, bad.stderr);
    const unknown = await cli([
      ...['pool', 'create', 'web', '--selector', 'rack', '--template', 'web', '--size', '2'],
      ...['--image', 'nope'],
    ]);
    assert.equal(unknown.code, 2, unknown.stderr);
    assert.match(unknown.stderr, /artifact "nope" is not registered/);
    await ok([
      ...['pool', 'create', 'web', '--selector', 'rack', '--template', 'web', '--size', '2'],
      ...['--spares', '1', '--spread-by', 'rack', '--release-template', 'wipe'],
    ]);
    let p: PoolDoc | undefined;
    await waitFor(
      'two members provisioning, one per rack, and the spare kept',
      async () => {
        p = await pool('web');
        return p.provisioning === 2 && p.sparesReady === 1;
      },
      30_000,
      100,
    );
    assert.deepEqual(memberIds(p as PoolDoc, false), ['a1', 'b1'], 'one per rack');
    assert.deepEqual(memberIds(p as PoolDoc, true), ['a2']);
    assert.equal((await lifecycle('a2')).spareOf, 'web');
    // The spare is the pool's alone: a larger pool gets nothing, and says why.
    await ok(['pool', 'create', 'big', '--selector', 'rack=a', '--template', 'web', '--size', '3']);
    const big = await pool('big');
    assert.deepEqual([big.lacking, big.provisioning], [3, 0]);
    assert.equal(
      big.why,
      '3 of 3 slots cannot be filled: no ready machine matches the selector "rack=a": 2 machines match it but are not ready (1 provisioning, 1 spare); 2 machines fail a term of it, of 4; `slipway hardware explain \'rack=a\'` says why each is left out',
    );
    assert.match(await ok(['pool', 'get', 'big']), /^lacks: 3 of 3 slots cannot be filled: /m);
    await ok(['pool', 'delete', 'big']);

    writeFileSync(join(cluster.dir, 'go'), '');
    const installed = Date.now();
    await waitFor(
      'a1 failed and replaced from the spare, both members deployed, a new spare kept',
      async () => {
        p = await pool('web');
        return p.deployed === 2 && p.sparesReady === 1;
      },
      60_000,
      200,
    );
    t.diagnostic(
      `installs let go, to both members deployed again (a1 replaced by its spare): ${Date.now() - installed} ms`,
    );
    assert.deepEqual(
      memberIds(p as PoolDoc, false),
      ['a2', 'b1'],
      'the spare a2 took the failed slot in rack a',
    );
    assert.deepEqual(memberIds(p as PoolDoc, true), ['b2']);
    // The failed a1 is released through the pool's template; its slot was refilled meanwhile.
    assert.equal((await lifecycle('a1')).state, 'releasing', 'the release is held; the slot is refilled');
    writeFileSync(join(cluster.dir, 'wipe'), '');
    await waitFor(
      'a1 released through the wipe, and failed again',
      async () => (await lifecycle('a1')).state === 'failed',
      60_000,
      200,
    );
    const { events: a1 } = JSON.parse(await ok(['-o', 'json', 'hardware', 'history', 'a1'])) as {
      events: { to: string; trigger: string; reason?: string; step?: string; workflowId?: string }[];
    };
    const [failed, releasing, ended] = a1.slice(-3);
    assert.deepEqual(
      [failed?.to, failed?.trigger, releasing?.to, releasing?.trigger, ended?.to, ended?.trigger],
      ['failed', 'fail', 'releasing', 'release', 'failed', 'released'],
    );
    assert.match(releasing?.workflowId ?? '', /^web-release-/);
    const original = (failed?.reason ?? '').replace(
      /; released through pool web's release template next$/,
      '',
    );
    assert.match(original, /^workflow web-\S+ failed: /);
    assert.equal(ended?.reason, `${original} (released through workflow ${releasing?.workflowId ?? ''})`);
    assert.equal(ended?.step, 'os/run');
    assert.equal(ended?.step, failed?.step);
    assert.deepEqual(
      (p as PoolDoc).spread.map((c) => [c.value, c.members]),
      [
        ['a', 1],
        ['b', 1],
      ],
    );
    const table = await ok(['pool', 'get', 'web']);
    assert.match(table, /^a2 +deployed +member +a/m);
    assert.match(table, /^b2 +ready +spare +b/m);

    // Taint: every member replaced through the release template, new machines first (the spare),
    // deployed members never below size - maxUnavailable (2 - 1) as far as the polls see.
    const taintedAt = Date.now();
    const tainted = await ok(['pool', 'taint', 'web']);
    assert.match(tainted, /^a2 +deployed +member +a +yes$/m);
    let least = 2;
    await waitFor(
      'every tainted member replaced',
      async () => {
        p = await pool('web');
        least = Math.min(least, p.deployed);
        return !p.members.some((m) => m.tainted) && p.deployed === 2 && p.provisioning === 0;
      },
      90_000,
      100,
    );
    assert.ok(least >= 1, `deployed fell to ${least}`);
    t.diagnostic(`taint of 2 members, replaced through the release template: ${Date.now() - taintedAt} ms`);
    const members = memberIds(p as PoolDoc, false);
    assert.deepEqual(
      (p as PoolDoc).spread.map((c) => c.members),
      [1, 1],
      `still one per rack: ${members.join(', ')}`,
    );

    // Delete: the members run the release template and go back to ready; the spare is freed.
    const deleted = JSON.parse(await ok(['-o', 'json', 'pool', 'delete', 'web'])) as { deleting: boolean };
    assert.equal(deleted.deleting, true);
    await waitFor(
      'the pool gone, its members released to ready',
      async () => {
        const gone = (await cli(['pool', 'get', 'web'])).code === 2;
        const states = await Promise.all(members.map(async (id) => (await lifecycle(id)).state));
        return gone && states.every((s) => s === 'ready');
      },
      60_000,
      200,
    );
    for (const id of members) {
      const { events } = JSON.parse(await ok(['-o', 'json', 'hardware', 'history', id])) as {
        events: { to: string; trigger: string; workflowId?: string }[];
      };
      const tail = events.slice(-2).map((e) => [e.to, e.trigger, /^web-release-/.test(e.workflowId ?? '')]);
      assert.deepEqual(
        tail,
        [
          ['releasing', 'release', true],
          ['ready', 'released', true],
        ],
        `${id} went through its release template`,
      );
    }
    for (const id of ['a1', 'a2', 'b1', 'b2'])
      assert.equal((await lifecycle(id)).spareOf, undefined, 'spares freed');
    assert.match(await ok(['pool', 'list']), /^\(none\)$/m);
  });

  test('race policy: holds after failed installations in a row, resumes, and the first lane to deploy keeps the slot', async (t) => {
    // Every machine ready again (a1 failed above).
    for (const id of ['a1', 'a2', 'b1', 'b2']) {
      const state = (await lifecycle(id)).state;
      if (state === 'failed') await ok(['hardware', 'release', id, '--reason', 'mended']);
      if (state === 'quarantined') await ok(['hardware', 'accept', id, '--reason', 'mended']);
    }
    await waitFor(
      'all four ready',
      async () =>
        (await Promise.all(['a1', 'a2', 'b1', 'b2'].map(lifecycle))).every((l) => l.state === 'ready'),
      30_000,
      100,
    );
    const failFile = join(cluster.dir, 'fail');
    writeFileSync(failFile, '');
    await ok(['template', 'create', '-f', template('flaky.yaml', 'flaky', `test ! -e ${failFile}`)]);
    const create = ['pool', 'create', 'edge', '--selector', 'rack', '--template', 'flaky', '--size', '1'];
    for (const [flags, why] of [
      [['--on-failure', 'sideways'], /--on-failure must be alternate, retry, race, got "sideways"/],
      [['--attempts', '0'], /--attempts must be 1 to 16, got 0/],
    ] as const) {
      const bad = await cli([...create, ...flags]);
      assert.equal(bad.code, 2, bad.stderr);
      assert.match(bad.stderr, why);
    }
    const startedAt = Date.now();
    await ok([...create, '--on-failure', 'race', '--attempts', '2']);
    let p: (PoolDoc & { held: string; failedInARow: number; onFailure: string }) | undefined;
    await waitFor(
      'both lanes failed and the pool held',
      async () => {
        p = (await pool('edge')) as typeof p;
        return p?.held !== '';
      },
      60_000,
      100,
    );
    t.diagnostic(`race on two machines, both failed, pool held: ${Date.now() - startedAt} ms`);
    assert.deepEqual([p?.onFailure, p?.failedInARow, p?.provisioning, p?.deployed], ['race', 2, 0, 0]);
    assert.match(
      p?.held ?? '',
      /^held: 2 installations failed in a row with none deployed, 2 attempts for its slot; the last on [ab][12]: .*; mend the cause, then `slipway pool resume edge`$/,
    );
    assert.match(await ok(['pool', 'get', 'edge']), /^pool held: 2 installations failed in a row/m);
    assert.match(await ok(['pool', 'list']), /^edge .* held$/m);
    // a1 failed once above: failing again within the window quarantines it.
    const failed = (p as PoolDoc).members
      .filter((m) => m.state === 'failed' || m.state === 'quarantined')
      .map((m) => m.id);
    assert.equal(failed.length, 2, `both lanes failed: ${JSON.stringify(p?.members)}`);
    // Mended: resumed, the slot is raced again on the two machines left; the first to deploy keeps it.
    const { rmSync } = await import('node:fs');
    rmSync(failFile);
    const resumedAt = Date.now();
    await ok(['pool', 'resume', 'edge']);
    await waitFor(
      'one member deployed, the losing lane back to ready',
      async () => {
        p = (await pool('edge')) as typeof p;
        const others = ['a1', 'a2', 'b1', 'b2'].filter((id) => !failed.includes(id));
        const states = await Promise.all(others.map(async (id) => (await lifecycle(id)).state));
        return p?.deployed === 1 && states.includes('ready') && states.includes('deployed');
      },
      60_000,
      100,
    );
    t.diagnostic(`resumed, raced again, one deployed and the other released: ${Date.now() - resumedAt} ms`);
    assert.equal(p?.failedInARow, 0, 'a deployment starts the count afresh');
    const winner = (p as PoolDoc).members.find((m) => m.state === 'deployed')?.id ?? '';
    const { events } = JSON.parse(await ok(['-o', 'json', 'hardware', 'history', winner])) as {
      events: { workflowId?: string }[];
    };
    const lane = events.at(-1)?.workflowId ?? '';
    const wf = JSON.parse(await ok(['-o', 'json', 'workflow', 'get', lane])) as {
      onFailure: string;
      raceOutcome: string;
    };
    assert.deepEqual([wf.onFailure, wf.raceOutcome], ['race', 'won']);
    const resume = await cli(['pool', 'resume', 'edge']);
    assert.equal(resume.code, 0, resume.stderr);
    assert.match(resume.stderr, /pool edge was not held: nothing to resume/);
  });
});

// Goal: the race failure policy on a real cluster with real workers (docs/decisions/0037). One
// `workflow create --selector S --on-failure race` starts the request on two ready machines: the
// request's lane on r1 (its action runs and keeps running), the rival lane on r2 (it waits until
// r1's action is running, then succeeds). The rival wins: `workflow get` names it and its machine
// and lists the machines tried in order; the request's lane is cancelled, its running process
// stopped by its worker (the process's pid stops existing), and r1 released to ready (not failed),
// its history saying it lost the race; r2 is deployed; the decision is a workflow.race event.
// `workflow wait` of the request waits for the race as a whole and names the winner.
// `--on-failure race` (or alternate) with `--hardware` exits 2 saying to give a selector.
// Method: 3 real `slipway server` processes on loopback (plaintext, no tokens), the real CLI, and a
// real `slipway worker` process per machine.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
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

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface WorkflowDoc {
  state: string;
  hardwareId: string;
  onFailure: string;
  machinesTried: string[];
  raceRequest: string;
  raceRival: string;
  raceWinner: string;
  raceWinnerHardwareId: string;
  raceOutcome: string;
}

interface Lifecycle {
  state: string;
  owner?: string;
}

interface MachineEventDoc {
  from?: string;
  to: string;
  trigger: string;
  reason?: string;
}

async function workflow(id: string): Promise<WorkflowDoc> {
  return JSON.parse(await ok(['-o', 'json', 'workflow', 'get', id])) as WorkflowDoc;
}

async function lifecycle(id: string): Promise<Lifecycle> {
  return (JSON.parse(await ok(['-o', 'json', 'hardware', 'get', id])) as { lifecycle: Lifecycle }).lifecycle;
}

before(async () => {
  cluster = new ProcessCluster(3);
  cluster.startAll();
  await cluster.waitForLeader();
  for (const n of cluster.nodes) await cluster.waitForClusterVersion(n, stateVersionFleet, 30_000);
  // On r1 the action records its pid and runs on; on r2 it waits for that, then succeeds.
  const marker = join(cluster.dir, 'r1.pid');
  const script =
    `if test {{ hardware.id }} = r2; then while ! test -s ${marker}; do sleep 0.1; done; exit 0; fi; ` +
    `echo $$ > ${marker}.tmp && mv ${marker}.tmp ${marker}; exec sleep 300`;
  const template = join(cluster.dir, 'race.yaml');
  writeFileSync(
    template,
    'version: "0.1"\nname: race\nglobal_timeout: 600\ntasks:\n  - name: os\n    worker: "{{ hardware.id }}"\n' +
      `    actions:\n      - name: install\n        command: ["sh", "-c", ${JSON.stringify(script)}]\n        timeout: 400\n`,
  );
  await ok(['template', 'create', '-f', template]);
  for (const [n, id] of ['r1', 'r2'].entries()) {
    await ok([
      'hardware',
      'create',
      '--id',
      id,
      '--mac',
      `02:00:00:00:0e:0${n + 1}`,
      '--ip',
      `10.74.0.${n + 1}/24`,
    ]);
    await ok(['hardware', 'label', id, 'pool=race']);
    await ok(['hardware', 'accept', id, '--reason', 'racked']);
    await c.startWorker(id);
  }
});

after(async () => {
  await c.stopWorkers();
  const marker = join(cluster.dir, 'r1.pid');
  if (existsSync(marker)) {
    const pid = Number(readFileSync(marker, 'utf8').trim());
    if (pid > 0 && alive(pid)) process.kill(pid, 'SIGKILL');
  }
  await cluster.destroy();
});

describe('the race policy with the CLI and real workers', () => {
  test('a named machine cannot race or alternate: the CLI says to give a selector', async () => {
    for (const policy of ['race', 'alternate']) {
      const r = await cli([
        'workflow',
        'create',
        '--template',
        'race',
        '--hardware',
        'r1',
        '--on-failure',
        policy,
      ]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, new RegExp(`--on-failure ${policy} needs --selector instead of --hardware r1`));
    }
    assert.equal((await lifecycle('r1')).state, 'ready', 'nothing changed');
  });

  test('keeps the first success, stops the other lane and releases its machine', async () => {
    const id = (
      await ok([
        'workflow',
        'create',
        '--template',
        'race',
        '--selector',
        'pool=race',
        '--on-failure',
        'race',
      ])
    ).trim();
    const rival = `${id}.rival`;
    // `workflow wait` waits for the race as a whole: exit 0, naming the winner.
    const waited = await cli(['workflow', 'wait', id]);
    assert.equal(waited.code, 0, waited.stderr);
    assert.equal(waited.stdout.trim(), `SUCCESS: race won by workflow ${rival} on r2`);
    let doc: WorkflowDoc | undefined;
    await waitFor(
      'the race to be won',
      async () => {
        doc = await workflow(id);
        return doc.raceOutcome === 'won';
      },
      60_000,
      200,
    );
    assert.deepEqual(
      [doc?.onFailure, doc?.machinesTried, doc?.raceWinner, doc?.raceWinnerHardwareId, doc?.raceRival],
      ['race', ['r1', 'r2'], rival, 'r2', rival],
    );
    assert.equal(doc?.state, 'CANCELLED', 'the losing lane');
    assert.equal((await workflow(rival)).state, 'SUCCESS');
    // The loser's action was running: its worker stops the process.
    const pid = Number(readFileSync(join(cluster.dir, 'r1.pid'), 'utf8').trim());
    assert.ok(pid > 0);
    await waitFor('the losing action to be stopped', () => Promise.resolve(!alive(pid)), 30_000, 100);
    const r1 = await lifecycle('r1');
    assert.deepEqual([r1.state, r1.owner], ['ready', undefined]);
    const history = (
      JSON.parse(await ok(['-o', 'json', 'hardware', 'history', 'r1'])) as { events: MachineEventDoc[] }
    ).events;
    assert.deepEqual(
      history.slice(-2).map((e) => [e.from, e.to, e.trigger]),
      [
        ['provisioning', 'releasing', 'release'],
        ['releasing', 'ready', 'released'],
      ],
    );
    assert.match(history.at(-2)?.reason ?? '', new RegExp(`lost the race to workflow ${rival}`));
    assert.equal((await lifecycle('r2')).state, 'deployed');
    const table = await ok(['workflow', 'get', id]);
    assert.match(table, /on failure: race \(rival lane .*\), machines tried 2 of 2: r1 → r2/);
    assert.match(table, new RegExp(`race: won: workflow ${rival.replace('.', '\\.')} on r2`));
    const events = (await ok(['-o', 'json', 'workflow', 'events', id]))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { type: string; message: string });
    const race = events.filter((e) => e.type === 'workflow.race');
    assert.deepEqual(
      race.map((e) => e.message),
      [
        `race started: workflow ${id} on r1, workflow ${rival} on r2, both ready and matching pool=race; at most 2 machines`,
        `race won: workflow ${rival} succeeded first, on r2`,
      ],
    );
    const cancelled = events.find((e) => e.type === 'action.cancelled');
    assert.match(cancelled?.message ?? '', /^lost the race/);
  });
});

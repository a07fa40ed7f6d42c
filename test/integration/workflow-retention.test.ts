// Goal: bounded state end to end (docs/decisions/0020-bounded-state.md). An admin sets the
// workflow retention with `slipway workflow retention` (bad values exit 2 naming the flag); until
// then the default waits out its grace after the upgrade, which `workflow retention` and the
// leader's log say; the leader then removes the finished workflows past it, oldest finished
// first, after writing them to its --workflow-archive as JSON lines with their events; the
// newest stay; the removals are counted on /metrics and the setting is audited. The setting
// survives a restart from a snapshot.
// Method: one real `slipway server` with --workflow-archive FILE and small snapshots; five
// workflows finished one after another by cancelling them; waits on conditions with deadlines.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ClusterClient } from '../../src/cli/client.js';
import type { Workflow, WorkflowEvent } from '../../src/model/records.js';
import { ProcessCluster, runSlipway, type CliResult, type ProcNode } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';
import { allItems } from '../../src/platform/pages.js';

let cluster: ProcessCluster;
let node: ProcNode;
let client: ClusterClient;
let archiveFile: string;

const templateYaml = `version: "0.1"
name: kept
global_timeout: 600
tasks:
  - name: provision
    worker: "{{ hardware.id }}"
    actions:
      - name: one
        command: ["true"]
        timeout: 600
`;

const cli = (args: string[]): Promise<CliResult> =>
  runSlipway(['--server', cluster.apiAddrs().join(','), ...args], { timeoutMs: 30_000 });

async function workflowIds(): Promise<string[]> {
  const workflows = await allItems(
    (token) => client.control('workflowList', { local: false, hardwareId: '', continue: token }),
    (page) => page.workflows,
  );
  return workflows.map((w) => w.id).sort();
}

interface ArchiveLine {
  readonly workflow: Workflow;
  readonly events: readonly WorkflowEvent[];
  readonly archivedMs: number;
  readonly archivedBy: string;
}

function archiveLines(): ArchiveLine[] {
  if (!existsSync(archiveFile)) return [];
  const text = readFileSync(archiveFile, 'utf8');
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as ArchiveLine);
}

before(async () => {
  cluster = new ProcessCluster(1, ['--snapshot-entries', '10']);
  // The node is stopped with SIGTERM once: what it runs on its way out is counted.
  cluster.coverage = true;
  archiveFile = join(cluster.dir, 'finished.jsonl');
  cluster.extraArgs.push('--workflow-archive', archiveFile);
  cluster.startAll();
  node = await cluster.waitForLeader();
  client = new ClusterClient(cluster.apiAddrs(), { timeoutMs: 20_000 });
  // The retention needs state version 2: the leader raises it within seconds of leading.
  await waitFor(
    'the cluster to run at state version 2',
    async () => ((await cluster.status(node))?.clusterVersion ?? 0) >= 2,
    20_000,
    100,
  );
  await client.control('templateCreate', { source: templateYaml, replace: false });
  await client.control('hardwareCreate', {
    documentJson: JSON.stringify({ id: 'hw-1', interfaces: [{ mac: '02:00:00:00:20:01' }] }),
    replace: false,
  });
});

after(async () => {
  client?.close();
  await cluster?.destroy();
});

describe('workflow retention', () => {
  test('bad values exit 2 naming the flag; without flags it shows the defaults and when they start', async () => {
    for (const [args, why] of [
      [['--finished-max', '0'], /--finished-max must be 1 to 100000, got 0/],
      [['--finished-max', 'many'], /--finished-max must be a whole number, got "many"/],
      [['--finished-days', '3651'], /--finished-days must be 0 to 3650, got 3651/],
      [['--keep', '0'], /--keep must be 1 to 100000, got 0/],
      [['--max-age', '3651d'], /--max-age must be at most 3650d, got 3651d/],
      [['--max-age', '36h'], /--max-age must be whole days \(90d, 2160h\), got "36h"/],
      [['--keep', '5', '--finished-max', '6'], /give --keep or --finished-max \(its name before\), not both/],
    ] as const) {
      const res = await cli(['workflow', 'retention', ...args]);
      assert.equal(res.code, 2, res.stderr);
      assert.match(res.stderr, why);
    }
    const shown = await cli(['-o', 'json', 'workflow', 'retention']);
    assert.equal(shown.code, 0, shown.stderr);
    // Nobody set it: the default waits 7 days from when the cluster reached version 2 (moments ago).
    const { defaultStartsAt, ...retention } = JSON.parse(shown.stdout) as Record<string, unknown>;
    assert.deepEqual(retention, { finishedMax: 10_000, finishedDays: 30 });
    const startsMs = Date.parse(String(defaultStartsAt));
    const weekFromNow = Date.now() + 7 * 24 * 3600 * 1000;
    assert.ok(Math.abs(startsMs - weekFromNow) < 120_000, `starts at ${String(defaultStartsAt)}`);
    assert.match(
      shown.stderr,
      /removes nothing before \S+Z .*Set a retention to keep more, or to apply it at once/,
    );
    // The leader says so once in its log, with how to choose.
    await waitFor('the leader to log when the default retention starts', () =>
      readFileSync(join(cluster.dir, `${node.id}.log`), 'utf8').includes(
        `starts to remove finished workflows at ${String(defaultStartsAt)}`,
      ),
    );
  });

  test('the leader archives the finished workflows past the retention, then removes them', async () => {
    const set = await cli(['-o', 'json', 'workflow', 'retention', '--keep', '2']);
    assert.equal(set.code, 0, set.stderr);
    // The flag left out keeps its value; set, it applies at once (no default start any more).
    assert.deepEqual(JSON.parse(set.stdout), { finishedMax: 2, finishedDays: 30 });
    // The names before --keep and --max-age set the same (720h is 30 days).
    const old = await cli([
      '-o',
      'json',
      'workflow',
      'retention',
      '--finished-max',
      '2',
      '--max-age',
      '720h',
    ]);
    assert.deepEqual(JSON.parse(old.stdout), { finishedMax: 2, finishedDays: 30 }, old.stderr);
    const shown = await cli(['-o', 'json', 'workflow', 'retention']);
    assert.deepEqual(JSON.parse(shown.stdout), { finishedMax: 2, finishedDays: 30 });
    assert.equal(shown.stderr, '');
    const ids: string[] = [];
    // One workflow at a time on the machine (invariant 9), each cancelled before the next:
    // finished in this order, so the first three are the oldest finished.
    for (let i = 0; i < 5; i++) {
      const wf = (
        await client.control('workflowCreate', {
          template: 'kept',
          hardwareId: 'hw-1',
          hardwareMap: {},
          netboot: false,
        })
      ).workflow;
      assert.ok(wf !== undefined);
      ids.push(wf.id);
      await client.control('workflowCancel', { id: wf.id });
    }
    const newest = ids.slice(3).sort();
    await waitFor(
      'only the two newest finished workflows to remain',
      async () => {
        const left = await workflowIds();
        return left.length === 2 && left.every((id, i) => id === newest[i]);
      },
      30_000,
      200,
    );
    const lines = archiveLines();
    assert.deepEqual(
      lines.map((l) => l.workflow.id).sort(),
      ids.slice(0, 3).sort(),
      'each removed workflow is archived once',
    );
    for (const line of lines) {
      assert.equal(line.workflow.state, 'CANCELLED');
      assert.ok(line.workflow.finishedMs !== undefined && line.archivedMs >= line.workflow.finishedMs);
      assert.equal(line.archivedBy, node.id);
      assert.deepEqual(
        line.events.map((e) => e.type),
        ['workflow.created', 'workflow.cancelled'],
      );
    }
    // Counted on /metrics, and the setting is in the audit trail (the removals, machinery, are not).
    const metrics = await (await fetch(`http://${node.metricsAddr}/metrics`)).text();
    assert.match(metrics, /^slipway_workflows_collected_total 3$/m);
    assert.match(metrics, /^slipway_workflows_archived_total 3$/m);
    const trail = await client.audit('auditList', {
      user: '',
      kind: '',
      sinceMs: 0,
      untilMs: 0,
      limit: 100,
      continue: '',
      local: false,
    });
    const kinds = trail.entries.map((e) => `${e.kind} ${e.target} ${e.outcome}`);
    assert.ok(kinds.includes('workflow.retention finishedMax=2 finishedDays=30 ok'), kinds.join('\n'));
    assert.ok(!kinds.some((k) => k.startsWith('workflow.gc')), kinds.join('\n'));
  });

  test('the setting survives a restart from a snapshot', async () => {
    await cluster.kill(node, 'SIGTERM');
    cluster.start(node);
    node = await cluster.waitForLeader();
    const shown = await cli(['-o', 'json', 'workflow', 'retention']);
    assert.equal(shown.code, 0, shown.stderr);
    assert.deepEqual(JSON.parse(shown.stdout), { finishedMax: 2, finishedDays: 30 });
    assert.equal((await workflowIds()).length, 2);
    const log = readFileSync(join(cluster.dir, `${node.id}.log`), 'utf8');
    assert.match(log, /took a snapshot and compacted the log/, 'the node restarted from a snapshot');
  });
});

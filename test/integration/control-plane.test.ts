// Goal: workflows keep going, and every action attempt runs exactly once, while provisioner
// nodes die under them; deadlines fire from the replicated state even when the leader dies;
// bad input and bad credentials change nothing.
// Method: 3 real `slipway server` processes with tokens required, 10 real `slipway worker`
// processes (each a machine), 50 workflows of 5 actions, one at a time per machine (a machine has
// one owner, docs/decisions/0028: the next is created once the last succeeded). Each action
// appends a line naming its workflow and action to the machine's file, so the test counts
// executions. One node is
// SIGKILLed while actions run; a real `slipway workflow events --follow` streams through it.
// Writes sent to a follower together reach the leader in one call, each answered on its own.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { ClusterClient } from '../../src/cli/client.js';
import type { WorkflowRecord } from '../../src/gen/control.js';
import type { AttemptRef, ConnectRequest, ConnectResponse } from '../../src/gen/worker.js';
import { WorkerClient } from '../../src/gen/worker.js';
import {
  ProcessCluster,
  runSlipway,
  slipwayBin,
  type CliResult,
  type ProcNode,
} from '../support/process-cluster.js';
import { allItems } from '../../src/platform/pages.js';

const adminToken = 'admin-token-for-the-control-plane-test';
const workerCount = 10;
const workflowsPerWorker = 5;
const actionsPerWorkflow = 5;

const cli = (args: string[], timeoutMs = 60_000): Promise<CliResult> => runSlipway(args, { timeoutMs });

async function waitFor<T>(what: string, deadlineMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

let cluster: ProcessCluster;
let admin: ClusterClient;
/** The node the frozen-node tests froze last, woken a moment before the tests that follow. */
let lastFrozen: ProcNode | undefined;
const workers: ChildProcess[] = [];

function serverList(first: number): string {
  const addrs = cluster.apiAddrs();
  return [...addrs.slice(first), ...addrs.slice(0, first)].join(',');
}

function startWorker(id: string, first: number, token: string): ChildProcess {
  const tokenFile = join(cluster.dir, `${id}.token`);
  writeFileSync(tokenFile, token);
  const log = openSync(join(cluster.dir, `${id}.worker.log`), 'a');
  const p = spawn(
    process.execPath,
    [
      slipwayBin,
      'worker',
      '--id',
      id,
      '--server',
      serverList(first),
      '--token-file',
      tokenFile,
      '--journal-dir',
      join(cluster.dir, 'journal', id),
      '--work-dir',
      cluster.dir,
    ],
    { stdio: ['ignore', log, log] },
  );
  workers.push(p);
  return p;
}

async function stopProcess(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise<void>((r) => p.once('exit', () => r()));
  p.kill('SIGCONT');
  p.kill('SIGKILL');
  await exited;
}

before(async () => {
  cluster = new ProcessCluster(3, []);
  cluster.requireToken(adminToken);
  cluster.startAll();
  await cluster.waitForLeader();
  admin = new ClusterClient(cluster.apiAddrs(), { timeoutMs: 20_000, token: adminToken });
});

// A test that kills nodes may fail before it restarts them; the next one starts whole.
beforeEach(async () => {
  let restarted = false;
  for (const n of cluster.nodes) {
    if (n.proc === null) {
      cluster.start(n);
      restarted = true;
    }
  }
  if (restarted) await cluster.waitForLeader();
});

after(async () => {
  admin.close();
  for (const w of workers) await stopProcess(w);
  await cluster.destroy();
});

function hardwareDoc(i: number): string {
  const mac = `02:00:00:00:00:${i.toString(16).padStart(2, '0')}`;
  return JSON.stringify({ id: `hw-${String(i)}`, interfaces: [{ mac, ip: `10.77.0.${String(10 + i)}/24` }] });
}

const templateYaml = (name: string, actions: string): string => `version: "0.1"
name: ${name}
global_timeout: 600
tasks:
  - name: provision
    worker: "{{ hardware.id }}"
    actions:
${actions}`;

/**
 * Runs workflowsPerWorker five-step workflows on every machine, one at a time: a machine's next
 * is created once its last succeeded. A create whose answer was lost (its node died) is not sent
 * again blindly: the next listing shows whether it was made. Fails on a workflow that failed;
 * returns every workflow once all succeeded.
 */
async function feedInTurn(client: ClusterClient, deadlineMs: number): Promise<WorkflowRecord[]> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const workflows = await allItems(
      (token) => client.control('workflowList', { local: false, hardwareId: '', continue: token }),
      (page) => page.workflows,
    ).catch(() => undefined);
    if (workflows !== undefined) {
      const list = { workflows };
      const states = list.workflows.map((w) => w.state);
      assert.ok(
        !states.some((st) => st === 'FAILED' || st === 'TIMEOUT' || st === 'CANCELLED'),
        states.join(','),
      );
      let done = 0;
      for (let i = 0; i < workerCount; i++) {
        const mine = list.workflows.filter((w) => w.hardwareId === `hw-${String(i)}`);
        if (!mine.every((w) => w.state === 'SUCCESS')) continue;
        if (mine.length === workflowsPerWorker) done++;
        else {
          const req = {
            template: 'five-steps',
            hardwareId: `hw-${String(i)}`,
            hardwareMap: {},
            netboot: false,
          };
          await client.control('workflowCreate', req).catch(() => undefined);
        }
      }
      if (done === workerCount) return list.workflows;
    }
    if (Date.now() > deadline) throw new Error('timed out waiting for every workflow to succeed');
    // Pacing, not synchronization: the next round reads the state again.
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('workflows across node loss', () => {
  test('50 workflows of 5 actions complete, each attempt runs once, events --follow is exact', async () => {
    const outDir = cluster.dir;
    const actions = Array.from(
      { length: actionsPerWorkflow },
      (_, a) => `      - name: step-${String(a + 1)}
        command: ["sh", "-c", "echo \\"$WF step-${String(a + 1)}\\" >> \\"$OUT\\"; sleep 0.2"]
        timeout: 60
        retries: 2
        environment:
          WF: "{{ workflow.id }}"
          OUT: "${outDir}/{{ hardware.id }}.out"`,
    ).join('\n');
    await admin.control('templateCreate', { source: templateYaml('five-steps', actions), replace: false });
    const tokens: string[] = [];
    for (let i = 0; i < workerCount; i++) {
      await admin.control('hardwareCreate', { documentJson: hardwareDoc(i), replace: false });
      tokens.push((await admin.control('hardwareToken', { id: `hw-${String(i)}` })).token);
    }
    // One workflow at a time per machine (invariant 9): each machine's first now, the next ones
    // as the last succeeds (feedInTurn), through the node's death.
    const firsts: WorkflowRecord[] = [];
    for (let i = 0; i < workerCount; i++) {
      const res = await admin.control('workflowCreate', {
        template: 'five-steps',
        hardwareId: `hw-${String(i)}`,
        hardwareMap: {},
        netboot: false,
      });
      assert.ok(res.workflow);
      firsts.push(res.workflow);
    }
    // Worker i starts on node i % 3; the victim serves workers 0, 3, 6 and 9.
    for (let i = 0; i < workerCount; i++) startWorker(`hw-${String(i)}`, i % 3, tokens[i] ?? '');
    const victim = cluster.nodes[0];
    assert.ok(victim);
    const survivors = new ClusterClient(
      cluster.nodes.filter((n) => n !== victim).map((n) => n.apiAddr),
      { timeoutMs: 20_000, token: adminToken },
    );
    const feeding = feedInTurn(survivors, 240_000);
    const followed = firsts[0];
    assert.ok(followed);
    assert.equal(followed.hardwareId, 'hw-0');
    // A real CLI follows hw-0's first workflow, starting at the node that will die.
    const follow = cli(
      [
        '--server',
        serverList(0),
        '--token-file',
        join(cluster.dir, 'admin.token'),
        '-o',
        'json',
        'workflow',
        'events',
        followed.id,
        '--follow',
      ],
      300_000,
    );
    // Kill the victim while hw-0 is in the middle of its workflows.
    const hw0Out = join(outDir, 'hw-0.out');
    await waitFor('hw-0 to run a few actions', 60_000, () =>
      Promise.resolve(
        existsSync(hw0Out) && readFileSync(hw0Out, 'utf8').split('\n').length > 3 ? true : undefined,
      ),
    );
    await cluster.kill(victim);

    try {
      const created = await feeding;
      assert.equal(created.length, workerCount * workflowsPerWorker);
      // Exactly once: every (workflow, action) line appears once in its machine's file.
      for (let i = 0; i < workerCount; i++) {
        const lines = readFileSync(join(outDir, `hw-${String(i)}.out`), 'utf8')
          .trim()
          .split('\n');
        const counts = new Map<string, number>();
        for (const l of lines) counts.set(l, (counts.get(l) ?? 0) + 1);
        const mine = created.filter((w) => w.hardwareId === `hw-${String(i)}`);
        assert.equal(counts.size, mine.length * actionsPerWorkflow, `hw-${String(i)} ran every action`);
        for (const [line, n] of counts)
          assert.equal(n, 1, `"${line}" ran ${String(n)} times on hw-${String(i)}`);
        for (const w of mine) {
          const rec = (await survivors.control('workflowGet', { id: w.id, local: false })).workflow;
          assert.ok(rec);
          for (const a of rec.actions) assert.equal(a.state, 'SUCCESS');
        }
      }
      // The follower saw every event of the workflow once, in order, across the node's death.
      const r = await follow;
      assert.equal(r.code, 0, r.stderr);
      const waited = await cli(
        ['--server', serverList(1), '--token-file', join(cluster.dir, 'admin.token')].concat([
          'workflow',
          'wait',
          followed.id,
        ]),
        60_000,
      );
      assert.deepEqual([waited.code, waited.stdout.trim()], [0, 'SUCCESS'], waited.stderr);
      const seen = r.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { seq: number; type: string });
      const all: number[] = [];
      await survivors.events(followed.id, 0, false, (e) => all.push(e.seq));
      assert.deepEqual(
        seen.map((e) => e.seq),
        all,
        'events --follow delivered exactly the stored events, in order',
      );
      assert.equal(seen.at(-1)?.type, 'workflow.succeeded');
    } finally {
      survivors.close();
    }
  });

  test('deadlines fire from the replicated state when the leader dies', async () => {
    const yaml = templateYaml(
      'too-slow',
      `      - name: hang
        command: ["sleep", "60"]
        timeout: 8`,
    );
    await admin.control('templateCreate', { source: yaml, replace: false });
    await admin.control('hardwareCreate', { documentJson: hardwareDoc(99), replace: false });
    const token = (await admin.control('hardwareToken', { id: 'hw-99' })).token;
    const wf = (
      await admin.control('workflowCreate', {
        template: 'too-slow',
        hardwareId: 'hw-99',
        hardwareMap: {},
        netboot: false,
      })
    ).workflow;
    assert.ok(wf);
    const worker = startWorker('hw-99', 0, token);
    const running = await waitFor('the action to start', 30_000, async () => {
      const rec = (await admin.control('workflowGet', { id: wf.id, local: false })).workflow;
      return rec?.actions[0]?.state === 'RUNNING' ? rec : undefined;
    });
    // The agent would stop the action at its deadline itself; freeze it so only the cluster can.
    worker.kill('SIGSTOP');
    const deadlineMs = running.actions[0]?.deadlineMs ?? 0;
    assert.ok(deadlineMs > Date.now(), 'the deadline is still ahead');
    const leader = await cluster.waitForLeader();
    await cluster.kill(leader);
    const done = await waitFor('the timeout', 30_000, async () => {
      const rec = (await admin.control('workflowGet', { id: wf.id, local: false })).workflow;
      return rec?.state === 'TIMEOUT' ? rec : undefined;
    });
    const action = done.actions[0];
    assert.equal(action?.state, 'TIMEOUT');
    // Within the deadline plus one election (300 ms here) and the scan period, with margin for
    // a loaded 2-core machine.
    const late = (action?.stoppedMs ?? 0) - deadlineMs;
    assert.ok(late >= 0 && late < 3000, `timeout fired ${String(late)} ms after the deadline`);
    await stopProcess(worker);
  });
});

describe('a frozen node', () => {
  /**
   * Freezes a follower (SIGSTOP: its kernel still accepts connections and ACKs data, but nothing
   * answers and no FIN comes), starts a worker whose server list begins with it, and runs a
   * workflow of two actions.
   * `freezeWhen` says whether the node freezes before the worker starts, or once the worker,
   * connected to it, runs the second action.
   */
  async function runPastFrozenNode(hardware: number, freezeWhen: 'before' | 'running'): Promise<void> {
    const leader = await cluster.waitForLeader();
    const frozen = cluster.nodes.find((n) => n.id !== leader.id && n.proc !== null);
    assert.ok(frozen !== undefined);
    lastFrozen = frozen;
    const template = `freeze-${freezeWhen}`;
    const steps = [
      '      - name: quick\n        command: ["true"]\n        timeout: 60',
      '      - name: slow\n        command: ["sleep", "2"]\n        timeout: 60',
    ].join('\n');
    await admin.control('templateCreate', { source: templateYaml(template, steps), replace: true });
    await admin.control('hardwareCreate', { documentJson: hardwareDoc(hardware), replace: false });
    const id = `hw-${String(hardware)}`;
    const token = (await admin.control('hardwareToken', { id })).token;
    // The test's own calls go to the live nodes only: a call to the frozen one would wait out its deadline.
    const live = new ClusterClient(
      cluster.nodes.filter((n) => n !== frozen).map((n) => n.apiAddr),
      { timeoutMs: 20_000, token: adminToken },
    );
    const workflowIn = async (workflowId: string): Promise<WorkflowRecord | undefined> =>
      (await live.control('workflowGet', { id: workflowId, local: false })).workflow;
    try {
      if (freezeWhen === 'before') cluster.pause(frozen);
      const workflowId =
        (await live.control('workflowCreate', { template, hardwareId: id, hardwareMap: {}, netboot: false }))
          .workflow?.id ?? '';
      const worker = startWorker(id, cluster.nodes.indexOf(frozen), token);
      if (freezeWhen === 'running') {
        await waitFor('the slow action to run', 30_000, async () => {
          const wf = await workflowIn(workflowId);
          return wf?.actions[1]?.state === 'RUNNING' ? wf : undefined;
        });
        cluster.pause(frozen);
      }
      // Before: the connect timeout (5 s) passes the frozen node over. Running: keepalive
      // (10 s + 5 s) ends the dead stream, and the result waiting in the journal goes to the next node.
      const done = await waitFor('the workflow to succeed through another node', 45_000, async () => {
        const wf = await workflowIn(workflowId);
        return wf?.state === 'SUCCESS' ? wf : undefined;
      });
      // One attempt each: the result sent into the frozen stream is delivered again, not re-run.
      assert.deepEqual(
        done.actions.map((a) => [a.state, a.attempt]),
        [
          ['SUCCESS', 1],
          ['SUCCESS', 1],
        ],
      );
      await stopProcess(worker);
    } finally {
      live.close();
      cluster.resume(frozen);
    }
  }

  test('a worker whose first server is frozen before it starts moves on to the next', async () => {
    await runPastFrozenNode(201, 'before');
  });

  test('a worker whose node freezes mid-action reconnects elsewhere and delivers the result', async () => {
    await runPastFrozenNode(202, 'running');
  });
});

describe('operability', () => {
  test('each node serves Prometheus metrics of the workflows, workers and raft', async () => {
    for (const n of cluster.nodes) {
      const res = await fetch(`http://${n.metricsAddr}/metrics`);
      assert.equal(res.status, 200);
      const text = await res.text();
      const value = (re: RegExp): number => {
        const m = re.exec(text);
        assert.ok(m, `${re.source} in the metrics of ${n.id}`);
        return Number(m[1]);
      };
      // The workflows of the first test finished, on every node's copy of the state.
      assert.ok(value(/^slipway_workflows\{state="SUCCESS"\} (\d+)$/m) >= workerCount * workflowsPerWorker);
      assert.ok(value(/^slipway_raft_term (\d+)$/m) >= 1);
      assert.ok(value(/^slipway_raft_applied_index (\d+)$/m) > 0);
      assert.ok(value(/^slipway_provisioning_success_ratio ([\d.]+)$/m) > 0);
      assert.match(text, /^slipway_connected_workers \d+$/m);
      assert.match(text, /^slipway_action_duration_seconds_bucket\{le="1",result="succeeded"\} \d+$/m);
      assert.match(text, /^slipway_timeouts_total\{kind="action"\} \d+$/m);
    }
    const missing = await fetch(`http://${cluster.nodes[0]?.metricsAddr ?? ''}/nope`);
    assert.equal(missing.status, 404);
  });
});

describe('forwarding through a follower', () => {
  test('writes a follower receives together go to the leader in one call, each with its own answer', async () => {
    const leader = await cluster.waitForLeader();
    // Not the node the frozen-node tests just woke: what it does in its first seconds after
    // SIGCONT is theirs to test, not this one's.
    const follower = cluster.nodes.find((n) => n.id !== leader.id && n.proc !== null && n !== lastFrozen);
    assert.ok(follower !== undefined);
    const forwarded = async (): Promise<{ commands: number; calls: number }> => {
      const text = await (await fetch(`http://${follower.metricsAddr}/metrics`)).text();
      const pick = (name: string): number =>
        Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
      return {
        commands: pick('slipway_forwarded_commands_total'),
        calls: pick('slipway_forward_calls_total'),
      };
    };
    const via = new ClusterClient([follower.apiAddr], { timeoutMs: 20_000, token: adminToken });
    try {
      const before = await forwarded();
      assert.ok(
        Number.isFinite(before.commands) && Number.isFinite(before.calls),
        'the counters are exported',
      );
      const fresh = Array.from({ length: 40 }, (_, i) => 100 + i);
      // hw-0..hw-4 exist since the first test: each of these is refused, alone.
      const taken = [0, 1, 2, 3, 4];
      const create = (i: number): Promise<unknown> =>
        via.control('hardwareCreate', { documentJson: hardwareDoc(i), replace: false });
      const results = await Promise.allSettled([...fresh, ...taken].map(create));
      results
        .slice(0, fresh.length)
        .forEach((r, i) =>
          assert.equal(
            r.status,
            'fulfilled',
            `hw-${String(fresh[i])}: ${r.status === 'rejected' ? String(r.reason) : ''}`,
          ),
        );
      for (const r of results.slice(fresh.length)) {
        assert.equal(r.status, 'rejected');
        assert.equal((r.reason as ServiceError).code, status.ALREADY_EXISTS);
      }
      const after = await forwarded();
      const commands = after.commands - before.commands;
      const calls = after.calls - before.calls;
      assert.ok(commands >= results.length, `forwarded ${String(commands)} commands`);
      assert.ok(calls < commands / 2, `${String(commands)} commands went in ${String(calls)} calls`);
      const listed = await allItems(
        (token) => admin.control('hardwareList', { local: false, continue: token }),
        (page) => page.hardwareJson,
      );
      const ids = new Set(listed.map((doc) => (JSON.parse(doc) as { id: string }).id));
      for (const i of fresh) assert.ok(ids.has(`hw-${String(i)}`), `hw-${String(i)} is in the state`);
    } finally {
      via.close();
    }
  });

  test("a worker's acknowledgment says when the leader committed its result; the next action follows", async () => {
    const leader = await cluster.waitForLeader();
    // Not the node the frozen-node tests just woke: what it does in its first seconds after
    // SIGCONT is theirs to test, not this one's.
    const follower = cluster.nodes.find((n) => n.id !== leader.id && n.proc !== null && n !== lastFrozen);
    assert.ok(follower !== undefined);
    const steps = ['one', 'two']
      .map((name) => `      - name: ${name}\n        command: ["true"]\n        timeout: 60`)
      .join('\n');
    await admin.control('templateCreate', { source: templateYaml('two-steps', steps), replace: true });
    await admin.control('hardwareCreate', { documentJson: hardwareDoc(200), replace: false });
    const token = (await admin.control('hardwareToken', { id: 'hw-200' })).token;
    const created = await admin.control('workflowCreate', {
      template: 'two-steps',
      hardwareId: 'hw-200',
      hardwareMap: {},
      netboot: false,
    });
    const workflowId = created.workflow?.id ?? '';
    const client = new WorkerClient(follower.apiAddr, credentials.createInsecure());
    const md = new Metadata();
    md.set('x-worker-id', 'hw-200');
    md.set('authorization', `Bearer ${token}`);
    const stream = client.connect(md);
    const received: ConnectResponse[] = [];
    stream.on('data', (msg: ConnectResponse) => received.push(msg));
    stream.on('error', () => undefined);
    const next = (pred: (m: ConnectResponse) => boolean, what: string): Promise<ConnectResponse> =>
      waitFor(what, 20_000, () => {
        const i = received.findIndex(pred);
        return Promise.resolve(i < 0 ? undefined : received.splice(i, 1)[0]);
      });
    const actionAt = (index: number) => (m: ConnectResponse) =>
      m.kind?.$case === 'action' && m.kind.value.attempt?.actionIndex === index;
    const ackOf = (index: number) => (m: ConnectResponse) =>
      m.kind?.$case === 'ack' && m.kind.value.attempt?.actionIndex === index;
    const result = (attempt: AttemptRef | undefined): ConnectRequest => ({
      kind: {
        $case: 'result',
        value: { attempt, success: true, exitStatus: 0, message: '', outputTail: '' },
      },
    });
    try {
      stream.write({ kind: { $case: 'hello', value: { pendingResults: [], agentVersion: 'test' } } });
      const first = await next(actionAt(0), 'the first action');
      assert.ok(first.kind?.$case === 'action');
      const attempt = first.kind.value.attempt;
      assert.equal(attempt?.workflowId, workflowId);
      const sentAt = Date.now();
      stream.write(result(attempt));
      const ack = await next(ackOf(0), "the first result's acknowledgment");
      const second = await next(actionAt(1), 'the second action');
      const receivedAt = Date.now();
      assert.ok(ack.kind?.$case === 'ack' && second.kind?.$case === 'action');
      assert.equal(ack.kind.value.duplicate, false);
      // The nodes share this machine's clock: the leader applied the result after it was sent.
      const committedAt = ack.kind.value.committedAtMs;
      assert.ok(
        committedAt >= sentAt && committedAt <= receivedAt,
        `committed at ${String(committedAt)}, sent at ${String(sentAt)}, received by ${String(receivedAt)}`,
      );
      // A duplicate is acknowledged as one, from the applied state: no entry answers it.
      stream.write(result(attempt));
      const again = await next(ackOf(0), "the duplicate's acknowledgment");
      assert.ok(again.kind?.$case === 'ack');
      assert.equal(again.kind.value.duplicate, true);
      assert.equal(again.kind.value.committedAtMs, 0);
      stream.write(result(second.kind.value.attempt));
      await next(ackOf(1), "the second result's acknowledgment");
      const listed = await waitFor('the workflow to succeed', 20_000, async () => {
        const wf = (await admin.control('workflowGet', { id: workflowId, local: false })).workflow;
        return wf?.state === 'SUCCESS' ? wf : undefined;
      });
      assert.equal(listed.id, workflowId);
    } finally {
      stream.cancel();
      client.close();
    }
  });
});

describe('bad input and bad credentials change nothing', () => {
  const tokenArgs = (): string[] => [
    '--server',
    cluster.apiAddrs().join(','),
    '--token-file',
    join(cluster.dir, 'admin.token'),
  ];

  async function snapshot(): Promise<string> {
    const hw = await allItems(
      (token) => admin.control('hardwareList', { local: false, continue: token }),
      (page) => page.hardwareJson,
    );
    const t = await allItems(
      (token) => admin.control('templateList', { local: false, continue: token }),
      (page) => page.templates,
    );
    const w = await allItems(
      (token) => admin.control('workflowList', { local: false, hardwareId: '', continue: token }),
      (page) => page.workflows,
    );
    return JSON.stringify([hw, t, w.map((x) => [x.id, x.state])]);
  }

  test('invalid templates, unknown hardware and malformed documents are refused with exit 2', async () => {
    const before = await snapshot();
    const bad = join(cluster.dir, 'bad.yaml');
    writeFileSync(
      bad,
      'version: "0.1"\nname: bad\nglobal_timeout: 60\ntasks:\n  - name: t\n    actions:\n      - name: a\n        comand: ["true"]\n',
    );
    const r1 = await cli([...tokenArgs(), 'template', 'create', '-f', bad]);
    assert.equal(r1.code, 2, r1.stderr);
    assert.match(r1.stderr, /line 8/);
    assert.match(r1.stderr, /comand/);
    const r2 = await cli([
      ...tokenArgs(),
      'workflow',
      'create',
      '--template',
      'five-steps',
      '--hardware',
      'no-such',
    ]);
    assert.equal(r2.code, 2, r2.stderr);
    assert.match(r2.stderr, /hardware "no-such" not found/);
    const badHw = join(cluster.dir, 'bad-hw.yaml');
    writeFileSync(badHw, 'id: x1\ninterfaces:\n  - mac: "zz:00"\n');
    const r3 = await cli([...tokenArgs(), 'hardware', 'create', '-f', badHw]);
    assert.equal(r3.code, 2, r3.stderr);
    assert.match(r3.stderr, /mac/);
    const r4 = await cli([
      ...tokenArgs(),
      'hardware',
      'create',
      '--id',
      'x2',
      '--mac',
      '02:00:00:00:00:01',
      '--ip',
      'nope',
    ]);
    assert.equal(r4.code, 2, r4.stderr);
    // Sent past the CLI's own checks, straight to the API.
    await assert.rejects(
      admin.control('templateCreate', { source: 'name: [unclosed', replace: false }),
      (e: ServiceError) => e.code === status.INVALID_ARGUMENT,
    );
    await assert.rejects(
      admin.control('hardwareCreate', { documentJson: '{"id": 5}', replace: false }),
      (e: ServiceError) => e.code === status.INVALID_ARGUMENT,
    );
    assert.equal(await snapshot(), before);
  });

  test('no token: UNAUTHENTICATED; too weak a role: PERMISSION_DENIED; nothing changes', async () => {
    const before = await snapshot();
    const anonymous = new ClusterClient(cluster.apiAddrs(), { timeoutMs: 10_000 });
    const forged = new ClusterClient(cluster.apiAddrs(), {
      timeoutMs: 10_000,
      token: 'not-a-real-token-at-all',
    });
    const viewerToken = (await admin.control('tokenCreate', { name: 'ci-viewer', role: 'viewer' })).token;
    const viewer = new ClusterClient(cluster.apiAddrs(), { timeoutMs: 10_000, token: viewerToken });
    try {
      for (const c of [anonymous, forged]) {
        await assert.rejects(
          c.control('hardwareList', { local: false }),
          (e: ServiceError) => e.code === status.UNAUTHENTICATED,
        );
        await assert.rejects(
          c.control('hardwareCreate', { documentJson: hardwareDoc(50), replace: false }),
          (e: ServiceError) => e.code === status.UNAUTHENTICATED,
        );
      }
      assert.ok((await viewer.control('hardwareList', { local: false })).hardwareJson.length > 0);
      await assert.rejects(
        viewer.control('hardwareCreate', { documentJson: hardwareDoc(51), replace: false }),
        (e: ServiceError) => e.code === status.PERMISSION_DENIED,
      );
      await assert.rejects(
        viewer.control('hardwareToken', { id: 'hw-0' }),
        (e: ServiceError) => e.code === status.PERMISSION_DENIED,
      );
      const r = await cli(['--server', cluster.apiAddrs().join(','), 'hardware', 'list']);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /token/);
    } finally {
      anonymous.close();
      forged.close();
      viewer.close();
    }
    assert.equal(await snapshot(), before);
  });

  /** The status a worker stream as `workerId` with `token` ends with. */
  async function refusal(workerId: string, token: string): Promise<number> {
    const leader = await cluster.waitForLeader();
    const client = new WorkerClient(leader.apiAddr, credentials.createInsecure());
    try {
      const md = new Metadata();
      md.set('x-worker-id', workerId);
      md.set('authorization', `Bearer ${token}`);
      return await new Promise<number>((resolve) => {
        const s = client.connect(md);
        s.on('error', (e: ServiceError) => resolve(e.code));
        s.on('data', () => undefined);
        s.write({ kind: { $case: 'hello', value: { pendingResults: [], agentVersion: 'test' } } });
      });
    } finally {
      client.close();
    }
  }

  test("a worker stream with another machine's token is refused", async () => {
    const other = (await admin.control('hardwareToken', { id: 'hw-1' })).token;
    assert.equal(await refusal('hw-0', other), status.UNAUTHENTICATED);
  });

  test('hardware token mints a new token and the previous one stops working', async () => {
    const first = (await admin.control('hardwareToken', { id: 'hw-2' })).token;
    const second = (await admin.control('hardwareToken', { id: 'hw-2' })).token;
    assert.notEqual(first, second);
    assert.equal(await refusal('hw-2', first), status.UNAUTHENTICATED);
    const shown = (await admin.control('hardwareGet', { id: 'hw-2', local: false })).hardwareJson;
    assert.ok(!shown.includes(second) && !shown.includes('workerToken'), shown);
  });
});

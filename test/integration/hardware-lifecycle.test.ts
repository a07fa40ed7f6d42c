// Goal: the machine lifecycle on a real cluster (docs/decisions/0028-machine-lifecycle.md). An
// operator walks a machine through the verbs with the CLI: each move the table allows is made and
// shown (list --state, get, history), each it does not is refused with exit 1 naming the state
// and the moves, a workflow owns the machine (a second one and a delete are refused, naming it),
// labels are set and removed. A machine left inspecting with a short deadline when the leader is
// SIGKILLed is failed by the new leader once its deadline passes, exactly once: one history event,
// one audit entry, the new leader's log; a `hardware history --follow` that began on the killed
// node sees every transition once and ends when the machine is deleted. Each node's /metrics
// counts the machines by state.
// Method: 3 real `slipway server` processes on loopback (plaintext, no tokens), the real CLI.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stateVersionFleet } from '../../src/state/versions.js';
import { ProcessCluster, runSlipway, slipwayBin, type CliResult } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

let cluster: ProcessCluster;

function cli(args: readonly string[], servers = cluster.apiAddrs()): Promise<CliResult> {
  return runSlipway(['--server', servers.join(','), '--timeout', '10000', ...args]);
}

async function ok(args: readonly string[]): Promise<string> {
  const r = await cli(args);
  assert.equal(r.code, 0, `slipway ${args.join(' ')}: ${r.stdout}${r.stderr}`);
  return r.stdout;
}

/** The command exits 1 with a message matching `why`. */
async function refused(args: readonly string[], why: RegExp): Promise<void> {
  const r = await cli(args);
  assert.equal(r.code, 1, `slipway ${args.join(' ')} should be refused: ${r.stdout}${r.stderr}`);
  assert.match(r.stderr, why);
}

interface Lifecycle {
  state: string;
  reason?: string;
  owner?: string;
  deadlineMs?: number;
}

async function lifecycleOf(id: string): Promise<Lifecycle> {
  const doc = JSON.parse(await ok(['-o', 'json', 'hardware', 'get', id])) as { lifecycle: Lifecycle };
  return doc.lifecycle;
}

interface Event {
  seq: number;
  stampMs: number;
  from: string;
  to: string;
  trigger: string;
  by: string;
  reason: string;
}

async function history(id: string): Promise<Event[]> {
  return (JSON.parse(await ok(['-o', 'json', 'hardware', 'history', id])) as { events: Event[] }).events;
}

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
});

after(async () => {
  await cluster.destroy();
});

describe('a machine walked through its lifecycle with the CLI', () => {
  test('each move the table allows is made, each other refused naming the state and its moves', async () => {
    await ok(['hardware', 'create', '--id', 'm1', '--mac', '02:00:00:00:0b:01', '--ip', '10.71.0.1/24']);
    assert.equal((await lifecycleOf('m1')).state, 'enrolled');
    await ok(['hardware', 'accept', 'm1', '--reason', 'racked and cabled']);
    await refused(
      ['hardware', 'accept', 'm1', '--reason', 'again'],
      /hardware "m1" is ready; accept is not one of its moves \(from ready: inspect → inspecting, workflow create → provisioning, drain → maintenance/,
    );
    assert.match(await ok(['hardware', 'label', 'm1', 'rack=a4', 'zone=west']), /m1: rack=a4 zone=west/);
    assert.match(await ok(['hardware', 'label', 'm1', 'zone-']), /m1: rack=a4$/m);
    const bad = await cli(['hardware', 'label', 'm1', 'rack=not ok']);
    assert.equal(bad.code, 2, bad.stderr);
    await ok(['hardware', 'drain', 'm1', '--reason', 'cabling']);
    await ok(['hardware', 'undrain', 'm1', '--reason', 'cabled']);
    assert.equal((await lifecycleOf('m1')).state, 'ready');

    const workflow = (await ok(['workflow', 'create', '--template', 'os', '--hardware', 'm1'])).trim();
    const owned = await lifecycleOf('m1');
    assert.deepEqual([owned.state, owned.owner], ['provisioning', workflow]);
    assert.ok((owned.deadlineMs ?? 0) > Date.now(), 'provisioning has a deadline');
    await refused(
      ['workflow', 'create', '--template', 'os', '--hardware', 'm1'],
      /owned by workflow "[^"]+": one workflow at a time/,
    );
    await refused(
      ['hardware', 'delete', 'm1'],
      new RegExp(`owned by workflow "${workflow}" \\(provisioning\\); cancel it first`),
    );
    await refused(
      ['hardware', 'retire', 'm1', '--reason', 'old'],
      /is provisioning; retire is not one of its moves/,
    );
    const listed = await ok(['hardware', 'list', '--state', 'provisioning']);
    assert.match(listed.split('\n')[0] ?? '', /STATE +OWNER$/);
    assert.match(listed, new RegExp(`^m1 .* provisioning +${workflow}$`, 'm'));
    await ok(['workflow', 'cancel', workflow]);
    assert.equal((await lifecycleOf('m1')).state, 'failed');
    // A finished workflow that did not succeed: `workflow wait` and `events --follow` exit 1.
    const waited = await cli(['workflow', 'wait', workflow]);
    assert.equal(waited.code, 1, waited.stderr);
    assert.match(waited.stdout, /^CANCELLED/);
    assert.equal((await cli(['workflow', 'events', workflow, '--follow'])).code, 1);
    await ok(['hardware', 'release', 'm1', '--reason', 'wipe it']);
    await ok(['hardware', 'quarantine', 'm1', '--reason', 'flaky NIC']);
    await refused(
      ['workflow', 'create', '--template', 'os', '--hardware', 'm1'],
      /is quarantined; workflow create is not one of its moves/,
    );
    await ok(['hardware', 'accept', 'm1', '--reason', 'NIC replaced']);
    assert.match(await ok(['hardware', 'get', 'm1']), /^state: +ready$/m);
    assert.equal((await ok(['hardware', 'list', '--state', 'failed,quarantined'])).trim(), '(none)');

    assert.deepEqual(
      (await history('m1')).map((e) => `${e.from || '-'}>${e.to}:${e.trigger}`),
      [
        '->enrolled:register',
        'enrolled>ready:accept',
        'ready>maintenance:drain',
        'maintenance>ready:undrain',
        'ready>provisioning:provision',
        'provisioning>failed:cancel',
        'failed>releasing:release',
        'releasing>ready:released',
        'ready>quarantined:quarantine',
        'quarantined>ready:accept',
      ],
    );
    const trail = JSON.parse(
      await ok(['-o', 'json', 'audit', 'list', '--kind', 'hardware.transition', '--limit', '100']),
    ) as {
      entries: { target: string }[];
    };
    assert.equal(
      trail.entries.filter((e) => e.target.startsWith('m1 ')).length,
      10,
      'every transition is in the trail',
    );
    // Every node counts the machines by state on /metrics, from its own copy of the state.
    for (const n of cluster.nodes) {
      const metrics = async (): Promise<string> => (await fetch(`http://${n.metricsAddr}/metrics`)).text();
      await waitFor(
        `${n.id} to count m1 ready`,
        async () => /^slipway_machines\{state="ready"\} 1$/m.test(await metrics()),
        10_000,
        100,
      );
      assert.match(await metrics(), /^slipway_machines\{state="quarantined"\} 0$/m, n.id);
    }
  });

  test('the new leader fails a machine left inspecting by a SIGKILLed leader, once, at its deadline', async () => {
    await ok(['hardware', 'create', '--id', 'm2', '--mac', '02:00:00:00:0b:02', '--ip', '10.71.0.2/24']);
    const leader = await cluster.waitForLeader();
    // A real CLI follows m2's history, starting at the node that will die.
    const others = cluster.nodes.filter((n) => n !== leader).map((n) => n.apiAddr);
    const followOut: string[] = [];
    const follower = spawn(
      process.execPath,
      [
        slipwayBin,
        '--server',
        [leader.apiAddr, ...others].join(','),
        '-o',
        'json',
        'hardware',
        'history',
        'm2',
        '--follow',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    follower.stdout.on('data', (chunk: Buffer) => followOut.push(chunk.toString()));
    const followed = new Promise<number | null>((resolve) => follower.once('exit', (code) => resolve(code)));
    try {
      await waitFor(
        'the follower to see m2 registered',
        () => followOut.join('').includes('"register"'),
        20_000,
        50,
      );
      await ok(['hardware', 'inspect', 'm2', '--reason', 'new disks', '--deadline', '5s']);
      const inspecting = await lifecycleOf('m2');
      assert.equal(inspecting.state, 'inspecting');
      const deadlineMs = inspecting.deadlineMs ?? 0;
      await cluster.kill(leader);
      const next = await cluster.waitForLeader();
      assert.notEqual(next.id, leader.id);
      await waitFor(
        'm2 to fail by its deadline',
        async () => (await cli(['-o', 'json', 'hardware', 'get', 'm2'], others)).stdout.includes('"failed"'),
        30_000,
        200,
      );

      const events = (
        JSON.parse((await cli(['-o', 'json', 'hardware', 'history', 'm2'], others)).stdout) as {
          events: Event[];
        }
      ).events;
      const expiries = events.filter((e) => e.trigger === 'expire');
      assert.equal(expiries.length, 1, JSON.stringify(events));
      const expiry = expiries[0]!;
      assert.deepEqual(
        [expiry.from, expiry.to, expiry.by, expiry.reason],
        ['inspecting', 'failed', 'leader (deadline)', 'deadline passed in inspecting'],
      );
      assert.ok(expiry.stampMs >= deadlineMs, `expired at ${expiry.stampMs}, deadline ${deadlineMs}`);
      assert.ok(
        expiry.stampMs - deadlineMs < 5_000,
        `expired ${expiry.stampMs - deadlineMs} ms after the deadline`,
      );
      assert.match(
        readFileSync(join(cluster.dir, `${next.id}.log`), 'utf8'),
        /"hardwareId":"m2".*machine deadline passed/,
      );
      const trail = JSON.parse(
        (
          await cli(
            ['-o', 'json', 'audit', 'list', '--kind', 'hardware.transition', '--user', 'leader (deadline)'],
            others,
          )
        ).stdout,
      ) as {
        entries: { target: string }[];
      };
      assert.deepEqual(
        trail.entries.map((e) => e.target).filter((t) => t.startsWith('m2 ')),
        ['m2 inspecting → failed (expire)'],
      );

      // The follower moved to a live node and saw each transition once; the delete ends it.
      const deleted = await cli(['hardware', 'delete', 'm2'], others);
      assert.equal(deleted.code, 0, deleted.stderr);
      assert.equal(await followed, 0);
      const seen = followOut
        .join('')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Event);
      assert.deepEqual(
        seen.map((e) => e.seq),
        events.map((e) => e.seq),
      );
      assert.deepEqual(
        seen.map((e) => e.trigger),
        ['register', 'inspect', 'expire'],
      );
    } finally {
      follower.kill('SIGKILL');
      cluster.start(leader);
    }
  });
});

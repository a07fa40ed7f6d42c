// Goal: the machine lifecycle as the replicated state applies it (docs/decisions/0028): every
// verb's move and each refusal, the moves workflows make (create, success, failure, cancel,
// retry) with one owner per machine, the transitional deadlines and their expiry by the leader
// (once), drain with and without --now, release with no release template, labels, the history
// and its bound, the audit trail and the hooks; the version gate (nothing tracked below state
// version 3, every machine adopted from its workflows when the cluster reaches it, queued
// workflows from before handed the ownership in turn); snapshots that carry it all and refuse an
// inconsistent lifecycle.
// Method: ControlState driven through apply() with leader stamps (test/support/lifecycle-harness.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DecodeError } from '../../src/state/binary.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { writeSnapshot } from '../../src/state/control/snapshot.js';
import { readSnapshotRecords, snapshotRecordSlices } from '../../src/state/control/snapshot-records.js';
import { BinaryReader } from '../../src/state/binary.js';
import { runAtOnce } from '../../src/state/slices.js';
import { inspectingTimeoutSDefault, machineHistoryMax, provisioningGraceMs } from '../../src/model/limits.js';
import { LifecycleHarness, operator, specFor } from '../support/lifecycle-harness.js';

function states(h: LifecycleHarness, id: string): string[] {
  return h.lifecycle(id).history.map((e) => `${e.from ?? '-'}>${e.to}`);
}

describe('machines and their workflows', () => {
  it('a new machine is enrolled; a workflow takes it, and its success leaves it deployed', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    assert.deepEqual(h.lifecycle('m1').state, 'enrolled');
    assert.equal(h.state.hardware('m1')?.version, 1, 'registering is part of the creation');
    const first = h.lifecycle('m1').history[0];
    assert.deepEqual([first?.trigger, first?.by, first?.seq], ['register', 'ops (operator)', 1]);

    h.is(h.create('w1', 'm1'), 'workflow');
    const claimed = h.lifecycle('m1');
    assert.equal(claimed.state, 'provisioning');
    assert.equal(claimed.owner, 'w1');
    assert.equal(claimed.deadlineMs, h.nowMs + 600_000 + provisioningGraceMs);
    h.nowMs += 5_000;
    h.is(h.start('w1'), 'attempt');
    const started = h.state.workflow('w1');
    assert.equal(h.lifecycle('m1').deadlineMs, (started?.deadlineMs ?? 0) + provisioningGraceMs);
    h.nowMs += 1_000;
    h.finish('w1', true);
    const done = h.lifecycle('m1');
    assert.equal(done.state, 'deployed');
    assert.equal(done.owner, undefined);
    assert.equal(done.deadlineMs, undefined);
    assert.equal(done.sinceMs, h.nowMs);
    assert.deepEqual(states(h, 'm1'), ['->enrolled', 'enrolled>provisioning', 'provisioning>deployed']);
    const last = done.history.at(-1);
    assert.deepEqual([last?.trigger, last?.by, last?.workflowId], ['succeed', 'workflow w1', 'w1']);
    assert.deepEqual(
      h.published.map((p) => `${p.hardwareId}:${p.event.seq}`),
      ['m1:1', 'm1:2', 'm1:3'],
    );
    // Each transition is in the trail, with who caused it.
    const trail = [...h.state.auditTrail({ kind: 'hardware.transition', limit: 10 }).entries].reverse();
    assert.deepEqual(
      trail.map((e) => [e.user, e.role, e.target]),
      [
        ['ops', 'operator', 'm1 (new) → enrolled (register)'],
        ['ops', 'operator', 'm1 enrolled → provisioning (provision)'],
        ['workflow w1', 'admin', 'm1 provisioning → deployed (succeed)'],
      ],
    );
  });

  it('a failure or a cancel leaves the machine failed with why and where; a retry takes it again', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.provision('w1', 'm1', false);
    const failed = h.lifecycle('m1');
    assert.equal(failed.state, 'failed');
    assert.equal(failed.step, 'os/install');
    assert.match(failed.reason ?? '', /^workflow w1 failed: action "os\/install" gave up after 1 attempt/);
    h.ok({ type: 'workflow.retry', id: 'w1', fromStart: false, audit: operator }, 'workflow');
    assert.equal(h.lifecycle('m1').state, 'provisioning');
    assert.equal(h.lifecycle('m1').owner, 'w1');
    h.ok({ type: 'workflow.cancel', id: 'w1', message: 'wrong image', audit: operator }, 'workflow');
    const cancelled = h.lifecycle('m1');
    assert.equal(cancelled.state, 'failed');
    assert.equal(cancelled.reason, 'workflow w1 cancelled: wrong image');
    assert.equal(cancelled.history.at(-1)?.trigger, 'cancel');
    assert.equal(cancelled.history.at(-1)?.by, 'ops (operator)');
  });

  it('one owner: a second workflow for an owned machine is refused, naming the owner', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.machine('m2', 2);
    h.is(h.create('w1', 'm1'), 'workflow');
    h.refused(h.createCommand('w2', 'm1'), 'E_CONFLICT', /owned by workflow "w1": one workflow at a time/);
    h.provision('w3', 'm2', false);
    h.is(h.create('w4', 'm2'), 'workflow');
    h.refused(
      { type: 'workflow.retry', id: 'w3', fromStart: true, audit: operator },
      'E_CONFLICT',
      /cannot retry: hardware "m2" is provisioning, owned by workflow "w4"/,
    );
    h.refused(
      { type: 'hardware.delete', id: 'm1', audit: operator },
      'E_CONFLICT',
      /owned by workflow "w1" \(provisioning\); cancel it first/,
    );
  });

  it('a workflow is refused for a machine quarantined, retired, drained, inspecting or releasing', () => {
    const h = new LifecycleHarness();
    const cases: [string, (id: string) => void, RegExp][] = [
      ['quarantined', (id) => h.is(h.verb(id, 'quarantine'), 'hardware'), /is quarantined; workflow create/],
      ['retired', (id) => h.is(h.verb(id, 'retire'), 'hardware'), /is retired; workflow create/],
      ['maintenance', (id) => h.is(h.verb(id, 'drain'), 'hardware'), /is maintenance; workflow create/],
      ['inspecting', (id) => h.is(h.verb(id, 'inspect'), 'hardware'), /is inspecting; workflow create/],
    ];
    cases.forEach(([state, put, why], i) => {
      const id = `m-${state}`;
      h.machine(id, i + 1);
      put(id);
      assert.equal(h.lifecycle(id).state, state);
      h.refused(h.createCommand(`w-${state}`, id), 'E_CONFLICT', why);
    });
  });
});

describe('operator verbs', () => {
  it('accept: enrolled → ready; twice is refused, naming the state and its moves', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.is(h.verb('m1', 'accept', { reason: 'racked and cabled' }), 'hardware');
    assert.equal(h.lifecycle('m1').state, 'ready');
    assert.equal(h.lifecycle('m1').reason, 'racked and cabled');
    h.refused(
      h.verbCommand('m1', 'accept'),
      'E_CONFLICT',
      /^hardware "m1" is ready; accept is not one of its moves \(from ready: inspect → inspecting, workflow create → provisioning/,
    );
  });

  it('quarantine and retire; retired is final', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.is(h.verb('m1', 'quarantine'), 'hardware');
    h.is(h.verb('m1', 'retire'), 'hardware');
    assert.equal(h.lifecycle('m1').state, 'retired');
    for (const verb of [
      'accept',
      'undrain',
      'drain',
      'inspect',
      'release',
      'quarantine',
      'retire',
    ] as const) {
      h.refused(
        h.verbCommand('m1', verb),
        'E_CONFLICT',
        /is retired; .* \(from retired: none: it is final\)/,
      );
    }
  });

  it('inspect sets a deadline (default or given); the leader expires it once, and only when due', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.machine('m2', 2);
    h.is(h.verb('m1', 'inspect'), 'hardware');
    assert.equal(h.lifecycle('m1').deadlineMs, h.nowMs + inspectingTimeoutSDefault * 1000);
    h.is(h.verb('m2', 'inspect', { timeoutS: 5 }), 'hardware');
    const deadlineMs = h.nowMs + 5_000;
    assert.equal(h.lifecycle('m2').deadlineMs, deadlineMs);
    assert.deepEqual([...h.state.machinesInTransition()].sort(), ['m1', 'm2']);
    h.nowMs = deadlineMs - 1;
    h.refused({ type: 'hardware.expire', id: 'm2', deadlineMs }, 'E_NOT_DUE', /has not passed/);
    h.nowMs = deadlineMs;
    h.refused({ type: 'hardware.expire', id: 'm2', deadlineMs: deadlineMs - 1 }, 'E_NOT_DUE', /not \d+$/);
    h.ok({ type: 'hardware.expire', id: 'm2', deadlineMs }, 'hardware');
    const failed = h.lifecycle('m2');
    assert.deepEqual(
      [failed.state, failed.reason, failed.deadlineMs],
      ['failed', 'deadline passed in inspecting', undefined],
    );
    assert.equal(failed.history.at(-1)?.by, 'leader (deadline)');
    // A second proposal (a new leader's, or a late one) changes nothing.
    h.refused({ type: 'hardware.expire', id: 'm2', deadlineMs }, 'E_NOT_DUE', /is failed with deadline none/);
    assert.deepEqual([...h.state.machinesInTransition()], ['m1']);
    const trail = h.state.auditTrail({ kind: 'hardware.transition', limit: 1 }).entries[0];
    assert.deepEqual(
      [trail?.user, trail?.method, trail?.target],
      ['leader (deadline)', 'hardware.expire', 'm2 inspecting → failed (expire)'],
    );
  });

  it('a provisioning that never starts expires: the machine fails and its workflow times out', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.is(h.create('w1', 'm1', specFor('m1', 30)), 'workflow');
    assert.equal(h.expire('m1').type, 'hardware');
    assert.equal(h.lifecycle('m1').reason, 'deadline passed in provisioning');
    assert.equal(h.lifecycle('m1').owner, undefined);
    const wf = h.state.workflow('w1');
    assert.equal(wf?.state, 'TIMEOUT');
    assert.match(wf?.message ?? '', /the machine's provisioning deadline passed/);
    assert.deepEqual(states(h, 'm1'), ['->enrolled', 'enrolled>provisioning', 'provisioning>failed']);
  });

  it('drain: a running workflow finishes and undrain returns to where it left the machine', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.is(h.create('w1', 'm1'), 'workflow');
    h.is(h.verb('m1', 'drain', { reason: 'rack power work' }), 'hardware');
    const drained = h.lifecycle('m1');
    assert.deepEqual(
      [drained.state, drained.owner, drained.drainedFrom],
      ['maintenance', 'w1', 'provisioning'],
    );
    assert.equal(drained.deadlineMs, undefined);
    h.refused(h.verbCommand('m1', 'accept'), 'E_CONFLICT', /workflow "w1" still runs on it/);
    h.refused(
      { type: 'hardware.delete', id: 'm1', audit: operator },
      'E_CONFLICT',
      /owned by workflow "w1" \(maintenance\)/,
    );
    h.is(h.start('w1'), 'attempt');
    h.finish('w1', true);
    const after = h.lifecycle('m1');
    assert.deepEqual([after.state, after.owner, after.drainedFrom], ['maintenance', undefined, 'deployed']);
    h.is(h.verb('m1', 'undrain'), 'hardware');
    assert.equal(h.lifecycle('m1').state, 'deployed');
    assert.deepEqual(states(h, 'm1'), [
      '->enrolled',
      'enrolled>provisioning',
      'provisioning>maintenance',
      'maintenance>deployed',
    ]);
  });

  it('undrain while the owner still runs goes back to provisioning, with its deadline', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.is(h.create('w1', 'm1'), 'workflow');
    h.is(h.verb('m1', 'drain'), 'hardware');
    h.is(h.start('w1'), 'attempt');
    h.is(h.verb('m1', 'undrain'), 'hardware');
    const back = h.lifecycle('m1');
    assert.deepEqual([back.state, back.owner], ['provisioning', 'w1']);
    assert.equal(back.deadlineMs, (h.state.workflow('w1')?.deadlineMs ?? 0) + provisioningGraceMs);
  });

  it('drain --now cancels the owner in the same entry', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.is(h.create('w1', 'm1'), 'workflow');
    h.is(h.start('w1'), 'attempt');
    h.is(h.verb('m1', 'drain', { now: true, reason: 'disk smoke' }), 'hardware');
    const wf = h.state.workflow('w1');
    assert.equal(wf?.state, 'CANCELLED');
    assert.equal(wf?.message, 'hardware m1 drained --now: disk smoke');
    const drained = h.lifecycle('m1');
    assert.deepEqual(
      [drained.state, drained.owner, drained.drainedFrom],
      ['maintenance', undefined, 'failed'],
    );
    h.is(h.verb('m1', 'undrain'), 'hardware');
    assert.equal(h.lifecycle('m1').state, 'failed');
  });

  it('release: releasing, then ready at once while no release template is known', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.provision('w1', 'm1');
    h.is(h.verb('m1', 'release', { reason: 'tenant left' }), 'hardware');
    const lc = h.lifecycle('m1');
    assert.equal(lc.state, 'ready');
    assert.deepEqual(
      lc.history.slice(-2).map((e) => [e.from, e.to, e.trigger, e.reason]),
      [
        ['deployed', 'releasing', 'release', 'tenant left'],
        ['releasing', 'ready', 'released', 'no release template: released at once'],
      ],
    );
  });

  it('bad input is refused and changes nothing', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.refused(h.verbCommand('ghost', 'accept'), 'E_NOT_FOUND', /hardware "ghost" does not exist/);
    h.refused({ ...h.verbCommand('m1', 'accept'), reason: ' ' }, 'E_INVALID', /reason: say why/);
    h.refused(
      { ...h.verbCommand('m1', 'accept'), reason: 'x'.repeat(513) },
      'E_INVALID',
      /at most 512 bytes/,
    );
    h.refused({ ...h.verbCommand('m1', 'accept'), now: true }, 'E_INVALID', /now: only drain takes it/);
    h.refused(
      { ...h.verbCommand('m1', 'drain'), timeoutS: 5 },
      'E_INVALID',
      /only inspect and release take a deadline/,
    );
    h.refused(
      { ...h.verbCommand('m1', 'inspect'), timeoutS: 0 },
      'E_INVALID',
      /timeoutS: must be 1-604800 seconds/,
    );
    h.refused(
      { type: 'hardware.expire', id: 'm1', deadlineMs: 1 },
      'E_NOT_DUE',
      /is enrolled with deadline none/,
    );
  });
});

describe('labels on machines', () => {
  it('sets and removes labels, kept across a replaced document; bad ones change nothing', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    const labelled = h.ok(
      { type: 'hardware.label', id: 'm1', set: { rack: 'a', zone: 'z1' }, remove: [], audit: operator },
      'hardware',
    ).hardware;
    assert.deepEqual(labelled.labels, { rack: 'a', zone: 'z1' });
    assert.equal(labelled.version, 2);
    h.machine('m1', 1);
    assert.deepEqual(h.state.hardware('m1')?.labels, { rack: 'a', zone: 'z1' }, 'kept by a replace');
    assert.equal(h.lifecycle('m1').history.length, 1, 'a replace is not a transition');
    h.ok({ type: 'hardware.label', id: 'm1', set: {}, remove: ['rack', 'zone'] }, 'hardware');
    assert.equal(h.state.hardware('m1')?.labels, undefined, 'no labels: the field is left out');
    h.refused(
      { type: 'hardware.label', id: 'm1', set: { 'bad key': 'v' }, remove: [] },
      'E_INVALID',
      /label key "bad key"/,
    );
    h.refused(
      { type: 'hardware.label', id: 'm1', set: { rack: 'a b' }, remove: [] },
      'E_INVALID',
      /label value "a b"/,
    );
  });
});

describe('history', () => {
  it(`keeps the newest ${machineHistoryMax} transitions, their seqs dense`, () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    for (let i = 0; i < machineHistoryMax; i++) {
      h.is(h.verb('m1', 'drain'), 'hardware');
      h.is(h.verb('m1', 'undrain'), 'hardware');
    }
    const history = h.lifecycle('m1').history;
    assert.equal(history.length, machineHistoryMax);
    const total = 1 + 2 * machineHistoryMax;
    assert.deepEqual(
      history.map((e) => e.seq),
      Array.from({ length: machineHistoryMax }, (_, i) => total - machineHistoryMax + 1 + i),
    );
    assert.deepEqual(
      h.state.machineHistory('m1', total - 1, 10).map((e) => e.seq),
      [total - 1, total],
    );
    assert.equal(h.published.length, total, 'every transition was published');
  });
});

describe('the version gate', () => {
  it('below state version 3 nothing is tracked, the verbs are refused, and a machine may queue workflows', () => {
    const h = new LifecycleHarness(2);
    h.machine('m1', 1);
    assert.equal(h.state.hardware('m1')?.lifecycle, undefined);
    h.refused(h.verbCommand('m1', 'accept'), 'E_INVALID', /hardware\.lifecycle needs cluster version 3/);
    h.refused(
      { type: 'hardware.label', id: 'm1', set: { a: 'b' }, remove: [] },
      'E_INVALID',
      /hardware\.label needs cluster version 3/,
    );
    h.is(h.create('w1', 'm1'), 'workflow');
    h.is(h.create('w2', 'm1'), 'workflow');
    assert.equal(h.published.length, 0);
    assert.equal(h.state.auditTrail({ kind: 'hardware.transition', limit: 1 }).entries.length, 0);
  });

  it('reaching version 3 adopts every machine from its workflows; a queue from before is owned in turn', () => {
    const h = new LifecycleHarness(2);
    for (const [i, id] of ['busy', 'done', 'broke', 'stopped', 'new'].entries()) h.machine(id, i + 1);
    h.is(h.create('q1', 'busy'), 'workflow');
    h.is(h.start('q1'), 'attempt');
    h.is(h.create('q2', 'busy'), 'workflow');
    h.provision('ok1', 'done');
    h.provision('bad1', 'broke', false);
    h.nowMs += 10;
    h.provision('ok2', 'broke');
    h.nowMs += 10;
    h.provision('bad2', 'broke', false);
    h.is(h.create('c1', 'stopped'), 'workflow');
    h.ok({ type: 'workflow.cancel', id: 'c1' }, 'workflow');

    h.ok({ type: 'cluster.version', version: 3 }, 'clusterVersion');
    const lc = (id: string) => h.lifecycle(id);
    assert.deepEqual([lc('busy').state, lc('busy').owner], ['provisioning', 'q1']);
    assert.equal(lc('busy').deadlineMs, (h.state.workflow('q1')?.deadlineMs ?? 0) + provisioningGraceMs);
    assert.equal(lc('done').state, 'deployed');
    assert.deepEqual(
      [lc('broke').state, lc('broke').step],
      ['failed', 'os/install'],
      'the last to finish says',
    );
    assert.equal(lc('stopped').state, 'failed');
    assert.equal(lc('new').state, 'enrolled');
    for (const id of ['busy', 'done', 'broke', 'stopped', 'new']) {
      const [event] = lc(id).history;
      assert.deepEqual(
        [event?.trigger, event?.by, lc(id).history.length],
        ['adopt', 'upgrade to state version 3', 1],
      );
    }
    assert.equal(
      h.state.auditTrail({ kind: 'hardware.transition', limit: 1 }).entries.length,
      0,
      'adoption is not a move',
    );

    // The queued workflow inherits the machine, which stays provisioning until the last ends.
    h.finish('q1', true);
    assert.deepEqual([lc('busy').state, lc('busy').owner], ['provisioning', 'q2']);
    h.is(h.start('q2'), 'attempt');
    h.finish('q2', true);
    assert.deepEqual([lc('busy').state, lc('busy').owner], ['deployed', undefined]);
  });
});

describe('snapshots', () => {
  it('carry lifecycles and labels in both layouts; equal states give equal bytes', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.machine('m2', 2);
    h.is(h.create('w1', 'm1'), 'workflow');
    h.is(h.verb('m2', 'inspect', { timeoutS: 60 }), 'hardware');
    h.ok({ type: 'hardware.label', id: 'm2', set: { rack: 'a' }, remove: [] }, 'hardware');
    const bytes = h.state.snapshot();
    const copy = new ControlState();
    copy.restore(bytes);
    assert.deepEqual(copy.snapshot(), bytes);
    assert.deepEqual(copy.hardware('m2')?.labels, { rack: 'a' });
    assert.deepEqual([...copy.machinesInTransition()].sort(), ['m1', 'm2']);
    const records = Buffer.concat(runAtOnce(snapshotRecordSlices(h.state.captureImage())));
    const image = runAtOnce(readSnapshotRecords(new BinaryReader(records)));
    assert.deepEqual(image.hardware, h.state.captureImage().hardware);
    // A transition changes the bytes (and so the state digest).
    h.is(h.verb('m1', 'drain'), 'hardware');
    assert.notDeepEqual(h.state.snapshot(), bytes);
  });

  it('refuse an inconsistent lifecycle', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.is(h.verb('m1', 'inspect'), 'hardware');
    const image = h.state.captureImage();
    const broken = (change: (lc: Record<string, unknown>) => void): Uint8Array => {
      const hw = JSON.parse(JSON.stringify(image.hardware[0])) as { lifecycle: Record<string, unknown> };
      change(hw.lifecycle);
      return writeSnapshot({ ...image, hardware: [hw as never] });
    };
    const refuse = (bytes: Uint8Array, why: RegExp) =>
      assert.throws(
        () => new ControlState().restore(bytes),
        (e: unknown) => e instanceof DecodeError && why.test(e.message),
      );
    refuse(
      broken((lc) => delete lc['deadlineMs']),
      /inspecting without a deadline/,
    );
    refuse(
      broken((lc) => (lc['state'] = 'provisioning')),
      /last event went to inspecting/,
    );
    refuse(
      broken((lc) => (lc['owner'] = 'nobody')),
      /owner "nobody" is not an active workflow/,
    );
    refuse(writeSnapshot({ ...image, clusterVersion: 2 }), /a lifecycle or labels before state version 3/);
  });
});

// Goal: repeated failures quarantine a machine (docs/decisions/0028, the addendum): the replicated
// state keeps each machine's recent failures by leader stamp; the policy's count within its window
// moves it to quarantined instead of failed, with why, in its history; failures spread wider than
// the window, or cancels, leave it failed; accept clears the record; the policy is an admin
// setting (validated, gated at state version 3, in the snapshot only when not the default).
// Method: ControlState driven through apply() with leader stamps (test/support/lifecycle-harness.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BinaryReader, DecodeError } from '../../src/state/binary.js';
import { readSnapshotRecords, snapshotRecordSlices } from '../../src/state/control/snapshot-records.js';
import { runAtOnce } from '../../src/state/slices.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { writeSnapshot } from '../../src/state/control/snapshot.js';
import { quarantinePolicyDefault } from '../../src/model/quarantine-policy.js';
import type { ControlCommand } from '../../src/state/control/commands.js';
import { LifecycleHarness, operator, specFor } from '../support/lifecycle-harness.js';

const hourMs = 3600 * 1000;

function policy(failures: number, windowS: number): ControlCommand {
  return { type: 'hardware.quarantinePolicy', failures, windowS, audit: operator };
}

describe('quarantine after repeated failures', () => {
  it('two failures within 24 h quarantine the machine, saying why; it is not given out again', () => {
    const h = new LifecycleHarness();
    assert.deepEqual(h.state.quarantinePolicy, { failures: 2, windowS: 86400 });
    h.machine('m1', 1);
    h.provision('w1', 'm1', false);
    const first = h.lifecycle('m1');
    assert.equal(first.state, 'failed');
    assert.deepEqual(first.failures, [h.nowMs]);
    const firstMs = h.nowMs;
    h.nowMs += 23 * hourMs;
    h.provision('w2', 'm1', false);
    const lc = h.lifecycle('m1');
    assert.equal(lc.state, 'quarantined');
    assert.deepEqual(lc.failures, [firstMs, h.nowMs]);
    assert.equal(lc.step, 'os/install');
    assert.match(lc.reason ?? '', /^failed 2 times within 24h; last: workflow w2 failed: /);
    const event = lc.history.at(-1);
    assert.deepEqual(
      [event?.from, event?.to, event?.trigger, event?.workflowId, event?.by],
      ['provisioning', 'quarantined', 'fail', 'w2', 'workflow w2'],
    );
    assert.equal(h.published.at(-1)?.event.to, 'quarantined');
    h.refused(h.createCommand('w3', 'm1'), 'E_CONFLICT', /is quarantined; workflow create is not one/);
  });

  it('failures spread wider than the window leave the machine failed, keeping only the recent', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    for (const id of ['w1', 'w2', 'w3']) {
      h.provision(id, 'm1', false);
      assert.equal(h.lifecycle('m1').state, 'failed', id);
      assert.deepEqual(h.lifecycle('m1').failures, [h.nowMs], id);
      h.nowMs += 24 * hourMs + 1;
    }
  });

  it('a cancel is not a failure; a provisioning deadline that passes is', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.is(h.create('w1', 'm1'), 'workflow');
    h.ok({ type: 'workflow.cancel', id: 'w1', message: 'wrong image', audit: operator }, 'workflow');
    assert.equal(h.lifecycle('m1').state, 'failed');
    assert.equal(h.lifecycle('m1').failures, undefined);
    h.provision('w2', 'm1', false);
    h.is(h.create('w3', 'm1', specFor('m1', 30)), 'workflow');
    assert.equal(h.expire('m1').type, 'hardware');
    const lc = h.lifecycle('m1');
    assert.equal(lc.state, 'quarantined');
    assert.equal(lc.history.at(-1)?.trigger, 'expire');
    assert.match(lc.reason ?? '', /^failed 2 times within 24h; last: deadline passed in provisioning$/);
    assert.equal(h.state.workflow('w3')?.state, 'TIMEOUT');
  });

  it('accept clears the record: the count starts afresh', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.provision('w1', 'm1', false);
    h.provision('w2', 'm1', false);
    assert.equal(h.lifecycle('m1').state, 'quarantined');
    h.is(h.verb('m1', 'accept'), 'hardware');
    assert.equal(h.lifecycle('m1').state, 'ready');
    assert.equal(h.lifecycle('m1').failures, undefined);
    h.provision('w3', 'm1', false);
    assert.equal(h.lifecycle('m1').state, 'failed');
    assert.deepEqual(h.lifecycle('m1').failures, [h.nowMs]);
    // Other moves keep it: a quarantine by hand and a release do not forgive.
    h.is(h.verb('m1', 'quarantine'), 'hardware');
    assert.deepEqual(h.lifecycle('m1').failures, [h.nowMs]);
  });
});

describe('the quarantine policy', () => {
  it('an admin sets it; bad values are refused and change nothing', () => {
    const h = new LifecycleHarness();
    const set = h.ok(policy(3, 3600), 'quarantinePolicy');
    assert.deepEqual(set.policy, { failures: 3, windowS: 3600 });
    const trail = h.state.auditTrail({ kind: 'hardware.quarantinePolicy', limit: 1 }).entries;
    assert.equal(trail[0]?.target, 'failures=3 windowS=3600');
    h.refused(policy(0, 3600), 'E_INVALID', /^failures: must be 1-16, got 0$/);
    h.refused(policy(17, 3600), 'E_INVALID', /^failures: must be 1-16/);
    h.refused(policy(2, 0), 'E_INVALID', /^windowS: must be 1-7776000 seconds, got 0$/);
    h.refused(policy(2, 1.5), 'E_INVALID', /^windowS:/);
    assert.deepEqual(h.state.quarantinePolicy, { failures: 3, windowS: 3600 });

    h.machine('m1', 1);
    h.provision('w1', 'm1', false);
    h.provision('w2', 'm1', false);
    assert.equal(h.lifecycle('m1').state, 'failed', 'two of three');
    h.provision('w3', 'm1', false);
    assert.match(h.lifecycle('m1').reason ?? '', /^failed 3 times within 1h; /);
  });

  it('a policy of one failure quarantines at the first', () => {
    const h = new LifecycleHarness();
    h.ok(policy(1, 60), 'quarantinePolicy');
    h.machine('m1', 1);
    h.provision('w1', 'm1', false);
    assert.match(h.lifecycle('m1').reason ?? '', /^failed 1 times within 1m; /);
  });

  it('needs state version 3', () => {
    const h = new LifecycleHarness(2);
    h.refused(policy(3, 3600), 'E_INVALID', /hardware\.quarantinePolicy needs cluster version 3/);
    assert.deepEqual(h.state.quarantinePolicy, quarantinePolicyDefault);
  });

  it('the snapshot carries the policy (only when not the default) and the failures', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.provision('w1', 'm1', false);
    const plain = h.state.snapshot();
    assert.doesNotMatch(Buffer.from(plain).toString(), /"quarantinePolicy":/);
    h.ok(policy(4, 7200), 'quarantinePolicy');
    const bytes = h.state.snapshot();
    const copy = new ControlState();
    copy.restore(bytes);
    assert.deepEqual(copy.snapshot(), bytes);
    assert.deepEqual(copy.quarantinePolicy, { failures: 4, windowS: 7200 });
    assert.deepEqual(copy.hardware('m1')?.lifecycle?.failures, h.lifecycle('m1').failures);
    const records = Buffer.concat(runAtOnce(snapshotRecordSlices(h.state.captureImage())));
    const fromRecords = runAtOnce(readSnapshotRecords(new BinaryReader(records)));
    assert.deepEqual(fromRecords.quarantinePolicy, { failures: 4, windowS: 7200 });
    assert.deepEqual(fromRecords.hardware, h.state.captureImage().hardware);
    h.ok(policy(2, 86400), 'quarantinePolicy');
    // The default, set again, is left out as if never set.
    assert.doesNotMatch(Buffer.from(h.state.snapshot()).toString(), /"quarantinePolicy":/);

    const image = h.state.captureImage();
    const refuse = (data: Uint8Array, why: RegExp) =>
      assert.throws(
        () => new ControlState().restore(data),
        (e: unknown) => e instanceof DecodeError && why.test(e.message),
      );
    const hw = JSON.parse(JSON.stringify(image.hardware[0])) as { lifecycle: { failures: number[] } };
    hw.lifecycle.failures = [5, 3];
    refuse(writeSnapshot({ ...image, hardware: [hw as never] }), /failures are not oldest first/);
    const text = Buffer.from(writeSnapshot({ ...image, quarantinePolicy: { failures: 4, windowS: 7200 } }))
      .toString()
      .replace('"clusterVersion":3', '"clusterVersion":2');
    refuse(Buffer.from(text), /quarantinePolicy: is set at state version 3; the cluster runs at 2/);
  });
});

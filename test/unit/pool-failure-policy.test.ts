// Goal: a pool's failure policy as the replicated state applies it (docs/decisions/0040). Every
// failed installation of a member is counted, a deployment clears the count, an operator's
// cancel counts nothing; after --attempts failures in a row for each of its slots the pool holds
// (pool.allocate refused, naming the machine that failed last and why) until pool.resume. Under retry the failed
// member is installed again on its own machine (and only it, only while it is failed, not
// quarantined); under race one slot is started on two machines, counted as one slot, the first to
// deploy keeps it and the other is cancelled, released to ready and leaves the pool. Bad attempts
// are refused and change nothing; the count survives snapshot and restore and replays the same.
// Method: ControlState through apply() (test/support/lifecycle-harness.ts); the pure standing
// (src/fleet/pool.ts) on the same states.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ControlCommand } from '../../src/state/control/commands.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { heldWhy, poolStanding, slotsFilled } from '../../src/fleet/pool.js';
import { parseSelector } from '../../src/fleet/selector.js';
import type { Selector } from '../../src/fleet/selector-terms.js';
import { LifecycleHarness, operator, specFor } from '../support/lifecycle-harness.js';

/** Machines m1..m5 ready, in rack a. */
function fleet(): LifecycleHarness {
  const h = new LifecycleHarness();
  for (let n = 1; n <= 5; n++) {
    h.machine(`m${n}`, n);
    h.ok(
      { type: 'hardware.label', id: `m${n}`, set: { rack: 'a' }, remove: [], audit: operator },
      'hardware',
    );
    h.ok(h.verbCommand(`m${n}`, 'accept'), 'hardware');
  }
  return h;
}

function createPool(extra: Record<string, unknown> = {}): ControlCommand {
  return {
    type: 'pool.create',
    name: 'web',
    selector: 'rack',
    template: 'os',
    size: 1,
    spares: 0,
    ...extra,
    audit: operator,
  };
}

function allocate(
  h: LifecycleHarness,
  id: string,
  offer: readonly string[],
  extra: { race?: true; retry?: true } = {},
): ControlCommand {
  return {
    type: 'pool.allocate',
    pool: 'web',
    id,
    templateVersion: h.state.template('os')?.version ?? 0,
    hardwareMap: {},
    candidates: offer.map((hardwareId) => ({ hardwareId, spec: specFor(hardwareId) })),
    ...extra,
  };
}

function run(h: LifecycleHarness, wf: string, success: boolean): void {
  h.is(h.start(wf), 'attempt');
  h.finish(wf, success);
}

const anyMachine = parseSelector('rack') as Selector;

function standing(h: LifecycleHarness) {
  const pool = h.state.pool('web');
  assert.ok(pool !== undefined);
  return poolStanding(pool, anyMachine, h.state.hardwareList(), (id) => h.state.workflow(id)?.race?.request);
}

describe('a pool holds after failed installations in a row', () => {
  it('counts failures, clears them on a deployment, holds at its attempts and resumes', () => {
    const h = fleet();
    // 1 attempt for each of 2 slots: held at 2 in a row.
    h.ok(createPool({ size: 2, attempts: 1 }), 'pool');
    h.ok(allocate(h, 'w1', ['m1']), 'pool');
    run(h, 'w1', false);
    assert.equal(h.state.pool('web')?.failedInARow, 1);
    h.ok(allocate(h, 'w2', ['m2']), 'pool');
    run(h, 'w2', true);
    assert.equal(h.state.pool('web')?.failedInARow, undefined, 'a deployment starts the count afresh');
    h.ok(allocate(h, 'w3', ['m3']), 'pool');
    run(h, 'w3', false);
    h.ok(allocate(h, 'w4', ['m4']), 'pool');
    run(h, 'w4', false);
    const held = h.state.pool('web');
    assert.deepEqual([held?.failedInARow, held?.lastFailure?.hardwareId], [2, 'm4']);
    assert.match(
      heldWhy(held!) ?? '',
      /^held: 2 installations failed in a row with none deployed, 1 attempts for each of its 2 slots; the last on m4: workflow w4 failed/,
    );
    h.refused(allocate(h, 'w5', ['m5']), 'E_CONFLICT', /pool "web" is held: .*slipway pool resume web/);
    // Held: nothing offered, no spare kept; pool get says why.
    const s = standing(h);
    assert.deepEqual([s.offer, s.reserve, s.missing], [[], undefined, 1]);
    assert.match(s.why ?? '', /^held: /);
    const resumed = h.ok({ type: 'pool.resume', name: 'web', audit: operator }, 'pool').pool;
    assert.deepEqual([resumed.failedInARow, resumed.lastFailure], [undefined, undefined]);
    assert.deepEqual(standing(h).offer, ['m5']);
    h.ok(allocate(h, 'w5', ['m5']), 'pool');
    // Resuming a pool that does not hold changes nothing; an unknown pool is refused.
    const version = h.state.pool('web')?.version;
    assert.equal(h.ok({ type: 'pool.resume', name: 'web' }, 'pool').pool.version, version);
    h.refused({ type: 'pool.resume', name: 'nope' }, 'E_NOT_FOUND');
  });

  it('an operator cancel is no failed installation; a passed deadline is one', () => {
    const h = fleet();
    h.ok(createPool({ attempts: 1 }), 'pool');
    h.ok(allocate(h, 'w1', ['m1']), 'pool');
    h.ok({ type: 'workflow.cancel', id: 'w1', message: 'by hand', audit: operator }, 'workflow');
    assert.equal(h.lifecycle('m1').state, 'failed');
    assert.equal(h.state.pool('web')?.failedInARow, undefined);
    h.ok(allocate(h, 'w2', ['m2']), 'pool');
    h.is(h.expire('m2'), 'hardware');
    assert.equal(h.state.pool('web')?.failedInARow, 1);
    assert.match(h.state.pool('web')?.lastFailure?.reason ?? '', /deadline passed in provisioning/);
    h.refused(allocate(h, 'w3', ['m3']), 'E_CONFLICT', /held/);
  });

  it('refuses attempts out of range, changing nothing', () => {
    const h = fleet();
    h.refused(
      createPool({ attempts: 0 }),
      'E_INVALID',
      /attempts must be a whole number from 1 to 16, got 0/,
    );
    h.refused(createPool({ attempts: 17 }), 'E_INVALID', /got 17/);
    h.refused(createPool({ attempts: 1.5 }), 'E_INVALID', /got 1.5/);
    const pool = h.ok(createPool({ onFailure: 'retry', attempts: 4 }), 'pool').pool;
    assert.deepEqual([pool.onFailure, pool.attempts], ['retry', 4]);
  });

  it('the count replays the same and survives snapshot and restore', () => {
    const h = fleet();
    h.ok(createPool({ attempts: 1 }), 'pool');
    h.ok(allocate(h, 'w1', ['m1']), 'pool');
    run(h, 'w1', false);
    const replay = new ControlState();
    for (const a of h.applied) replay.apply(a.index, a.nowMs, a.command);
    assert.deepEqual(replay.snapshot(), h.state.snapshot());
    const copy = new ControlState();
    copy.restore(h.state.snapshot());
    assert.deepEqual(copy.pool('web'), h.state.pool('web'));
    const refused = copy.apply(h.index + 1, h.nowMs, allocate(h, 'w2', ['m2']));
    assert.equal(refused.type === 'error' && refused.code, 'E_CONFLICT');
  });
});

describe('the retry policy installs the same machine again', () => {
  it('offers the failed member, keeps it a member, and moves on once it is quarantined', () => {
    const h = fleet();
    // 2 attempts for each of 2 slots: held at 4 in a row.
    h.ok(createPool({ size: 2, onFailure: 'retry', attempts: 2 }), 'pool');
    h.ok(allocate(h, 'w1', ['m1']), 'pool');
    h.ok(allocate(h, 'w2', ['m2']), 'pool');
    run(h, 'w1', false);
    run(h, 'w2', false);
    assert.deepEqual(h.state.pool('web')?.members, ['m1', 'm2']);
    const s = standing(h);
    assert.deepEqual([s.retry, s.offer], ['m1', []], 'the failed member first, no other machine');
    // Only a failed member, one at a time; and a retry pool runs no race.
    h.refused(allocate(h, 'w3', ['m3'], { retry: true }), 'E_CONFLICT', /m3 is no failed member/);
    h.refused(allocate(h, 'w3', ['m1', 'm2'], { retry: true }), 'E_CONFLICT', /m1, m2 is no failed member/);
    h.refused(
      allocate(h, 'w3', ['m3', 'm4'], { race: true }),
      'E_INVALID',
      /retry policy: it starts no race/,
    );
    // Retrying m1 keeps m2, failed too, a member for its own retry.
    assert.deepEqual(h.ok(allocate(h, 'w3', ['m1'], { retry: true }), 'pool').pool.members, ['m1', 'm2']);
    assert.equal(h.state.workflow('w3')?.hardwareId, 'm1');
    assert.equal(h.lifecycle('m1').state, 'provisioning');
    assert.equal(h.lifecycle('m1').afterRelease, undefined);
    // m1's second failure within the quarantine window quarantines it: it is retried no more.
    run(h, 'w3', false);
    assert.equal(h.lifecycle('m1').state, 'quarantined');
    assert.equal(h.state.pool('web')?.failedInARow, 3);
    h.refused(allocate(h, 'w4', ['m1'], { retry: true }), 'E_CONFLICT', /m1 is no failed member/);
    assert.equal(standing(h).retry, 'm2');
    h.ok(allocate(h, 'w4', ['m2'], { retry: true }), 'pool');
    run(h, 'w4', false);
    assert.equal(h.state.pool('web')?.failedInARow, 4);
    h.refused(allocate(h, 'w5', ['m3']), 'E_CONFLICT', /held: 4 installations failed in a row/);
    h.ok({ type: 'pool.resume', name: 'web', audit: operator }, 'pool');
    // Both quarantined: no member to retry, so other machines take the slots.
    const next = standing(h);
    assert.deepEqual([next.retry, next.missing, next.offer.includes('m3')], [undefined, 2, true]);
    assert.deepEqual(h.ok(allocate(h, 'w5', ['m3']), 'pool').pool.members, ['m3']);
    run(h, 'w5', true);
    assert.deepEqual([h.lifecycle('m3').state, h.state.pool('web')?.failedInARow], ['deployed', undefined]);
  });

  it('with a release template a retried member is not released in between', () => {
    const h = fleet();
    h.ok({ type: 'template.put', name: 'wipe', source: 'version: "0.1"\nname: wipe\n' }, 'template');
    h.ok(createPool({ onFailure: 'retry', releaseTemplate: 'wipe' }), 'pool');
    h.ok(allocate(h, 'w1', ['m1']), 'pool');
    run(h, 'w1', false);
    assert.deepEqual([h.lifecycle('m1').state, h.lifecycle('m1').afterRelease], ['failed', undefined]);
    assert.deepEqual([standing(h).retry, standing(h).release], ['m1', undefined]);
  });
});

describe('the race policy starts a slot on two machines', () => {
  it('counts both lanes as one slot; the first to deploy keeps it, the other leaves ready', () => {
    const h = fleet();
    h.ok(createPool({ size: 2, onFailure: 'race' }), 'pool');
    const raced = h.ok(allocate(h, 'w1', ['m1', 'm2'], { race: true }), 'pool').pool;
    assert.deepEqual(raced.members, ['m1', 'm2']);
    assert.equal(h.state.workflow('w1.rival')?.hardwareId, 'm2');
    assert.equal(standing(h).missing, 1, 'two lanes fill one slot');
    const lanes = ['m1', 'm2'].map((id) => h.state.hardware(id)!);
    assert.equal(
      slotsFilled(lanes, (id) => h.state.workflow(id)?.race?.request),
      1,
    );
    assert.equal(slotsFilled(lanes, undefined), 2);
    h.ok(allocate(h, 'w2', ['m3', 'm4'], { race: true }), 'pool');
    h.refused(allocate(h, 'w3', ['m5']), 'E_CONFLICT', /has 2 machines provisioning or deployed, its size 2/);
    // m2's lane wins: m1's is cancelled, m1 goes back to ready and leaves the pool.
    run(h, 'w1.rival', true);
    assert.equal(h.state.workflow('w1')?.state, 'CANCELLED');
    assert.deepEqual([h.lifecycle('m1').state, h.lifecycle('m2').state], ['ready', 'deployed']);
    assert.deepEqual(h.state.pool('web')?.members, ['m2', 'm3', 'm4']);
    assert.equal(h.state.pool('web')?.failedInARow, undefined, 'a lost race is no failure');
    // A failed lane counts; its rival still fills the slot.
    run(h, 'w2', false);
    assert.equal(h.state.pool('web')?.failedInARow, 1);
    assert.equal(standing(h).missing, 0);
    run(h, 'w2.rival', true);
    assert.equal(h.state.pool('web')?.failedInARow, undefined);
    // The failed lane's machine leaves at the next allocation, as any failed member.
    assert.deepEqual(h.state.pool('web')?.members, ['m2', 'm3', 'm4']);
    assert.deepEqual([h.lifecycle('m3').state, standing(h).missing], ['failed', 0]);
  });

  it('an alternate pool starts no race', () => {
    const h = fleet();
    h.ok(createPool(), 'pool');
    h.refused(
      allocate(h, 'w1', ['m1', 'm2'], { race: true }),
      'E_INVALID',
      /alternate policy: it starts no race/,
    );
  });
});

describe('a member that is ready again leaves its pool', () => {
  it('and a pool being deleted goes with its last member, released by hand', () => {
    const h = fleet();
    h.ok({ type: 'template.put', name: 'wipe', source: 'version: "0.1"\nname: wipe\n' }, 'template');
    h.ok(createPool({ releaseTemplate: 'wipe' }), 'pool');
    h.ok(allocate(h, 'w1', ['m1']), 'pool');
    run(h, 'w1', true);
    assert.equal(h.ok({ type: 'pool.delete', name: 'web', audit: operator }, 'pool').pool.deleting, true);
    h.ok(h.verbCommand('m1', 'release'), 'hardware');
    assert.equal(h.lifecycle('m1').state, 'ready');
    assert.equal(h.state.pool('web'), undefined, 'the deleting pool went with its last member');
  });
});

// Goal: pools as the replicated state applies them (docs/decisions/0035): pool.create refuses a
// selector that does not parse, a template that does not exist, a size below 0, a bad name, a
// repeat, each changing nothing; pool.allocate takes one offered machine for a free slot and
// joins it to the pool in the same entry, and is refused once the slots are filled (never two for
// one slot, whatever the leader proposes); a failed member is replaced and leaves; deleting a
// member machine is refused naming the pool; deleting a pool is refused while a member is
// provisioning; below state version 3 pool commands are refused. The same log applied on another
// state gives the same bytes, and the pools survive snapshot and restore.
// Method: ControlState through apply() (test/support/lifecycle-harness.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ControlCommand } from '../../src/state/control/commands.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { LifecycleHarness, operator, specFor } from '../support/lifecycle-harness.js';

/** Machines m1..m4 ready in rack a, m5 ready in rack b. */
function fleet(): LifecycleHarness {
  const h = new LifecycleHarness();
  for (let n = 1; n <= 5; n++) {
    const id = `m${n}`;
    h.machine(id, n);
    h.ok(
      { type: 'hardware.label', id, set: { rack: n === 5 ? 'b' : 'a' }, remove: [], audit: operator },
      'hardware',
    );
    h.ok(h.verbCommand(id, 'accept'), 'hardware');
  }
  return h;
}

function createPool(size: number, selector = 'rack==a'): ControlCommand {
  return { type: 'pool.create', name: 'web', selector, template: 'os', size, spares: 0, audit: operator };
}

function allocateFor(h: LifecycleHarness, id: string, offer: readonly string[]): ControlCommand {
  return {
    type: 'pool.allocate',
    pool: 'web',
    id,
    templateVersion: h.state.template('os')?.version ?? 0,
    hardwareMap: {},
    candidates: offer.map((hardwareId) => ({ hardwareId, spec: specFor(hardwareId) })),
  };
}

describe('pool commands', () => {
  it('bad input is refused and changes nothing', () => {
    const h = fleet();
    h.refused(createPool(1, 'rack=='), 'E_INVALID', /^selector: /);
    h.refused({ ...createPool(1), template: 'nope' } as ControlCommand, 'E_NOT_FOUND', /template "nope"/);
    h.refused(createPool(-1), 'E_INVALID', /size must be a whole number from 0/);
    h.refused({ ...createPool(1), name: 'Web!' } as ControlCommand, 'E_INVALID', /pool name/);
    h.refused({ type: 'pool.scale', name: 'web', size: 2 }, 'E_NOT_FOUND');
    const pool = h.ok(createPool(2), 'pool').pool;
    assert.deepEqual([pool.selector, pool.size, pool.members], ['rack=a', 2, []]);
    h.refused(createPool(2), 'E_EXISTS');
    h.refused({ type: 'pool.scale', name: 'web', size: -3 }, 'E_INVALID');
  });

  it('fills slots one machine each, never past its size, and guards its members', () => {
    const h = fleet();
    h.ok(createPool(2), 'pool');
    const first = h.ok(allocateFor(h, 'web-1', ['m5', 'm1', 'm2']), 'pool').pool;
    assert.deepEqual(first.members, ['m1'], 'm5 is in rack b');
    assert.equal(h.state.workflow('web-1')?.hardwareId, 'm1');
    // A second leader's proposal with the same offer takes the next machine, not the same slot twice.
    assert.deepEqual(h.ok(allocateFor(h, 'web-2', ['m1', 'm2']), 'pool').pool.members, ['m1', 'm2']);
    h.refused(
      allocateFor(h, 'web-3', ['m3']),
      'E_CONFLICT',
      /has 2 machines provisioning or deployed, its size 2/,
    );
    h.refused({ type: 'hardware.delete', id: 'm1' }, 'E_CONFLICT', /belongs to pool "web"/);
    h.refused({ type: 'pool.delete', name: 'web' }, 'E_CONFLICT', /provisioning \(m1, m2\)/);
    h.ok(
      { type: 'attempt.start', workflowId: 'web-1', actionIndex: 0, attempt: 1, workerId: 'm1' },
      'attempt',
    );
    h.finish('web-1', true);
    h.ok(
      { type: 'attempt.start', workflowId: 'web-2', actionIndex: 0, attempt: 1, workerId: 'm2' },
      'attempt',
    );
    h.finish('web-2', false);
    assert.deepEqual([h.lifecycle('m1').state, h.lifecycle('m2').state], ['deployed', 'failed']);
    // The failed member's slot is free again: its replacement joins, and the failed one leaves.
    const replaced = h.ok(allocateFor(h, 'web-3', ['m2', 'm3']), 'pool').pool;
    assert.deepEqual(replaced.members, ['m1', 'm3']);
    h.ok({ type: 'pool.scale', name: 'web', size: 3 }, 'pool');
    h.ok(allocateFor(h, 'web-4', ['m4']), 'pool');
    h.refused(allocateFor(h, 'web-5', ['m5']), 'E_CONFLICT');
  });

  it('the same log gives the same state elsewhere, and pools survive snapshot and restore', () => {
    const h = fleet();
    h.ok(createPool(2), 'pool');
    h.ok(allocateFor(h, 'web-1', ['m1', 'm2']), 'pool');
    const replay = new ControlState();
    for (const a of h.applied) replay.apply(a.index, a.nowMs, a.command);
    assert.deepEqual(replay.snapshot(), h.state.snapshot());
    const copy = new ControlState();
    copy.restore(h.state.snapshot());
    assert.deepEqual(copy.pools(), h.state.pools());
    assert.deepEqual(copy.pool('web')?.members, ['m1']);
    assert.deepEqual(copy.snapshot(), h.state.snapshot());
    // The restored state goes on from the replicated pool: the next slot, then full.
    copy.apply(h.index + 1, h.nowMs, allocateFor(h, 'web-2', ['m1', 'm2']));
    assert.deepEqual(copy.pool('web')?.members, ['m1', 'm2']);
    const full = copy.apply(h.index + 2, h.nowMs, allocateFor(h, 'web-3', ['m3']));
    assert.equal(full.type === 'error' && full.code, 'E_CONFLICT');
  });

  it('a pool whose members are all deployed can be deleted; its machines stay deployed', () => {
    const h = fleet();
    h.ok(createPool(1), 'pool');
    h.ok(allocateFor(h, 'web-1', ['m1']), 'pool');
    h.ok(
      { type: 'attempt.start', workflowId: 'web-1', actionIndex: 0, attempt: 1, workerId: 'm1' },
      'attempt',
    );
    h.finish('web-1', true);
    h.ok({ type: 'pool.delete', name: 'web' }, 'deleted');
    assert.equal(h.lifecycle('m1').state, 'deployed');
    assert.deepEqual(h.state.pools(), []);
  });

  it('is refused below state version 3', () => {
    const h = new LifecycleHarness(2);
    const res = h.run(createPool(1));
    assert.equal(res.type, 'error');
    assert.deepEqual(h.state.pools(), []);
  });
});

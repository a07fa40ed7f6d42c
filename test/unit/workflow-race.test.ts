// Goal: the race failure policy as the replicated state applies it (docs/decisions/0037): one
// workflow.allocate with race starts two lanes on two distinct ready machines in one entry (never a
// machine another workflow owns, refused whole when only one is ready); the first lane to succeed
// wins, the other is cancelled in the same entry (its running action stopped) and its machine
// released to ready, not failed; a lane that fails leaves the other running, and alternates
// onward within the request's budget, never onto a machine either lane took; both lanes failing
// with nothing left fails the request; an operator's cancel ends both lanes; every decision is an
// event with its reason; a snapshot restores it all.
// Method: ControlState through apply() (test/support/lifecycle-harness.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ControlCommand } from '../../src/state/control/commands.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { raceOutcome } from '../../src/state/control/race.js';
import { LifecycleHarness, operator, specFor } from '../support/lifecycle-harness.js';

type Allocate = Extract<ControlCommand, { readonly type: 'workflow.allocate' }>;

function raceCommand(h: LifecycleHarness, id: string, offer: readonly string[], attempts = 2): Allocate {
  return {
    type: 'workflow.allocate',
    id,
    template: 'os',
    templateVersion: h.state.template('os')?.version ?? 0,
    selector: 'rack=a',
    hardwareMap: {},
    candidates: offer.map((hardwareId) => ({ hardwareId, spec: specFor(hardwareId) })),
    alternateAttempts: attempts,
    race: true,
    audit: operator,
  };
}

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

function alternateCommand(h: LifecycleHarness, id: string, offer: readonly string[]): ControlCommand {
  return {
    type: 'workflow.alternate',
    id,
    finishedMs: h.state.workflow(id)?.finishedMs ?? 0,
    candidates: offer.map((hardwareId) => ({ hardwareId, spec: specFor(hardwareId) })),
  };
}

function events(h: LifecycleHarness, id: string, type: string): string[] {
  return h.state
    .events(id, 0, 1000)
    .filter((e) => e.type === type)
    .map((e) => e.message ?? '');
}

describe('the race policy', () => {
  it('starts two lanes on two machines, keeps the first success, cancels and releases the other', () => {
    const h = fleet();
    // m1 is taken by another workflow first: the race never gets it.
    h.ok(h.createCommand('other', 'm1'), 'workflow');
    const request = h.ok(raceCommand(h, 'w1', ['m1', 'm2', 'm3']), 'workflow').workflow;
    assert.equal(request.hardwareId, 'm2');
    assert.deepEqual(request.race, { request: 'w1', rival: 'w1.rival', tried: ['m2', 'm3'] });
    const rival = h.state.workflow('w1.rival');
    assert.equal(rival?.hardwareId, 'm3');
    assert.equal(rival?.spec.tasks[0]?.worker, 'm3', 'the rival runs the rendering for its machine');
    assert.deepEqual(rival?.race, { request: 'w1', rival: 'w1' });
    assert.deepEqual(
      ['m2', 'm3'].map((id) => [h.lifecycle(id).state, h.lifecycle(id).owner]),
      [
        ['provisioning', 'w1'],
        ['provisioning', 'w1.rival'],
      ],
    );
    // Both start; the rival finishes first and wins; the request's running action is stopped.
    h.is(h.start('w1'), 'attempt');
    h.is(h.start('w1.rival'), 'attempt');
    h.finish('w1.rival', true);
    const lost = h.state.workflow('w1');
    assert.equal(lost?.state, 'CANCELLED');
    assert.equal(lost?.actions[0]?.state, 'CANCELLED', 'the running action is stopped');
    assert.equal(lost?.race?.winner, 'w1.rival');
    assert.equal(lost?.race?.lostTo, 'w1.rival');
    assert.equal(h.state.workflow('w1.rival')?.state, 'SUCCESS');
    assert.equal(h.lifecycle('m3').state, 'deployed');
    const m2 = h.lifecycle('m2');
    assert.deepEqual([m2.state, m2.owner], ['ready', undefined], 'the loser released, not failed');
    assert.deepEqual(
      m2.history.slice(-2).map((e) => [e.from, e.to, e.trigger]),
      [
        ['provisioning', 'releasing', 'release'],
        ['releasing', 'ready', 'released'],
      ],
    );
    assert.match(m2.history.at(-2)?.reason ?? '', /workflow w1 lost the race to workflow w1.rival/);
    assert.deepEqual(events(h, 'w1', 'workflow.race'), [
      'race started: workflow w1 on m2, workflow w1.rival on m3, both ready and matching rack=a; at most 2 machines',
      'race won: workflow w1.rival succeeded first, on m3',
    ]);
    assert.match(events(h, 'w1', 'workflow.cancelled')[0] ?? '', /^lost the race: workflow w1.rival/);
    assert.equal(raceOutcome(h.state.workflow('w1')!, h.state.workflow('w1.rival')), 'won');
    assert.equal(h.state.workflowsAwaitingAlternate().length, 0);
    // The late result of the stopped action is acknowledged and changes nothing.
    const late = h.run({
      type: 'attempt.result',
      workflowId: 'w1',
      actionIndex: 0,
      attempt: 1,
      workerId: 'm2',
      success: true,
      exitStatus: 0,
      message: '',
      outputTail: '',
    });
    assert.equal(late.type, 'duplicate');
    assert.equal(h.state.workflow('w1')?.state, 'CANCELLED');
    assert.equal(h.lifecycle('m2').state, 'ready');
  });

  it('a failed lane leaves the other running; it alternates onward within the budget; both failing fail', () => {
    const h = fleet();
    h.ok(raceCommand(h, 'w1', ['m1', 'm2', 'm3', 'm4'], 3), 'workflow');
    h.is(h.start('w1'), 'attempt');
    h.finish('w1', false);
    assert.equal(h.lifecycle('m1').state, 'failed', 'a failed lane fails its machine');
    assert.equal(h.state.workflow('w1.rival')?.state, 'PENDING', 'the other lane runs on');
    assert.equal(raceOutcome(h.state.workflow('w1')!, h.state.workflow('w1.rival')), 'running');
    // The request's lane moves on: never m1 or m2 (either lane's), m3 is the third of three.
    const moved = h.ok(alternateCommand(h, 'w1', ['m1', 'm2', 'm3']), 'workflow').workflow;
    assert.equal(moved.hardwareId, 'm3');
    assert.deepEqual(moved.race?.tried, ['m1', 'm2', 'm3']);
    assert.match(events(h, 'w1', 'workflow.alternate')[0] ?? '', /machine 3 of 3: m3/);
    // The rival fails: the budget is spent (three machines), so it gives up; the request runs on.
    h.is(h.start('w1.rival'), 'attempt');
    h.finish('w1.rival', false);
    const rival = h.ok(alternateCommand(h, 'w1.rival', ['m4']), 'workflow').workflow;
    assert.match(rival.alternate?.gaveUp ?? '', /gave up: tried 3 of 3 machines \(m1, m2, m3\)/);
    assert.equal(raceOutcome(h.state.workflow('w1')!, rival), 'running');
    h.is(h.start('w1'), 'attempt');
    h.finish('w1', false);
    h.ok(alternateCommand(h, 'w1', ['m4']), 'workflow');
    assert.equal(raceOutcome(h.state.workflow('w1')!, h.state.workflow('w1.rival')), 'failed');
    assert.equal(h.lifecycle('m4').state, 'ready', 'no fourth machine');
  });

  it("a lane's success gives up the other lane's pending move; cancel ends both lanes", () => {
    const h = fleet();
    h.ok(raceCommand(h, 'w1', ['m1', 'm2'], 4), 'workflow');
    h.is(h.start('w1.rival'), 'attempt');
    h.finish('w1.rival', false);
    assert.deepEqual(
      h.state.workflowsAwaitingAlternate().map((w) => w.id),
      ['w1.rival'],
    );
    h.is(h.start('w1'), 'attempt');
    h.finish('w1', true);
    assert.equal(h.state.workflow('w1')?.race?.winner, 'w1');
    assert.match(
      h.state.workflow('w1.rival')?.alternate?.gaveUp ?? '',
      /^lost the race: workflow w1 succeeded/,
    );
    assert.equal(h.state.workflowsAwaitingAlternate().length, 0);

    h.ok(raceCommand(h, 'w2', ['m3', 'm4']), 'workflow');
    h.is(h.start('w2.rival'), 'attempt');
    h.ok({ type: 'workflow.cancel', id: 'w2', audit: operator }, 'workflow');
    const rival = h.state.workflow('w2.rival');
    assert.equal(rival?.state, 'CANCELLED');
    assert.match(rival?.message ?? '', /^cancelled with its rival lane w2/);
    assert.equal(rival?.actions[0]?.state, 'CANCELLED');
  });

  it('is refused whole when fewer than two machines are ready, or the rival id is taken', () => {
    const h = fleet();
    h.ok(h.createCommand('x1', 'm1'), 'workflow');
    h.ok(h.createCommand('x2', 'm2'), 'workflow');
    h.ok(h.createCommand('x3', 'm3'), 'workflow');
    h.refused(raceCommand(h, 'w1', ['m4']), 'E_CONFLICT', /only one ready machine matches "rack=a"/);
    const g = fleet();
    g.refused(raceCommand(g, 'w1', ['m1']), 'E_VERSION', /offer again/);
    g.ok(g.createCommand('w1.rival', 'm4'), 'workflow');
    g.refused(raceCommand(g, 'w1', ['m1', 'm2']), 'E_EXISTS', /w1.rival/);
    g.refused(raceCommand(g, 'w2', ['m1', 'm2'], 1), 'E_INVALID', /at least 2/);
    assert.equal(g.lifecycle('m1').state, 'ready');
  });

  it('restores from a snapshot with both lanes and the outcome', () => {
    const h = fleet();
    h.ok(raceCommand(h, 'w1', ['m1', 'm2']), 'workflow');
    h.is(h.start('w1'), 'attempt');
    h.finish('w1', true);
    const copy = new ControlState();
    copy.restore(h.state.snapshot());
    assert.deepEqual(copy.workflow('w1'), h.state.workflow('w1'));
    assert.deepEqual(copy.workflow('w1.rival'), h.state.workflow('w1.rival'));
    assert.deepEqual(copy.hardware('m2'), h.state.hardware('m2'));
  });
});

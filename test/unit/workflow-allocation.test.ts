// Goal: workflow.allocate as the replicated state applies it (docs/decisions/0030): the first
// offered machine that is ready, unowned and matching is taken in the same entry (ready →
// provisioning, owned, the selector in its event and in the workflow), then deployed or failed
// with the workflow's end; two allocations in one log with the same offer never get the same
// machine; an offer overtaken while others are ready is E_VERSION, none ready is E_CONFLICT naming
// what matched; below state version 3 it is refused. Property: over random logs of allocations
// (stale offers included), labels, operator verbs and workflow ends, every allocated machine was
// ready, unowned and matching when the entry applied (a race's two lanes included), and no machine
// ever has two active owners.
// Method: ControlState through apply() (test/support/lifecycle-harness.ts); fast-check for the
// property.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { ControlCommand } from '../../src/state/control/commands.js';
import { isTerminal } from '../../src/model/records.js';
import { machineFacts } from '../../src/fleet/facts.js';
import { matches, parseSelector, SelectorError } from '../../src/fleet/selector.js';
import { LifecycleHarness, operator, specFor } from '../support/lifecycle-harness.js';

type Allocate = Extract<ControlCommand, { readonly type: 'workflow.allocate' }>;

function allocateCommand(
  h: LifecycleHarness,
  id: string,
  selector: string,
  offer: readonly string[],
): Allocate {
  return {
    type: 'workflow.allocate',
    id,
    template: 'os',
    templateVersion: h.state.template('os')?.version ?? 0,
    selector,
    hardwareMap: {},
    candidates: offer.map((hardwareId) => ({ hardwareId, spec: specFor(hardwareId) })),
    audit: operator,
  };
}

/** Machines m1..m4 ready in rack a, m5 ready in rack b, m6 enrolled in rack a. */
function fleet(): LifecycleHarness {
  const h = new LifecycleHarness();
  for (let n = 1; n <= 6; n++) {
    const id = `m${n}`;
    h.machine(id, n);
    h.ok(
      { type: 'hardware.label', id, set: { rack: n === 5 ? 'b' : 'a' }, remove: [], audit: operator },
      'hardware',
    );
    if (n !== 6) h.ok(h.verbCommand(id, 'accept'), 'hardware');
  }
  return h;
}

describe('workflow.allocate', () => {
  it('takes the first offered machine that is ready and matches, in the same entry', () => {
    const h = fleet();
    const wf = h.ok(allocateCommand(h, 'w1', 'rack==a', ['m6', 'm5', 'm2', 'm1']), 'workflow').workflow;
    assert.equal(wf.hardwareId, 'm2', 'm6 is enrolled and m5 in rack b');
    assert.equal(wf.selector, 'rack=a', 'kept as canonical text');
    assert.equal(wf.spec.tasks[0]?.worker, 'm2', "the chosen machine's rendering");
    const lc = h.lifecycle('m2');
    assert.deepEqual([lc.state, lc.owner], ['provisioning', 'w1']);
    const event = lc.history.at(-1);
    assert.deepEqual([event?.from, event?.trigger, event?.workflowId], ['ready', 'provision', 'w1']);
    assert.match(event?.reason ?? '', /allocated by selector rack=a/);
    h.ok({ type: 'attempt.start', workflowId: 'w1', actionIndex: 0, attempt: 1, workerId: 'm2' }, 'attempt');
    h.finish('w1', false);
    const failed = h.lifecycle('m2');
    assert.deepEqual([failed.state, failed.step], ['failed', 'os/install']);
    assert.match(failed.reason ?? '', /workflow w1 failed/);
    h.ok(allocateCommand(h, 'w2', 'rack=a', ['m1']), 'workflow');
    h.ok({ type: 'attempt.start', workflowId: 'w2', actionIndex: 0, attempt: 1, workerId: 'm1' }, 'attempt');
    h.finish('w2', true);
    assert.equal(h.lifecycle('m1').state, 'deployed');
  });

  it('two allocations with the same offer in one log get two machines; then overtaken; then none', () => {
    const h = fleet();
    const a = h.ok(allocateCommand(h, 'w1', 'rack=a', ['m1', 'm2']), 'workflow').workflow;
    const b = h.ok(allocateCommand(h, 'w2', 'rack=a', ['m1', 'm2']), 'workflow').workflow;
    assert.deepEqual([a.hardwareId, b.hardwareId], ['m1', 'm2']);
    // The same offer again: both taken, but m3 and m4 are ready: the API offers again.
    h.refused(
      allocateCommand(h, 'w3', 'rack=a', ['m1', 'm2']),
      'E_VERSION',
      /2 other machines are: offer again/,
    );
    h.ok(allocateCommand(h, 'w3', 'rack=a', ['m3']), 'workflow');
    h.ok(allocateCommand(h, 'w4', 'rack=a', ['m4']), 'workflow');
    const message = h.refused(allocateCommand(h, 'w5', 'rack=a', ['m4']), 'E_CONFLICT');
    assert.equal(
      message,
      'no ready machine matches the selector "rack=a": 5 machines match it but are not ready ' +
        "(1 enrolled, 4 provisioning); 1 machine fails a term of it, of 6; `slipway hardware explain 'rack=a'` says why each is left out",
    );
    h.refused(allocateCommand(h, 'w6', 'rack=', ['m5']), 'E_INVALID', /selector: rack=: /);
    h.refused(allocateCommand(h, 'w1', 'rack=b', ['m5']), 'E_EXISTS');
  });

  it('is refused below state version 3', () => {
    const h = new LifecycleHarness(2);
    h.machine('m1', 1);
    h.refused(allocateCommand(h, 'w1', '', ['m1']), 'E_INVALID', /needs cluster version 3/);
  });
});

const labelsArb = fc.constantFrom('a', 'b');
const stepArb = fc.oneof(
  fc.record({
    kind: fc.constant('allocate' as const),
    selector: fc.constantFrom('rack=a', 'rack=b', '', 'rack in (a,b),!gpu', 'gpu'),
    offer: fc.array(fc.integer({ min: 1, max: 6 }), { maxLength: 6 }),
  }),
  fc.record({
    kind: fc.constant('label' as const),
    n: fc.integer({ min: 1, max: 6 }),
    rack: labelsArb,
    gpu: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('verb' as const),
    n: fc.integer({ min: 1, max: 6 }),
    verb: fc.constantFrom('accept', 'drain', 'undrain', 'quarantine', 'release'),
  }),
  fc.record({ kind: fc.constant('end' as const), pick: fc.nat(), success: fc.boolean() }),
  fc.record({
    kind: fc.constant('alternate' as const),
    pick: fc.nat(),
    offer: fc.array(fc.integer({ min: 1, max: 6 }), { maxLength: 6 }),
  }),
);

describe('property: one machine, one owner, and only a ready matching one', () => {
  it('holds over random logs', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 60 }), (steps) => {
        const h = fleet();
        let next = 0;
        for (const step of steps) {
          h.nowMs += 1_000;
          if (step.kind === 'allocate') {
            const offer = step.offer.map((n) => `m${n}`);
            const before = new Map(offer.map((id) => [id, h.state.hardware(id)]));
            const command = allocateCommand(h, `w${(next += 1)}`, step.selector, offer);
            // Every third a race (0037): its rival lane takes a second machine in the same entry.
            const policy =
              next % 3 === 0
                ? { alternateAttempts: 3, race: true }
                : next % 2 === 0
                  ? { alternateAttempts: 3 }
                  : {};
            const result = h.run({ ...command, ...policy });
            if (result.type !== 'workflow') continue;
            const hw = before.get(result.workflow.hardwareId);
            const selector = parseSelector(step.selector);
            assert.ok(hw !== undefined && !(selector instanceof SelectorError));
            assert.equal(hw.lifecycle?.state, 'ready', 'allocated a machine that was not ready');
            assert.equal(hw.lifecycle?.owner, undefined, 'allocated an owned machine');
            assert.ok(matches(selector, machineFacts(hw)), 'allocated a machine that did not match');
            const first = offer.find((id) => {
              const m = before.get(id);
              return (
                m?.lifecycle?.state === 'ready' &&
                m.lifecycle.owner === undefined &&
                matches(selector, machineFacts(m))
              );
            });
            assert.equal(result.workflow.hardwareId, first, 'not the first qualifying machine offered');
            const rival = result.workflow.race && h.state.workflow(result.workflow.race.rival);
            if (rival) {
              const was = before.get(rival.hardwareId);
              assert.notEqual(rival.hardwareId, result.workflow.hardwareId, 'a race took one machine twice');
              assert.equal(was?.lifecycle?.state, 'ready', "the rival's machine was not ready");
              assert.equal(was?.lifecycle?.owner, undefined, "the rival's machine was owned");
            }
          } else if (step.kind === 'alternate') {
            const waiting = h.state.workflowsAwaitingAlternate();
            const wf = waiting[step.pick % Math.max(1, waiting.length)];
            if (wf === undefined) continue;
            const offer = step.offer.map((n) => `m${n}`);
            const before = new Map(offer.map((id) => [id, h.state.hardware(id)]));
            const result = h.run(alternateCommand(h, wf.id, offer));
            if (result.type !== 'workflow' || result.workflow.state !== 'PENDING') continue;
            const moved = result.workflow;
            assert.ok(!(wf.alternate?.tried ?? []).includes(moved.hardwareId), 'a machine tried twice');
            assert.equal(new Set(moved.alternate?.tried).size, moved.alternate?.tried.length);
            assert.ok((moved.alternate?.tried.length ?? 0) <= (moved.alternate?.attempts ?? 0));
            const hw = before.get(moved.hardwareId);
            const selector = parseSelector(moved.selector ?? '');
            assert.ok(hw !== undefined && !(selector instanceof SelectorError));
            assert.equal(hw.lifecycle?.state, 'ready', 're-allocated a machine that was not ready');
            assert.ok(matches(selector, machineFacts(hw)), 're-allocated a machine that did not match');
          } else if (step.kind === 'label') {
            const set = { rack: step.rack, ...(step.gpu ? { gpu: 'true' } : {}) };
            h.run({
              type: 'hardware.label',
              id: `m${step.n}`,
              set,
              remove: step.gpu ? [] : ['gpu'],
              audit: operator,
            });
          } else if (step.kind === 'verb') {
            h.verb(`m${step.n}`, step.verb);
          } else {
            const active = h.state.workflows().filter((w) => !isTerminal(w.state));
            const wf = active[step.pick % Math.max(1, active.length)];
            if (wf !== undefined) {
              h.start(wf.id);
              h.finish(wf.id, step.success);
            }
          }
          const owners = new Map<string, string>();
          for (const wf of h.state.workflows()) {
            if (isTerminal(wf.state)) continue;
            assert.ok(!owners.has(wf.hardwareId), `${wf.hardwareId} has two active workflows`);
            owners.set(wf.hardwareId, wf.id);
            assert.equal(h.state.hardware(wf.hardwareId)?.lifecycle?.owner, wf.id);
          }
        }
      }),
      { numRuns: 150 },
    );
  });
});

type Alternate = Extract<ControlCommand, { readonly type: 'workflow.alternate' }>;

function alternateCommand(h: LifecycleHarness, id: string, offer: readonly string[]): Alternate {
  return {
    type: 'workflow.alternate',
    id,
    finishedMs: h.state.workflow(id)?.finishedMs ?? 0,
    candidates: offer.map((hardwareId) => ({ hardwareId, spec: specFor(hardwareId) })),
  };
}

/** Starts and fails the workflow's one action on its current machine. */
function failOn(h: LifecycleHarness, id: string): void {
  h.is(h.start(id), 'attempt');
  h.finish(id, false);
  assert.equal(h.state.workflow(id)?.state, 'FAILED');
}

describe('the alternate policy', () => {
  it('re-allocates a failed workflow on another machine, never one tried, up to N, each decision an event', () => {
    const h = fleet();
    const first = { ...allocateCommand(h, 'w1', 'rack=a', ['m1', 'm2']), alternateAttempts: 3 };
    assert.equal(h.ok(first, 'workflow').workflow.hardwareId, 'm1');
    assert.deepEqual(h.state.workflow('w1')?.alternate, { attempts: 3, tried: ['m1'] });
    failOn(h, 'w1');
    assert.deepEqual([h.lifecycle('m1').state, h.lifecycle('m1').step], ['failed', 'os/install']);
    // A stale proposal (another finish time) changes nothing; the tried machine is skipped.
    h.refused({ ...alternateCommand(h, 'w1', ['m2']), finishedMs: 1 }, 'E_NOT_DUE');
    const moved = h.ok(alternateCommand(h, 'w1', ['m1', 'm2', 'm3']), 'workflow').workflow;
    assert.deepEqual(
      [moved.state, moved.hardwareId, moved.alternate?.tried],
      ['PENDING', 'm2', ['m1', 'm2']],
    );
    assert.equal(moved.spec.tasks[0]?.worker, 'm2');
    assert.equal(h.lifecycle('m2').owner, 'w1');
    assert.match(h.lifecycle('m2').reason ?? '', /machine 2 of 3/);
    const events = h.state.events('w1', 0, 1000).filter((e) => e.type === 'workflow.alternate');
    assert.match(
      events[0]?.message ?? '',
      /^failed on m1 at os\/install: .*; machine 2 of 3: m2, ready and matching rack=a \(tried m1\)$/,
    );
    // The same proposal again, applied after: stale.
    h.refused(alternateCommand(h, 'w1', ['m3']), 'E_NOT_DUE');
    failOn(h, 'w1');
    h.ok(alternateCommand(h, 'w1', ['m3']), 'workflow');
    failOn(h, 'w1');
    const gaveUp = h.ok(alternateCommand(h, 'w1', ['m4']), 'workflow').workflow;
    assert.equal(gaveUp.state, 'FAILED');
    assert.equal(gaveUp.hardwareId, 'm3', 'no fourth machine');
    assert.match(gaveUp.alternate?.gaveUp ?? '', /gave up: tried 3 of 3 machines \(m1, m2, m3\)/);
    assert.deepEqual(
      ['m1', 'm2', 'm3', 'm4'].map((id) => h.lifecycle(id).state),
      ['failed', 'failed', 'failed', 'ready'],
    );
    assert.equal(h.state.workflowsAwaitingAlternate().length, 0);
    h.refused(alternateCommand(h, 'w1', ['m4']), 'E_NOT_DUE', /gave up/);
  });

  it('gives up, saying why, when no other machine is ready; waits for a new offer when one is', () => {
    const h = fleet();
    h.ok({ ...allocateCommand(h, 'w1', 'rack=b', ['m5']), alternateAttempts: 4 }, 'workflow');
    failOn(h, 'w1');
    assert.deepEqual(
      h.state.workflowsAwaitingAlternate().map((w) => w.id),
      ['w1'],
    );
    const stopped = h.ok(alternateCommand(h, 'w1', ['m5']), 'workflow').workflow;
    assert.match(
      stopped.alternate?.gaveUp ?? '',
      /gave up after m5: no other ready machine matches the selector "rack=b"/,
    );
    const g = fleet();
    g.ok({ ...allocateCommand(g, 'w1', 'rack=a', ['m1']), alternateAttempts: 2 }, 'workflow');
    failOn(g, 'w1');
    g.refused(alternateCommand(g, 'w1', ['m1']), 'E_VERSION', /others are: offer again/);
  });
});

// Goal: the machine lifecycle's transition table and label rules, as data and pure functions
// (src/fleet/lifecycle.ts, src/fleet/labels.ts; docs/decisions/0028-machine-lifecycle.md): the
// table names exactly the states, its transitional states are the ones with deadlines,
// refusals name the machine's state and its allowed moves, and labels are checked as Kubernetes
// checks them.
// Method: the functions called directly, on hand-made records.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  isAllowed,
  lifecycleTable,
  moveRefusal,
  movesText,
  provisionRefusal,
  targetOf,
  transitionalStates,
  verbRefusal,
} from '../../src/fleet/lifecycle.js';
import { applyLabelChange } from '../../src/fleet/labels.js';
import { labelKeyProblem, labelValueProblem } from '../../src/model/labels.js';
import { machineStates, operatorVerbs, type MachineLifecycle } from '../../src/model/machine-lifecycle.js';
import { labelsPerHardwareMax } from '../../src/model/limits.js';

const at = (state: MachineLifecycle['state'], extra: Partial<MachineLifecycle> = {}): MachineLifecycle => ({
  state,
  sinceMs: 1,
  history: [{ seq: 1, stampMs: 1, to: state, trigger: 'adopt', by: 'test' }],
  ...extra,
});

describe('the transition table', () => {
  it('has the issue’s ten states, each reachable, and only retired is final', () => {
    assert.deepEqual([...machineStates].sort(), [
      'deployed',
      'enrolled',
      'failed',
      'inspecting',
      'maintenance',
      'provisioning',
      'quarantined',
      'ready',
      'releasing',
      'retired',
    ]);
    for (const state of machineStates) {
      assert.ok(
        lifecycleTable.some((e) => e.to === state && e.from !== null),
        `${state} is reached by a move`,
      );
      const out = lifecycleTable.filter((e) => e.from === state);
      assert.equal(out.length === 0, state === 'retired', `${state} has moves out: ${out.length}`);
    }
    // A machine's history starts only by being registered or adopted.
    const starts = lifecycleTable.filter((e) => e.from === null);
    assert.deepEqual([...new Set(starts.map((e) => e.trigger))].sort(), ['adopt', 'register']);
  });

  it('lists no move twice, and no move from a state to itself', () => {
    const keys = lifecycleTable.map((e) => `${e.from}>${e.to}:${e.trigger}`);
    assert.equal(new Set(keys).size, keys.length);
    for (const e of lifecycleTable) assert.notEqual(e.from, e.to, `${e.trigger} from ${e.from}`);
  });

  it('transitional states are inspecting, provisioning, releasing, and each has a deadline’s expiry', () => {
    assert.deepEqual([...transitionalStates].sort(), ['inspecting', 'provisioning', 'releasing']);
    for (const state of transitionalStates) {
      const to = lifecycleTable.filter((e) => e.trigger === 'expire' && e.from === state).map((e) => e.to);
      // A provisioning's expiry is its workflow's failure: the quarantine policy may count it.
      assert.deepEqual(to, state === 'provisioning' ? ['failed', 'quarantined'] : ['failed'], state);
    }
    for (const e of lifecycleTable.filter((x) => x.trigger === 'expire')) {
      assert.ok(e.from !== null && transitionalStates.has(e.from));
    }
  });

  it('every operator verb has a move, and undrain goes back to several states', () => {
    for (const verb of operatorVerbs)
      assert.ok(
        lifecycleTable.some((e) => e.trigger === verb),
        verb,
      );
    assert.equal(targetOf('maintenance', 'undrain'), undefined, 'the record says where undrain goes');
    assert.ok(isAllowed('maintenance', 'deployed', 'undrain'));
    assert.ok(!isAllowed('maintenance', 'retired', 'undrain'));
  });

  it('a refusal names the state and the allowed moves', () => {
    const message = moveRefusal('m1', 'ready', 'accept');
    assert.match(message, /^hardware "m1" is ready; accept is not one of its moves \(from ready: /);
    for (const e of lifecycleTable.filter((x) => x.from === 'ready'))
      assert.ok(message.includes(`→ ${e.to}`));
    assert.match(movesText('ready'), /workflow create → provisioning/);
    assert.equal(movesText('retired'), 'none: it is final');
    assert.match(moveRefusal('m1', 'retired', 'undrain'), /from retired: none: it is final/);
  });

  it('verbs: the table first, then a running owner leaves only drain', () => {
    assert.equal(verbRefusal('m1', at('enrolled'), 'accept'), undefined);
    assert.match(verbRefusal('m1', at('ready'), 'accept') ?? '', /is ready; accept is not one of its moves/);
    assert.match(verbRefusal('m1', at('ready'), 'undrain') ?? '', /undrain is not one of its moves/);
    const drained = at('maintenance', { owner: 'w1', drainedFrom: 'provisioning' });
    assert.equal(verbRefusal('m1', drained, 'undrain'), undefined);
    assert.match(verbRefusal('m1', drained, 'retire') ?? '', /workflow "w1" still runs on it/);
    const provisioning = at('provisioning', { owner: 'w1', deadlineMs: 5 });
    assert.equal(verbRefusal('m1', provisioning, 'drain'), undefined);
    assert.match(verbRefusal('m1', provisioning, 'quarantine') ?? '', /quarantine is not one of its moves/);
  });

  it('a workflow may take a machine only from the provision moves, and only with no owner', () => {
    for (const state of machineStates) {
      const free = provisionRefusal('m1', at(state));
      assert.equal(free === undefined, ['enrolled', 'ready', 'deployed', 'failed'].includes(state), state);
    }
    assert.match(
      provisionRefusal('m1', at('provisioning', { owner: 'w1', deadlineMs: 5 })) ?? '',
      /owned by workflow "w1": one workflow at a time/,
    );
  });
});

describe('labels', () => {
  it('accepts keys and values as Kubernetes does', () => {
    for (const key of ['rack', 'a', 'rack.zone_1-b', 'example.com/rack', 'a.b-c.d/x'])
      assert.equal(labelKeyProblem(key), undefined, key);
    for (const value of ['', 'a', 'A-1_b.c', 'x'.repeat(63)])
      assert.equal(labelValueProblem(value), undefined);
  });

  it('refuses bad keys and values, naming them', () => {
    for (const key of [
      '',
      '-a',
      'a-',
      'a b',
      'Example.com/x',
      '/x',
      'a/',
      'x'.repeat(64),
      `${'a'.repeat(254)}/x`,
    ]) {
      assert.match(labelKeyProblem(key) ?? '', /^label key/, key);
    }
    for (const value of ['-a', 'a b', 'x'.repeat(64), 'é']) {
      assert.match(labelValueProblem(value) ?? '', /^label value/, value);
    }
  });

  it('sets, removes and sorts; refuses a key both set and removed, and too many labels', () => {
    const first = applyLabelChange({}, { set: { zone: 'b', rack: 'a' }, remove: [] });
    assert.ok('labels' in first);
    assert.deepEqual(Object.keys(first.labels), ['rack', 'zone']);
    const next = applyLabelChange(first.labels, { set: { gpu: '' }, remove: ['zone', 'absent'] });
    assert.ok('labels' in next);
    assert.deepEqual(next.labels, { gpu: '', rack: 'a' });
    const both = applyLabelChange({}, { set: { rack: 'a' }, remove: ['rack'] });
    assert.ok('problem' in both && /both set and removed/.test(both.problem));
    const many = Object.fromEntries(
      Array.from({ length: labelsPerHardwareMax + 1 }, (_, i) => [`k${i}`, 'v']),
    );
    const over = applyLabelChange({}, { set: many, remove: [] });
    assert.ok('problem' in over && /at most 64 labels/.test(over.problem));
    // A key in the inventory facts' namespace is the inventory's: a selector reads it as a fact.
    const fact = applyLabelChange({}, { set: { memory: 'big' }, remove: [] });
    assert.ok('problem' in fact && /is an inventory fact/.test(fact.problem));
    const badValue = applyLabelChange({}, { set: { rack: 'a b' }, remove: [] });
    assert.ok('problem' in badValue && /label value "a b" .*\(label rack\)$/.test(badValue.problem));
    // A label named "problem" is a label like any other.
    const named = applyLabelChange({}, { set: { problem: 'none' }, remove: [] });
    assert.ok('labels' in named && named.labels['problem'] === 'none');
  });
});

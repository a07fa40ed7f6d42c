// Goal: the pure rules of allocation and explain (src/fleet/allocation.ts, docs/decisions/0030):
// a machine is selected only when it matches every term and is ready with no owner; a machine
// left out says the first term it fails (value it has vs what the term needs) or why it is not
// ready; the choice is the first selected in the order given; the refusal counts what matched but
// was not ready and points at `hardware explain`; a selector that does not parse is pointed at.
// Method: plain records in, answers out.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  chooseMachine,
  noMachineMessage,
  tallyOf,
  verdictOf,
  type Candidate,
} from '../../src/fleet/allocation.js';
import { parseSelector, pointAt, SelectorError, type Selector } from '../../src/fleet/selector.js';
import type { MachineLifecycle, MachineState } from '../../src/model/machine-lifecycle.js';

function lifecycle(state: MachineState, owner?: string): MachineLifecycle {
  return { state, sinceMs: 1, history: [], ...(owner === undefined ? {} : { owner }) };
}

function machine(id: string, state: MachineState, labels: Record<string, string>, owner?: string): Candidate {
  return { id, arch: 'x86_64', uefi: true, labels, lifecycle: lifecycle(state, owner) };
}

function selector(text: string): Selector {
  const parsed = parseSelector(text);
  assert.ok(!(parsed instanceof SelectorError), parsed instanceof SelectorError ? parsed.message : '');
  return parsed;
}

const fleet: readonly Candidate[] = [
  machine('m1', 'provisioning', { rack: 'a' }, 'w9'),
  machine('m2', 'ready', { rack: 'b' }),
  machine('m3', 'ready', { rack: 'a' }),
  machine('m4', 'failed', { rack: 'a' }),
  machine('m5', 'ready', { rack: 'a', gpu: 'true' }),
  machine('m6', 'ready', {}),
];

describe('verdicts', () => {
  it('a machine that fails a term says the first one, with what it has', () => {
    const v = verdictOf(selector('rack=a,!gpu'), fleet[1]!);
    assert.equal(v.kind, 'fails');
    assert.equal(v.kind === 'fails' && v.failure.text, 'rack=a: has rack=b');
    const gpu = verdictOf(selector('rack=a,!gpu'), fleet[4]!);
    assert.equal(gpu.kind === 'fails' && gpu.failure.index, 1);
    assert.equal(gpu.kind === 'fails' && gpu.failure.text, '!gpu: has gpu=true');
    const none = verdictOf(selector('rack in (a,b)'), fleet[5]!);
    assert.equal(none.kind === 'fails' && none.failure.reason, 'has no label rack');
  });

  it('an inventory fact on a machine never inspected fails with the fact unknown', () => {
    const v = verdictOf(selector('rack=a,memory>=64Gi'), fleet[2]!);
    assert.equal(v.kind === 'fails' && v.failure.term, 'memory>=64Gi');
    assert.match(v.kind === 'fails' ? v.failure.reason : '', /no inventory yet/);
  });

  it('a machine matching every term is selected only when ready and unowned', () => {
    const s = selector('rack=a');
    assert.deepEqual(verdictOf(s, fleet[2]!), { kind: 'selected' });
    assert.deepEqual(verdictOf(s, fleet[3]!), { kind: 'not-ready', reason: 'not ready: state failed' });
    assert.deepEqual(verdictOf(s, fleet[0]!), {
      kind: 'not-ready',
      reason: 'not ready: state provisioning',
    });
    const owned = machine('m7', 'ready', { rack: 'a' }, 'w1');
    assert.deepEqual(verdictOf(s, owned), { kind: 'not-ready', reason: 'not ready: owned by workflow w1' });
    const untracked: Candidate = { id: 'm8', arch: 'x86_64', uefi: false, labels: { rack: 'a' } };
    assert.equal(verdictOf(s, untracked).kind, 'not-ready');
  });
});

describe('choice and refusal', () => {
  it('chooses the first selected machine in the order given, and none when none is', () => {
    assert.equal(chooseMachine(selector('rack=a'), fleet)?.id, 'm3');
    assert.equal(chooseMachine(selector('rack=a'), [...fleet].reverse())?.id, 'm5');
    assert.equal(chooseMachine(selector('rack=a,gpu'), fleet)?.id, 'm5');
    assert.equal(chooseMachine(selector('rack=c'), fleet), undefined);
    assert.equal(chooseMachine(selector(''), fleet)?.id, 'm2', 'an empty selector takes any ready machine');
  });

  it('tallies the fleet and says how many matched but were not ready', () => {
    const s = selector('rack=a,!gpu');
    const tally = tallyOf(s, fleet);
    assert.deepEqual(tally, { total: 6, selected: 1, notReady: { failed: 1, provisioning: 1 }, failing: 3 });
    const blocked = fleet.filter((m) => m.id !== 'm3');
    const message = noMachineMessage('rack=a,!gpu', tallyOf(s, blocked));
    assert.equal(
      message,
      'no ready machine matches the selector "rack=a,!gpu": 2 machines match it but are not ready ' +
        '(1 failed, 1 provisioning); 3 machines fail a term of it, of 5; ' +
        "`slipway hardware explain 'rack=a,!gpu'` says why each is left out",
    );
    assert.match(
      noMachineMessage('rack=z', tallyOf(selector('rack=z'), fleet)),
      /no machine matches it; 6 machines fail/,
    );
  });
});

describe('a selector that does not parse', () => {
  it('is pointed at: the message, the selector, a caret under the column', () => {
    const text = 'rack=a,memory>=64Gx';
    const parsed = parseSelector(text);
    assert.ok(parsed instanceof SelectorError);
    const [message, shown, caret] = pointAt(text, parsed).split('\n');
    assert.match(message ?? '', /^memory>=64Gx: unknown unit "Gx" at column 16/);
    assert.equal(shown, `  ${text}`);
    assert.equal(caret?.indexOf('^'), 2 + parsed.column - 1);
    assert.equal(text.charAt((caret?.indexOf('^') ?? 0) - 2), '6');
  });

  it('shows a long selector around the column only', () => {
    const text = `${'k=v,'.repeat(40)}rack in (a,b`;
    const parsed = parseSelector(text);
    assert.ok(parsed instanceof SelectorError);
    const [, shown, caret] = pointAt(text, parsed).split('\n');
    assert.ok((shown?.length ?? 0) < 80, shown);
    assert.ok(shown?.startsWith('  …'));
    assert.equal(caret?.trimEnd().length, (shown?.length ?? 0) + (parsed.column > text.length ? 1 : 0));
  });
});

// Goal: the pure decision of a pool (src/fleet/pool.ts, docs/decisions/0035): members counted by
// their state; the machines offered are ready, unowned, matching, no member, in fleet order and
// never more than the slots missing (never two for one slot); a pool larger than what matches
// says how many slots it lacks and why, in the allocation refusal's words.
// Method: plain records in, answers out.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Candidate } from '../../src/fleet/allocation.js';
import { poolStanding, type Pool } from '../../src/fleet/pool.js';
import { parseSelector, SelectorError, type Selector } from '../../src/fleet/selector.js';
import type { MachineState } from '../../src/model/machine-lifecycle.js';

function machine(id: string, state: MachineState, labels: Record<string, string>, owner?: string): Candidate {
  const lifecycle = { state, sinceMs: 1, history: [], ...(owner === undefined ? {} : { owner }) };
  return { id, arch: 'x86_64', uefi: true, labels, lifecycle };
}

function selector(text: string): Selector {
  const parsed = parseSelector(text);
  assert.ok(!(parsed instanceof SelectorError));
  return parsed;
}

function pool(size: number, members: readonly string[] = []): Pool {
  return { name: 'web', selector: 'rack=a', template: 't', size, spares: 0, members, version: 1 };
}

const fleet: readonly Candidate[] = [
  machine('m1', 'deployed', { rack: 'a' }),
  machine('m2', 'provisioning', { rack: 'a' }, 'w2'),
  machine('m3', 'failed', { rack: 'a' }),
  machine('m4', 'ready', { rack: 'a' }),
  machine('m5', 'ready', { rack: 'b' }),
  machine('m6', 'ready', { rack: 'a' }, 'w6'),
  machine('m7', 'ready', { rack: 'a' }),
  machine('m8', 'deployed', { rack: 'a' }),
];

describe('pool standing', () => {
  it('counts members by state and offers ready matching machines for the missing slots only', () => {
    const s = poolStanding(pool(3, ['m1', 'm2', 'm3']), selector('rack=a'), fleet);
    assert.deepEqual(
      { d: s.deployed, p: s.provisioning, f: s.failed, ready: s.ready, missing: s.missing },
      { d: 1, p: 1, f: 1, ready: 2, missing: 1 },
    );
    // One slot: the machines for it, best first (the state takes the first still ready).
    assert.deepEqual(s.offer, ['m4', 'm7']);
    assert.equal(s.lacking, 0);
    assert.equal(s.why, undefined);
  });

  it('a full pool offers nothing; one shrunk below its members offers nothing either', () => {
    assert.deepEqual(poolStanding(pool(2, ['m1', 'm2']), selector('rack=a'), fleet).offer, []);
    const shrunk = poolStanding(pool(0, ['m1', 'm2']), selector('rack=a'), fleet);
    assert.deepEqual([shrunk.missing, shrunk.offer.length], [0, 0]);
  });

  it('never offers a member, an owned or non-matching machine', () => {
    const s = poolStanding(pool(4, ['m4']), selector('rack=a'), fleet);
    assert.deepEqual(s.offer, ['m7']);
    assert.ok(!s.offer.includes('m6') && !s.offer.includes('m5'));
  });

  it('a pool larger than the matching machines says how many it lacks and why', () => {
    const s = poolStanding(pool(5, ['m1']), selector('rack=a'), fleet);
    assert.deepEqual([s.missing, s.ready, s.lacking], [4, 2, 2]);
    assert.deepEqual(s.offer, ['m4', 'm7']);
    assert.match(
      s.why ?? '',
      /^2 of 5 slots cannot be filled: no ready machine matches the selector "rack=a"/,
    );
    assert.match(s.why ?? '', /not ready \(1 deployed, 1 failed, 1 owned, 1 provisioning\)/);
  });
});

// Goal: the pure decision of a pool (src/fleet/pool.ts, docs/decisions/0035): members counted by
// their state; the machines offered are ready, unowned, matching, no member, in fleet order and
// never more than the slots missing (never two for one slot); a pool larger than what matches
// says how many slots it lacks and why, in the allocation refusal's words.
// Method: plain records in, answers out.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
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

// Goal (docs/decisions/0036): placement by --spread-by never puts a member in a value while
// another value where the pool may take a machine has fewer; the pool's own spares come first and
// no other allocation takes them; a taint never releases a member while that would leave fewer
// than size - maxUnavailable deployed, and ends with every member replaced.
// Method: the pure standing on plain records; fast-check walks random fleets and keeper steps.
type Fleet = Map<string, Candidate>;

function spreadPool(size: number, extra: Partial<Pool> = {}): Pool {
  return {
    name: 'web',
    selector: 'role=web',
    template: 't',
    size,
    spares: 0,
    members: [],
    version: 1,
    ...extra,
  };
}

function at(fleetMap: Fleet, id: string, state: MachineState, extra: Record<string, unknown> = {}): void {
  const m = fleetMap.get(id);
  assert.ok(m !== undefined);
  fleetMap.set(id, { ...m, lifecycle: { state, sinceMs: 1, history: [], ...extra } });
}

describe('pool placement', () => {
  it('spreads across the label, offers the pool its own spares first, and hides them from others', () => {
    const racks: Fleet = new Map();
    for (const [id, rack] of [
      ['m1', 'a'],
      ['m2', 'a'],
      ['m3', 'b'],
      ['m4', 'b'],
    ] as const)
      racks.set(id, machine(id, 'ready', { role: 'web', rack }));
    const web = selector('role=web');
    at(racks, 'm1', 'deployed');
    const pool = spreadPool(3, { spreadBy: 'rack', members: ['m1'], spares: 1 });
    const s = poolStanding(pool, web, [...racks.values()]);
    assert.deepEqual(s.offer, ['m3', 'm4'], 'rack b has fewer members');
    assert.deepEqual(
      s.spread.map((c) => [c.value, c.members, c.available]),
      [
        ['a', 1, 1],
        ['b', 0, 2],
      ],
    );
    // m4 kept as the pool's spare: offered first (within the spread), to this pool only.
    at(racks, 'm4', 'ready', { spareOf: 'web' });
    assert.deepEqual(poolStanding(pool, web, [...racks.values()]).offer, ['m4', 'm3']);
    const other = poolStanding({ ...pool, name: 'db', members: [] }, web, [...racks.values()]);
    assert.ok(!other.offer.includes('m4'), "another pool's spare is not offered");
  });

  it('fills every value evenly, whatever the fleet (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('a', 'b', 'c', ''), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 12 }),
        (labels, size) => {
          const fleetMap: Fleet = new Map();
          labels.forEach((rack, i) => {
            const id = `m${String(i).padStart(2, '0')}`;
            fleetMap.set(id, machine(id, 'ready', rack === '' ? { role: 'web' } : { role: 'web', rack }));
          });
          const web = selector('role=web');
          let pool = spreadPool(size, { spreadBy: 'rack' });
          for (;;) {
            const s = poolStanding(pool, web, [...fleetMap.values()]);
            const chosen = s.offer[0];
            if (chosen === undefined) break;
            const value = (fleetMap.get(chosen)?.labels ?? {})['rack'] ?? '';
            const least = Math.min(...s.spread.filter((c) => c.available > 0).map((c) => c.members));
            const mine = s.spread.find((c) => c.value === value)?.members;
            assert.equal(mine, least, `${chosen} in "${value}" while a value has ${least}`);
            at(fleetMap, chosen, 'provisioning', { owner: `w-${chosen}` });
            pool = { ...pool, members: [...pool.members, chosen].sort() };
          }
          assert.equal(pool.members.length, Math.min(size, labels.length));
        },
      ),
    );
  });

  it('a taint never leaves fewer than size - maxUnavailable deployed, and replaces every member (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 0, max: 3 }),
        fc.boolean(),
        fc.array(fc.boolean(), { minLength: 200, maxLength: 200 }),
        (size, maxUnavailable, extra, withTemplate, coin) => {
          const fleetMap: Fleet = new Map();
          const total = size + extra;
          for (let i = 0; i < total; i++) {
            const id = `m${String(i).padStart(2, '0')}`;
            fleetMap.set(id, machine(id, i < size ? 'deployed' : 'ready', { role: 'web' }));
          }
          const web = selector('role=web');
          const members = [...fleetMap.keys()].slice(0, size);
          let pool = spreadPool(size, { maxUnavailable, members, tainted: members });
          const deployed = (): number =>
            pool.members.filter((id) => fleetMap.get(id)?.lifecycle?.state === 'deployed').length;
          // With no machine to surge onto and no room in the budget, a taint cannot move: it waits.
          const stuck = extra === 0 && maxUnavailable === 0;
          let releasing: string[] = [];
          for (let step = 0; step < 200; step++) {
            const s = poolStanding(pool, web, [...fleetMap.values()]);
            if (s.release !== undefined) {
              const id = s.release.hardwareId;
              assert.equal(s.release.why, 'taint');
              pool = {
                ...pool,
                members: pool.members.filter((m) => m !== id),
                tainted: (pool.tainted ?? []).filter((m) => m !== id),
              };
              assert.ok(deployed() >= size - maxUnavailable, `${deployed()} deployed after releasing ${id}`);
              if (withTemplate) {
                at(fleetMap, id, 'releasing', { owner: `r-${id}` });
                releasing.push(id);
              } else at(fleetMap, id, 'ready');
            }
            const chosen = s.offer[0];
            if (chosen !== undefined) {
              at(fleetMap, chosen, 'provisioning', { owner: `w-${chosen}` });
              pool = { ...pool, members: [...pool.members, chosen].sort() };
            }
            // Provisioning members and release workflows finish, some at once, all within three steps.
            for (const id of pool.members)
              if (
                fleetMap.get(id)?.lifecycle?.state === 'provisioning' &&
                (coin[step] === true || step % 3 === 0)
              )
                at(fleetMap, id, 'deployed');
            if (coin[(step + 1) % coin.length] === true || step % 3 === 1) {
              for (const id of releasing) at(fleetMap, id, 'ready');
              releasing = [];
            }
            assert.ok(
              deployed() >= Math.min(size - maxUnavailable, size),
              `step ${step}: ${deployed()} deployed, budget ${size - maxUnavailable}`,
            );
          }
          if (!stuck) {
            assert.equal((pool.tainted ?? []).length, 0, 'every tainted member replaced');
          }
        },
      ),
    );
  });
});

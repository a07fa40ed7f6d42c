// Goal: the real raft driver (src/raft/node.ts's RaftNode, with the real KvStore) keeps raft's
// safety invariants and gives clients a linearizable history under crashes (torn and lost
// writes), partitions, message loss, duplication and delay, and recovers once faults stop;
// a run replays exactly from its seed; and the checks catch deliberate defects.
// Method: test/sim/driver-sim.ts runs whole clusters of RaftNodes on virtual time through the
// RaftClock, LogStore and Transport seams (sim-process.ts, sim-log-store.ts, sim-transport.ts):
// one leader per term, one vote per voter and term, the same entry applied at each index,
// convergence on one state after healing, and a linearizable history that ends with a read of
// every key (so acknowledged writes must be present).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runDriverSim, type DriverSimBug } from './driver-sim.js';

const seedsFirst = 1;
const seedsLast = 1000;
const chunk = 250;

describe('the real driver under simulation', () => {
  for (let start = seedsFirst; start <= seedsLast; start += chunk) {
    test(`driver seeds ${start}-${start + chunk - 1}`, async () => {
      const failures: string[] = [];
      const totals = { crashes: 0, partitions: 0, leaders: 0, clientOk: 0 };
      for (let seed = start; seed < start + chunk; seed++) {
        const r = await runDriverSim(seed);
        if (!r.ok) failures.push(`${r.failure ?? ''}\n  reproduce: runDriverSim(${seed})`);
        for (const k of Object.keys(totals) as (keyof typeof totals)[]) totals[k] += r.stats[k];
      }
      assert.deepEqual(failures, []);
      // The faults really happened: a run without crashes or partitions proves little.
      assert.ok(totals.crashes > chunk / 2 && totals.partitions > chunk / 2, JSON.stringify(totals));
      assert.ok(totals.leaders >= chunk && totals.clientOk > chunk * 10, JSON.stringify(totals));
    });
  }
});

describe('replay', () => {
  for (const seed of [7, 86]) {
    test(`seed ${seed} replays to the same run`, async () => {
      const a = await runDriverSim(seed);
      const b = await runDriverSim(seed);
      assert.ok(a.stats.events > 300, `a real run has many events (${a.stats.events})`);
      assert.deepEqual(b, a);
    });
  }
});

describe('injected defects are caught', () => {
  const cases: { bug: DriverSimBug; seeds: number; expect: RegExp }[] = [
    { bug: 'staleRead', seeds: 5, expect: /not linearizable/ },
    { bug: 'ackBeforePersist', seeds: 10, expect: /applied a different entry|not linearizable/ },
  ];
  for (const { bug, seeds, expect } of cases) {
    test(`${bug} is reported within seeds 1-${seeds}`, async () => {
      for (let seed = 1; seed <= seeds; seed++) {
        const r = await runDriverSim(seed, { bug });
        if (!r.ok) {
          assert.match(r.failure ?? '', expect);
          return;
        }
      }
      assert.fail(`${bug} went unnoticed in seeds 1-${seeds}`);
    });
  }
});

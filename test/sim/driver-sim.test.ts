// Goal: the real raft driver (src/raft/node.ts's RaftNode, with the real ReplicatedState) keeps raft's
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
import { ControlMonitor } from './control-workload.js';
import { ReplicatedState } from '../../src/state/replicated-state.js';
import type { WorkflowEvent } from '../../src/model/records.js';

const seedsFirst = 1;
const seedsLast = 500;
const chunk = 250;

describe('the real driver under simulation', () => {
  for (let start = seedsFirst; start <= seedsLast; start += chunk) {
    test(`driver seeds ${start}-${start + chunk - 1}`, async () => {
      const failures: string[] = [];
      const totals = { crashes: 0, partitions: 0, leaders: 0, clientOk: 0 };
      const control = {
        workflowsCreated: 0,
        attemptsStarted: 0,
        resultsRecorded: 0,
        attemptsLost: 0,
        events: 0,
      };
      for (let seed = start; seed < start + chunk; seed++) {
        const r = await runDriverSim(seed);
        if (!r.ok) failures.push(`${r.failure ?? ''}\n  reproduce: runDriverSim(${seed})`);
        for (const k of Object.keys(totals) as (keyof typeof totals)[]) totals[k] += r.stats[k];
        for (const k of Object.keys(control) as (keyof typeof control)[]) control[k] += r.control[k];
      }
      assert.deepEqual(failures, []);
      // The faults really happened: a run without crashes or partitions proves little.
      assert.ok(totals.crashes > chunk / 2 && totals.partitions > chunk / 2, JSON.stringify(totals));
      assert.ok(totals.leaders >= chunk && totals.clientOk > chunk * 10, JSON.stringify(totals));
      // The control plane really ran: workflows, attempts started, results and lost attempts.
      assert.ok(control.workflowsCreated > chunk && control.attemptsStarted > chunk, JSON.stringify(control));
      assert.ok(control.resultsRecorded > chunk && control.attemptsLost > 0, JSON.stringify(control));
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
    {
      bug: 'ackBeforePersist',
      seeds: 10,
      expect: /applied a different entry|not linearizable|did not converge/,
    },
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

describe('the control monitor names each violation', () => {
  const event = (seq: number, extra: Partial<WorkflowEvent> = {}): WorkflowEvent => ({
    seq,
    workflowId: 'w0',
    type: 'action.started',
    stampMs: 1,
    actionIndex: 0,
    attempt: seq,
    ...extra,
  });
  const watched = (): { feed: (id: string, e: WorkflowEvent) => void; failures: string[] } => {
    const failures: string[] = [];
    const monitor = new ControlMonitor((m) => failures.push(m));
    const stats = { workflowsCreated: 0, attemptsStarted: 0, resultsRecorded: 0, attemptsLost: 0, events: 0 };
    const stores = new Map<string, ReplicatedState>();
    const feed = (id: string, e: WorkflowEvent): void => {
      let kv = stores.get(id);
      if (kv === undefined) {
        kv = new ReplicatedState();
        monitor.watch(id, kv, stats);
        stores.set(id, kv);
      }
      kv.control.onEvent?.(e);
    };
    return { feed, failures };
  };

  test('a gap in a changefeed', () => {
    const { feed, failures } = watched();
    feed('n1', event(1));
    feed('n1', event(3));
    assert.match(failures.join('\n'), /n1's changefeed went from seq 1 to 3/);
  });

  test('a duplicate in a changefeed', () => {
    const { feed, failures } = watched();
    feed('n1', event(1));
    feed('n1', event(1));
    assert.match(failures.join('\n'), /went from seq 1 to 1/);
  });

  test('two nodes with different events at one seq', () => {
    const { feed, failures } = watched();
    feed('n1', event(1));
    feed('n2', event(1, { type: 'workflow.created' }));
    assert.match(failures.join('\n'), /n2 has event .* at seq 1, another node/);
  });

  test('an attempt started twice, and one recorded twice', () => {
    const { feed, failures } = watched();
    feed('n1', event(1, { attempt: 1 }));
    feed('n1', event(2, { attempt: 1 }));
    feed('n1', event(3, { type: 'action.succeeded', attempt: 1 }));
    feed('n1', event(4, { type: 'action.failed', attempt: 1 }));
    assert.equal(failures.length, 2, failures.join('\n'));
    assert.match(failures[0]!, /attempt w0\/0\/1 started at seq 1 and again at seq 2/);
    assert.match(failures[1]!, /attempt w0\/0\/1 recorded at seq 3 and again at seq 4/);
  });
});

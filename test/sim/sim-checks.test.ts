// Goal: prove that the simulation's checks can fail and that a run replays exactly from its
// seed, so that the thousands of passing seeds in sim.test.ts mean something.
// Method: (1) the same seed run twice gives the identical event trace and result; (2) whole
// runs with a deliberate defect injected through the test-only `bug` option (a driver that
// acknowledges before its write is durable, a node that reads locally without ReadIndex, a
// node that applies a corrupted command) must each be reported as the matching violation
// within a bounded range of seeds; (3) the Monitor is fed tampered observations directly (two
// leaders in a term, a second vote, a rewritten entry, a new leader missing a committed entry,
// a committed entry on too few disks) and must name each violation.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { encodeConfChange } from '../../src/raft/core/membership.js';
import type { Entry } from '../../src/raft/core/types.js';
import { SimDisk, emptyMembershipSnapshot } from './disk.js';
import { Monitor, SimViolation, type ViolationKind } from './monitor.js';
import { member, type InjectedBug } from './node.js';
import { Prng } from '../../src/platform/prng.js';
import { Scheduler } from './scheduler.js';
import { runSeed } from './simulation.js';

describe('replay', () => {
  for (const seed of [7, 1812]) {
    test(`seed ${seed} replays to the same trace and result`, () => {
      const run = (): { lines: string[]; result: string } => {
        const lines: string[] = [];
        const r = runSeed({ seed, trace: (l) => lines.push(l) });
        return { lines, result: JSON.stringify(r) };
      };
      const a = run();
      const b = run();
      assert.ok(a.lines.length > 300, `a real run traces many events (${a.lines.length})`);
      assert.deepEqual(b.lines, a.lines);
      assert.equal(b.result, a.result);
      // Tracing only observes: the untraced run ends in the same state.
      assert.equal(JSON.stringify(runSeed({ seed })), a.result);
    });
  }
});

describe('injected defects are caught', () => {
  const cases: { bug: InjectedBug; expect: ViolationKind; seedsMax: number }[] = [
    { bug: 'ackBeforePersist', expect: 'committed-entry-lost', seedsMax: 50 },
    { bug: 'staleRead', expect: 'linearizability', seedsMax: 300 },
    { bug: 'tamperApply', expect: 'state-machine-safety', seedsMax: 50 },
  ];
  for (const c of cases) {
    test(`${c.bug} is reported as ${c.expect}`, () => {
      const seen: string[] = [];
      for (let seed = 1; seed <= c.seedsMax; seed++) {
        const r = runSeed({ seed, bug: c.bug });
        if (r.violation === undefined) continue;
        seen.push(`${seed}:${r.violation.kind}`);
        if (r.violation.kind === c.expect) {
          assert.match(r.violation.message, new RegExp(`^${c.expect}: `));
          return;
        }
      }
      assert.fail(`no ${c.expect} in seeds 1-${c.seedsMax}; violations seen: ${seen.join(' ') || 'none'}`);
    });
  }
});

describe('the monitor names tampered observations', () => {
  const enc = new TextEncoder();
  const entry = (index: number, term: number, text: string): Entry => ({
    index,
    term,
    type: 'normal',
    data: enc.encode(text),
  });
  const throwsKind = (kind: ViolationKind, fn: () => void): void => {
    assert.throws(fn, (e: unknown) => e instanceof SimViolation && e.kind === kind);
  };

  test('two leaders in one term, including the same node after a restart', () => {
    const m = new Monitor();
    m.onLeader('n1', 1, 3);
    m.onLeader('n1', 1, 3);
    m.onLeader('n2', 1, 4);
    throwsKind('election-safety', () => m.onLeader('n3', 1, 3));
    throwsKind('election-safety', () => m.onLeader('n2', 2, 4));
  });

  test('a vote granted twice in one term', () => {
    const m = new Monitor();
    m.onVoteGranted('n1', 5, 'n2');
    m.onVoteGranted('n1', 5, 'n2');
    m.onVoteGranted('n1', 6, 'n3');
    throwsKind('double-vote', () => m.onVoteGranted('n1', 5, 'n3'));
  });

  test('one (index, term) with different data or a different predecessor', () => {
    const m = new Monitor();
    m.onEntries('n1', [entry(2, 2, 'a'), entry(3, 2, 'b')], 1);
    m.onEntries('n2', [entry(3, 2, 'b')], 2);
    throwsKind('log-matching', () => m.onEntries('n3', [entry(3, 2, 'tampered')], 2));
    throwsKind('log-matching', () => m.onEntries('n3', [entry(3, 2, 'b')], 1));
  });

  test('different entries committed, or applied, at one index', () => {
    const m = new Monitor();
    m.onCommitted('n1', entry(2, 2, 'a'), 2);
    m.onApply('n1', entry(2, 2, 'a'));
    throwsKind('committed-mismatch', () => m.onCommitted('n2', entry(2, 3, 'a'), 3));
    throwsKind('committed-mismatch', () => m.onCommitted('n2', entry(2, 2, 'tampered'), 3));
    throwsKind('state-machine-safety', () => m.onApply('n2', entry(2, 2, 'tampered')));
    throwsKind('state-machine-safety', () => m.onApply('n2', entry(3, 2, 'never committed')));
  });

  test('a new leader without an entry committed in an earlier term', () => {
    const m = new Monitor();
    m.onCommitted('n1', entry(1, 1, 'a'), 1);
    m.onCommitted('n1', entry(2, 2, 'b'), 2);
    const log = new Map([
      [1, 1],
      [2, 3],
    ]);
    // Committed in term 2: a leader of term 2 itself need not be checked against it ...
    m.checkLeaderCompleteness('n2', 2, 0, (i) => log.get(i));
    // ... but a leader of term 3 holding another entry there is wrong, unless a snapshot covers it.
    throwsKind('leader-completeness', () => m.checkLeaderCompleteness('n2', 3, 0, (i) => log.get(i)));
    m.checkLeaderCompleteness('n2', 3, 2, (i) => log.get(i));
  });

  test('a committed entry on too few disks', () => {
    const sched = new Scheduler();
    const faults = { latencyMinMs: 1, latencyMaxMs: 1, spikeP: 0, spikeMaxMs: 0, spikesUntil: 0, tornP: 0 };
    const ids = ['n1', 'n2', 'n3'];
    const boot: Entry = {
      index: 1,
      term: 1,
      type: 'conf',
      data: encodeConfChange({ type: 'bootstrap', voters: ids.map(member) }),
    };
    const disks = new Map(
      ids.map((id) => [
        id,
        {
          disk: new SimDisk(id, sched, new Prng(1), faults, {
            hardState: { term: 1, vote: '', commit: 1 },
            snapshot: emptyMembershipSnapshot,
            entries: [boot],
          }),
        },
      ]),
    );
    const m = new Monitor();
    m.onCommitted('n1', boot, 1);
    const e2 = entry(2, 2, 'x');
    m.onCommitted('n1', e2, 2);
    // Entry 2 is committed but written nowhere: 3 voters need 2 holders.
    throwsKind('committed-entry-lost', () => m.checkDurability(disks));
    for (const id of ['n1', 'n2']) {
      disks
        .get(id)!
        .disk.write({ kind: 'batch', hardState: null, entries: [e2], snapshot: null }, () => undefined);
    }
    while (sched.step());
    m.checkDurability(disks);
  });
});

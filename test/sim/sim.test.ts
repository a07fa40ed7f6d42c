// Goal: the raft core keeps every safety invariant (election safety, no double vote, log
// matching, identical committed prefixes, leader completeness, state machine safety, no lost
// committed entry), recovers after the network heals, and gives clients a linearizable
// history, across seeds 1-1500 of the deterministic cluster simulation.
// Method: each seed is one whole-cluster run on virtual time (test/sim/simulation.ts) with
// seeded network, disk, crash, pause and membership faults; the Monitor checks after every
// event and the linearizability checker judges the history at the end. A failure lists each
// failing seed with the command that replays it exactly. sim-more.test.ts runs 1501-3000 in
// parallel with this file.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runSeeds } from './run.js';

const chunk = 250;

for (let start = 1; start <= 1500; start += chunk) {
  test(`simulation seeds ${start}-${start + chunk - 1}`, () => {
    const summary = runSeeds(start, chunk);
    const report = summary.failures.map((f) => `seed ${f.seed}: ${f.message}\n  reproduce: ${f.reproduce}`);
    assert.equal(summary.failed, 0, report.join('\n'));
    // The faults really happened: a run without elections, crashes or snapshots proves little.
    assert.ok(summary.totals['leaders']! > chunk, 'leaders were elected');
    assert.ok(
      summary.totals['crashes']! > 0 && summary.totals['snapshotsInstalled']! > 0,
      'faults were injected',
    );
    assert.ok(summary.totals['clientOk']! > chunk, 'clients completed operations');
  });
}

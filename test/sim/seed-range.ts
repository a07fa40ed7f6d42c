// Registers one node:test per chunk of simulation seeds; sim.test.ts and sim-more.test.ts
// each take half the range so the two files run in parallel.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runSeeds } from './run.js';

const chunk = 250;

export function testSeedRange(first: number, last: number): void {
  for (let start = first; start <= last; start += chunk) {
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
}

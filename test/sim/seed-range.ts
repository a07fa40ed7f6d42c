// Registers one node:test per chunk of simulation seeds; sim.test.ts and sim-more.test.ts
// each take half the range so the two files run in parallel.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import type { RunSummary } from './run.js';

const chunk = 250;

/** Runs seeds [start, start + count) on a worker thread (seed-worker.ts says why). */
function runSeedsOnWorker(start: number, count: number): Promise<RunSummary> {
  return new Promise((resolve, reject) => {
    // A worker thread does not inherit tsx's loader: the first module registers it.
    const boot =
      `import { register } from ${JSON.stringify(import.meta.resolve('tsx/esm/api'))}; register(); ` +
      `await import(${JSON.stringify(new URL('./seed-worker.ts', import.meta.url).href)});`;
    const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), {
      workerData: { start, count },
    });
    worker.once('message', (summary: RunSummary) => {
      resolve(summary);
    });
    worker.once('error', reject);
    worker.once('exit', (code) => {
      reject(new Error(`the simulation worker exited with code ${code} before reporting`));
    });
  });
}

export function testSeedRange(first: number, last: number): void {
  for (let start = first; start <= last; start += chunk) {
    test(`simulation seeds ${start}-${start + chunk - 1}`, async () => {
      const summary = await runSeedsOnWorker(start, chunk);
      const report = summary.failures.map((f) => `seed ${f.seed}: ${f.message}\n  reproduce: ${f.reproduce}`);
      assert.equal(summary.failed, 0, report.join('\n'));
      const t = summary.totals;
      const totals = JSON.stringify(t);
      // The faults really happened: a run without elections, crashes or snapshots proves little.
      assert.ok(t['leaders']! > chunk, `leaders were elected: ${totals}`);
      assert.ok(
        t['crashes']! > chunk / 2 && t['powerLosses']! > 0 && t['tornWrites']! > 0 && t['lostUnsynced']! > 0,
        `crashes, power losses, torn tails and lost unsynced writes: ${totals}`,
      );
      assert.ok(t['partitions']! > chunk / 2 && t['pauses']! > 0, `partitions and pauses: ${totals}`);
      assert.ok(t['transfers']! > 0 && t['confChanges']! > chunk / 4, `operator actions: ${totals}`);
      assert.ok(t['snapshots']! > 0, `snapshots were taken and installed: ${totals}`);
      assert.ok(t['clientOk']! > chunk * 10, `clients completed operations: ${totals}`);
      // The control plane really ran: workflows, attempts started, results and lost attempts.
      assert.ok(t['control.workflowsCreated']! > chunk && t['control.attemptsStarted']! > chunk, totals);
      assert.ok(t['control.resultsRecorded']! > chunk && t['control.attemptsLost']! > 0, totals);
      // The leaders' duties really ran: deadlines passed and were enforced, power jobs were
      // carried out on BMCs that failed and hung, and runs waited for everything to finish.
      assert.ok(t['control.timeouts']! > 0 && t['drains']! > 0, totals);
      assert.ok(t['power.executions']! > chunk && t['power.failed']! > 0 && t['power.hung']! > 0, totals);
    });
  }
}

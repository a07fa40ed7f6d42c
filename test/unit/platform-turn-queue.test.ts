// Goal: TurnQueue runs one job per turn of the event loop, in order, so other work queued in
// between (I/O callbacks, immediates) runs between two jobs; a failing job fails only itself.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TurnQueue } from '../../src/platform/turn-queue.js';

void test('jobs run in order, one per turn: work a job queues runs before the next job', async () => {
  const q = new TurnQueue();
  const order: string[] = [];
  const jobs = [1, 2, 3].map((n) =>
    q.run(() => {
      order.push(`job${n}`);
      // Queued during this turn's check phase: the next turn runs it, before the next job.
      setImmediate(() => order.push(`after${n}`));
      return n * 10;
    }),
  );
  assert.equal(q.pending, 3);
  assert.deepEqual(await Promise.all(jobs), [10, 20, 30]);
  assert.deepEqual(order.slice(0, 5), ['job1', 'after1', 'job2', 'after2', 'job3']);
  assert.equal(q.pending, 0);
});

void test('a job that throws rejects its own promise and the queue goes on', async () => {
  const q = new TurnQueue();
  const failing = q.run(() => {
    throw new Error('render failed');
  });
  const next = q.run(() => 'ok');
  await assert.rejects(failing, /render failed/);
  assert.equal(await next, 'ok');
});

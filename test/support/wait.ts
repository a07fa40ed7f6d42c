// Waiting on a condition with a deadline, for tests: never a fixed sleep. The poll interval
// only sets how soon a met condition is noticed; the deadline bounds the wait.
import assert from 'node:assert/strict';

/**
 * Polls `check` until it holds; fails naming `what` once `deadlineMs` has passed. An async check
 * (a status call, a page fetch) is awaited before the next poll.
 */
export async function waitFor(
  what: string,
  check: () => boolean | Promise<boolean>,
  deadlineMs = 5000,
  everyMs = 10,
): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

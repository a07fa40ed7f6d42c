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

/**
 * Reads `read` until its value has not changed for `stillMs`, and returns that value; fails
 * naming `what` once `deadlineMs` has passed (e.g. a commit index once nothing is written).
 */
export async function waitForStill<T>(
  what: string,
  read: () => Promise<T>,
  stillMs: number,
  deadlineMs: number,
  everyMs: number,
): Promise<T> {
  let last = await read();
  let stillSince = Date.now();
  await waitFor(
    `${what} to stay still for ${stillMs} ms`,
    async () => {
      const now = await read();
      if (now !== last) {
        last = now;
        stillSince = Date.now();
      }
      return Date.now() - stillSince >= stillMs;
    },
    deadlineMs,
    everyMs,
  );
  return last;
}

// A node:test reporter that adds up, per test file, the time of its top-level tests and suites,
// and prints them slowest first as JSON lines ({"file","seconds","tests"}) when the run ends;
// then one JSON line per failed test ({"failed","file","error"}), so the end of a run's
// output names what failed even when only that end is kept. test/run.sh runs it beside the TAP
// reporter (test/README.md, "Where the time goes"). Plain JavaScript: the runner loads
// reporters before tsx's hooks apply.
import path from 'node:path';

/**
 * @typedef {{ message?: string, failureType?: string, cause?: unknown }} TestError
 * @typedef {{ name?: string, nesting?: number, file?: string,
 *   details?: { duration_ms?: number, error?: TestError } }} TestEventData
 */

/** The failure's own words: node:test wraps a test's error as the cause of its own. */
function failureText(/** @type {TestError | undefined} */ error) {
  const cause = error?.cause;
  const inner = cause instanceof Error ? cause.message : typeof cause === 'string' ? cause : undefined;
  const text = inner ?? error?.message ?? 'failed';
  // A harness's error may put what matters at its end (what it saw, the last refusal): both
  // ends are kept.
  return text.length > 4000 ? `${text.slice(0, 2500)} … ${text.slice(-1500)}` : text;
}

/** @param {AsyncIterable<{ type: string, data: TestEventData }>} source */
export default async function* fileTimes(source) {
  /** @type {Map<string, { seconds: number, tests: number }>} */
  const byFile = new Map();
  /** @type {{ failed: string, file: string, error: string }[]} */
  const failures = [];
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { nesting, file, details, name } = event.data;
    if (file === undefined) continue;
    const relative = path.relative(process.cwd(), file);
    // A suite that failed only because a test in it did is named by that test's own line.
    if (event.type === 'test:fail' && details?.error?.failureType !== 'subtestsFailed') {
      failures.push({ failed: name ?? '?', file: relative, error: failureText(details?.error) });
    }
    if (nesting !== 0) continue;
    const entry = byFile.get(relative) ?? { seconds: 0, tests: 0 };
    entry.seconds += (details?.duration_ms ?? 0) / 1000;
    entry.tests += 1;
    byFile.set(relative, entry);
  }
  const rows = [...byFile].sort((a, b) => b[1].seconds - a[1].seconds);
  for (const [file, { seconds, tests }] of rows) {
    yield `${JSON.stringify({ file, seconds: Math.round(seconds * 10) / 10, tests })}\n`;
  }
  for (const failure of failures) yield `${JSON.stringify(failure)}\n`;
}

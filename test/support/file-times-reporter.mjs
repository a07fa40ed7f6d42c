// A node:test reporter that adds up, per test file, the time of its top-level tests and suites,
// and prints them slowest first as JSON lines ({"file","seconds","tests"}) when the run ends.
// test/run.sh runs it beside the TAP reporter, so every run of the suite says where its time
// goes (test/README.md, "Where the time goes"). Plain JavaScript: the runner loads reporters
// before tsx's hooks apply.
import path from 'node:path';

/** @param {AsyncIterable<{ type: string, data: { nesting?: number, file?: string, details?: { duration_ms?: number } } }>} source */
export default async function* fileTimes(source) {
  /** @type {Map<string, { seconds: number, tests: number }>} */
  const byFile = new Map();
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { nesting, file, details } = event.data;
    if (nesting !== 0 || file === undefined) continue;
    const entry = byFile.get(file) ?? { seconds: 0, tests: 0 };
    entry.seconds += (details?.duration_ms ?? 0) / 1000;
    entry.tests += 1;
    byFile.set(file, entry);
  }
  const rows = [...byFile].sort((a, b) => b[1].seconds - a[1].seconds);
  for (const [file, { seconds, tests }] of rows) {
    const relative = path.relative(process.cwd(), file);
    yield `${JSON.stringify({ file: relative, seconds: Math.round(seconds * 10) / 10, tests })}\n`;
  }
}

// The unit test files in one process: test/run.sh runs this file instead of each of them (a Node
// process per file cost more CPU than most of their tests: the 132 files here take about 53 s of
// CPU under coverage together, about 88 s one process each). Each file's tests run under a suite
// named by its path, in file order, one file after another. A file whose tests change what the
// whole process shares (TMPDIR, say) says so on a line that starts with unitGroupOptOut, and runs
// in a process of its own as every file under test/integration and test/e2e does. Any unit file
// still runs alone with `node --import tsx --test FILE`.
import { readdirSync, readFileSync } from 'node:fs';
import { describe } from 'node:test';

/**
 * The start of the line that keeps a unit file out of the group; test/run.sh runs those files
 * alone, found by the same rule (`grep -l '^// Runs in a process of its own:'`).
 */
const unitGroupOptOut = '// Runs in a process of its own:';

const dir = new URL('./unit/', import.meta.url);

/** The unit test files the group runs, sorted: every one without the opt-out line. */
function groupedUnitFiles(): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.test.ts'))
    .filter(
      (f) =>
        !readFileSync(new URL(f, dir), 'utf8')
          .split('\n')
          .some((line) => line.startsWith(unitGroupOptOut)),
    )
    .sort();
}

for (const file of groupedUnitFiles()) {
  describe(`test/unit/${file}`, async () => {
    await import(new URL(file, dir).href);
  });
}

// The build the test suite runs its `slipway` processes from (npm test makes it first): this
// checkout transpiled into dist/, the layout bin/slipway.js runs, by tsx's own transform
// (test/support/transpile-tree.ts), so coverage reads as when each process compiled its sources
// at start, at a fraction of the cost. The test files run from it too, through
// test/support/dist-loader.mjs. `npm run build` (tsc) stays the production build; the
// compiled-build and package tests run that one.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { productDirs, transpileTree } from './support/transpile-tree.js';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
// The tests and benchmarks too: test/run.sh runs the test files from dist/ (test/support/dist-hooks.mjs).
const count = await transpileTree(repoRoot, join(repoRoot, 'dist'), [...productDirs, 'test', 'bench']);
process.stdout.write(`dist/: ${String(count)} files transpiled\n`);

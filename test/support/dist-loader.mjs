// `node --import ./test/support/dist-loader.mjs`: how test/run.sh runs the test files, from the
// transpiled dist/ (test/support/dist-hooks.mjs says how). Stack traces name the TypeScript
// lines, through dist/'s source maps, as under tsx. A single file can still be run from its
// sources with `node --import tsx --test FILE`.
import { register } from 'node:module';

process.setSourceMapsEnabled(true);
register('./dist-hooks.mjs', import.meta.url);

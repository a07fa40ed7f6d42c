// `node test/support/coverage-premerge.mjs DIR PART PARTS`: merges every PARTS-th V8 coverage
// file of DIR (NODE_V8_COVERAGE's output; this process takes those at PART, counting from 0) into
// one, then deletes them, so that c8's report, which test/run.sh runs next over DIR, reads a few
// small files instead of some 1,400 large ones. Each process's file holds every script it ran
// (Node's own, node_modules, the tests'), 1.4 to 11 MB of JSON; this keeps only the scripts that
// c8's globs in test/run.sh take (src/, lb/ and their dist/ copies, without src/gen/; run.sh
// passes the same folder lists in COVERAGE_PREMERGE_FOLDERS and COVERAGE_PREMERGE_GENERATED), with
// their source maps, and c8 still applies its own --include and --exclude after.
// Two of them side by side (test/lanes.sh) and c8's report after took 10.5 s where c8 alone took
// 19 s and 2.7 GB of memory, at the end of the suite, when the other core had nothing left to do.
// Lines, statements and functions come out the same; branch counts may differ slightly, as they
// do with c8's own --merge-async: merging in another order splits blocks differently.
// Plain JavaScript, run without coverage (NODE_V8_COVERAGE unset): it adds no file of its own.
import { readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import v8Coverage from '@bcoe/v8-coverage';

const [dir, partText, partsText] = process.argv.slice(2);
const part = Number(partText);
const parts = Number(partsText);
if (dir === undefined || !Number.isInteger(part) || !Number.isInteger(parts) || part < 0 || part >= parts) {
  process.stderr.write('usage: node test/support/coverage-premerge.mjs DIR PART PARTS (0 <= PART < PARTS)\n');
  process.exit(2);
}

const checkout = pathToFileURL(path.resolve(import.meta.dirname, '../..')).href + '/';
// The folders test/run.sh's c8 --include and --exclude globs name, from the same lists there
// (src/ and lb/ and their dist/ copies, without the generated codecs): space-separated folders
// under the checkout.
const folders = (variable) => {
  const list = (process.env[variable] ?? '').split(' ').filter((folder) => folder !== '');
  if (list.length === 0) {
    process.stderr.write(`coverage-premerge: ${variable} names no folder (test/run.sh sets it)\n`);
    process.exit(2);
  }
  return list.map((folder) => `${checkout}${folder.replace(/\/*$/, '')}/`);
};
const covered = folders('COVERAGE_PREMERGE_FOLDERS');
const generated = folders('COVERAGE_PREMERGE_GENERATED');
const kept = (url) =>
  covered.some((prefix) => url.startsWith(prefix)) && !generated.some((prefix) => url.startsWith(prefix));

// The listing comes first: the other part's output, written meanwhile, is not an input.
const mine = readdirSync(dir)
  .filter((f) => f.startsWith('coverage-') && f.endsWith('.json'))
  .sort()
  .filter((_, i) => i % parts === part);
let merged = { result: [] };
const sourceMaps = {};
for (const file of mine) {
  const report = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
  const result = report.result.filter((script) => kept(script.url));
  for (const [url, map] of Object.entries(report['source-map-cache'] ?? {})) {
    if (kept(url)) sourceMaps[url] = map;
  }
  merged = v8Coverage.mergeProcessCovs([merged, { result }]);
}
// Written under another name first: c8 never reads half a file, and a failure before the end
// leaves the inputs in place.
const out = path.join(dir, `premerged-${part}-of-${parts}.json`);
writeFileSync(`${out}.partial`, JSON.stringify({ result: merged.result, 'source-map-cache': sourceMaps }));
renameSync(`${out}.partial`, out);
for (const file of mine) rmSync(path.join(dir, file));
process.stdout.write(`coverage: ${mine.length} files merged into ${path.basename(out)}\n`);

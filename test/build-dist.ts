// The compiled build the test suite runs its `slipway` processes from: every .ts file under
// src/, lb/ and cluster/ transpiled on its own into dist/ (the layout bin/slipway.js runs), with
// source maps, by esbuild — the transform tsx applies to the sources, so coverage reads the same
// as when the processes compiled their sources at each start, at a fraction of the cost.
// `npm run build` (tsc) stays the production build; test/integration/compiled-build.test.ts and
// the package test run that one. Types are checked separately (tsc --noEmit).
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transform } from 'esbuild';
import { readFile } from 'node:fs/promises';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const sourceDirs = ['src', 'lb', 'cluster'];
const outRoot = join(repoRoot, 'dist');

async function tsFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((e) => {
      const path = join(dir, e.name);
      if (e.isDirectory()) return tsFiles(path);
      return Promise.resolve(e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : []);
    }),
  );
  return nested.flat();
}

async function transpile(file: string): Promise<void> {
  const rel = relative(repoRoot, file);
  const out = join(outRoot, rel.replace(/\.ts$/, '.js'));
  const result = await transform(await readFile(file, 'utf8'), {
    loader: 'ts',
    format: 'esm',
    target: 'node20',
    sourcemap: 'external',
    // As tsx transforms the sources (its esbuild options): the same code, so coverage reads the same.
    minifyWhitespace: true,
    keepNames: true,
    sourcefile: relative(dirname(out), file),
  });
  await mkdir(dirname(out), { recursive: true });
  const mapName = `${out.slice(dirname(out).length + 1)}.map`;
  await writeFile(out, `${result.code}//# sourceMappingURL=${mapName}\n`);
  await writeFile(`${out}.map`, result.map);
}

await rm(outRoot, { recursive: true, force: true });
const files = (await Promise.all(sourceDirs.map((d) => tsFiles(join(repoRoot, d))))).flat();
await Promise.all(files.map(transpile));
// The stamp bin/slipway.js compares with the sources' times: this build is current.
await writeFile(join(outRoot, '.built'), '');
process.stdout.write(`dist/: ${String(files.length)} files transpiled\n`);

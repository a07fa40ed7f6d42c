// A checkout's TypeScript (src/, lb/, cluster/, and for the suite test/ and bench/) transpiled
// file by file into OUT_DIR with source maps, by esbuild with the options tsx uses: the code a
// test's `slipway` processes and the test files themselves run (test/support/dist-hooks.mjs),
// made in about a second instead of a tsc emit of a minute. The sources are written for pure type
// stripping (tsconfig's erasableSyntaxOnly), so nothing but types is lost; types are checked by
// tsc --noEmit elsewhere. Used by test/build-dist.ts (this checkout's dist/ for the suite) and
// by test/support/previous-release.ts (the release the rolling upgrade starts from).
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join, relative, sep } from 'node:path';
import { transform } from 'esbuild';

/** What a build of the product holds, as tsc lays out dist/. */
export const productDirs = ['src', 'lb', 'cluster'] as const;

async function tsFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const nested = await Promise.all(
    entries.map((e) => {
      const path = join(dir, e.name);
      if (e.isDirectory()) return tsFiles(path);
      return Promise.resolve(e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : []);
    }),
  );
  return nested.flat();
}

/**
 * The generated codecs (src/gen/) are outside coverage: without source maps, no process a test
 * starts reads theirs (control.js's alone is 0.6 MB) to embed it in its coverage file, and c8
 * has that much less to read for each of the suite's 1,400-odd processes.
 */
function mapped(root: string, file: string): boolean {
  return !relative(root, file).startsWith(`${join('src', 'gen')}${sep}`);
}

async function transpile(root: string, outDir: string, file: string): Promise<void> {
  const out = join(outDir, relative(root, file).replace(/\.ts$/, '.js'));
  const withMap = mapped(root, file);
  const result = await transform(await readFile(file, 'utf8'), {
    loader: 'ts',
    format: 'esm',
    target: 'node20',
    sourcemap: withMap ? 'external' : false,
    // Without the sources inside: c8 and stack traces read them from src/. Every process under
    // coverage copies the maps it loaded into its coverage file: 1.7 MB a CLI run with them,
    // 1.4 MB without, for c8 to read back at the end.
    sourcesContent: false,
    sourcefile: relative(dirname(out), file),
    // As tsx transforms the sources (its esbuild options): the same code, so coverage reads the same.
    minifyWhitespace: true,
    keepNames: true,
  });
  await mkdir(dirname(out), { recursive: true });
  if (!withMap) {
    await writeFile(out, result.code);
    return;
  }
  await writeFile(out, `${result.code}//# sourceMappingURL=${basename(out)}.map\n`);
  await writeFile(`${out}.map`, result.map);
}

/**
 * Transpiles `dirs` of the checkout at `root` into `outDir` (emptied first), laid out as tsc lays
 * out dist/, and stamps it `.built` as `npm run build` does. Returns the number of files.
 */
export async function transpileTree(
  root: string,
  outDir: string,
  dirs: readonly string[] = productDirs,
): Promise<number> {
  await rm(outDir, { recursive: true, force: true });
  const files = (await Promise.all(dirs.map((d) => tsFiles(join(root, d))))).flat();
  await Promise.all(files.map((file) => transpile(root, outDir, file)));
  await writeFile(join(outDir, '.built'), '');
  return files.length;
}

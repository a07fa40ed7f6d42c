// Module hooks for the suite's test processes (registered by test/support/dist-loader.mjs): they
// run this checkout's transpiled dist/ (test/build-dist.ts) instead of compiling TypeScript at
// each start as tsx does, which cost about a quarter of a second of CPU per test file.
//  - src/, lb/ and cluster/ resolve to their dist/ modules, as every `slipway` process a test
//    starts runs them: one copy of each module, mapped back to the sources for coverage.
//  - test/ and bench/ keep their own URLs (their paths to fixtures, bin/ and each other are
//    relative to where they are) and are served dist/'s transpiled code.
//  - A specifier written `.js` for a `.ts` source (the TypeScript convention) finds the source.
// A source without its dist/ counterpart is an error that says to rebuild: dist/ is stale.
// Plain JavaScript: hooks load before any TypeScript can.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = new URL('../../', import.meta.url).href;
const redirected = ['src/', 'lb/', 'cluster/'].map((d) => root + d);
const served = ['test/', 'bench/'].map((d) => root + d);

const under = (url, prefixes) => prefixes.some((p) => url.startsWith(p));

/** The dist/ file a source URL under the checkout is transpiled to. */
function distUrl(url) {
  return new URL(`dist/${url.slice(root.length).replace(/\.ts$/, '.js')}`, root);
}

function stale(url) {
  return new Error(
    `${url} has no transpiled copy in dist/: rebuild it (node --import tsx test/build-dist.ts), or run this file with --import tsx`,
  );
}

export async function resolve(specifier, context, next) {
  const parent = context.parentURL;
  const nearby = (specifier.startsWith('./') || specifier.startsWith('../')) && parent?.startsWith('file:');
  if (nearby || specifier.startsWith('file:')) {
    let url = new URL(specifier, parent);
    if (url.pathname.endsWith('.js') && !existsSync(url)) {
      const ts = new URL(url.href.replace(/\.js$/, '.ts'));
      if (existsSync(ts)) url = ts;
    }
    const href = url.href;
    if (href.endsWith('.ts') && under(href, redirected)) {
      const target = distUrl(href);
      if (!existsSync(target)) throw stale(href);
      return { url: target.href, format: 'module', shortCircuit: true };
    }
    if (href.endsWith('.ts') && under(href, served))
      return { url: href, format: 'module', shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (url.endsWith('.ts') && under(url, served)) {
    const js = distUrl(url);
    if (!existsSync(js)) throw stale(url);
    // The source map's URL made relative to the .ts file, where it is looked for (Node takes
    // no absolute file: URL there).
    const source = readFileSync(js, 'utf8').replace(
      /\/\/# sourceMappingURL=(\S+)\s*$/,
      (_, map) =>
        `//# sourceMappingURL=${relative(dirname(fileURLToPath(url)), fileURLToPath(new URL(map, js)))}\n`,
    );
    return { format: 'module', source, shortCircuit: true };
  }
  return next(url, context);
}

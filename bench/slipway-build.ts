// The slipway that benchmarks run: the compiled build (`npm run build`), as an operator runs it,
// not the sources through tsx, whose loader thread adds about 40 MB of RSS per node and CPU at
// start. The event-loop probe (bench/eld-probe.ts) is compiled beside it for the same reason.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

export interface SlipwayBuild {
  /** The CLI entry of the compiled build: `node MAIN server ...`. */
  readonly main: string;
  /** Node flags that preload the event-loop probe into a server. */
  readonly probeArgs: readonly string[];
}

let built: SlipwayBuild | undefined;

/** The latest modification time under dir, folders included (as bin/slipway.js judges a build). */
function newestMtimeMs(dir: string): number {
  let newest = statSync(dir).mtimeMs;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const child = `${dir}/${entry.name}`;
    newest = Math.max(newest, entry.isDirectory() ? newestMtimeMs(child) : statSync(child).mtimeMs);
  }
  return newest;
}

/** Whether dist/ holds a build newer than every file under src/ and lb/ (bin/slipway.js's rule). */
function buildIsFresh(): boolean {
  try {
    const built = statSync(join(repoRoot, 'dist', '.built')).mtimeMs;
    return (
      existsSync(join(repoRoot, 'dist', 'src', 'cli', 'main.js')) &&
      ['src', 'lb'].every((dir) => built >= newestMtimeMs(join(repoRoot, dir)))
    );
  } catch {
    return false;
  }
}

/**
 * Builds once per benchmark process (about 7 s on 2 cores; 30-40 s on a loaded machine) unless
 * dist/ already holds a build of the current sources, as when CI runs several benchmarks after
 * one `npm run build`; later calls return the same build.
 */
export function slipwayBuild(): SlipwayBuild {
  if (built !== undefined) return built;
  if (buildIsFresh()) {
    process.stderr.write('slipway: using the build in dist/ (newer than src/ and lb/)\n');
  } else {
    process.stderr.write('building slipway (npm run build)\n');
    const result = spawnSync('npm', ['run', '-s', 'build'], { cwd: repoRoot, encoding: 'utf8' });
    if (result.status !== 0) {
      process.stderr.write(`${result.stdout}${result.stderr}`);
      throw new Error(`npm run build failed (exit ${String(result.status ?? result.signal)})`);
    }
  }
  const probeSource = readFileSync(new URL('./eld-probe.ts', import.meta.url), 'utf8');
  const probe = ts.transpileModule(probeSource, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  // dist/ is rebuilt from scratch by every build, so the probe never outlives the build it goes with.
  const probePath = fileURLToPath(new URL('../dist/bench-eld-probe.mjs', import.meta.url));
  writeFileSync(probePath, probe.outputText);
  built = {
    main: fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url)),
    probeArgs: ['--import', probePath],
  };
  return built;
}

// The slipway that benchmarks run: the compiled build (`npm run build`), as an operator runs it,
// not the sources through tsx, whose loader thread adds about 40 MB of RSS per node and CPU at
// start. The event-loop probe (bench/eld-probe.ts) is compiled beside it for the same reason.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
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

/** Builds once per benchmark process (about 7 s on 2 cores); later calls return the same build. */
export function slipwayBuild(): SlipwayBuild {
  if (built !== undefined) return built;
  process.stderr.write('building slipway (npm run build)\n');
  const result = spawnSync('npm', ['run', '-s', 'build'], { cwd: repoRoot, encoding: 'utf8' });
  if (result.status !== 0) {
    process.stderr.write(`${result.stdout}${result.stderr}`);
    throw new Error(`npm run build failed (exit ${String(result.status ?? result.signal)})`);
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

// The previous release of Slipway, for tests that run it beside this build: the rolling upgrade
// (test/e2e/rolling-upgrade.test.ts) starts a cluster on it and upgrades it node by node.
//
// The one place it is recorded. At the next release, move it to the release being replaced:
// its last commit (the one tagged or built as that release), its package version, and the
// highest state version it applies (src/state/versions.ts there; 1 for builds before 0.2.0,
// which advertise none). Then run the rolling upgrade test: a change the gates do not cover
// (a new command mapped to no version, a snapshot section written before the version allows
// it, a wire field an old node misreads) shows up there as a failed workflow, a stopped node
// or different state digests.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, realpathSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { transpileTree } from './transpile-tree.js';

const run = promisify(execFile);

export const previousRelease = {
  /** The last commit before version gates: builds 0.1.x. */
  commit: 'c869330b6276bceeaf29cb76ef1d0c4f4d7d5298',
  /** Its package version, as `slipway --version` prints it. */
  packageVersion: '0.1.0',
  /** What its Status says as its build: nothing, from builds before 0.2.0. */
  build: '',
  /** The highest state version it applies. */
  stateVersion: 1,
} as const;

/** A build of Slipway compiled by tsc (tsconfig.build.json): run `main` with node. */
export interface CompiledBuild {
  /** Its cli/main.js. */
  readonly main: string;
  /** Removes what was made for it (the build and, for an earlier commit, its worktree). */
  remove(): Promise<void>;
}

/**
 * Builds `sourceRoot` (a checkout: src/, lb/, cluster/) into `outDir` with the suite's transform
 * (transpile-tree.ts): a release's code as its processes run it, in seconds instead of a tsc emit.
 */
async function compile(sourceRoot: string, outDir: string): Promise<string> {
  await transpileTree(sourceRoot, outDir);
  return join(outDir, 'src', 'cli', 'main.js');
}

/**
 * Builds `commit` of the repository at `repoRoot`: a detached git worktree of it in a temporary
 * folder, sharing this checkout's node_modules (a symlink), compiled by its own
 * tsconfig.build.json into its dist/ (where its CLI finds its package.json, as a release does).
 * Needs the commit in the repository's history: a shallow clone must fetch it first.
 */
export async function buildCommit(repoRoot: string, commit: string): Promise<CompiledBuild> {
  const known = await run('git', ['-C', repoRoot, 'cat-file', '-e', `${commit}^{commit}`]).then(
    () => true,
    () => false,
  );
  if (!known) {
    throw new Error(
      `commit ${commit} (the previous release, test/support/previous-release.ts) is not in the ` +
        `repository at ${repoRoot}: fetch the history (git fetch --unshallow, or a checkout with ` +
        'fetch-depth 0) to run the rolling upgrade test',
    );
  }
  const parent = mkdtempSync(join(tmpdir(), 'slipway-previous-release-'));
  const tree = join(parent, 'tree');
  const remove = async (): Promise<void> => {
    await run('git', ['-C', repoRoot, 'worktree', 'remove', '--force', tree]).catch(() => undefined);
    rmSync(parent, { recursive: true, force: true });
    // A worktree whose folder went first would stay registered until pruned.
    await run('git', ['-C', repoRoot, 'worktree', 'prune']).catch(() => undefined);
  };
  try {
    await run('git', ['-C', repoRoot, 'worktree', 'add', '--detach', tree, commit]);
    symlinkSync(realpathSync(join(repoRoot, 'node_modules')), join(tree, 'node_modules'), 'dir');
    const main = await compile(tree, join(tree, 'dist'));
    if (!existsSync(main)) throw new Error(`building ${commit} made no ${main}`);
    return { main, remove };
  } catch (err) {
    await remove();
    throw err;
  }
}

/** The newest modification time under `dir`, folders included (as bin/slipway.js reads it). */
function newestMtimeMs(dir: string): number {
  let newest = statSync(dir).mtimeMs;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const child = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtimeMs(child) : statSync(child).mtimeMs);
  }
  return newest;
}

/**
 * The checkout's own compiled build (dist/, as `npm test` makes it first) when it is newer than
 * every source: the build bin/slipway.js runs, so no second compile is needed.
 */
function currentDist(repoRoot: string): CompiledBuild | undefined {
  const stamp = join(repoRoot, 'dist', '.built');
  const main = join(repoRoot, 'dist', 'src', 'cli', 'main.js');
  if (!existsSync(stamp) || !existsSync(main)) return undefined;
  const built = statSync(stamp).mtimeMs;
  if (['src', 'lb'].some((dir) => newestMtimeMs(join(repoRoot, dir)) > built)) return undefined;
  return { main, remove: () => Promise.resolve() };
}

/**
 * Builds the checkout at `repoRoot` as it is: its dist/ when that is current, otherwise into a
 * folder of its own at the repo root (named like the compiled-build test's, which git, eslint and
 * prettier ignore; dist/ is left alone, since bin/slipway.js would pick it up for other test files).
 */
export async function buildWorkingTree(repoRoot: string): Promise<CompiledBuild> {
  const current = currentDist(repoRoot);
  if (current !== undefined) return current;
  const outDir = join(repoRoot, `.build-test-upgrade-${String(process.pid)}`);
  const remove = (): Promise<void> => {
    rmSync(outDir, { recursive: true, force: true });
    return Promise.resolve();
  };
  try {
    return { main: await compile(repoRoot, outDir), remove };
  } catch (err) {
    await remove();
    throw err;
  }
}

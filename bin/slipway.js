#!/usr/bin/env node
// Entry point for the `slipway` command. It runs the compiled build in dist/ (`npm run build`)
// when that build is newer than every file and folder under src/ and lb/, and otherwise the
// TypeScript sources through tsx: a checkout works without a build step, and an edit never runs
// stale code.
// The compiled build saves tsx's loader thread, about 40 MB of RSS per node, and its start-up.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The compiled folders (tsconfig.build.json), each under dist/ by the same name. */
const sources = [
  fileURLToPath(new URL('../src', import.meta.url)),
  fileURLToPath(new URL('../lb', import.meta.url)),
];
const builtStamp = new URL('../dist/.built', import.meta.url);
const builtMain = new URL('../dist/src/cli/main.js', import.meta.url);

/**
 * The latest modification time under dir, folders included (a deleted file changes its folder).
 * Paths are plain strings, not URLs: a URL per file cost more than its stat, on every start.
 */
function newestMtimeMs(dir) {
  let newest = statSync(dir).mtimeMs;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const child = `${dir}/${entry.name}`;
    newest = Math.max(newest, entry.isDirectory() ? newestMtimeMs(child) : statSync(child).mtimeMs);
  }
  return newest;
}

function builtMtimeMs() {
  try {
    return statSync(builtStamp).mtimeMs;
  } catch {
    return -1;
  }
}

const built = builtMtimeMs();
// A build from before lb/ was compiled has no dist/src/: it is stale whatever its time.
// An installed package ships the build without its sources: a folder that is absent is not newer.
if (
  built >= 0 &&
  existsSync(builtMain) &&
  sources.every((dir) => !existsSync(dir) || built >= newestMtimeMs(dir))
) {
  await import(builtMain.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
}

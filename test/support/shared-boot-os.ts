// One boot OS build for every end-to-end test that boots it (provision-vip-qemu, fleet-lab-qemu,
// tinkerbell-qemu): the build is deterministic (bootos-qemu builds twice and compares the
// bytes), so a build from the same inputs is the same boot OS, and the suite need not spend a
// core's half-minute on each. The cache is keyed by everything the build reads: the sources
// under src/ (the agent bundle, the init), the lock file, this Node, and the Debian packages it
// takes files from. A changed input is a new key; other keys' builds go once a day old.
// Several test files may ask at once: each builds into a directory of its own and renames it
// into place; the first rename wins and the others use that one.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { buildBootOs } from '../../src/bootos/build.js';
import { runTool } from '../../src/platform/run-tool.js';

const repo = path.resolve(import.meta.dirname, '../..');
const cacheRoot = path.join(
  process.env['XDG_CACHE_HOME'] ?? path.join(homedir(), '.cache'),
  'slipway',
  'boot-os',
);
/** The packages the build takes files from (src/bootos/build.ts). */
const packages = ['linux-image-amd64', 'busybox-static', 'kexec-tools', 'ipmitool', 'zstd', 'libc6'];

/** The directory of a boot OS built from this tree's sources, built now if it is not cached. */
export async function sharedBootOs(): Promise<string> {
  const key = await inputsKey();
  const dir = path.join(cacheRoot, key);
  if (existsSync(path.join(dir, 'manifest.json'))) return dir;
  await mkdir(cacheRoot, { recursive: true });
  const building = path.join(cacheRoot, `.${key}.${process.pid}.${randomBytes(4).toString('hex')}`);
  try {
    await buildBootOs({ outDir: building });
    await rename(building, dir).catch((err: unknown) => {
      // Another test file's build got there first: the same bytes, so use that one.
      if (!existsSync(path.join(dir, 'manifest.json'))) throw err;
    });
  } finally {
    await rm(building, { recursive: true, force: true });
  }
  // Builds of other inputs go once a day old: another checkout's tests may be booting one now.
  const dayAgoMs = Date.now() - 24 * 60 * 60 * 1000;
  for (const other of await readdir(cacheRoot)) {
    if (other === key || other.startsWith('.')) continue;
    const at = path.join(cacheRoot, other);
    const modifiedMs = await stat(at).then(
      (s) => s.mtimeMs,
      () => Date.now(),
    );
    if (modifiedMs < dayAgoMs) await rm(at, { recursive: true, force: true });
  }
  return dir;
}

async function inputsKey(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of await sourceFiles(path.join(repo, 'src'))) {
    hash
      .update(path.relative(repo, file))
      .update('\0')
      .update(await readFile(file))
      .update('\0');
  }
  hash.update(await readFile(path.join(repo, 'package-lock.json')));
  hash.update(`${process.execPath} ${process.version}\n`);
  // Whether the agent is bundled from the sources (a test run through tsx) or from dist/ (the
  // suite, test/support/dist-hooks.mjs): the same code, not the same bytes.
  hash.update(
    `bundled from ${import.meta.resolve('../../src/bootos/build.js').includes('/dist/') ? 'dist' : 'src'}\n`,
  );
  const versions = await runTool('dpkg-query', ['-W', '-f', '${Package} ${Version}\n', ...packages]).catch(
    (err: unknown) => `dpkg-query failed: ${String(err)}`,
  );
  hash.update(versions);
  return hash.digest('hex').slice(0, 32);
}

async function sourceFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sourceFiles(full)));
    else if (entry.isFile()) out.push(full);
  }
  return out.sort();
}

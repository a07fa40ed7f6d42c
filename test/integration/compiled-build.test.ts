// Goal: the compiled build (`npm run build`, tsconfig.build.json) runs as the sources do, so
// operators and the benchmarks can run it without tsx: the CLI answers, a node serves the
// replicated store and server reflection (its descriptors read from the package's proto/, found
// from dist/ as from src/), and TFTP transfers run on worker threads loaded from .js files (their
// entry is found beside the running module, and only the tsx path needs a bootstrap).
// Method: tsc compiles src/ and lb/ into a folder of its own at the repo root, laid out as dist/
// is (the build finds package.json and bin/ in the nearest folder above it that holds them; the
// real dist/ is left alone, since bin/slipway.js would pick it up for the other test files). A
// one-node cluster runs from it with TFTP on loopback; the compiled CLI writes and reads a key,
// and tftp-hpa fetches a file, compared byte for byte. The build folder is removed at the end.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { nextPort, ProcessCluster } from '../support/process-cluster.js';
import { ReflectionClient } from '../support/reflection-client.js';

const run = promisify(execFile);
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const outDir = join(repoRoot, `.build-test-${String(process.pid)}`);
const main = join(outDir, 'src', 'cli', 'main.js');
const tftpRoot = mkdtempSync(join(tmpdir(), 'slipway-compiled-tftp-'));
const tftpAddr = `127.0.0.1:${String(nextPort())}`;
/** Larger than one window of blocks, so the worker thread runs a real transfer. */
const payload = randomBytes(300_000);

let cluster: ProcessCluster | undefined;

async function cli(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(process.execPath, [main, ...args], { timeout: 30_000 });
}

before(async () => {
  const tsc = join(repoRoot, 'node_modules', '.bin', 'tsc');
  // --noCheck: the same bytes as `npm run build` emits, without checking the types again (npm
  // test's type-check does), in about a third of the CPU.
  await run(tsc, ['-p', join(repoRoot, 'tsconfig.build.json'), '--outDir', outDir, '--noCheck'], {
    cwd: repoRoot,
    timeout: 240_000,
  });
  writeFileSync(join(tftpRoot, 'payload.bin'), payload);
});

after(async () => {
  await cluster?.destroy();
  rmSync(outDir, { recursive: true, force: true });
  rmSync(tftpRoot, { recursive: true, force: true });
});

void test('the compiled CLI prints the package version', async () => {
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
  const { stdout } = await cli(['--version']);
  assert.equal(stdout.trim(), pkg.version);
});

void test('a compiled node serves the store, server reflection and TFTP from worker threads', async () => {
  cluster = new ProcessCluster(1, ['--tftp-addr', tftpAddr, '--tftp-root', tftpRoot], main);
  cluster.startAll();
  const leader = await cluster.waitForLeader(60_000);

  await cli(['--server', leader.apiAddr, 'kv', 'put', 'built', 'yes']);
  const got = await cli(['--server', leader.apiAddr, '-o', 'json', 'kv', 'get', 'built']);
  assert.match(got.stdout, /"value": ?"yes"/);

  const reflection = new ReflectionClient(leader.apiAddr);
  try {
    const services = await reflection.listServices();
    assert.ok(services.includes('slipway.kv.v1.Kv'), services.join(', '));
    assert.equal((await reflection.fileContainingSymbol('slipway.kv.v1.Kv')).length, 1);
  } finally {
    reflection.close();
  }

  const out = join(tftpRoot, 'fetched.bin');
  const [host, port] = tftpAddr.split(':') as [string, string];
  await run('tftp', ['-m', 'binary', host, port, '-c', 'get', 'payload.bin', out], { timeout: 30_000 });
  assert.ok(readFileSync(out).equals(payload), 'the fetched file differs from the served one');

  const log = readFileSync(join(cluster.dir, `${leader.id}.log`), 'utf8');
  assert.match(
    log,
    /"workers":[1-9][^}]*"msg":"TFTP serving"/,
    'the node did not serve TFTP from worker threads',
  );
});

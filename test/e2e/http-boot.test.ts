// Goal: a real HTTP client (curl) gets what iPXE would: the per-MAC script at the URL forms
// iPXE produces, a byte range of an artifact (and a resumed download), HEAD metadata, and
// refusals for unknown machines and for paths that try to leave the artifacts directory.
// Method: the HTTP boot server on 127.0.0.1 with an ephemeral port over a temporary artifacts
// directory holding a random 64 KiB "kernel"; curl runs as a child process and its output
// files are compared byte for byte with the source.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { defaultBootArtifacts } from '../../src/boot/http/ipxe-script.js';
import { startHttpBootServer, type HttpBootServer } from '../../src/boot/http/server.js';
import { staticInventory } from '../../src/boot/inventory.js';
import { hardwareRecord } from '../support/netns.js';

const run = promisify(execFile);
const mac = '52:54:00:77:05:01';
const kernel = randomBytes(64 * 1024);

let dir: string;
let server: HttpBootServer;
let base: string;

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'slipway-http-e2e-'));
  await mkdir(path.join(dir, 'artifacts'));
  await writeFile(path.join(dir, 'artifacts', 'vmlinuz-x86_64'), kernel);
  await writeFile(path.join(dir, 'secret'), 'not for clients');
  server = await startHttpBootServer({
    host: '127.0.0.1',
    port: 0,
    inventory: staticInventory([hardwareRecord({ id: 'curl-1', mac })]),
    script: {
      httpBaseUrl: 'http://10.77.1.1:8080',
      apiAddress: '10.77.1.1:7001',
      artifacts: defaultBootArtifacts,
      extraKernelArgs: ['console=ttyS0'],
    },
    artifactsDir: path.join(dir, 'artifacts'),
    logger: pino({ level: 'silent' }),
  });
  base = `http://127.0.0.1:${server.port}`;
});

after(async () => {
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

/** curl's exit code, the HTTP status (-w) and what it wrote to stdout. */
async function curl(args: readonly string[]): Promise<{ code: number; status: string; stdout: string }> {
  try {
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '-w', '\n%{http_code}', ...args]);
    const cut = stdout.lastIndexOf('\n');
    return { code: 0, status: stdout.slice(cut + 1), stdout: stdout.slice(0, cut) };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string };
    const stdout = failed.stdout ?? '';
    const cut = stdout.lastIndexOf('\n');
    return { code: failed.code ?? -1, status: stdout.slice(cut + 1), stdout: stdout.slice(0, cut) };
  }
}

describe('curl', () => {
  it('fetches the per-MAC script at the URL forms iPXE produces', async () => {
    for (const form of [mac, mac.replaceAll(':', '%3A'), mac.replaceAll(':', '-')]) {
      const result = await curl([`${base}/ipxe/${form}`]);
      assert.equal(result.status, '200', form);
      assert.match(result.stdout, /^#!ipxe\n/);
      assert.match(
        result.stdout,
        /^kernel http:\/\/10\.77\.1\.1:8080\/boot\/vmlinuz-x86_64 .*slipway\.worker_id=curl-1 slipway\.server=10\.77\.1\.1:7001 slipway\.http=http:\/\/10\.77\.1\.1:8080 .*console=ttyS0$/m,
      );
    }
  });

  it('fetches a byte range of an artifact, and resumes a download', async () => {
    const part = path.join(dir, 'part');
    const ranged = await curl(['-r', '1000-4999', '-o', part, `${base}/artifacts/vmlinuz-x86_64`]);
    assert.equal(ranged.status, '206');
    assert.deepEqual(await readFile(part), kernel.subarray(1000, 5000));

    const resumed = path.join(dir, 'resumed');
    await writeFile(resumed, kernel.subarray(0, 10_000));
    const resume = await curl(['-C', '-', '-o', resumed, `${base}/artifacts/vmlinuz-x86_64`]);
    assert.equal(resume.status, '206');
    assert.deepEqual(await readFile(resumed), kernel);
  });

  it('reads HEAD metadata', async () => {
    const result = await curl(['-I', `${base}/artifacts/vmlinuz-x86_64`]);
    assert.equal(result.status, '200');
    assert.match(result.stdout, /^content-length: 65536\r?$/im);
    assert.match(result.stdout, /^accept-ranges: bytes\r?$/im);
  });

  it('is refused for an unknown machine, a range past the end and a path out of the directory', async () => {
    assert.equal((await curl([`${base}/ipxe/52-54-00-77-05-99`])).status, '404');
    assert.equal((await curl(['-r', '70000-', `${base}/artifacts/vmlinuz-x86_64`])).status, '416');
    const escape = await curl(['--path-as-is', `${base}/artifacts/../secret`]);
    assert.equal(escape.status, '400');
    assert.doesNotMatch(escape.stdout, /not for clients/);
  });
});

// Goal: the boot OS takes the Node.js runtime it bundles from `--node` (default: the one running),
// and a runtime the worker cannot run on is refused before anything is built, saying why: not an
// executable, not Node.js, or older than 20.19.
// Method: checkNodeRuntime against this process's node and small scripts that print a version,
// then the `slipway bootos build --node` command line, which must fail and write nothing.
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { BootOsBuildError, checkNodeRuntime } from '../../src/bootos/build.js';
import { runSlipway } from '../support/process-cluster.js';

const dir = mkdtempSync(join(tmpdir(), 'slipway-node-runtime-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** An executable that prints `version` for --version, as a node binary would. */
function fakeRuntime(name: string, version: string): string {
  const file = join(dir, name);
  writeFileSync(file, `#!/bin/sh\necho '${version}'\n`);
  chmodSync(file, 0o755);
  return file;
}

describe('the Node.js runtime in the boot OS', () => {
  test('the running node is accepted, and so is any 20.19 or later', async () => {
    assert.equal(await checkNodeRuntime(process.execPath), process.version);
    assert.equal(await checkNodeRuntime(fakeRuntime('node24', 'v24.11.1')), 'v24.11.1');
    assert.equal(await checkNodeRuntime(fakeRuntime('node2019', 'v20.19.0')), 'v20.19.0');
  });

  test('an old, a foreign or a missing runtime is refused with the reason', async () => {
    await assert.rejects(checkNodeRuntime(fakeRuntime('node18', 'v18.20.4')), (err: Error) => {
      assert.ok(err instanceof BootOsBuildError);
      assert.match(err.message, /is Node\.js v18\.20\.4; the worker needs 20\.19 or later/);
      return true;
    });
    await assert.rejects(checkNodeRuntime(fakeRuntime('node2018', 'v20.18.3')), /needs 20\.19 or later/);
    await assert.rejects(
      checkNodeRuntime(fakeRuntime('python', 'Python 3.11.7')),
      /is not Node\.js: --version printed "Python 3\.11\.7"/,
    );
    await assert.rejects(checkNodeRuntime(join(dir, 'absent')), /is not a Node\.js runtime that runs here/);
    const plain = join(dir, 'not-executable');
    writeFileSync(plain, 'v24.0.0');
    await assert.rejects(checkNodeRuntime(plain), /is not a Node\.js runtime that runs here/);
  });

  test('bootos build --node with an old runtime exits 1, says why and writes nothing', async () => {
    const out = join(dir, 'out');
    const r = await runSlipway(['bootos', 'build', '--out', out, '--node', fakeRuntime('old', 'v18.20.4')]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /Node\.js v18\.20\.4; the worker needs 20\.19 or later/);
    assert.equal(existsSync(out), false, 'nothing written');
  });
});

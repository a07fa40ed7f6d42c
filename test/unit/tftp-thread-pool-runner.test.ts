// Goal: the TFTP server's worker threads fail safe. A worker that cannot load fails the start
// (so startTftpServer refuses with the reason) and leaves no thread behind; a worker that stops
// loading after the server is up (a broken upgrade under a running node) is reported through
// onError and retried with a growing delay, and serving resumes once a worker loads again.
// Method: ThreadPoolRunner runs real worker threads from small CommonJS scripts that stand in for
// the transfer worker and fail, or not, as a flag file says.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { TRANSFER_LIMITS_DEFAULT } from '../../src/boot/tftp/limits.js';
import type { TransferThreadConfig } from '../../src/boot/tftp/transfer-protocol.js';
import type { RunnerHooks } from '../../src/boot/tftp/transfer-runner.js';
import { ThreadPoolRunner } from '../../src/boot/tftp/thread-pool-runner.js';
import { waitFor } from '../support/wait.js';

const config: TransferThreadConfig = {
  limits: TRANSFER_LIMITS_DEFAULT,
  socketType: 'udp4',
};

/** A stand-in transfer worker: throws while `flag` exists, else says ready and answers close. */
function workerScript(flag: string): string {
  return [
    `const { parentPort } = require('node:worker_threads');`,
    `if (require('node:fs').existsSync(${JSON.stringify(flag)})) throw new Error('cannot load the transfer worker');`,
    `parentPort.on('message', (m) => { if (m.type === 'close') parentPort.postMessage({ type: 'closed' }); });`,
    `parentPort.postMessage({ type: 'ready' });`,
  ].join('\n');
}

describe('TFTP worker threads that fail to load', () => {
  it('fail the start with the reason and leave no thread running', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'slw-tftp-runner-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const flag = join(dir, 'broken');
    writeFileSync(flag, '');
    const errors: unknown[] = [];
    const hooks: RunnerHooks = { onEvent: () => undefined, onError: (error) => errors.push(error) };
    await assert.rejects(
      ThreadPoolRunner.start(2, config, hooks, { script: workerScript(flag) }),
      /cannot load the transfer worker/,
    );
    // A failed start is the caller's error, not a runtime failure to report.
    assert.deepEqual(errors, []);
  });

  it('are reported and retried with a growing delay after the start, until one loads', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'slw-tftp-runner-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const flag = join(dir, 'broken');
    const errors: Error[] = [];
    const hooks: RunnerHooks = {
      onEvent: () => undefined,
      onError: (error) => errors.push(error instanceof Error ? error : new Error(String(error))),
    };
    const runner = await ThreadPoolRunner.start(1, config, hooks, { script: workerScript(flag) });
    t.after(() => runner.close());
    const [worker] = runner.workersForTesting();
    assert.ok(worker !== undefined);

    // The installation breaks, then the running worker dies: its replacement cannot load.
    writeFileSync(flag, '');
    await worker.terminate();
    await waitFor('two failed reloads', () => errors.length >= 3, 15_000);
    assert.match(errors[0]?.message ?? '', /exited with code 1.*0 transfer\(s\) failed/);
    assert.match(errors[1]?.message ?? '', /cannot load the transfer worker/);
    assert.equal(runner.workersForTesting().length <= 1, true);

    // Repaired: the next retry loads, and the slot serves again.
    rmSync(flag);
    assert.equal(existsSync(flag), false);
    await waitFor('a worker loaded again', () => runner.workersForTesting().length === 1, 15_000);
    const restarts = runner.restarts;
    assert.ok(restarts >= 3, `restarts ${restarts}`);
    assert.equal(
      runner.start({
        type: 'start',
        id: 1,
        client: { address: '127.0.0.1', port: 9 },
        local: '127.0.0.1',
        request: { type: 'rrq', filename: 'x', mode: 'octet', options: new Map() },
        content: new Uint8Array(1),
      }),
      true,
    );
  });
});

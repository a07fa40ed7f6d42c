// src/platform/recorded-process.ts against real processes: a PID is signalled only while its
// command line is the recorded one, and stopping resolves only once the process is gone.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { commandLine, isRunningAs, stopRecordedProcess } from '../../src/platform/recorded-process.js';
import { waitFor } from '../support/wait.js';

const started: ChildProcess[] = [];

/** A node process that prints "ready" once its handlers are in place; with `ignoreTerm`, it ignores SIGTERM. */
async function startIdle(marker: string, ignoreTerm: boolean): Promise<number> {
  const script =
    (ignoreTerm ? "process.on('SIGTERM', () => {});" : '') +
    "setInterval(() => {}, 1000); process.stdout.write('ready\\n');";
  const child = spawn(process.execPath, ['-e', script, marker], { stdio: ['ignore', 'pipe', 'ignore'] });
  started.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the test process exited early (${code})`)));
  });
  return child.pid!;
}

const runningWith =
  (marker: string) =>
  (argv: readonly string[]): boolean =>
    argv.includes(marker);

after(() => {
  for (const child of started)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

describe('recorded processes', () => {
  test('commandLine reads the arguments of a live process and nothing for a missing one', async () => {
    const pid = await startIdle('marker-a', false);
    assert.deepEqual(commandLine(pid)?.slice(-1), ['marker-a']);
    assert.equal(commandLine(2 ** 22 + 1), undefined); // above Linux's pid_max
  });

  test('a process whose command line is not the recorded one is left alone', async () => {
    const pid = await startIdle('marker-b', false);
    assert.equal(isRunningAs(pid, runningWith('someone-else')), false);
    assert.equal(await stopRecordedProcess(pid, runningWith('someone-else'), 1000), false);
    assert.equal(isRunningAs(pid, runningWith('marker-b')), true, 'still running');
  });

  test('SIGTERM stops a process that honours it', async () => {
    const pid = await startIdle('marker-c', false);
    assert.equal(await stopRecordedProcess(pid, runningWith('marker-c'), 5000), true);
    assert.equal(commandLine(pid), undefined);
  });

  test('a process that ignores SIGTERM is killed after the grace period, and is gone when stopping resolves', async () => {
    const pid = await startIdle('marker-d', true);
    assert.equal(await stopRecordedProcess(pid, runningWith('marker-d'), 300), true);
    assert.equal(commandLine(pid), undefined);
    const child = started.find((c) => c.pid === pid)!;
    await waitFor('the child to be reaped', () => child.signalCode !== null);
    assert.equal(child.signalCode, 'SIGKILL');
  });
});

// Goal: prove that runAction runs an action as a real process and reports it faithfully: exit
// statuses and signals, timeouts and cancellation that kill the whole process group (a
// grandchild included), spawn failures, a minimal environment, and an output tail that stays
// within its byte bound and valid UTF-8.
// Method: real processes (/bin/sh, sleep, env, printf). A grandchild's PID is printed by the
// action itself and then watched through /proc until it is gone; waits poll a condition with a
// deadline, never a fixed sleep. Any process a failed test leaves behind is killed by PID.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { OutputTail, runAction, type ActionProcessSpec } from '../../src/worker/runner.js';
import { waitFor } from '../support/wait.js';

const scratch = mkdtempSync(path.join(tmpdir(), 'slipway-runner-'));
const strays = new Set<number>();

after(() => {
  for (const pid of strays) {
    if (isRunning(pid)) process.kill(pid, 'SIGKILL');
  }
  rmSync(scratch, { recursive: true, force: true });
});

function shell(script: string, extra: Partial<ActionProcessSpec> = {}): ActionProcessSpec {
  return { command: ['/bin/sh', '-c', script], args: [], env: {}, timeoutMs: 10_000, ...extra };
}

/** Running, as opposed to gone or a zombie waiting for a parent that is not ours. */
function isRunning(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}

/** The PID an action printed on its first line (`echo $!`), remembered for cleanup. */
function printedPid(outputTail: string): number {
  const pid = Number(outputTail.split('\n')[0]);
  assert.ok(Number.isSafeInteger(pid) && pid > 1, `no PID in output ${JSON.stringify(outputTail)}`);
  strays.add(pid);
  return pid;
}

describe('runAction', () => {
  it('reports success with stdout and stderr merged into the tail', async () => {
    const outcome = await runAction(shell('echo out; echo err >&2'));
    assert.equal(outcome.success, true);
    assert.equal(outcome.exitStatus, 0);
    assert.equal(outcome.message, 'exited with status 0');
    assert.equal(outcome.timedOut, false);
    assert.equal(outcome.cancelled, false);
    assert.deepEqual(outcome.outputTail.split('\n').sort(), ['', 'err', 'out']);
  });

  it('appends args to the command', async () => {
    const outcome = await runAction({
      command: ['printf', '%s,'],
      args: ['a', 'b c'],
      env: {},
      timeoutMs: 5_000,
    });
    assert.equal(outcome.outputTail, 'a,b c,');
  });

  it('reports a failing exit status', async () => {
    const outcome = await runAction(shell('echo failing; exit 3'));
    assert.equal(outcome.success, false);
    assert.equal(outcome.exitStatus, 3);
    assert.equal(outcome.message, 'exited with status 3');
    assert.equal(outcome.outputTail, 'failing\n');
  });

  it('maps death by a signal to 128 + its number', async () => {
    const outcome = await runAction(shell('kill -KILL $$'));
    assert.equal(outcome.success, false);
    assert.equal(outcome.exitStatus, 137);
    assert.equal(outcome.message, 'killed by signal SIGKILL');
  });

  it('kills the whole group on timeout, grandchild included', async () => {
    const started = Date.now();
    const outcome = await runAction(shell('sleep 30 & echo $!; wait', { timeoutMs: 300 }));
    assert.ok(Date.now() - started < 10_000, 'the timeout did not stop the action');
    assert.equal(outcome.timedOut, true);
    assert.equal(outcome.cancelled, false);
    assert.equal(outcome.success, false);
    assert.equal(outcome.exitStatus, 143);
    assert.equal(outcome.message, 'timed out after 300 ms (killed by signal SIGTERM)');
    const grandchild = printedPid(outcome.outputTail);
    await waitFor(`grandchild ${grandchild} to die`, () => !isRunning(grandchild));
  });

  it('follows SIGTERM with SIGKILL when the group ignores it', async () => {
    const spec = shell('trap "" TERM; sleep 30 & echo $!; wait', { timeoutMs: 200 });
    const outcome = await runAction(spec, { killGraceMs: 300 });
    assert.equal(outcome.timedOut, true);
    assert.equal(outcome.exitStatus, 137);
    assert.equal(outcome.message, 'timed out after 200 ms (killed by signal SIGKILL)');
    const grandchild = printedPid(outcome.outputTail);
    await waitFor(`grandchild ${grandchild} to die`, () => !isRunning(grandchild));
  });

  it('kills what the process left running when it exits by itself', async () => {
    // The background sleep keeps the output pipe open; the result must not wait for it.
    const started = Date.now();
    const outcome = await runAction(shell('sleep 30 & echo $!'));
    assert.ok(Date.now() - started < 10_000, 'the result waited for a stray');
    assert.equal(outcome.success, true);
    const stray = printedPid(outcome.outputTail);
    await waitFor(`stray ${stray} to die`, () => !isRunning(stray));
  });

  it('stops a running action when aborted and reports it cancelled', async () => {
    const marker = path.join(scratch, 'started');
    const abort = new AbortController();
    const running = runAction(shell(`sleep 30 & echo $!; touch ${marker}; wait`), { signal: abort.signal });
    await waitFor('the action to start', () => existsSync(marker));
    abort.abort();
    const outcome = await running;
    assert.equal(outcome.cancelled, true);
    assert.equal(outcome.timedOut, false);
    assert.equal(outcome.success, false);
    assert.equal(outcome.exitStatus, 143);
    assert.equal(outcome.message, 'cancelled (killed by signal SIGTERM)');
    const grandchild = printedPid(outcome.outputTail);
    await waitFor(`grandchild ${grandchild} to die`, () => !isRunning(grandchild));
  });

  it('does not start an action whose signal is already aborted', async () => {
    const marker = path.join(scratch, 'never');
    const abort = new AbortController();
    abort.abort();
    const outcome = await runAction(shell(`touch ${marker}`), { signal: abort.signal });
    assert.equal(outcome.cancelled, true);
    assert.equal(outcome.exitStatus, 130);
    assert.equal(outcome.message, 'cancelled (before it started)');
    assert.equal(existsSync(marker), false);
  });

  it('reports a missing program as status 127', async () => {
    const outcome = await runAction({
      command: ['slipway-no-such-program'],
      args: [],
      env: {},
      timeoutMs: 5_000,
    });
    assert.equal(outcome.success, false);
    assert.equal(outcome.exitStatus, 127);
    assert.equal(outcome.message, 'command not found: slipway-no-such-program');
  });

  it('reports a program that is not executable as status 126', async () => {
    const script = path.join(scratch, 'not-executable.sh');
    writeFileSync(script, '#!/bin/sh\necho hi\n', { mode: 0o644 });
    const outcome = await runAction({ command: [script], args: [], env: {}, timeoutMs: 5_000 });
    assert.equal(outcome.exitStatus, 126);
    assert.equal(outcome.message, `permission denied: ${script}`);
  });

  it('refuses an empty command and a missing working directory', async () => {
    const empty = await runAction({ command: [], args: [], env: {}, timeoutMs: 5_000 });
    assert.equal(empty.exitStatus, 127);
    assert.equal(empty.message, 'the action has no command to run');
    const missing = path.join(scratch, 'no-such-dir');
    const outcome = await runAction(shell('true', { cwd: missing }));
    assert.equal(outcome.exitStatus, 126);
    assert.equal(outcome.message, `working directory not found: ${missing}`);
  });

  it('runs in the given working directory', async () => {
    const outcome = await runAction({ command: ['pwd'], args: [], env: {}, cwd: scratch, timeoutMs: 5_000 });
    assert.equal(outcome.outputTail, `${scratch}\n`);
  });

  it('passes only PATH, HOME and the action environment', async () => {
    process.env['SLIPWAY_RUNNER_LEAK'] = 'must-not-pass';
    try {
      const outcome = await runAction({
        command: ['env'],
        args: [],
        env: { FOO: 'bar baz', HOME: '/h' },
        timeoutMs: 5_000,
      });
      const variables = new Map(
        outcome.outputTail
          .trim()
          .split('\n')
          .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
      );
      // Node itself hands NODE_V8_COVERAGE to every child while coverage is collected (c8).
      variables.delete('NODE_V8_COVERAGE');
      assert.deepEqual([...variables.keys()].sort(), ['FOO', 'HOME', 'PATH']);
      assert.equal(variables.get('FOO'), 'bar baz');
      assert.equal(variables.get('HOME'), '/h');
    } finally {
      delete process.env['SLIPWAY_RUNNER_LEAK'];
    }
  });

  it('keeps only the last bytes of a large output', async () => {
    const outcome = await runAction(shell('yes 0123456789 | head -c 200000; echo; echo END'), {
      outputTailBytes: 1000,
    });
    assert.equal(outcome.success, true);
    assert.ok(
      Buffer.byteLength(outcome.outputTail) <= 1000,
      `tail is ${Buffer.byteLength(outcome.outputTail)} bytes`,
    );
    assert.ok(Buffer.byteLength(outcome.outputTail) >= 990, 'the tail lost more than one line end');
    assert.ok(outcome.outputTail.endsWith('\nEND\n'));
  });

  it('cuts the tail on a character boundary', async () => {
    // "€" is 3 bytes; 10 bytes hold three whole ones and a fragment that must be dropped.
    const outcome = await runAction(shell('printf "€€€€€€€€€€"'), { outputTailBytes: 10 });
    assert.equal(outcome.outputTail, '€€€');
    assert.equal(outcome.outputTail.includes('\ufffd'), false);
  });
});

describe('OutputTail', () => {
  it('keeps the last bytes across many chunks and drops a split character', () => {
    const tail = new OutputTail(8);
    for (const chunk of ['abc', 'déf', 'ghi', 'jk€']) tail.append(chunk);
    // "abcdéfghijk€" ends with bytes "fghijk" + 3 for "€": the last 8 are "ghijk€".
    assert.equal(tail.text(), 'ghijk€');
    assert.ok(Buffer.byteLength(tail.text()) <= 8);
    const empty = new OutputTail(0);
    empty.append('anything');
    assert.equal(empty.text(), '');
  });
});

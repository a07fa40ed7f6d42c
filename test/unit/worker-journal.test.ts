// Goal: prove that the agent's journal keeps what invariant 3 needs across restarts: the running
// attempt, unacknowledged results until acknowledged, and the bounded history of executed
// attempts; that every change is on disk when its promise resolves; and that a damaged journal
// is refused with an error naming the file instead of being silently dropped.
// Method: a real directory per test. Each change is checked by reopening the journal from disk
// (as a restarted agent would) or by reading the file itself; corruption is made by editing the
// file's bytes.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  journalFileName,
  JournalCorruptError,
  JournalFullError,
  ResultJournal,
  type ActionResult,
  type AttemptRef,
} from '../../src/worker/journal.js';

const root = mkdtempSync(path.join(tmpdir(), 'slipway-journal-'));
let dirCount = 0;

after(() => rmSync(root, { recursive: true, force: true }));

function freshDir(): string {
  dirCount += 1;
  return path.join(root, `agent-${dirCount}`);
}

function ref(actionIndex: number, attempt = 1, workflowId = 'wf-1'): AttemptRef {
  return { workflowId, actionIndex, attempt };
}

function result(attempt: AttemptRef, success = true): ActionResult {
  return {
    attempt,
    success,
    exitStatus: success ? 0 : 3,
    message: success ? 'ok' : 'exited with status 3',
    outputTail: 'tail €\n',
  };
}

async function rejectsCorrupt(dir: string, reason: RegExp): Promise<void> {
  const file = path.join(dir, journalFileName);
  await assert.rejects(ResultJournal.open(dir), (error: unknown) => {
    assert.ok(error instanceof JournalCorruptError, String(error));
    assert.equal(error.file, file);
    assert.ok(error.message.startsWith(`worker journal ${file} is corrupted: `), error.message);
    assert.match(error.message, reason);
    return true;
  });
}

/** Writes a journal file whose checksum is right for `body`, to test checks past the checksum. */
function writeWithValidChecksum(dir: string, body: string): void {
  const digest = createHash('sha256').update(body).digest('hex');
  writeFileSync(path.join(dir, journalFileName), `slipway-worker-journal 1 sha256=${digest}\n${body}\n`);
}

describe('ResultJournal', () => {
  it('starts empty in a new directory', async () => {
    const journal = await ResultJournal.open(freshDir());
    assert.equal(journal.running(), undefined);
    assert.deepEqual(journal.pending(), []);
    assert.equal(journal.hasExecuted(ref(0)), false);
  });

  it('keeps the running attempt across a restart, and counts it as executed', async () => {
    const dir = freshDir();
    const journal = await ResultJournal.open(dir);
    await journal.setRunning(ref(2));
    const reopened = await ResultJournal.open(dir);
    assert.deepEqual(reopened.running(), ref(2));
    assert.equal(reopened.hasExecuted(ref(2)), true);
    assert.equal(reopened.hasExecuted(ref(2, 2)), false);
    await reopened.setRunning(undefined);
    const cleared = await ResultJournal.open(dir);
    assert.equal(cleared.running(), undefined);
    assert.equal(cleared.hasExecuted(ref(2)), true);
  });

  it('keeps results until acknowledged, across restarts', async () => {
    const dir = freshDir();
    const journal = await ResultJournal.open(dir);
    await journal.setRunning(ref(0));
    await journal.addResult(result(ref(0)));
    assert.equal(journal.running(), undefined, 'the result ends the running attempt');
    await journal.setRunning(ref(1));
    await journal.addResult(result(ref(1), false));
    const reopened = await ResultJournal.open(dir);
    assert.deepEqual(reopened.pending(), [result(ref(0)), result(ref(1), false)]);
    await reopened.acknowledge(ref(0));
    await reopened.acknowledge(ref(7)); // unknown: nothing happens
    const afterAck = await ResultJournal.open(dir);
    assert.deepEqual(afterAck.pending(), [result(ref(1), false)]);
    assert.equal(afterAck.hasExecuted(ref(0)), true, 'an acknowledged attempt is still executed');
  });

  it('has the change on disk when the promise resolves', async () => {
    const dir = freshDir();
    const journal = await ResultJournal.open(dir);
    await journal.addResult(result(ref(4)));
    const text = readFileSync(path.join(dir, journalFileName), 'utf8');
    assert.match(text, /^slipway-worker-journal 1 sha256=[0-9a-f]{64}\n/);
    assert.match(text, /"actionIndex":4/);
    assert.deepEqual(readdirSync(dir), [journalFileName], 'no temporary file is left behind');
  });

  it('keeps the first result of an attempt and ignores a second', async () => {
    const dir = freshDir();
    const journal = await ResultJournal.open(dir);
    await journal.addResult(result(ref(0), true));
    await journal.addResult(result(ref(0), false));
    assert.deepEqual((await ResultJournal.open(dir)).pending(), [result(ref(0), true)]);
  });

  it('applies concurrent changes one after another', async () => {
    const dir = freshDir();
    const journal = await ResultJournal.open(dir);
    const refs = Array.from({ length: 20 }, (_, i) => ref(i));
    await Promise.all(refs.map((attempt) => journal.addResult(result(attempt))));
    const reopened = await ResultJournal.open(dir);
    assert.deepEqual(
      reopened.pending().map((pending) => pending.attempt),
      refs,
    );
  });

  it('remembers a bounded history of executed attempts', async () => {
    const dir = freshDir();
    const journal = await ResultJournal.open(dir, { executedMax: 3 });
    for (let i = 0; i < 4; i += 1) {
      await journal.setRunning(ref(i));
      await journal.addResult(result(ref(i)));
      await journal.acknowledge(ref(i));
    }
    const reopened = await ResultJournal.open(dir, { executedMax: 3 });
    assert.deepEqual(
      [0, 1, 2, 3].map((i) => reopened.hasExecuted(ref(i))),
      [false, true, true, true],
    );
  });

  it('still knows an unacknowledged attempt executed after it left the history', async () => {
    const journal = await ResultJournal.open(freshDir(), { executedMax: 1 });
    await journal.addResult(result(ref(0)));
    await journal.setRunning(ref(1));
    assert.equal(journal.hasExecuted(ref(0)), true);
  });

  it('refuses more unacknowledged results than its bound', async () => {
    const dir = freshDir();
    const journal = await ResultJournal.open(dir, { pendingMax: 2 });
    await journal.addResult(result(ref(0)));
    await journal.addResult(result(ref(1)));
    await assert.rejects(journal.addResult(result(ref(2))), JournalFullError);
    await journal.acknowledge(ref(0));
    await journal.addResult(result(ref(2)));
    assert.deepEqual(
      (await ResultJournal.open(dir)).pending().map((pending) => pending.attempt),
      [ref(1), ref(2)],
    );
  });

  it('ignores a temporary file left by a crash mid-write', async () => {
    const dir = freshDir();
    const journal = await ResultJournal.open(dir);
    await journal.addResult(result(ref(0)));
    writeFileSync(path.join(dir, `${journalFileName}.tmp`), 'half a jour');
    assert.deepEqual((await ResultJournal.open(dir)).pending(), [result(ref(0))]);
  });

  it('refuses a journal whose bytes changed (checksum)', async () => {
    const dir = freshDir();
    const journal = await ResultJournal.open(dir);
    await journal.addResult(result(ref(0)));
    const file = path.join(dir, journalFileName);
    writeFileSync(file, readFileSync(file, 'utf8').replace('"exitStatus":0', '"exitStatus":1'));
    await rejectsCorrupt(dir, /checksum mismatch/);
  });

  it('refuses a truncated journal', async () => {
    const dir = freshDir();
    const journal = await ResultJournal.open(dir);
    await journal.addResult(result(ref(0)));
    const file = path.join(dir, journalFileName);
    const text = readFileSync(file, 'utf8');
    writeFileSync(file, text.slice(0, text.length - 10));
    await rejectsCorrupt(dir, /truncated/);
  });

  it('refuses a file that is not a journal', async () => {
    const dir = freshDir();
    await ResultJournal.open(dir);
    writeFileSync(path.join(dir, journalFileName), '{"pending": []}\n');
    await rejectsCorrupt(dir, /the first line is not a journal header/);
  });

  it('refuses bad JSON and unexpected content even with a valid checksum', async () => {
    const badJson = freshDir();
    await ResultJournal.open(badJson);
    writeWithValidChecksum(badJson, '{"running": null, "pending": [');
    await rejectsCorrupt(badJson, /bad JSON/);
    const badShape = freshDir();
    await ResultJournal.open(badShape);
    writeWithValidChecksum(
      badShape,
      JSON.stringify({ running: null, pending: [{ attempt: ref(0) }], executed: [] }),
    );
    await rejectsCorrupt(badShape, /unexpected content at pending\.0\.success/);
  });
});

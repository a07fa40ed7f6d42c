// Goal: the raft log syncs every write that raft needs on disk (entries, a snapshot, a new term
// or vote) and skips the fsync only for a write that moves nothing but the commit index, which
// still reaches the database and reads back after a reopen.
// Method: a LevelLogStore on real LevelDB in a temp dir; its write counters tell synced from
// unsynced batches, and load() after close() shows what was written.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { Entry } from '../../src/raft/core/types.js';
import { LevelLogStore } from '../../src/raft/storage/level-log-store.js';

function entries(from: number, to: number, term: number): Entry[] {
  const out: Entry[] = [];
  for (let i = from; i <= to; i++) out.push({ index: i, term, type: 'normal', data: new Uint8Array([i]) });
  return out;
}

async function withStore(work: (dir: string, store: LevelLogStore) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'slipway-storage-sync-'));
  const store = new LevelLogStore({ dir });
  try {
    await store.load();
    await work(dir, store);
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

void describe('raft log store: which writes are synced', () => {
  void test('entries, a new term and a new vote are synced; a commit-only write is not', async () => {
    await withStore(async (_dir, store) => {
      await store.save({
        hardState: { term: 1, vote: 'n1', commit: 0 },
        entries: entries(1, 3, 1),
        snapshot: null,
      });
      assert.deepEqual(store.writeCounts, { writes: 1, synced: 1 });

      await store.save({ hardState: { term: 1, vote: 'n1', commit: 2 }, entries: [], snapshot: null });
      assert.deepEqual(store.writeCounts, { writes: 2, synced: 1 });

      await store.save({ hardState: { term: 2, vote: '', commit: 2 }, entries: [], snapshot: null });
      assert.deepEqual(store.writeCounts, { writes: 3, synced: 2 });

      await store.save({ hardState: { term: 2, vote: 'n2', commit: 2 }, entries: [], snapshot: null });
      assert.deepEqual(store.writeCounts, { writes: 4, synced: 3 });

      await store.save({
        hardState: { term: 2, vote: 'n2', commit: 3 },
        entries: entries(4, 4, 2),
        snapshot: null,
      });
      assert.deepEqual(store.writeCounts, { writes: 5, synced: 4 });

      await store.saveLocalSnapshot(
        { meta: { index: 3, term: 1, membership: { voters: [], learners: [] } }, data: new Uint8Array([7]) },
        2,
      );
      assert.deepEqual(store.writeCounts, { writes: 6, synced: 5 });
    });
  });

  void test('a commit-only write is in the database after a reopen', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'slipway-storage-sync-'));
    try {
      const store = new LevelLogStore({ dir });
      await store.load();
      await store.save({
        hardState: { term: 3, vote: 'n1', commit: 1 },
        entries: entries(1, 5, 3),
        snapshot: null,
      });
      await store.save({ hardState: { term: 3, vote: 'n1', commit: 4 }, entries: [], snapshot: null });
      assert.deepEqual(store.writeCounts, { writes: 2, synced: 1 });
      await store.close();

      const reopened = new LevelLogStore({ dir });
      const loaded = await reopened.load();
      await reopened.close();
      assert.deepEqual(loaded.hardState, { term: 3, vote: 'n1', commit: 4 });
      assert.equal(loaded.entries.length, 5);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  void test('a batch refused by validation writes nothing', async () => {
    await withStore(async (_dir, store) => {
      await store.save({
        hardState: { term: 2, vote: '', commit: 0 },
        entries: entries(1, 2, 2),
        snapshot: null,
      });
      await assert.rejects(
        store.save({ hardState: { term: 2, vote: '', commit: 9 }, entries: [], snapshot: null }),
        /commit 9 is past the last log index 2/,
      );
      assert.deepEqual(store.writeCounts, { writes: 1, synced: 1 });
    });
  });
});

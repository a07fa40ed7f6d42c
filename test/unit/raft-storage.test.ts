// Goal: the durable raft log keeps exactly what each synced batch wrote, across close and
// reopen, and refuses or repairs damaged records by the stated policy (torn tail truncated,
// anything else a StorageCorruptionError naming the index and directory).
// Method: the codecs are checked against known CRC-32C vectors, hand-damaged records and a
// fast-check round-trip and bit-flip property; the store runs on real LevelDB in a temp dir,
// and damage is done by reopening the same database with `level` and rewriting values.
import assert from 'node:assert/strict';
import { Buffer } from 'node:buffer';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { Level } from 'level';
import type { Entry, EntryType, HardState, SnapshotMeta } from '../../src/raft/core/types.js';
import { crc32c, crc32cUpdate } from '../../src/platform/crc32c.js';
import {
  decodeEntry,
  decodeHardState,
  decodeSnapshotDataHeader,
  decodeSnapshotMeta,
  encodeEntry,
  encodeEntryInto,
  encodeHardState,
  encodeSnapshotDataHeader,
  encodeSnapshotMeta,
  entryRecordBytes,
  isDamagedBytes,
  type Decoded,
  type RecordCheck,
} from '../../src/raft/storage/entry-codec.js';
import {
  LevelLogStore,
  openLogStore,
  snapshotChunkBytesMax,
} from '../../src/raft/storage/level-log-store.js';
import { StorageCorruptionError, type LoadedState } from '../../src/raft/storage/log-store.js';

const membership = {
  voters: [
    { id: 'n1', addr: '127.0.0.1:7001', apiAddr: '127.0.0.1:8001' },
    { id: 'n2', addr: '127.0.0.1:7002', apiAddr: '' },
  ],
  learners: [{ id: 'n3', addr: '127.0.0.1:7003', apiAddr: '127.0.0.1:8003' }],
};

function entry(index: number, term: number, type: EntryType = 'normal'): Entry {
  const data = type === 'noop' ? new Uint8Array(0) : Buffer.from(`cmd-${index}-${term}`);
  return { index, term, type, data };
}

function entries(from: number, to: number, term: number): Entry[] {
  const out: Entry[] = [];
  for (let i = from; i <= to; i++) out.push(entry(i, term));
  return out;
}

/** Entries as plain comparable values (stored data comes back as Buffer views). */
function plain(list: readonly Entry[]): { index: number; term: number; type: EntryType; data: string }[] {
  return list.map((e) => ({
    index: e.index,
    term: e.term,
    type: e.type,
    data: Buffer.from(e.data).toString('hex'),
  }));
}

function snapshotMeta(index: number, term: number): SnapshotMeta {
  return { index, term, membership };
}

function expectFailure<T>(d: Decoded<T>, check: RecordCheck): string {
  assert.equal(d.ok, false, `expected the ${check} check to fail`);
  if (d.ok) throw new Error('unreachable');
  assert.equal(d.error.check, check, d.error.message);
  return d.error.message;
}

function rechecksum(record: Buffer): Buffer {
  record.writeUInt32BE(crc32c(record, 0, record.length - 4), record.length - 4);
  return record;
}

/** Runs `fn` with a fresh data directory and removes it (closing any stores) afterwards. */
async function withDir(
  fn: (dir: string, track: (s: LevelLogStore) => LevelLogStore) => Promise<void>,
): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'slipway-raft-storage-'));
  const stores: LevelLogStore[] = [];
  try {
    await fn(dir, (s) => {
      stores.push(s);
      return s;
    });
  } finally {
    for (const s of stores) await s.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/** Opens the store's database directly (the store must be closed) to read or damage records. */
async function withRawDb(
  location: string,
  fn: (db: Level<Buffer, Uint8Array>) => Promise<void>,
): Promise<void> {
  const db = new Level<Buffer, Uint8Array>(location, { keyEncoding: 'buffer', valueEncoding: 'view' });
  await db.open();
  try {
    await fn(db);
  } finally {
    await db.close();
  }
}

/** A snapshot chunk's key, as the store lays them out (level-log-store.ts). */
function snapshotChunkKey(generation: number, chunk: number): Buffer {
  if (generation === 0) {
    const key = Buffer.alloc(11);
    key.write('s/data/', 0, 'latin1');
    key.writeUInt32BE(chunk, 7);
    return key;
  }
  const key = Buffer.alloc(14);
  key.write('s/gen/', 0, 'latin1');
  key.writeUInt32BE(generation, 6);
  key.writeUInt32BE(chunk, 10);
  return key;
}

function entryKey(index: number): Buffer {
  const key = Buffer.alloc(10);
  key.write('l/', 0, 'latin1');
  key.writeUInt32BE(Math.floor(index / 2 ** 32), 2);
  key.writeUInt32BE(index >>> 0, 6);
  return key;
}

async function storedEntryIndexes(location: string): Promise<number[]> {
  const out: number[] = [];
  await withRawDb(location, async (db) => {
    for await (const key of db.keys({ gte: Buffer.from('l/'), lt: Buffer.from('l0') })) {
      out.push(key.readUInt32BE(2) * 2 ** 32 + key.readUInt32BE(6));
    }
  });
  return out;
}

async function countKeys(location: string, prefix: string): Promise<number> {
  let n = 0;
  await withRawDb(location, async (db) => {
    for await (const key of db.keys({ gte: Buffer.from(prefix) })) {
      if (!key.toString('latin1').startsWith(prefix)) break;
      n++;
    }
  });
  return n;
}

async function damage(location: string, key: Buffer, change: (value: Buffer) => Buffer): Promise<void> {
  await withRawDb(location, async (db) => {
    const value = await db.get(key);
    assert.ok(value !== undefined, `no value under ${key.toString('hex')} to damage`);
    await db.put(key, change(Buffer.from(value)));
  });
}

function flipBit(byteAt: number): (v: Buffer) => Buffer {
  return (v) => {
    const at = byteAt < 0 ? v.length + byteAt : byteAt;
    v[at] = v[at]! ^ 0x10;
    return v;
  };
}

/** Opens a store on `dir`, loads it and hands both back; the store is tracked for cleanup. */
async function reopen(
  dir: string,
  track: (s: LevelLogStore) => LevelLogStore,
): Promise<[LevelLogStore, LoadedState]> {
  const store = track(await openLogStore(dir));
  return [store, await store.load()];
}

async function seed(
  dir: string,
  track: (s: LevelLogStore) => LevelLogStore,
  list: readonly Entry[],
  hardState: HardState | null = null,
): Promise<string> {
  const [store] = await reopen(dir, track);
  await store.save({ hardState, entries: list, snapshot: null });
  await store.close();
  return store.location;
}

void describe('crc32c', () => {
  void test('matches the published CRC-32C check values', () => {
    // "123456789" is the standard check string; the others are RFC 3720 §B.4 vectors.
    assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
    assert.equal(crc32c(new Uint8Array(32)), 0x8a9136aa);
    assert.equal(crc32c(new Uint8Array(32).fill(0xff)), 0x62a8ab43);
    assert.equal(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i)), 0x46dd794e);
    assert.equal(crc32c(Uint8Array.from({ length: 32 }, (_, i) => 31 - i)), 0x113fdb5c);
  });

  void test('continuing over pieces equals the checksum of the whole, at every split point', () => {
    const bytes = Uint8Array.from({ length: 70 }, (_, i) => (i * 37 + 11) & 0xff);
    const whole = crc32c(bytes);
    for (let split = 0; split <= bytes.length; split++) {
      assert.equal(crc32cUpdate(crc32c(bytes, 0, split), bytes, split), whole, `split at ${split}`);
    }
  });

  void test('rejects a range outside the array', () => {
    assert.throws(() => crc32c(new Uint8Array(4), 2, 9), /outside a 4-byte array/);
  });
});

void describe('entry codec', () => {
  const sample = entry(1234, 7);

  void test('round-trips an entry at the largest safe index and term', () => {
    const e: Entry = {
      index: Number.MAX_SAFE_INTEGER,
      term: Number.MAX_SAFE_INTEGER,
      type: 'conf',
      data: Buffer.from([1, 2]),
    };
    const d = decodeEntry(encodeEntry(e));
    assert.ok(d.ok);
    assert.deepEqual(plain([d.value]), plain([e]));
  });

  void test('a record shorter than the header fails the size check', () => {
    expectFailure(decodeEntry(encodeEntry(sample).subarray(0, 10)), 'size');
  });

  void test('a record cut short (torn write) fails the length check, naming both lengths', () => {
    const record = encodeEntry(sample);
    const message = expectFailure(decodeEntry(record.subarray(0, record.length - 3)), 'length');
    assert.match(
      message,
      new RegExp(`record is ${record.length - 3} bytes .* ${sample.data.length} data bytes`),
    );
  });

  void test('a flipped bit in the data fails the checksum check', () => {
    const record = encodeEntry(sample);
    record[24] = record[24]! ^ 1;
    assert.equal(expectFailure(decodeEntry(record), 'checksum'), 'checksum mismatch');
  });

  void test('an intact record of another format version fails the version check', () => {
    const record = encodeEntry(sample);
    record[0] = 9;
    assert.match(expectFailure(decodeEntry(rechecksum(record)), 'version'), /version 9/);
  });

  void test('an intact record with an unknown type code fails the type check', () => {
    const record = encodeEntry(sample);
    record[17] = 42;
    assert.match(expectFailure(decodeEntry(rechecksum(record)), 'type'), /type code 42/);
  });

  void test('an intact record whose term exceeds 2^53 - 1 fails the range check', () => {
    const record = encodeEntry(sample);
    record.writeUInt32BE(0x00200000, 1);
    expectFailure(decodeEntry(rechecksum(record)), 'range');
  });

  void test('only size, length and checksum failures count as damaged bytes', () => {
    const damaged = (['size', 'length', 'checksum'] as const).filter(isDamagedBytes);
    assert.deepEqual(damaged, ['size', 'length', 'checksum']);
    assert.equal(isDamagedBytes('version'), false);
    assert.equal(isDamagedBytes('type'), false);
  });

  void test('refuses to encode an entry with a bad index, term or type', () => {
    assert.throws(
      () => encodeEntry({ ...sample, index: -1 }),
      /entry index must be a non-negative safe integer/,
    );
    assert.throws(() => encodeEntry({ ...sample, term: 1.5 }), /term of entry 1234/);
    assert.throws(() => encodeEntry({ ...sample, type: 'bogus' as EntryType }), /unknown type "bogus"/);
  });

  const arbEntry = fc.record({
    index: fc.maxSafeNat(),
    term: fc.maxSafeNat(),
    type: fc.constantFrom<EntryType>('normal', 'conf', 'noop'),
    data: fc.uint8Array({ maxLength: 300 }),
  });

  void test('property: decode(encode(e)) equals e', () => {
    fc.assert(
      fc.property(arbEntry, (e) => {
        const d = decodeEntry(encodeEntry(e));
        assert.ok(d.ok);
        assert.deepEqual(plain([d.value]), plain([e]));
      }),
    );
  });

  void test('property: entries encoded back to back into one buffer each decode from their slice', () => {
    fc.assert(
      fc.property(fc.array(arbEntry, { maxLength: 20 }), (list) => {
        const slab = Buffer.alloc(list.reduce((n, e) => n + entryRecordBytes(e), 0));
        const ends: number[] = [];
        let at = 0;
        for (const e of list) ends.push((at = encodeEntryInto(e, slab, at)));
        assert.equal(at, slab.length);
        const back = list.map((_, i) => {
          const d = decodeEntry(slab.subarray(i === 0 ? 0 : ends[i - 1], ends[i]));
          assert.ok(d.ok);
          return d.value;
        });
        assert.deepEqual(plain(back), plain(list));
      }),
    );
  });

  void test('property: any single flipped bit is detected as damage', () => {
    fc.assert(
      fc.property(arbEntry, fc.nat(), (e, pick) => {
        const record = encodeEntry(e);
        const bit = pick % (record.length * 8);
        record[bit >> 3] = record[bit >> 3]! ^ (1 << (bit & 7));
        const d = decodeEntry(record);
        assert.equal(d.ok, false);
        if (!d.ok) assert.ok(isDamagedBytes(d.error.check), `bit ${bit}: ${d.error.check}`);
      }),
    );
  });
});

void describe('hard state and snapshot meta records', () => {
  const hs: HardState = { term: 5, vote: 'n2', commit: 17 };

  void test('round-trip', () => {
    assert.deepEqual(decodeHardState(encodeHardState(hs)), { ok: true, value: hs });
    const meta = snapshotMeta(40, 3);
    assert.deepEqual(decodeSnapshotMeta(encodeSnapshotMeta(meta)), { ok: true, value: meta });
  });

  void test('a garbled record fails the checksum check and a cut one the length check', () => {
    const record = encodeHardState(hs);
    record[8] = record[8]! ^ 4;
    expectFailure(decodeHardState(record), 'checksum');
    expectFailure(decodeHardState(encodeHardState(hs).subarray(0, 12)), 'length');
  });

  void test('a hard state record read as snapshot meta fails the kind check', () => {
    expectFailure(decodeSnapshotMeta(encodeHardState(hs)), 'kind');
  });

  void test('intact envelopes with bad JSON or a bad shape fail the json and shape checks', () => {
    const badJson = encodeHardState(hs);
    badJson[6] = 0x21; // '!' where '{' was
    expectFailure(decodeHardState(rechecksum(badJson)), 'json');
    // A well-formed envelope around JSON with a negative term.
    const payload = Buffer.from(JSON.stringify({ term: -5, vote: 'n9', commit: 17 }));
    const envelope = Buffer.alloc(6 + payload.length + 4);
    envelope[0] = 1;
    envelope[1] = 0x68;
    envelope.writeUInt32BE(payload.length, 2);
    payload.copy(envelope, 6);
    expectFailure(decodeHardState(rechecksum(envelope)), 'shape');
  });

  void test('refuses to encode a member without an id', () => {
    const bad = {
      index: 1,
      term: 1,
      membership: { voters: [{ id: '', addr: 'x', apiAddr: '' }], learners: [] },
    };
    assert.throws(() => encodeSnapshotMeta(bad), /membership\.voters\[0\] needs a non-empty id/);
  });
});

void describe('LevelLogStore', () => {
  void test('a fresh store loads the zero state', () =>
    withDir(async (dir, track) => {
      const [, loaded] = await reopen(dir, track);
      assert.deepEqual(loaded, {
        hardState: { term: 0, vote: '', commit: 0 },
        snapshot: { index: 0, term: 0, membership: { voters: [], learners: [] } },
        entries: [],
        snapshotData: null,
        truncatedTornTailAt: null,
      });
    }));

  void test('entries and hard state survive close and reopen', () =>
    withDir(async (dir, track) => {
      const list = [entry(1, 1, 'noop'), entry(2, 1), entry(3, 1, 'conf'), entry(4, 2), entry(5, 2)];
      const hs: HardState = { term: 2, vote: 'n1', commit: 4 };
      await seed(dir, track, list, hs);
      const [store, loaded] = await reopen(dir, track);
      assert.deepEqual(plain(loaded.entries), plain(list));
      assert.deepEqual(loaded.hardState, hs);
      assert.equal(loaded.truncatedTornTailAt, null);
      // Appending after a reload continues the same log.
      await store.save({ hardState: { ...hs, commit: 5 }, entries: [entry(6, 2)], snapshot: null });
      await store.close();
      const [, again] = await reopen(dir, track);
      assert.deepEqual(plain(again.entries), plain([...list, entry(6, 2)]));
      assert.equal(again.hardState.commit, 5);
    }));

  void test('replacing a suffix deletes the later entries from disk', () =>
    withDir(async (dir, track) => {
      const [store] = await reopen(dir, track);
      await store.save({ hardState: null, entries: entries(1, 10, 1), snapshot: null });
      await store.save({ hardState: null, entries: entries(6, 7, 2), snapshot: null });
      await store.close();
      assert.deepEqual(await storedEntryIndexes(store.location), [1, 2, 3, 4, 5, 6, 7]);
      const [, loaded] = await reopen(dir, track);
      assert.deepEqual(plain(loaded.entries), plain([...entries(1, 5, 1), ...entries(6, 7, 2)]));
    }));

  void test('a snapshot from the leader drops the covered prefix and keeps a matching suffix', () =>
    withDir(async (dir, track) => {
      const log = [...entries(1, 5, 1), ...entries(6, 10, 2)];
      const [store] = await reopen(dir, track);
      await store.save({ hardState: null, entries: log, snapshot: null });
      const data = Buffer.from('state at 7');
      await store.save({
        hardState: { term: 2, vote: '', commit: 7 },
        entries: [],
        snapshot: { meta: snapshotMeta(7, 2), data },
      });
      await store.close();
      assert.deepEqual(await storedEntryIndexes(store.location), [8, 9, 10]);
      const [, loaded] = await reopen(dir, track);
      assert.deepEqual(loaded.snapshot, snapshotMeta(7, 2));
      assert.equal(Buffer.from(loaded.snapshotData ?? []).toString(), 'state at 7');
      assert.deepEqual(plain(loaded.entries), plain(entries(8, 10, 2)));
      assert.equal(loaded.hardState.commit, 7);
    }));

  void test('a snapshot whose (index, term) the log lacks discards the whole log', () =>
    withDir(async (dir, track) => {
      const [store] = await reopen(dir, track);
      await store.save({ hardState: null, entries: entries(1, 10, 1), snapshot: null });
      // Same index, different term: the suffix after it is from a stale leader.
      await store.save({
        hardState: null,
        entries: [entry(9, 3)],
        snapshot: { meta: snapshotMeta(8, 3), data: Buffer.from('s8') },
      });
      await store.close();
      assert.deepEqual(await storedEntryIndexes(store.location), [9]);
      const [store2, loaded] = await reopen(dir, track);
      assert.deepEqual(plain(loaded.entries), plain([entry(9, 3)]));
      // A snapshot past the end of the log also discards it.
      await store2.save({
        hardState: null,
        entries: [],
        snapshot: { meta: snapshotMeta(20, 4), data: Buffer.from('s20') },
      });
      await store2.close();
      assert.deepEqual(await storedEntryIndexes(store2.location), []);
      const [, last] = await reopen(dir, track);
      assert.equal(last.snapshot.index, 20);
      assert.deepEqual(last.entries, []);
    }));

  void test('saveLocalSnapshot compacts up to compactTo and keeps the trailing entries', () =>
    withDir(async (dir, track) => {
      const [store] = await reopen(dir, track);
      await store.save({
        hardState: { term: 1, vote: 'n1', commit: 10 },
        entries: entries(1, 10, 1),
        snapshot: null,
      });
      await store.saveLocalSnapshot({ meta: snapshotMeta(8, 1), data: Buffer.from('s8') }, 5);
      await store.close();
      assert.deepEqual(await storedEntryIndexes(store.location), [6, 7, 8, 9, 10]);
      const [store2, loaded] = await reopen(dir, track);
      assert.deepEqual(loaded.snapshot, snapshotMeta(8, 1));
      assert.deepEqual(plain(loaded.entries), plain(entries(9, 10, 1)));
      // After a restart the next compaction still removes the entries kept below the snapshot.
      await store2.save({ hardState: null, entries: [entry(11, 1)], snapshot: null });
      await store2.saveLocalSnapshot({ meta: snapshotMeta(10, 1), data: Buffer.from('s10') }, 10);
      await store2.close();
      assert.deepEqual(await storedEntryIndexes(store2.location), [11]);
    }));

  void test('a snapshot larger than one chunk is split, read back whole, and its old chunks removed', () =>
    withDir(async (dir, track) => {
      const big = Buffer.alloc(snapshotChunkBytesMax * 2 + 123);
      for (let i = 0; i < big.length; i += 4096) big[i] = (i / 4096) & 0xff;
      const [store] = await reopen(dir, track);
      await store.save({ hardState: null, entries: entries(1, 3, 1), snapshot: null });
      await store.saveLocalSnapshot({ meta: snapshotMeta(2, 1), data: big }, 2);
      await store.close();
      assert.equal(await countKeys(store.location, 's/gen/'), 3);
      const [store2, loaded] = await reopen(dir, track);
      assert.ok(loaded.snapshotData !== null && big.equals(loaded.snapshotData));
      await store2.saveLocalSnapshot({ meta: snapshotMeta(3, 1), data: Buffer.from('small') }, 3);
      await store2.close();
      assert.equal(await countKeys(store2.location, 's/gen/'), 1);
      const [, after] = await reopen(dir, track);
      assert.equal(Buffer.from(after.snapshotData ?? []).toString(), 'small');
    }));

  void test('chunks staged by a write that a crash interrupted are ignored, then deleted', () =>
    withDir(async (dir, track) => {
      const [store] = await reopen(dir, track);
      await store.save({ hardState: null, entries: entries(1, 4, 1), snapshot: null });
      await store.saveLocalSnapshot({ meta: snapshotMeta(2, 1), data: Buffer.from('kept') }, 2);
      await store.close();
      // The next snapshot's chunks were written (generation 2), but not the batch naming them.
      await withRawDb(store.location, async (db) => {
        for (let c = 0; c < 3; c++) await db.put(snapshotChunkKey(2, c), Buffer.from(`staged ${c}`));
      });
      const [store2, loaded] = await reopen(dir, track);
      assert.equal(Buffer.from(loaded.snapshotData ?? []).toString(), 'kept');
      await store2.saveLocalSnapshot({ meta: snapshotMeta(3, 1), data: Buffer.from('next') }, 3);
      await store2.close();
      // Generation 2 now holds one chunk; the staged ones past it and generation 1 are gone.
      assert.equal(await countKeys(store2.location, 's/gen/'), 1);
      const [, after] = await reopen(dir, track);
      assert.equal(Buffer.from(after.snapshotData ?? []).toString(), 'next');
      assert.deepEqual(after.snapshot, snapshotMeta(3, 1));
    }));

  void test('a staged snapshot is named by saveLocalSnapshot; staged chunks never serve other data', () =>
    withDir(async (dir, track) => {
      const storedGeneration = async (location: string): Promise<number> => {
        let generation = -1;
        await withRawDb(location, async (db) => {
          const header = decodeSnapshotDataHeader(await db.get(Buffer.from('s/data')));
          assert.ok(header.ok);
          generation = header.value.generation;
        });
        return generation;
      };
      const big = Buffer.alloc(snapshotChunkBytesMax + 10, 7);
      const [store] = await reopen(dir, track);
      await store.save({ hardState: null, entries: entries(1, 6, 1), snapshot: null });
      const first = { meta: snapshotMeta(2, 1), data: big };
      await store.stageSnapshot(first);
      // Written beside the log while the next appends go on; nothing names them yet.
      await store.save({ hardState: null, entries: entries(7, 7, 1), snapshot: null });
      await store.saveLocalSnapshot(first, 2);
      await store.close();
      // Named as staged (generation 1), not written again under generation 2.
      assert.equal(await storedGeneration(store.location), 1);
      assert.equal(await countKeys(store.location, 's/gen/'), 2);

      const [store2, loaded] = await reopen(dir, track);
      assert.ok(loaded.snapshotData !== null && big.equals(loaded.snapshotData));
      // Staged for one snapshot, then asked to store another: the other is written whole.
      await store2.stageSnapshot({ meta: snapshotMeta(3, 1), data: Buffer.from('staged, unused') });
      await store2.saveLocalSnapshot({ meta: snapshotMeta(4, 1), data: Buffer.from('stored') }, 4);
      await store2.close();
      assert.equal(await storedGeneration(store2.location), 3);
      assert.equal(await countKeys(store2.location, 's/gen/'), 1);
      const [, after] = await reopen(dir, track);
      assert.deepEqual(after.snapshot, snapshotMeta(4, 1));
      assert.equal(Buffer.from(after.snapshotData ?? []).toString(), 'stored');
    }));

  void test('a snapshot stored in the first layout (chunks under s/data/) loads and is replaced', () =>
    withDir(async (dir, track) => {
      const [store] = await reopen(dir, track);
      await store.save({ hardState: null, entries: entries(1, 4, 1), snapshot: null });
      await store.saveLocalSnapshot({ meta: snapshotMeta(2, 1), data: Buffer.from('old layout') }, 2);
      await store.close();
      // Rewrite it as versions before snapshot generations stored it.
      await withRawDb(store.location, async (db) => {
        const header = decodeSnapshotDataHeader(await db.get(Buffer.from('s/data')));
        assert.ok(header.ok);
        await db.put(Buffer.from('s/data'), encodeSnapshotDataHeader({ ...header.value, generation: 0 }));
        await db.put(snapshotChunkKey(0, 0), await db.get(snapshotChunkKey(1, 0)));
        await db.del(snapshotChunkKey(1, 0));
      });
      const [store2, loaded] = await reopen(dir, track);
      assert.equal(Buffer.from(loaded.snapshotData ?? []).toString(), 'old layout');
      await store2.saveLocalSnapshot({ meta: snapshotMeta(3, 1), data: Buffer.from('new layout') }, 3);
      await store2.close();
      assert.equal(await countKeys(store2.location, 's/data/'), 0);
      assert.equal(await countKeys(store2.location, 's/gen/'), 1);
      const [, after] = await reopen(dir, track);
      assert.equal(Buffer.from(after.snapshotData ?? []).toString(), 'new layout');
    }));

  void test('a bit-flipped tail record is truncated, reported, and the commit clamped', () =>
    withDir(async (dir, track) => {
      const location = await seed(dir, track, entries(1, 5, 1), { term: 1, vote: 'n1', commit: 5 });
      await damage(location, entryKey(5), flipBit(-6));
      const [store, loaded] = await reopen(dir, track);
      assert.equal(loaded.truncatedTornTailAt, 5);
      assert.deepEqual(plain(loaded.entries), plain(entries(1, 4, 1)));
      assert.equal(loaded.hardState.commit, 4);
      await store.close();
      // The truncation was written: the next load is clean.
      assert.deepEqual(await storedEntryIndexes(location), [1, 2, 3, 4]);
      const [store2, again] = await reopen(dir, track);
      assert.equal(again.truncatedTornTailAt, null);
      await store2.save({ hardState: null, entries: [entry(5, 2)], snapshot: null });
    }));

  void test('a tail record cut short is truncated as a torn write', () =>
    withDir(async (dir, track) => {
      const location = await seed(dir, track, entries(1, 3, 1));
      await damage(location, entryKey(3), (v) => v.subarray(0, v.length - 5));
      const [, loaded] = await reopen(dir, track);
      assert.equal(loaded.truncatedTornTailAt, 3);
      assert.deepEqual(plain(loaded.entries), plain(entries(1, 2, 1)));
    }));

  void test('a corrupted middle record rejects load, naming the index and the directory, and changes nothing', () =>
    withDir(async (dir, track) => {
      const location = await seed(dir, track, entries(1, 5, 1));
      await damage(location, entryKey(3), flipBit(23));
      const store = track(await openLogStore(dir));
      const err = await store.load().then(
        () => assert.fail('load should reject'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof StorageCorruptionError);
      assert.equal(err.index, 3);
      assert.equal(err.file, location);
      assert.match(
        err.message,
        new RegExp(`raft log corrupted at index 3 in ${location}: checksum mismatch`),
      );
      assert.match(err.message, /refuses to start.*remove the data directory and re-add the member/);
      await store.close();
      assert.deepEqual(await storedEntryIndexes(location), [1, 2, 3, 4, 5]);
    }));

  void test('a missing entry in the middle rejects load naming the missing index', () =>
    withDir(async (dir, track) => {
      const location = await seed(dir, track, entries(1, 5, 1));
      await withRawDb(location, (db) => db.del(entryKey(3)));
      const store = track(await openLogStore(dir));
      await assert.rejects(store.load(), (e: unknown) => {
        assert.ok(e instanceof StorageCorruptionError);
        assert.equal(e.index, 3);
        assert.match(e.message, /entry 3 is missing; next is entry 4/);
        return true;
      });
    }));

  void test('an intact tail record that breaks the log (term going down) is not truncated but rejected', () =>
    withDir(async (dir, track) => {
      const location = await seed(dir, track, entries(1, 3, 2));
      await withRawDb(location, (db) => db.put(entryKey(3), encodeEntry(entry(3, 1))));
      const store = track(await openLogStore(dir));
      await assert.rejects(store.load(), (e: unknown) => {
        assert.ok(e instanceof StorageCorruptionError);
        assert.equal(e.index, 3);
        assert.match(e.message, /term 1 is below the previous term 2/);
        return true;
      });
    }));

  void test('a corrupt hard state, snapshot meta or snapshot chunk rejects load', () =>
    withDir(async (dir, track) => {
      const [store] = await reopen(dir, track);
      await store.save({
        hardState: { term: 1, vote: 'n1', commit: 2 },
        entries: entries(1, 3, 1),
        snapshot: null,
      });
      await store.saveLocalSnapshot({ meta: snapshotMeta(2, 1), data: Buffer.from('snapshot bytes') }, 1);
      await store.close();
      const cases: [string, RegExp][] = [
        ['m/hardstate', /raft hard state \(key m\/hardstate\) corrupted in .*checksum mismatch/],
        ['m/snapshot-meta', /raft snapshot meta \(key m\/snapshot-meta\) corrupted in .*checksum mismatch/],
        [
          snapshotChunkKey(1, 0).toString('latin1'),
          /raft snapshot data .* corrupted \(snapshot index 2\) in .*checksum mismatch/,
        ],
      ];
      for (const [key, pattern] of cases) {
        await damage(store.location, Buffer.from(key, 'latin1'), flipBit(8));
        const victim = track(await openLogStore(dir));
        await assert.rejects(victim.load(), (e: unknown) => {
          assert.ok(e instanceof StorageCorruptionError, String(e));
          assert.equal(e.file, store.location);
          assert.match(e.message, pattern);
          return true;
        });
        await victim.close();
        await damage(store.location, Buffer.from(key, 'latin1'), flipBit(8)); // repair for the next case
      }
    }));

  void test('bad batches are refused with a clear error and change nothing', () =>
    withDir(async (dir, track) => {
      const [store] = await reopen(dir, track);
      await assert.rejects(
        new LevelLogStore({ dir: join(dir, 'other') }).save({ hardState: null, entries: [], snapshot: null }),
        /call load\(\) before writing/,
      );
      const hs: HardState = { term: 2, vote: 'n1', commit: 3 };
      await store.save({
        hardState: hs,
        entries: [...entries(1, 2, 1), ...entries(3, 5, 2)],
        snapshot: null,
      });
      const refused: [Parameters<LevelLogStore['save']>[0], RegExp][] = [
        [{ hardState: null, entries: [entry(7, 2)], snapshot: null }, /must start in \[1, 6\]/],
        [
          { hardState: null, entries: [entry(6, 2), entry(8, 2)], snapshot: null },
          /not contiguous: index 8 follows 6/,
        ],
        [{ hardState: null, entries: [entry(6, 1)], snapshot: null }, /entry 6 has term 1, below the term 2/],
        [
          { hardState: { ...hs, commit: 9 }, entries: [], snapshot: null },
          /commit 9 is past the last log index 5/,
        ],
        [
          { hardState: { ...hs, vote: 'n3' }, entries: [], snapshot: null },
          /changes the vote in term 2 from n1 to n3/,
        ],
        [{ hardState: { ...hs, term: 1 }, entries: [], snapshot: null }, /term 1 is below the stored term 2/],
        [
          { hardState: null, entries: [{ ...entry(6, 2), index: 6.5 }], snapshot: null },
          /entry index must be/,
        ],
        // Valid entries with a bad hard state: the entries must not be written either.
        [{ hardState: { ...hs, commit: 2 }, entries: [entry(6, 2)], snapshot: null }, /commit 2 is below/],
      ];
      for (const [batch, pattern] of refused) await assert.rejects(store.save(batch), pattern);
      await assert.rejects(
        store.saveLocalSnapshot({ meta: snapshotMeta(4, 2), data: Buffer.from('x') }, 5),
        /compactTo must be an integer in \[0, 4\]/,
      );
      await assert.rejects(
        store.saveLocalSnapshot({ meta: snapshotMeta(4, 1), data: Buffer.from('x') }, 2),
        /has term 1 but the log has term 2/,
      );
      await store.close();
      const [, loaded] = await reopen(dir, track);
      assert.deepEqual(plain(loaded.entries), plain([...entries(1, 2, 1), ...entries(3, 5, 2)]));
      assert.deepEqual(loaded.hardState, hs);
      assert.equal(loaded.snapshot.index, 0);
    }));

  void test('a second write while one is in flight is refused; the first completes', () =>
    withDir(async (dir, track) => {
      const [store] = await reopen(dir, track);
      const first = store.save({ hardState: null, entries: entries(1, 50, 1), snapshot: null });
      await assert.rejects(
        store.save({ hardState: null, entries: [entry(51, 1)], snapshot: null }),
        /a write is already in flight/,
      );
      await first;
      await store.close();
      assert.equal((await storedEntryIndexes(store.location)).length, 50);
    }));

  void test('a second process on the same directory gets a clear lock error', () =>
    withDir(async (dir, track) => {
      track(await openLogStore(dir));
      await assert.rejects(openLogStore(dir), /locked by another process; is another slipway server using/);
    }));
});

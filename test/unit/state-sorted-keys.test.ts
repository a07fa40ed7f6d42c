// Goal: show SortedKeys (the chunked sorted index behind range queries and canonical
// snapshots) always holds exactly the keys added and not deleted, in ascending order, across
// chunk splits and merges.
// Method: a fast-check model test against a plain Set sorted on demand, with key spaces small
// enough to force collisions and runs long enough (thousands of operations) to split and merge
// chunks; plus checks of from() at every boundary and of bulk loading.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { SortedKeys } from '../../src/state/sorted-keys.js';

const ascending = (keys: Iterable<string>): string[] =>
  [...keys].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

test('property: adds and deletes match a set model, in order, through splits and merges', () => {
  const op = fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 3_000 }));
  fc.assert(
    fc.property(
      fc.array(op, { minLength: 500, maxLength: 5_000 }),
      fc.integer({ min: 0, max: 3_000 }),
      (ops, probe) => {
        const keys = new SortedKeys();
        const model = new Set<string>();
        for (const [isAdd, n] of ops) {
          const key = `k${n}`;
          if (isAdd) assert.equal(keys.add(key), !model.has(key));
          else assert.equal(keys.delete(key), model.has(key));
          if (isAdd) model.add(key);
          else model.delete(key);
        }
        assert.equal(keys.size, model.size);
        const sorted = ascending(model);
        assert.deepEqual([...keys], sorted);
        const start = `k${probe}`;
        assert.deepEqual(
          [...keys.from(start)],
          sorted.filter((k) => k >= start),
        );
      },
    ),
    { numRuns: 30 },
  );
});

test('deleting most of a large set keeps it ordered and findable', () => {
  const keys = new SortedKeys();
  const all = Array.from({ length: 5_000 }, (_, i) => `key/${String(i).padStart(5, '0')}`);
  for (const k of all) keys.add(k);
  const kept = all.filter((_, i) => i % 97 === 0);
  for (const k of all) if (!kept.includes(k)) assert.equal(keys.delete(k), true);
  assert.deepEqual([...keys], kept);
  assert.deepEqual([...keys.from('key/04')].slice(0, 2), kept.filter((k) => k >= 'key/04').slice(0, 2));
  for (const k of kept) assert.equal(keys.add(k), false);
});

test('from() handles starts before, between, on and past the keys', () => {
  const keys = SortedKeys.fromSorted(['b', 'd', 'f']);
  assert.deepEqual([...keys.from('')], ['b', 'd', 'f']);
  assert.deepEqual([...keys.from('c')], ['d', 'f']);
  assert.deepEqual([...keys.from('d')], ['d', 'f']);
  assert.deepEqual([...keys.from('g')], []);
  assert.deepEqual([...new SortedKeys().from('a')], []);
});

test('fromSorted bulk-loads and refuses unsorted or duplicate input', () => {
  const many = Array.from({ length: 2_000 }, (_, i) => `x${String(i).padStart(4, '0')}`);
  const keys = SortedKeys.fromSorted(many);
  assert.equal(keys.size, 2_000);
  assert.equal(keys.add('x0999a'), true);
  assert.deepEqual([...keys.from('x0999')].slice(0, 3), ['x0999', 'x0999a', 'x1000']);
  assert.throws(() => SortedKeys.fromSorted(['a', 'c', 'b']), /not strictly ascending at position 2/);
  assert.throws(() => SortedKeys.fromSorted(['a', 'a']), /not strictly ascending at position 1/);
});

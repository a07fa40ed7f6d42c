// Goal: paged lists hand out every item exactly once across pages, even while items are added
// and removed between pages; limits and tokens are checked; the CLI follows tokens to the end.
// Method: pageOf over sorted arrays with keys like the control lists' ([createdMs, id]), with
// fast-check for arbitrary page sizes and changes; allPages over a fake list call.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { status } from '@grpc/grpc-js';
import fc from 'fast-check';
import { ApiError } from '../../src/api/errors.js';
import { pageBytesMax, pageItemsDefault, pageOf, type PageKey } from '../../src/api/pages.js';
import { allItems, allPages } from '../../src/platform/pages.js';

interface Item {
  readonly createdMs: number;
  readonly id: string;
}
const keyOf = (i: Item): PageKey => [i.createdMs, i.id];
const byKey = (a: Item, b: Item): number =>
  a.createdMs - b.createdMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
const items = (n: number): Item[] =>
  Array.from({ length: n }, (_, i) => ({
    createdMs: Math.floor(i / 3),
    id: `wf-${String(i % 7)}-${String(i)}`,
  })).sort(byKey);

describe('pageOf', () => {
  it('lists every item once, in order, whatever the page size', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 200 }), fc.integer({ min: 1, max: 50 }), (n, limit) => {
        const all = items(n);
        const seen: Item[] = [];
        let token = '';
        for (let pages = 0; pages <= n + 1; pages++) {
          const page = pageOf(all, { limit, continue: token }, keyOf, () => 10);
          assert.ok(page.items.length <= limit);
          seen.push(...page.items);
          token = page.continue;
          if (token === '') break;
        }
        assert.equal(token, '');
        assert.deepEqual(seen, all);
      }),
    );
  });

  it('items present throughout are listed once while others come and go between pages', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.array(fc.integer({ min: 0, max: 300 })),
        (limit, churn) => {
          const stable = items(60);
          let current = [...stable];
          const seen: Item[] = [];
          let token = '';
          for (let step = 0; ; step++) {
            const page = pageOf(current, { limit, continue: token }, keyOf, () => 10);
            seen.push(...page.items);
            token = page.continue;
            if (token === '') break;
            const c = churn[step % Math.max(1, churn.length)] ?? 0;
            const extra = { createdMs: c % 25, id: `new-${String(step)}` };
            current = [...current.filter((i) => !i.id.startsWith('new-')), extra].sort(byKey);
          }
          const ids = seen.map((i) => i.id);
          for (const i of stable) assert.equal(ids.filter((id) => id === i.id).length, 1, i.id);
          assert.equal(new Set(ids).size, ids.length);
        },
      ),
    );
  });

  it('defaults to pageItemsDefault, refuses a limit over the maximum and a token it did not make', () => {
    const all = items(pageItemsDefault + 5);
    const first = pageOf(all, {}, keyOf, () => 10);
    assert.equal(first.items.length, pageItemsDefault);
    assert.notEqual(first.continue, '');
    const invalid = (e: unknown): boolean => e instanceof ApiError && e.code === status.INVALID_ARGUMENT;
    assert.throws(() => pageOf(all, { limit: 1001 }, keyOf, () => 10), invalid);
    assert.throws(() => pageOf(all, { continue: 'not a token!' }, keyOf, () => 10), invalid);
    const notAKey = Buffer.from('{"a":1}').toString('base64url');
    assert.throws(() => pageOf(all, { continue: notAKey }, keyOf, () => 10), invalid);
  });

  it('ends a page before it grows past pageBytesMax, but never sends an empty one', () => {
    const all = items(10);
    const page = pageOf(all, { limit: 10 }, keyOf, () => pageBytesMax / 3 + 1);
    assert.equal(page.items.length, 2);
    const huge = pageOf(all, { limit: 10 }, keyOf, () => pageBytesMax * 2);
    assert.equal(huge.items.length, 1);
  });
});

describe('allPages', () => {
  it('follows continue tokens to the last page and refuses a token that does not move', async () => {
    const all = items(23);
    const pages = await allPages((token) =>
      Promise.resolve(pageOf(all, { limit: 5, continue: token }, keyOf, () => 1)),
    );
    assert.equal(pages.length, 5);
    assert.deepEqual(
      pages.flatMap((p) => p.items),
      all,
    );
    await assert.rejects(
      allPages(() => Promise.resolve({ continue: 'same' })),
      /same continue token twice/,
    );
  });

  it('allItems gathers the items of every page in order, more than a page of them', async () => {
    const all = items(1_001);
    const got = await allItems(
      (token) => Promise.resolve(pageOf(all, { continue: token }, keyOf, () => 1)),
      (page) => page.items,
    );
    assert.deepEqual(got, all);
  });
});

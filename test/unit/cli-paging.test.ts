// Goal: the CLI's list flags (--limit, --continue) ask the node for the right pages and stop at
// the right item, bad values are usage errors naming the flag, and a request refused as larger
// than the node's message limit is worded naming the setting (src/cli/pages.ts, errors.ts).
// Method: listPages against a fake paged list of 2,500 items; refusals built as grpc-js words them.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Metadata, status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { answerBytesMax, messageLimitRefusal } from '../../src/cli/errors.js';
import { UsageError } from '../../src/cli/output.js';
import { listPages, paging, type PageRequestFields } from '../../src/cli/pages.js';

interface FakePage {
  readonly items: number[];
  readonly continue: string;
}

/** A list of `n` items served like src/api/pages.ts: at most 1,000 (default 500) after the token. */
function fakeList(
  n: number,
  pageCapBytes = Infinity,
): { fetch: (r: PageRequestFields) => Promise<FakePage>; asked: PageRequestFields[] } {
  const asked: PageRequestFields[] = [];
  const fetch = (r: PageRequestFields): Promise<FakePage> => {
    asked.push(r);
    const limit = r.limit ?? 500;
    assert.ok(limit >= 1 && limit <= 1000, `limit ${limit} within the server's bounds`);
    const start = r.continue === '' ? 0 : Number(r.continue.slice(1)) + 1;
    const end = Math.min(n, start + limit, start + pageCapBytes);
    const items = Array.from({ length: end - start }, (_, i) => start + i);
    return Promise.resolve({ items, continue: end < n ? `k${String(end - 1)}` : '' });
  };
  return { fetch, asked };
}

function serviceError(code: status, details: string): ServiceError {
  return Object.assign(new Error(details), { code, details, metadata: new Metadata() });
}

describe('listPages', () => {
  test('without --limit, every page from the token', async () => {
    const list = fakeList(2500);
    const all = await listPages(paging({}), list.fetch, (p) => p.items.length);
    assert.equal(all.pages.flatMap((p) => p.items).length, 2500);
    assert.equal(all.next, '');
    const rest = await listPages(paging({ continue: 'k1999' }), list.fetch, (p) => p.items.length);
    assert.deepEqual(rest.pages.flatMap((p) => p.items).slice(0, 2), [2000, 2001]);
    assert.equal(rest.pages.flatMap((p) => p.items).length, 500);
  });

  test('--limit stops at that many items across pages and gives the token after the last', async () => {
    const list = fakeList(2500);
    const r = await listPages(paging({ limit: '1500' }), list.fetch, (p) => p.items.length);
    assert.equal(r.pages.flatMap((p) => p.items).length, 1500);
    assert.deepEqual(
      list.asked.map((a) => a.limit),
      [1000, 500],
    );
    assert.equal(r.next, 'k1499');
    // A page cut short (the server's 2 MiB bound) is made up by the next one.
    const short = fakeList(2500, 300);
    const s = await listPages(paging({ limit: '700', continue: 'k9' }), short.fetch, (p) => p.items.length);
    assert.deepEqual(
      short.asked.map((a) => [a.limit, a.continue]),
      [
        [700, 'k9'],
        [400, 'k309'],
        [100, 'k609'],
      ],
    );
    assert.equal(s.next, 'k709');
    const end = await listPages(
      paging({ limit: '10', continue: 'k2494' }),
      list.fetch,
      (p) => p.items.length,
    );
    assert.equal(end.pages.flatMap((p) => p.items).length, 5);
    assert.equal(end.next, '', 'no token once the list is done');
  });

  test('bad values are usage errors naming the flag', async () => {
    for (const [flags, flag] of [
      [{ limit: '0' }, /--limit/],
      [{ limit: '-1' }, /--limit/],
      [{ limit: '1e3' }, /--limit/],
      [{ limit: '99999999999999999999' }, /--limit/],
      [{ continue: '' }, /--continue/],
      [{ continue: 'a b' }, /--continue/],
      [{ continue: 'x'.repeat(1025) }, /--continue/],
    ] as const) {
      assert.throws(
        () => paging(flags),
        (e: unknown) => e instanceof UsageError && flag.test(e.message),
      );
    }
    const refused = (): Promise<FakePage> =>
      Promise.reject(
        serviceError(
          status.INVALID_ARGUMENT,
          'the continue token is not one this list gave; start again without it',
        ),
      );
    await assert.rejects(
      listPages(paging({ continue: 'abc' }), refused, () => 0),
      (e: unknown) => e instanceof UsageError && /^--continue: the continue token/.test(e.message),
    );
  });
});

describe('messageLimitRefusal', () => {
  test("names the node's setting for a request it refused, and nothing else", () => {
    assert.equal(
      messageLimitRefusal(
        serviceError(status.RESOURCE_EXHAUSTED, 'Received message larger than max (3000000 vs 2097152)'),
      ),
      "the request is 2.9 MiB (3000000 bytes), larger than the node's apiMessageBytesMax (--api-message-bytes-max, 2 MiB)",
    );
    // The client's own limit on answers is not the node's.
    assert.equal(
      messageLimitRefusal(
        serviceError(
          status.RESOURCE_EXHAUSTED,
          `Received message larger than max (${String(answerBytesMax + 1)} vs ${String(answerBytesMax)})`,
        ),
      ),
      undefined,
    );
    assert.equal(
      messageLimitRefusal(
        serviceError(status.RESOURCE_EXHAUSTED, 'too many failed authentications from 127.0.0.1'),
      ),
      undefined,
    );
    assert.equal(
      messageLimitRefusal(
        serviceError(status.INTERNAL, 'Received message larger than max (3000000 vs 2097152)'),
      ),
      undefined,
    );
  });
});

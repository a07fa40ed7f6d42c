// Paging of list calls, like Kubernetes' `continue`: a page holds at most `limit` items and
// about pageBytesMax of them, and its token names the last item returned (its sort key, as
// base64url JSON). The next page starts after that key, so items created or deleted between
// pages shift nothing: each item that exists throughout is listed once. Lists must be sorted by
// the key given here.
import { status } from '@grpc/grpc-js';
import { ApiError } from './errors.js';
import { pageItemsMax } from '../wire/contract.js';

/** Items per page when the caller names no limit. */
export const pageItemsDefault = 500;
/** A page stops growing past this many bytes of items, well inside gRPC's 4 MiB message limit. */
export const pageBytesMax = 2 * 1024 * 1024;
/** A token is a short key; anything longer was not made here. */
const tokenLengthMax = 1024;

/** An item's position in its list's order: compared element by element. */
export type PageKey = readonly (string | number)[];

export interface PageRequest {
  readonly limit?: number | undefined;
  readonly continue?: string | undefined;
}

export interface Page<T> {
  readonly items: T[];
  /** Empty on the last page. */
  readonly continue: string;
}

/**
 * One page of `sorted` (ordered by `keyOf`). `bytesOf` measures an item as sent; the first item
 * of a page is always included, so a page is never empty while items remain.
 */
export function pageOf<T>(
  sorted: readonly T[],
  request: PageRequest,
  keyOf: (item: T) => PageKey,
  bytesOf: (item: T) => number,
): Page<T> {
  const limit = request.limit === undefined || request.limit === 0 ? pageItemsDefault : request.limit;
  if (limit > pageItemsMax) {
    throw new ApiError(
      status.INVALID_ARGUMENT,
      `limit ${limit} is over the largest page of ${pageItemsMax} items`,
    );
  }
  const token = request.continue ?? '';
  let start = 0;
  if (token !== '') {
    const after = decodeToken(token);
    start = sorted.findIndex((item) => compareKeys(keyOf(item), after) > 0);
    if (start < 0) start = sorted.length;
  }
  const items: T[] = [];
  let bytes = 0;
  for (let i = start; i < sorted.length && items.length < limit; i++) {
    const item = sorted[i] as T;
    bytes += bytesOf(item);
    if (items.length > 0 && bytes > pageBytesMax) break;
    items.push(item);
  }
  const last = items.at(-1);
  const more = start + items.length < sorted.length && last !== undefined;
  return { items, continue: more ? encodeToken(keyOf(last)) : '' };
}

function compareKeys(a: PageKey, b: PageKey): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x === y) continue;
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (typeof x === 'number' && typeof y === 'number') return x - y;
    return String(x) < String(y) ? -1 : 1;
  }
  return 0;
}

function encodeToken(key: PageKey): string {
  return Buffer.from(JSON.stringify(key), 'utf8').toString('base64url');
}

function decodeToken(token: string): PageKey {
  const bad = new ApiError(
    status.INVALID_ARGUMENT,
    'the continue token is not one this list gave; start again without it',
  );
  if (token.length > tokenLengthMax || !/^[A-Za-z0-9_-]+$/.test(token)) throw bad;
  let key: unknown;
  try {
    key = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    throw bad;
  }
  if (!Array.isArray(key) || !key.every((k) => typeof k === 'string' || typeof k === 'number')) throw bad;
  return key;
}

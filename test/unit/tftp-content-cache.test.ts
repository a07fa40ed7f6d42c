// Goal: the file-content cache stays within its byte budget, evicts the least recently used
// entry first, and never returns content whose version changed.
// Method: direct calls on ContentCache with small byte arrays.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ContentCache } from '../../src/boot/tftp/content-cache.js';

const blob = (length: number, fill: number): Uint8Array => new Uint8Array(length).fill(fill);

void test('evicts the least recently used entry when the budget is exceeded', () => {
  const cache = new ContentCache(30);
  cache.set('a', 'v1', blob(10, 1));
  cache.set('b', 'v1', blob(10, 2));
  cache.set('c', 'v1', blob(10, 3));
  assert.deepEqual(cache.get('a', 'v1'), blob(10, 1)); // a is now the most recent
  cache.set('d', 'v1', blob(10, 4));
  assert.equal(cache.get('b', 'v1'), null, 'b was the least recently used');
  assert.notEqual(cache.get('a', 'v1'), null);
  assert.notEqual(cache.get('c', 'v1'), null);
  assert.notEqual(cache.get('d', 'v1'), null);
  assert.equal(cache.bytes, 30);
});

void test('a changed version is a miss and frees the stale bytes', () => {
  const cache = new ContentCache(100);
  cache.set('ipxe.efi', 'ino1:10:1', blob(10, 1));
  assert.equal(cache.get('ipxe.efi', 'ino1:10:2'), null);
  assert.equal(cache.bytes, 0);
  assert.equal(cache.size, 0);
});

void test('replacing an entry accounts its bytes once; content over the budget is not kept', () => {
  const cache = new ContentCache(20);
  cache.set('a', 'v1', blob(10, 1));
  cache.set('a', 'v2', blob(15, 2));
  assert.equal(cache.bytes, 15);
  cache.set('huge', 'v1', blob(21, 3));
  assert.equal(cache.get('huge', 'v1'), null);
  assert.equal(cache.bytes, 15);
});

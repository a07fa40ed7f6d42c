// lb/vip-holder.ts: the VIP decisions, from what is observed, with time as a number; a carrier
// that comes back while holding is announced again.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { VipHolder } from '../../lb/vip-holder.js';

const opts = { reannounceAfterMs: [2000, 5000], retryAfterMs: 1000 };

describe('VipHolder', () => {
  test('takes the VIP and announces it when it should hold it and the interface lacks it', () => {
    const h = new VipHolder(opts);
    assert.deepEqual(h.step(0, false, false), []);
    assert.deepEqual(h.step(100, true, false), ['add', 'announce']);
  });

  test('announces again at the configured delays, once each, while it holds the VIP', () => {
    const h = new VipHolder(opts);
    h.step(1000, true, false);
    assert.deepEqual(h.step(1100, true, true), []);
    assert.deepEqual(h.step(2999, true, true), []);
    assert.deepEqual(h.step(3000, true, true), ['announce']);
    assert.deepEqual(h.step(3100, true, true), []);
    assert.deepEqual(h.step(6100, true, true), ['announce']);
    assert.deepEqual(h.step(60_000, true, true), []);
  });

  test('two re-announcements due at once give one announcement', () => {
    const h = new VipHolder(opts);
    h.step(0, true, false);
    assert.deepEqual(h.step(10_000, true, true), ['announce']);
    assert.deepEqual(h.step(10_100, true, true), []);
  });

  test('lets the VIP go as soon as it should not hold it, and drops pending announcements', () => {
    const h = new VipHolder(opts);
    h.step(0, true, false);
    assert.deepEqual(h.step(100, false, true), ['delete']);
    assert.deepEqual(h.step(200, false, false), []);
    assert.deepEqual(h.step(3000, false, false), [], 'no announcement after letting go');
  });

  test('a VIP found on the interface of a node that should not hold it (left by a crash) is removed', () => {
    assert.deepEqual(new VipHolder(opts).step(0, false, true), ['delete']);
  });

  test('after a failed add it waits the retry delay, then tries again', () => {
    const h = new VipHolder(opts);
    assert.deepEqual(h.step(0, true, false), ['add', 'announce']);
    h.addFailed(10);
    assert.deepEqual(h.step(100, true, false), []);
    assert.deepEqual(h.step(1009, true, false), []);
    assert.deepEqual(h.step(1010, true, false), ['add', 'announce']);
  });

  test('a failed add never holds back letting go', () => {
    const h = new VipHolder(opts);
    h.step(0, true, false);
    h.addFailed(0);
    assert.deepEqual(h.step(100, false, true), ['delete']);
  });

  test('an address removed behind its back while holding is put back and announced', () => {
    const h = new VipHolder(opts);
    h.step(0, true, false);
    assert.deepEqual(h.step(500, true, false), ['add', 'announce']);
  });
});

describe('VipHolder.linkBack', () => {
  test('a carrier back while holding announces at once, and again later: what was sent without it was lost', () => {
    const h = new VipHolder(opts);
    h.step(0, true, false);
    h.step(opts.reannounceAfterMs[1]! + 1, true, true);
    assert.deepEqual(h.step(100_000, true, true), []);
    h.linkBack(100_000);
    assert.deepEqual(h.step(100_000, true, true), ['announce']);
    assert.deepEqual(h.step(100_001, true, true), []);
    assert.deepEqual(h.step(100_000 + opts.reannounceAfterMs[0]!, true, true), ['announce']);
  });

  test('a carrier back on a node that lets the VIP go announces nothing', () => {
    const h = new VipHolder(opts);
    h.linkBack(0);
    assert.deepEqual(h.step(0, false, true), ['delete']);
    assert.deepEqual(h.step(1, false, false), []);
  });
});

// lb/vip-holder.ts: the VIP decisions, from what is observed, with time as a number; and how
// lb/vip-manager.ts reads the VIP from `ip -j addr` when the interface has no carrier.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { VipHolder } from '../../lb/vip-holder.js';
import { vipCidrIn } from '../../lb/vip-manager.js';

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

describe('vipCidrIn', () => {
  // The shape of `ip -j -4 addr show dev eth0` (iproute2 6.1), trimmed.
  const out = JSON.stringify([
    {
      ifindex: 2,
      ifname: 'eth0',
      flags: ['NO-CARRIER', 'BROADCAST', 'MULTICAST', 'UP'],
      addr_info: [
        { family: 'inet', local: '10.80.0.11', prefixlen: 24, scope: 'global' },
        { family: 'inet', local: '10.80.0.100', prefixlen: 32, scope: 'global' },
      ],
    },
  ]);

  test('finds the VIP with its prefix', () => {
    assert.equal(vipCidrIn(out, '10.80.0.100'), '10.80.0.100/32');
  });

  test('is undefined when the interface lacks it, or has no addresses', () => {
    assert.equal(vipCidrIn(out, '10.80.0.101'), undefined);
    assert.equal(vipCidrIn('[{"ifname":"eth0","addr_info":[]}]', '10.80.0.100'), undefined);
    assert.equal(vipCidrIn('[]', '10.80.0.100'), undefined);
  });
});

// Goal: the TFTP server's listeners follow the host's addresses exactly: a listener is added
// for each new unicast IPv4 address and removed for each one gone, nothing is done twice, and
// what cannot be bound as a unicast IPv4 address (IPv6, the wildcard, broadcast, garbage) gets
// no listener. (The feed itself is the link watcher's, tested in test/e2e/link-watch.test.ts.)
// Method: listenerChanges is pure.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { listenerChanges } from '../../src/boot/tftp/address-feed.js';

void test('listenerChanges adds new addresses and removes gone ones, in order, once', () => {
  assert.deepEqual(listenerChanges(new Set(), ['10.0.0.12', '10.0.0.100']), {
    add: ['10.0.0.12', '10.0.0.100'],
    remove: [],
  });
  // The VIP moves away.
  assert.deepEqual(listenerChanges(new Set(['10.0.0.12', '10.0.0.100']), ['10.0.0.12']), {
    add: [],
    remove: ['10.0.0.100'],
  });
  // Nothing changed, duplicates included.
  assert.deepEqual(listenerChanges(new Set(['10.0.0.12']), ['10.0.0.12', '10.0.0.12']), {
    add: [],
    remove: [],
  });
  // Every address gone.
  assert.deepEqual(listenerChanges(new Set(['10.0.0.12', '127.0.0.1']), []), {
    add: [],
    remove: ['10.0.0.12', '127.0.0.1'],
  });
});

void test('listenerChanges gives no listener to what is not a unicast IPv4 address', () => {
  const changes = listenerChanges(new Set(), [
    '0.0.0.0',
    '255.255.255.255',
    'fe80::1',
    '::1',
    '10.0.0.256',
    '',
    'eth0',
    '192.0.2.7',
  ]);
  assert.deepEqual(changes, { add: ['192.0.2.7'], remove: [] });
});

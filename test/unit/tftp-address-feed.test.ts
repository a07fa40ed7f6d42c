// Goal: the TFTP server's listeners follow the host's addresses exactly: a listener is added
// for each new unicast IPv4 address and removed for each one gone, nothing is done twice, and
// what cannot be bound as a unicast IPv4 address (IPv6, the wildcard, broadcast, garbage) gets
// no listener. The polled feed (the stand-in for the link watcher) reports the current list at
// once and then only changes.
// Method: listenerChanges is pure; the feed is driven with a read function the test changes,
// and waited on with deadlines.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { listenerChanges } from '../../src/boot/tftp/address-feed.js';
import { polledAddressFeed } from '../../src/boot/tftp/polled-address-feed.js';
import { waitFor } from '../support/wait.js';

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

void test('the polled feed reports the current addresses at once, then each change once, until unsubscribed', async () => {
  let current = ['10.0.0.12', '127.0.0.1'];
  let reads = 0;
  const seen: (readonly string[])[] = [];
  const read = (): string[] => {
    reads += 1;
    return current;
  };
  const stop = polledAddressFeed(5, read).subscribe((addresses) => seen.push(addresses));
  assert.deepEqual(seen, [['10.0.0.12', '127.0.0.1']]);
  current = ['10.0.0.100', '10.0.0.12', '127.0.0.1'];
  await waitFor('the added address to be reported', () => seen.length === 2);
  current = ['10.0.0.12', '127.0.0.1'];
  await waitFor('the removed address to be reported', () => seen.length === 3);
  const readsBefore = reads;
  await waitFor('more polls with nothing new', () => reads >= readsBefore + 3);
  assert.deepEqual(seen.slice(1), [
    ['10.0.0.100', '10.0.0.12', '127.0.0.1'],
    ['10.0.0.12', '127.0.0.1'],
  ]);

  stop();
  const readsAtStop = reads;
  // A second feed on the same interval shows time has passed for several polls.
  let otherReads = 0;
  const stopOther = polledAddressFeed(5, () => {
    otherReads += 1;
    return [];
  }).subscribe(() => undefined);
  await waitFor('the other feed to poll several times', () => otherReads >= 4);
  stopOther();
  assert.equal(reads, readsAtStop, 'no poll after unsubscribing');
  assert.equal(seen.length, 3);
});

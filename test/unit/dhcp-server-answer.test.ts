// Goal: the DHCP server's answer to a request follows the committed hardware record: a known
// MAC gets its reserved address with netmask, router, DNS, hostname and lease time, plus the
// boot file the PXE policy picks (iPXE binary for a PXE ROM, the per-MAC script URL for iPXE);
// allowPXE off gives the address only; unknown MACs, interfaces without a reservation and
// reservations on another interface's subnet get nothing; proxy mode boots known machines
// without an address; a different lease backend slots in and sees unknown clients too;
// reservations are answered without a promise, and a changed record changes the answer at once.
// Method: answerRequest on hand-built requests against an in-memory inventory.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DhcpPacket } from '../../src/boot/dhcp/codec.js';
import type { DhcpOptions } from '../../src/boot/dhcp/options.js';
import { defaultIpxeBinaries } from '../../src/boot/dhcp/pxe-policy.js';
import type { ReplyOutcome } from '../../src/boot/dhcp/reply.js';
import {
  answerRequest,
  reservedLeases,
  type AnswerContext,
  type LeaseQuery,
} from '../../src/boot/dhcp/server.js';
import { staticInventory } from '../../src/boot/inventory.js';
import { clientPacket, ignoredReason, replyOf } from '../support/dhcp-packets.js';
import { hardwareRecord } from '../support/netns.js';

const serverAddress = '10.1.0.1';
const macs = {
  pxe: '52:54:00:01:00:01',
  off: '52:54:00:01:00:02',
  bare: '52:54:00:01:00:03',
  elsewhere: '52:54:00:01:00:04',
  unknown: '52:54:00:01:00:99',
};

const inventory = staticInventory([
  hardwareRecord({
    id: 'node-1',
    mac: macs.pxe,
    ip: '10.1.0.50/24',
    gateway: '10.1.0.1',
    dns: ['10.1.0.2'],
    hostname: 'node-1',
    leaseTimeS: 7200,
  }),
  hardwareRecord({ id: 'node-2', mac: macs.off, ip: '10.1.0.51/24', allowPXE: false }),
  hardwareRecord({ id: 'node-3', mac: macs.bare }),
  hardwareRecord({ id: 'node-4', mac: macs.elsewhere, ip: '10.2.0.50/24' }),
]);

const context: AnswerContext = {
  mode: 'reservation',
  inventory,
  leases: reservedLeases(),
  serverAddress,
  httpBaseUrl: 'http://10.1.0.1:8080',
  httpBinaryBaseUrl: 'http://10.1.0.1:8080/binaries',
  ipxeBinaries: defaultIpxeBinaries,
  segment: [{ address: '10.1.0.1', prefix: 24 }],
};

const pxeRom: DhcpOptions = { vendorClass: 'PXEClient:Arch:00000:UNDI:002001', clientArch: [0] };
const ipxe: DhcpOptions = { ...pxeRom, userClass: { format: 'plain', classes: ['iPXE'] } };

function discover(mac: string, options: DhcpOptions = {}, fields: Partial<DhcpPacket> = {}): DhcpPacket {
  return clientPacket('DISCOVER', mac, options, { xid: 0x1234, ...fields });
}

const reply = replyOf;
const ignored = ignoredReason;

describe('reservation mode', () => {
  it('offers the reserved address and its configuration', async () => {
    const offer = reply(await answerRequest(discover(macs.pxe, pxeRom), context));
    assert.equal(offer.options.messageType, 'OFFER');
    assert.equal(offer.yiaddr, '10.1.0.50');
    assert.equal(offer.options.subnetMask, '255.255.255.0');
    assert.deepEqual(offer.options.routers, ['10.1.0.1']);
    assert.deepEqual(offer.options.dnsServers, ['10.1.0.2']);
    assert.equal(offer.options.hostname, 'node-1');
    assert.equal(offer.options.leaseTimeS, 7200);
    assert.equal(offer.options.serverId, serverAddress);
  });

  it('sends a PXE ROM the iPXE binary over TFTP from the server address', async () => {
    const offer = reply(await answerRequest(discover(macs.pxe, pxeRom), context));
    assert.equal(offer.siaddr, serverAddress);
    assert.equal(offer.file, 'undionly.kpxe');
  });

  it('sends iPXE straight to its per-MAC script URL', async () => {
    const offer = reply(await answerRequest(discover(macs.pxe, ipxe), context));
    assert.equal(offer.file, `http://10.1.0.1:8080/ipxe/${macs.pxe}`);
  });

  it('gives the address but no boot file when allowPXE is off', async () => {
    const offer = reply(await answerRequest(discover(macs.off, pxeRom), context));
    assert.equal(offer.yiaddr, '10.1.0.51');
    assert.equal(offer.file, '');
    assert.equal(offer.siaddr, '0.0.0.0');
    assert.equal(offer.options.bootfileName, undefined);
  });

  it('does not answer unknown MACs or interfaces without a reservation', async () => {
    assert.match(
      ignored(await answerRequest(discover(macs.unknown, pxeRom), context)),
      /no hardware has MAC/,
    );
    assert.match(ignored(await answerRequest(discover(macs.bare, pxeRom), context)), /reserves no address/);
  });

  it('leaves a local broadcast for another subnet to that subnet’s listener, but answers it relayed', async () => {
    assert.match(
      ignored(await answerRequest(discover(macs.elsewhere), context)),
      /not on this interface's subnets/,
    );
    const relayed = reply(await answerRequest(discover(macs.elsewhere, {}, { giaddr: '10.2.0.1' }), context));
    assert.equal(relayed.yiaddr, '10.2.0.50');
  });

  it('does not answer non-Ethernet clients or BOOTREPLYs', async () => {
    assert.match(
      ignored(await answerRequest(discover(macs.pxe, {}, { htype: 6 }), context)),
      /Ethernet only/,
    );
    assert.match(ignored(await answerRequest(discover(macs.pxe, {}, { op: 'reply' }), context)), /BOOTREPLY/);
  });
});

describe('answers from a changing inventory', () => {
  it('answers a reservation in the same turn, without a promise', () => {
    const outcome = answerRequest(discover(macs.pxe, pxeRom), context);
    assert.ok(!(outcome instanceof Promise));
    assert.equal(reply(outcome).yiaddr, '10.1.0.50');
  });

  it('follows every change to the record, even one that keeps the interface objects', () => {
    const first = hardwareRecord({ id: 'node-9', mac: macs.pxe, ip: '10.1.0.60/24' });
    let current = first;
    const live: AnswerContext = {
      ...context,
      leases: reservedLeases(),
      inventory: { byMac: (mac) => staticInventory([current]).byMac(mac) },
    };
    const before = reply(answerRequest(discover(macs.pxe, pxeRom), live) as ReplyOutcome);
    assert.equal(before.yiaddr, '10.1.0.60');
    assert.equal(before.file, 'undionly.kpxe');
    // As the state stores an allowPXE change: a new hardware object over the same interfaces.
    current = { ...first, netboot: { ...first.netboot, allowPXE: false } };
    const noBoot = reply(answerRequest(discover(macs.pxe, pxeRom), live) as ReplyOutcome);
    assert.equal(noBoot.yiaddr, '10.1.0.60');
    assert.equal(noBoot.file, '');
    current = hardwareRecord({ id: 'node-9', mac: macs.pxe, ip: '10.1.0.61/24', leaseTimeS: 60 });
    const moved = reply(answerRequest(discover(macs.pxe, pxeRom), live) as ReplyOutcome);
    assert.equal(moved.yiaddr, '10.1.0.61');
    assert.equal(moved.options.leaseTimeS, 60);
    assert.equal(moved.file, 'undionly.kpxe');
  });
});

describe('proxy mode', () => {
  const proxy: AnswerContext = { ...context, mode: 'proxy' };

  it('boots known PXE clients without handing out an address', async () => {
    const offer = reply(await answerRequest(discover(macs.pxe, pxeRom), proxy));
    assert.equal(offer.yiaddr, '0.0.0.0');
    assert.equal(offer.file, 'undionly.kpxe');
    assert.equal(offer.options.vendorClass, 'PXEClient');
    assert.equal(offer.options.leaseTimeS, undefined);
  });

  it('ignores unknown machines and machines that must not boot', async () => {
    assert.match(ignored(await answerRequest(discover(macs.unknown, pxeRom), proxy)), /no hardware/);
    assert.match(ignored(await answerRequest(discover(macs.off, pxeRom), proxy)), /allowPXE is off/);
  });
});

describe('lease backends', () => {
  it('asks the backend for every client, known or not, and offers what it returns', async () => {
    const queries: LeaseQuery[] = [];
    const pool: AnswerContext = {
      ...context,
      leases: {
        leaseFor: (query) => {
          queries.push(query);
          return Promise.resolve({
            kind: 'lease',
            lease: { ip: '10.1.0.200', mask: '255.255.255.0', dns: [], leaseTimeS: 600 },
          });
        },
      },
    };
    const offer = reply(await answerRequest(discover(macs.unknown, pxeRom), pool));
    assert.equal(offer.yiaddr, '10.1.0.200');
    assert.equal(offer.options.leaseTimeS, 600);
    // A machine the inventory does not know gets an address but never boot information.
    assert.equal(offer.file, '');
    assert.equal(queries[0]?.mac, macs.unknown);
    assert.equal(queries[0]?.record, undefined);
    assert.deepEqual(queries[0]?.segment, context.segment);
  });
});

describe('staticInventory', () => {
  it('finds machines by canonical MAC and refuses a MAC claimed twice', () => {
    assert.equal(inventory.byMac(macs.pxe)?.hardware.id, 'node-1');
    assert.equal(inventory.byMac(macs.unknown), undefined);
    assert.throws(
      () =>
        staticInventory([
          hardwareRecord({ id: 'a', mac: macs.pxe }),
          hardwareRecord({ id: 'b', mac: macs.pxe }),
        ]),
      /belongs to both a and b/,
    );
  });
});

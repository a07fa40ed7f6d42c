// Goal: dynamic mode hands out pool addresses and commits each lease in the replicated state
// before the ACK: a DISCOVER offers without committing and never offers one address to two
// clients at once; a REQUEST commits, then ACKs, and a grant the state refuses is NAKed;
// renewals extend the lease; RELEASE keeps the address for its machine; DECLINE keeps it from
// everyone; an exhausted pool offers nothing until a lease expires; relayed requests draw from
// the giaddr's pool; hardware reservations win over pools. The state side (ControlState) refuses
// a grant for an address another MAC holds or hardware reserves, and its snapshot keeps leases.
// Method: answerRequest with the dynamic backend over a real ControlState, through the real
// ReplicatedLeaseLedger whose proposer applies each command at once with a test clock.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ReplicatedLeaseLedger } from '../../src/node/lease-ledger.js';
import type { DhcpPacket } from '../../src/boot/dhcp/codec.js';
import { dynamicLeases } from '../../src/boot/dhcp/dynamic-leases.js';
import type { DhcpOptions } from '../../src/boot/dhcp/options.js';
import { overlappingPools, parsePoolSpec, PoolSpecError } from '../../src/boot/dhcp/pool.js';
import { defaultIpxeBinaries } from '../../src/boot/dhcp/pxe-policy.js';
import { answerRequest, reservedLeases, type AnswerContext } from '../../src/boot/dhcp/server.js';
import { inventoryOf } from '../../src/node/boot-services.js';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import type { HardwareInput } from '../../src/model/records.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { clientPacket, ignoredReason, replyOf } from '../support/dhcp-packets.js';

const serverAddress = '10.5.0.1';
const leaseTimeS = 600;
const t0 = 1_800_000_000_000;

interface Harness {
  readonly control: ControlState;
  readonly context: AnswerContext;
  /** Commands proposed, in order. */
  readonly proposed: ControlCommand[];
  now: number;
}

function harness(
  pools: readonly string[] = ['10.5.0.100-10.5.0.103/24,router=10.5.0.1,dns=10.5.0.2'],
): Harness {
  const control = new ControlState();
  let index = 0;
  const h: Harness = {
    control,
    proposed: [],
    now: t0,
    context: undefined as unknown as AnswerContext,
  };
  const propose = (command: ControlCommand): Promise<ControlResult> => {
    h.proposed.push(command);
    // Applied a turn later, as a commit would be, so concurrent grants can batch.
    return new Promise((resolve) => setImmediate(() => resolve(control.apply(++index, h.now, command))));
  };
  const leases = dynamicLeases({
    pools: pools.map(parsePoolSpec),
    leaseTimeS,
    ledger: new ReplicatedLeaseLedger(control, propose, 3600),
    reservations: reservedLeases(),
    now: () => h.now,
  });
  (h as { context: AnswerContext }).context = {
    mode: 'dynamic',
    inventory: inventoryOf(control),
    leases,
    serverAddress,
    httpBaseUrl: `http://${serverAddress}:8080`,
    httpBinaryBaseUrl: `http://${serverAddress}:8080/binaries`,
    ipxeBinaries: defaultIpxeBinaries,
    segment: [{ address: serverAddress, prefix: 24 }],
  };
  return h;
}

const packet = clientPacket;

const mac = (n: number): string => `52:54:00:05:00:${n.toString(16).padStart(2, '0')}`;

const reply = replyOf;
const ignored = ignoredReason;

async function discover(h: Harness, m: string, fields: Partial<DhcpPacket> = {}): Promise<DhcpPacket> {
  return reply(await answerRequest(packet('DISCOVER', m, {}, fields), h.context));
}

async function request(h: Harness, m: string, ip: string, options: DhcpOptions = {}): Promise<DhcpPacket> {
  return reply(
    await answerRequest(
      packet('REQUEST', m, { serverId: serverAddress, requestedIp: ip, ...options }),
      h.context,
    ),
  );
}

/** DISCOVER then REQUEST; returns the ACKed address. */
async function dora(h: Harness, m: string): Promise<string> {
  const offer = await discover(h, m);
  const ack = await request(h, m, offer.yiaddr);
  assert.equal(ack.options.messageType, 'ACK');
  return ack.yiaddr;
}

function put(h: Harness, hardware: HardwareInput): void {
  const result = h.control.apply(h.control.appliedIndex + 1000, h.now, {
    type: 'hardware.put',
    hardware,
    workerToken: `token-${hardware.id}`,
  });
  assert.equal(result.type, 'hardware', JSON.stringify(result));
}

function machine(id: string, m: string, ip?: string): HardwareInput {
  return {
    id,
    interfaces: [
      { mac: m, ...(ip === undefined ? {} : { ip: { address: ip, prefix: 24 } }), dns: [], leaseTimeS: 3600 },
    ],
    arch: 'x86_64',
    uefi: false,
    netboot: { allowPXE: true, allowWorkflow: true },
    metadata: {},
  };
}

describe('dynamic mode: offers and commits', () => {
  it('offers a pool address with the pool settings and commits nothing', async () => {
    const h = harness();
    const offer = await discover(h, mac(1));
    assert.equal(offer.options.messageType, 'OFFER');
    assert.equal(offer.yiaddr, '10.5.0.100');
    assert.equal(offer.options.subnetMask, '255.255.255.0');
    assert.deepEqual(offer.options.routers, ['10.5.0.1']);
    assert.deepEqual(offer.options.dnsServers, ['10.5.0.2']);
    assert.equal(offer.options.leaseTimeS, leaseTimeS);
    assert.equal(offer.file, '', 'an unknown machine gets no boot file');
    assert.deepEqual(h.proposed, []);
    assert.deepEqual(h.control.leases(), []);
  });

  it('never offers one address to two clients at once', async () => {
    const h = harness();
    const offers = await Promise.all([1, 2, 3, 4].map((n) => discover(h, mac(n))));
    assert.equal(new Set(offers.map((o) => o.yiaddr)).size, 4);
    ignored(await answerRequest(packet('DISCOVER', mac(5)), h.context));
    // The same client asking again gets the same offer.
    assert.equal((await discover(h, mac(2))).yiaddr, offers[1]?.yiaddr);
  });

  it('ACKs a REQUEST only once the lease is committed', async () => {
    const h = harness();
    const offer = await discover(h, mac(1));
    const ack = await request(h, mac(1), offer.yiaddr);
    assert.equal(ack.options.messageType, 'ACK');
    assert.equal(ack.yiaddr, offer.yiaddr);
    assert.equal(ack.options.leaseTimeS, leaseTimeS);
    assert.deepEqual(h.control.leaseOfMac(mac(1)), {
      ip: offer.yiaddr,
      mac: mac(1),
      state: 'bound',
      expiresMs: t0 + leaseTimeS * 1000,
      grantedMs: t0,
      updatedMs: t0,
    });
  });

  it('batches REQUESTs that arrive together into few commands', async () => {
    const h = harness(['10.5.0.10-10.5.0.250/24']);
    const macs = Array.from({ length: 60 }, (_, i) => mac(i + 1));
    const offers = await Promise.all(macs.map((m) => discover(h, m)));
    const acks = await Promise.all(macs.map((m, i) => request(h, m, offers[i]?.yiaddr ?? '')));
    assert.ok(acks.every((a) => a.options.messageType === 'ACK'));
    assert.equal(h.control.leases().length, 60);
    assert.ok(h.proposed.length < 60 / 4, `${h.proposed.length} commands for 60 grants`);
  });

  it('ignores a REQUEST for another server and frees its offer', async () => {
    const h = harness(['10.5.0.100-10.5.0.100/24']);
    const offer = await discover(h, mac(1));
    ignored(
      await answerRequest(
        packet('REQUEST', mac(1), { serverId: '10.5.0.9', requestedIp: offer.yiaddr }),
        h.context,
      ),
    );
    assert.equal((await discover(h, mac(2))).yiaddr, offer.yiaddr);
    assert.deepEqual(h.proposed, []);
  });

  it('NAKs an address another client holds, and changes nothing', async () => {
    const h = harness();
    const taken = await dora(h, mac(1));
    const before = h.control.snapshot();
    const nak = await request(h, mac(2), taken);
    assert.equal(nak.options.messageType, 'NAK');
    assert.equal(h.control.leaseOfMac(mac(2)), undefined);
    assert.equal(h.control.leaseAt(taken)?.mac, mac(1));
    assert.deepEqual(h.control.snapshot(), before);
  });

  it('answers an out-of-pool INIT-REBOOT with silence for a stranger and NAK for a known client', async () => {
    const h = harness();
    ignored(await answerRequest(packet('REQUEST', mac(1), { requestedIp: '10.5.0.7' }), h.context));
    await dora(h, mac(2));
    const nak = reply(await answerRequest(packet('REQUEST', mac(2), { requestedIp: '10.5.0.7' }), h.context));
    assert.equal(nak.options.messageType, 'NAK');
  });
});

describe('dynamic mode: the life of a lease', () => {
  it('a renewal extends the lease and keeps when it was first granted', async () => {
    const h = harness();
    const ip = await dora(h, mac(1));
    h.now += 300_000;
    const renewed = reply(await answerRequest(packet('REQUEST', mac(1), {}, { ciaddr: ip }), h.context));
    assert.equal(renewed.options.messageType, 'ACK');
    assert.equal(renewed.yiaddr, ip);
    const lease = h.control.leaseOfMac(mac(1));
    assert.equal(lease?.expiresMs, h.now + leaseTimeS * 1000);
    assert.equal(lease?.grantedMs, t0);
  });

  it('a repeated REQUEST early in the lease gets the committed lease without a new commit', async () => {
    const h = harness();
    const ip = await dora(h, mac(1));
    const commands = h.proposed.length;
    h.now += 60_000; // 10 % of the lease
    const again = await request(h, mac(1), ip);
    assert.equal(again.options.messageType, 'ACK');
    assert.equal(again.options.leaseTimeS, leaseTimeS - 60, 'only the committed time left');
    assert.equal(h.proposed.length, commands);
    h.now += 120_000; // 30 %: past the reuse window, so the renewal is committed
    await request(h, mac(1), ip);
    assert.equal(h.proposed.length, commands + 1);
    assert.equal(h.control.leaseOfMac(mac(1))?.expiresMs, h.now + leaseTimeS * 1000);
  });

  it('RELEASE ends the lease now, and the machine gets its address back later', async () => {
    const h = harness();
    const ip = await dora(h, mac(1));
    h.now += 1000;
    ignored(
      await answerRequest(packet('RELEASE', mac(1), { serverId: serverAddress }, { ciaddr: ip }), h.context),
    );
    assert.equal(h.control.leaseAt(ip)?.expiresMs, h.now);
    // Another machine gets a never-used address while there is one.
    assert.notEqual(await dora(h, mac(2)), ip);
    assert.equal(await dora(h, mac(1)), ip);
  });

  it('DECLINE keeps the address from everyone, and the client gets another', async () => {
    const h = harness(['10.5.0.100-10.5.0.101/24']);
    const ip = await dora(h, mac(1));
    ignored(
      await answerRequest(packet('DECLINE', mac(1), { serverId: serverAddress, requestedIp: ip }), h.context),
    );
    assert.deepEqual(
      [h.control.leaseAt(ip)?.state, h.control.leaseAt(ip)?.mac, h.control.leaseOfMac(mac(1))],
      ['declined', '', undefined],
    );
    const other = await dora(h, mac(1));
    assert.notEqual(other, ip);
    ignored(await answerRequest(packet('DISCOVER', mac(2)), h.context));
    const nak = await request(h, mac(2), ip);
    assert.equal(nak.options.messageType, 'NAK');
  });

  it('an exhausted pool offers nothing until a lease expires', async () => {
    const h = harness(['10.5.0.100-10.5.0.101/24']);
    const first = await dora(h, mac(1));
    await dora(h, mac(2));
    h.now += 11_000; // past the offer holds
    assert.match(ignored(await answerRequest(packet('DISCOVER', mac(3)), h.context)), /in use/);
    h.now += leaseTimeS * 1000;
    await dora(h, mac(2)); // renews
    const taken = await dora(h, mac(3));
    assert.equal(taken, first, "the expired lease's address");
    assert.equal(h.control.leaseOfMac(mac(1)), undefined, 'the old holder lost it');
  });

  it('a relayed request draws from the pool of its giaddr', async () => {
    const h = harness(['10.5.0.100-10.5.0.101/24', '10.6.0.100-10.6.0.101/24,router=10.6.0.1']);
    const offer = await discover(h, mac(1), { giaddr: '10.6.0.1' });
    assert.equal(offer.yiaddr, '10.6.0.100');
    assert.deepEqual(offer.options.routers, ['10.6.0.1']);
    assert.match(
      ignored(await answerRequest(packet('DISCOVER', mac(2), {}, { giaddr: '10.7.0.1' }), h.context)),
      /no pool/,
    );
  });
});

describe('dynamic mode and hardware records', () => {
  it('a reservation wins over the pool and its address is never offered to another', async () => {
    const h = harness(['10.5.0.100-10.5.0.101/24']);
    put(h, machine('m1', mac(1), '10.5.0.100'));
    const reserved = await discover(h, mac(1));
    assert.equal(reserved.yiaddr, '10.5.0.100');
    assert.equal((await discover(h, mac(2))).yiaddr, '10.5.0.101');
    assert.equal(h.control.reservedFor('10.5.0.100'), mac(1));
    const refused = h.control.apply(5000, h.now, {
      type: 'lease.grant',
      grants: [{ mac: mac(2), ip: '10.5.0.100', leaseTimeS }],
    });
    assert.deepEqual(refused, {
      type: 'grants',
      outcomes: [{ granted: false, reason: `10.5.0.100 is reserved for ${mac(1)} in a hardware record` }],
    });
  });

  it('known hardware without a reserved address gets a pool address and its boot file', async () => {
    const h = harness();
    put(h, machine('m2', mac(7)));
    const offer = reply(
      await answerRequest(
        packet('DISCOVER', mac(7), { vendorClass: 'PXEClient:Arch:00000:UNDI:002001' }),
        h.context,
      ),
    );
    assert.equal(offer.yiaddr, '10.5.0.100');
    assert.equal(offer.file, 'undionly.kpxe');
  });
});

describe('the lease state', () => {
  it('refuses bad grants by field and keeps what it had', () => {
    const control = new ControlState();
    const result = control.apply(1, t0, {
      type: 'lease.grant',
      grants: [
        { mac: 'nope', ip: '10.0.0.1', leaseTimeS: 60 },
        { mac: mac(1), ip: '10.0.0.300', leaseTimeS: 60 },
        { mac: mac(1), ip: '10.0.0.1', leaseTimeS: 0 },
      ],
    });
    assert.equal(result.type, 'grants');
    if (result.type !== 'grants') return;
    assert.deepEqual(
      result.outcomes.map((o) => o.granted),
      [false, false, false],
    );
    assert.deepEqual(control.leases(), []);
    assert.equal(control.apply(2, t0, { type: 'lease.grant', grants: [] }).type, 'error');
    const release = control.apply(3, t0, { type: 'lease.release', mac: mac(1), ip: '10.0.0.1' });
    assert.equal(release.type, 'error');
  });

  it('a snapshot keeps the leases, and a snapshot from before leases still restores', () => {
    const control = new ControlState();
    control.apply(1, t0, {
      type: 'lease.grant',
      grants: [
        { mac: mac(2), ip: '10.0.0.20', leaseTimeS: 60 },
        { mac: mac(1), ip: '10.0.0.3', leaseTimeS: 60 },
      ],
    });
    control.apply(2, t0, { type: 'lease.decline', mac: mac(1), ip: '10.0.0.3', probationS: 60 });
    const copy = new ControlState();
    copy.restore(control.snapshot());
    assert.deepEqual(copy.leases(), control.leases());
    assert.deepEqual(
      copy.leases().map((l) => l.ip),
      ['10.0.0.3', '10.0.0.20'],
    );
    assert.equal(copy.leaseOfMac(mac(2))?.ip, '10.0.0.20');

    const old = JSON.parse(new TextDecoder().decode(new ControlState().snapshot())) as Record<
      string,
      unknown
    >;
    delete old['leases'];
    old['format'] = 1;
    const restored = new ControlState();
    restored.restore(new TextEncoder().encode(JSON.stringify(old)));
    assert.deepEqual(restored.leases(), []);
  });

  it('parses pool specs and refuses bad ones with the reason', () => {
    const pool = parsePoolSpec('10.9.0.10-10.9.0.20/24,router=10.9.0.1,dns=10.9.0.2+10.9.0.3');
    assert.deepEqual(
      [pool.mask, pool.router, pool.dns, pool.last - pool.first + 1],
      ['255.255.255.0', '10.9.0.1', ['10.9.0.2', '10.9.0.3'], 11],
    );
    for (const [spec, problem] of [
      ['10.9.0.10/24', /START-END/],
      ['10.9.0.20-10.9.0.10/24', /comes before/],
      ['10.9.0.10-10.9.1.10/24', /not in one \/24/],
      ['10.9.0.0-10.9.0.10/24', /network or broadcast/],
      ['10.9.0.10-10.9.0.20/24,router=10.8.0.1', /router/],
      ['10.9.0.10-10.9.0.20/24,gateway=10.9.0.1', /unknown setting/],
    ] as const) {
      assert.throws(
        () => parsePoolSpec(spec),
        (e: unknown) => e instanceof PoolSpecError && problem.test(e.message),
      );
    }
    const overlap = overlappingPools([
      parsePoolSpec('10.9.0.10-10.9.0.20/24'),
      parsePoolSpec('10.9.0.20-10.9.0.30/24'),
    ]);
    assert.ok(overlap !== undefined);
  });
});

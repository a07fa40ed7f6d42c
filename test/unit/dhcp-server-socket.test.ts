// Goal: the DHCP socket server answers over real UDP where RFC 2131 §4.1 says (relayed
// requests at giaddr on the relay port with option 82 echoed, renewals at ciaddr), stays
// silent for unknown MACs and while another node is the one answering (by default: while
// this host does not hold the server address), and survives malformed datagrams, broken
// hardware records and a failing leadership check, counting each.
// Method: servers on 127.0.0.1 with ephemeral ports; a test socket plays the relay (giaddr
// 127.0.0.1) and another the client. Silence is proven without sleeping: after the silent
// case the test sends a request that must be answered, and datagrams on loopback arrive in
// order, so the first reply must be that one (its xid says so).
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { decodeDhcpPacket, encodeDhcpPacket, type DhcpPacket } from '../../src/boot/dhcp/codec.js';
import { DhcpSettingsError } from '../../src/boot/dhcp/errors.js';
import type { DhcpOptions } from '../../src/boot/dhcp/options.js';
import {
  startDhcpServer,
  type DhcpServer,
  type DhcpServerHooks,
  type DhcpServerOptions,
} from '../../src/boot/dhcp/server.js';
import { staticInventory } from '../../src/boot/inventory.js';
import { hardwareRecord } from '../support/netns.js';
import { clientPacket } from '../support/dhcp-packets.js';

const host = '127.0.0.1';
const waitMs = 5000;
const macs = {
  relayed: '52:54:00:02:00:01',
  local: '52:54:00:02:00:02',
  broken: '52:54:00:02:00:03',
  unknown: '52:54:00:02:00:99',
};
const agentInfo = Uint8Array.from([1, 4, 0x65, 0x74, 0x68, 0x31, 2, 2, 0xbe, 0xef]);

const inventory = staticInventory([
  hardwareRecord({ id: 'far', mac: macs.relayed, ip: '10.9.0.50/24', gateway: '10.9.0.1', leaseTimeS: 900 }),
  hardwareRecord({ id: 'near', mac: macs.local, ip: '127.0.0.1/8' }),
  // A gateway that is not an address: the reply builder refuses to put it on the wire.
  hardwareRecord({ id: 'broken', mac: macs.broken, ip: '10.9.0.51/24', gateway: '10.9.0.300' }),
]);

/** A UDP socket that queues what it receives and hands it out with a deadline. */
class Peer {
  readonly socket = dgram.createSocket('udp4');
  readonly #queue: DhcpPacket[] = [];
  #wake: (() => void) | undefined;

  static async open(): Promise<Peer> {
    const peer = new Peer();
    peer.socket.on('message', (message) => {
      peer.#queue.push(decodeDhcpPacket(message));
      peer.#wake?.();
    });
    await new Promise<void>((resolve) => peer.socket.bind(0, host, resolve));
    return peer;
  }

  get port(): number {
    return this.socket.address().port;
  }

  send(bytes: Uint8Array, port: number): Promise<void> {
    return new Promise((resolve, reject) =>
      this.socket.send(bytes, port, host, (error) => (error ? reject(error) : resolve())),
    );
  }

  async next(): Promise<DhcpPacket> {
    const deadline = Date.now() + waitMs;
    while (this.#queue.length === 0) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`no DHCP packet within ${waitMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
    const packet = this.#queue.shift();
    if (packet === undefined) throw new Error('unreachable');
    return packet;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.socket.close(resolve));
  }
}

/** Hook calls, for assertions. */
class Hooks {
  readonly errors: unknown[] = [];
  readonly ignored: string[] = [];
  malformed = 0;

  readonly hooks: DhcpServerHooks = {
    onIgnore: (e) => this.ignored.push(e.reason),
    onMalformed: () => (this.malformed += 1),
    onError: (error) => this.errors.push(error),
  };
}

/** Waits for a condition on counters or hooks, re-checking every few milliseconds up to a deadline. */
async function eventually(done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + waitMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${waitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

let xidNext = 1;

function request(mac: string, options: DhcpOptions, fields: Partial<DhcpPacket> = {}): DhcpPacket {
  xidNext += 1;
  return clientPacket(options.messageType ?? 'DISCOVER', mac, options, { xid: xidNext, ...fields });
}

/** A DISCOVER as a relay agent forwards it: giaddr set, hops 1, option 82 appended. */
function relayed(mac: string): DhcpPacket {
  return request(
    mac,
    { messageType: 'DISCOVER', relayAgentInfo: { raw: agentInfo, subOptions: [] } },
    { giaddr: host, hops: 1 },
  );
}

let relay: Peer;
let client: Peer;

before(async () => {
  relay = await Peer.open();
  client = await Peer.open();
});

after(async () => {
  await relay.close();
  await client.close();
});

async function withServer(
  extra: Partial<DhcpServerOptions>,
  body: (server: DhcpServer, hooks: Hooks) => Promise<void>,
): Promise<void> {
  const hooks = new Hooks();
  const server = await startDhcpServer({
    inventory,
    serverAddress: host,
    httpBaseUrl: 'http://127.0.0.1:8080',
    mode: 'reservation',
    address: host,
    port: 0,
    relayPort: relay.port,
    clientPort: client.port,
    logger: pino({ level: 'silent' }),
    hooks: hooks.hooks,
    ...extra,
  });
  try {
    await body(server, hooks);
  } finally {
    await server.close();
  }
}

describe('destinations', () => {
  it('answers a relayed DISCOVER at giaddr on the relay port, echoing option 82', async () => {
    await withServer({}, async (server) => {
      const discover = relayed(macs.relayed);
      await relay.send(encodeDhcpPacket(discover), server.port);
      const offer = await relay.next();
      assert.equal(offer.xid, discover.xid);
      assert.equal(offer.options.messageType, 'OFFER');
      assert.equal(offer.yiaddr, '10.9.0.50');
      assert.equal(offer.giaddr, host);
      assert.equal(offer.options.leaseTimeS, 900);
      assert.deepEqual(Array.from(offer.options.relayAgentInfo?.raw ?? []), Array.from(agentInfo));
      assert.equal(server.counters.replied, 1);
    });
  });

  it('answers a renewing client at ciaddr on the client port', async () => {
    await withServer({}, async (server) => {
      const renew = request(macs.local, { messageType: 'REQUEST' }, { ciaddr: host });
      await client.send(encodeDhcpPacket(renew), server.port);
      const ack = await client.next();
      assert.equal(ack.xid, renew.xid);
      assert.equal(ack.options.messageType, 'ACK');
      assert.equal(ack.yiaddr, host);
      assert.equal(ack.options.subnetMask, '255.0.0.0');
    });
  });
});

describe('silence', () => {
  it('does not answer an unknown MAC', async () => {
    await withServer({}, async (server, hooks) => {
      await relay.send(encodeDhcpPacket(relayed(macs.unknown)), server.port);
      const known = relayed(macs.relayed);
      await relay.send(encodeDhcpPacket(known), server.port);
      assert.equal((await relay.next()).xid, known.xid);
      assert.match(hooks.ignored[0] ?? '', /no hardware has MAC 52:54:00:02:00:99/);
      assert.equal(server.counters.ignored, 1);
    });
  });

  it('stays silent while another node answers, and answers once it is this node’s turn', async () => {
    let leader = false;
    await withServer({ shouldAnswer: () => leader }, async (server) => {
      await relay.send(encodeDhcpPacket(relayed(macs.relayed)), server.port);
      await eventually(() => server.counters.received === 1, 'receipt');
      assert.equal(server.counters.standby, 1);
      leader = true;
      const later = relayed(macs.relayed);
      await relay.send(encodeDhcpPacket(later), server.port);
      assert.equal((await relay.next()).xid, later.xid);
      assert.deepEqual([server.counters.received, server.counters.replied], [2, 1]);
    });
  });

  it('by default answers only while this host holds the server address', async () => {
    // 192.0.2.1 (TEST-NET-1) is held by no interface here; nothing is ever sent to it.
    await withServer({ serverAddress: '192.0.2.1' }, async (server) => {
      await relay.send(encodeDhcpPacket(relayed(macs.relayed)), server.port);
      await eventually(() => server.counters.received === 1, 'receipt');
      assert.deepEqual([server.counters.standby, server.counters.replied], [1, 0]);
    });
  });
});

describe('bad input changes nothing', () => {
  it('drops and counts malformed datagrams, then answers the next good one', async () => {
    await withServer({}, async (server, hooks) => {
      const good = encodeDhcpPacket(relayed(macs.relayed));
      const badCookie = Uint8Array.from(good);
      badCookie[236] = 0;
      for (const bad of [Uint8Array.of(1, 2, 3), badCookie, new Uint8Array(5000), good.subarray(0, 239)]) {
        await relay.send(bad, server.port);
      }
      await relay.send(good, server.port);
      assert.equal((await relay.next()).options.messageType, 'OFFER');
      await eventually(() => hooks.malformed === 4, 'four malformed datagrams');
      assert.equal(server.counters.malformed, 4);
    });
  });

  it('reports a hardware record that cannot be sent and keeps serving', async () => {
    await withServer({}, async (server, hooks) => {
      await relay.send(encodeDhcpPacket(relayed(macs.broken)), server.port);
      await eventually(() => hooks.errors.length === 1, 'the settings error');
      assert.ok(hooks.errors[0] instanceof DhcpSettingsError);
      assert.equal(server.counters.failed, 1);
      const good = relayed(macs.relayed);
      await relay.send(encodeDhcpPacket(good), server.port);
      assert.equal((await relay.next()).xid, good.xid);
    });
  });

  it('treats a failing leadership check as standby', async () => {
    const check = (): boolean => {
      throw new Error('raft is gone');
    };
    await withServer({ shouldAnswer: check }, async (server, hooks) => {
      await relay.send(encodeDhcpPacket(relayed(macs.relayed)), server.port);
      await eventually(() => hooks.errors.length === 1, 'the reported check failure');
      assert.equal(server.counters.standby, 1);
    });
  });
});

describe('start-up', () => {
  it('refuses an interface without an IPv4 address, naming it', async () => {
    await assert.rejects(
      startDhcpServer({
        inventory,
        serverAddress: host,
        httpBaseUrl: 'http://127.0.0.1:8080',
        mode: 'reservation',
        interfaceName: 'no-such-if0',
        port: 0,
        logger: pino({ level: 'silent' }),
      }),
      /DHCP interface "no-such-if0" has no IPv4 address/,
    );
  });

  it('refuses a server address or URL that is not one', async () => {
    const base = {
      inventory,
      mode: 'reservation' as const,
      address: host,
      port: 0,
      logger: pino({ level: 'silent' }),
    };
    await assert.rejects(
      startDhcpServer({ ...base, serverAddress: 'vip', httpBaseUrl: 'http://h:1' }),
      (error: unknown) => error instanceof DhcpSettingsError && error.field === 'serverAddress',
    );
    await assert.rejects(
      startDhcpServer({ ...base, serverAddress: host, httpBaseUrl: 'h:1' }),
      (error: unknown) => error instanceof DhcpSettingsError && error.field === 'httpBaseUrl',
    );
  });
});

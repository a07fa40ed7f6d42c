// Goal: a boot service opens when what it needs is on the host and follows it: readiness reads
// the link table right (interface missing, down, without carrier, without address; an address
// not local yet; the wildcard), the service opens, closes and opens again as the table changes
// (a new ifindex, another address), a refused bind is retried with a bounded back-off, and each
// state change is reported (and logged) once.
// Method: pure functions and LinkBoundService over a table the test sets (no sockets); the
// opened "service" is an object recording its close.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { LinkSource, LinkState, LinkTable } from '../../src/platform/link-watch.js';
import { ipv4Addresses, parseLinkTable, sameLinks } from '../../src/platform/link-watch.js';
import { LinkBoundService } from '../../src/boot/link-bound-service.js';
import { addressReadiness, dhcpReadiness, dhcpUnicastAddresses } from '../../src/boot/readiness.js';
import {
  allServing,
  Backoff,
  BootServiceState,
  describeStatus,
  type BootServiceStatus,
} from '../../src/boot/service-state.js';
import { waitFor } from '../support/wait.js';

const silent = pino({ level: 'silent' });

function link(name: string, index: number, fields: Partial<LinkState> = {}): LinkState {
  return { name, index, adminUp: true, carrier: true, ipv4: [], ...fields };
}

function table(...links: LinkState[]): LinkTable {
  return new Map(links.map((l) => [l.name, l]));
}

/** A link source the test drives. */
class Links implements LinkSource {
  #table: LinkTable = new Map();
  readonly #listeners = new Set<(links: LinkTable) => void>();
  set(next: LinkTable): void {
    this.#table = next;
    for (const l of this.#listeners) l(next);
  }
  subscribe(listener: (links: LinkTable) => void): () => void {
    this.#listeners.add(listener);
    listener(this.#table);
    return () => this.#listeners.delete(listener);
  }
}

const eth0 = (fields: Partial<LinkState> = {}): LinkState =>
  link('eth0', 7, { ipv4: [{ address: '10.0.0.2', prefix: 24 }], ...fields });

describe('readiness from the link table', () => {
  const dhcp = dhcpReadiness({ dhcpInterface: 'eth0' });

  it('waits for the interface, then for an address on it', () => {
    const missing = dhcp(table(link('lo', 1)));
    assert.equal(missing.ready, false);
    assert.match(
      missing.ready ? '' : missing.reason,
      /interface eth0 does not exist \(interfaces here: lo\)/,
    );
    const bare = dhcp(table(link('eth0', 7)));
    assert.deepEqual(bare, { ready: false, reason: 'interface eth0 has no IPv4 address' });
  });

  it('opens on an interface without carrier but reports it, and keys on ifindex and addresses', () => {
    const noCarrier = dhcp(table(eth0({ carrier: false })));
    assert.ok(noCarrier.ready);
    assert.match(noCarrier.degraded ?? '', /interface eth0 has no carrier/);
    assert.deepEqual(noCarrier.arg, [{ address: '10.0.0.2', prefix: 24 }]);
    const down = dhcp(table(eth0({ adminUp: false, carrier: false })));
    assert.ok(down.ready);
    assert.match(down.degraded ?? '', /interface eth0 is down \(ip link set eth0 up\)/);
    const up = dhcp(table(eth0()));
    assert.ok(up.ready);
    assert.equal(up.degraded, undefined);
    const recreated = dhcp(table(eth0({ index: 9 })));
    const readdressed = dhcp(table(eth0({ ipv4: [{ address: '10.0.0.3', prefix: 24 }] })));
    assert.ok(recreated.ready && readdressed.ready);
    assert.notEqual(recreated.key, up.key);
    assert.notEqual(readdressed.key, up.key);
    assert.equal(dhcp(table(eth0({ carrier: false }))).ready && noCarrier.key, up.key);
    const withVip = dhcp(
      table(
        eth0({
          ipv4: [
            { address: '10.0.0.2', prefix: 24 },
            { address: '10.0.0.100', prefix: 32 },
          ],
        }),
      ),
    );
    assert.ok(withVip.ready);
    assert.equal(withVip.key, up.key, 'the VIP coming does not reopen the sockets');
    assert.deepEqual(withVip.arg, [{ address: '10.0.0.2', prefix: 24 }]);
  });

  it('waits for an address to be on this host; the wildcard is always ready', () => {
    assert.deepEqual(addressReadiness('0.0.0.0')(new Map()), { ready: true, key: 'any', arg: undefined });
    assert.equal(addressReadiness('127.0.0.2')(new Map()).ready, true, 'all of 127/8 is local');
    const on = addressReadiness('10.0.0.2');
    assert.deepEqual(on(table(link('lo', 1))), {
      ready: false,
      reason: 'address 10.0.0.2 is not on this host (yet)',
    });
    const here = on(table(eth0({ carrier: false })));
    assert.ok(here.ready);
    assert.match(here.degraded ?? '', /no carrier/);
    assert.equal(dhcpReadiness({ dhcpAddr: '10.0.0.2:67' })(table(eth0())).ready, true);
  });

  it('binds DHCP on the server identifier while this host holds it, and on the interface', () => {
    const cfg = { advertise: '10.0.0.100', dhcpInterface: 'eth0' };
    assert.deepEqual(dhcpUnicastAddresses(cfg, table(eth0())), ['10.0.0.2']);
    const holding = eth0({
      ipv4: [
        { address: '10.0.0.2', prefix: 24 },
        { address: '10.0.0.100', prefix: 32 },
      ],
    });
    assert.deepEqual(dhcpUnicastAddresses(cfg, table(holding)), ['10.0.0.2', '10.0.0.100']);
    const elsewhere = link('vip0', 3, { ipv4: [{ address: '10.0.0.100', prefix: 32 }] });
    assert.deepEqual(dhcpUnicastAddresses(cfg, table(eth0(), elsewhere)), ['10.0.0.2', '10.0.0.100']);
  });
});

describe('the link table', () => {
  it('parses ip -j addr show, interfaces without carrier and their addresses included', () => {
    const parsed = parseLinkTable(
      JSON.stringify([
        { ifindex: 1, ifname: 'lo', flags: ['LOOPBACK', 'UP', 'LOWER_UP'], addr_info: [] },
        {
          ifindex: 5,
          ifname: 'br0',
          flags: ['NO-CARRIER', 'BROADCAST', 'UP'],
          addr_info: [
            { family: 'inet', local: '10.0.0.2', prefixlen: 24 },
            { family: 'inet6', local: 'fe80::1', prefixlen: 64 },
          ],
        },
        { ifname: 'broken' },
      ]),
    );
    assert.deepEqual([...parsed.keys()], ['lo', 'br0']);
    assert.deepEqual(parsed.get('br0'), {
      name: 'br0',
      index: 5,
      adminUp: true,
      carrier: false,
      ipv4: [{ address: '10.0.0.2', prefix: 24 }],
    });
    assert.deepEqual(ipv4Addresses(parsed), ['10.0.0.2']);
    assert.equal(sameLinks(parsed, new Map(parsed)), true);
    assert.equal(sameLinks(parsed, table(link('lo', 1))), false);
  });
});

/** What LinkBoundService opened: each open numbered, its arg, whether closed. */
interface Opened {
  readonly n: number;
  readonly arg: unknown;
  closed: boolean;
  close(): Promise<void>;
}

function harness(opts: { refuse?: () => Error | undefined } = {}) {
  const links = new Links();
  const state = new BootServiceState('dhcp', silent, { state: 'waiting', reason: 'starting' });
  const changes: BootServiceStatus[] = [];
  state.onChange((s) => changes.push(s));
  const opened: Opened[] = [];
  const service = new LinkBoundService<Opened, unknown>({
    links,
    state,
    readiness: dhcpReadiness({ dhcpInterface: 'eth0' }),
    open: (arg) => {
      const refusal = opts.refuse?.();
      if (refusal !== undefined) return Promise.reject(refusal);
      const o: Opened = {
        n: opened.length + 1,
        arg,
        closed: false,
        close: () => {
          o.closed = true;
          return Promise.resolve();
        },
      };
      opened.push(o);
      return Promise.resolve(o);
    },
    logger: silent,
    backoff: new Backoff(5, 20),
  });
  return { links, state, changes, opened, service };
}

describe('a link-bound boot service', () => {
  it('waits, opens, follows carrier, reopens on a new ifindex or address, closes when it goes', async () => {
    const { links, state, changes, opened, service } = harness();
    await service.start();
    assert.equal(state.status.state, 'waiting');
    links.set(table(eth0({ carrier: false })));
    await waitFor(
      'open without carrier',
      () => opened.length === 1 && /no carrier/.test(describeStatus(state.status)),
    );
    links.set(table(eth0()));
    await waitFor('serving', () => state.status.state === 'serving');
    assert.equal(opened.length, 1, 'carrier back: the same sockets');
    links.set(table(eth0({ index: 8 })));
    await waitFor('reopened for the new interface', () => opened.length === 2);
    assert.equal(opened[0]?.closed, true);
    links.set(table(eth0({ index: 8, ipv4: [{ address: '10.0.0.9', prefix: 24 }] })));
    await waitFor('reopened for the new address', () => opened.length === 3);
    assert.deepEqual(opened[2]?.arg, [{ address: '10.0.0.9', prefix: 24 }]);
    links.set(table(link('lo', 1)));
    await waitFor('closed when the interface goes', () => opened[2]?.closed === true);
    assert.match(describeStatus(state.status), /waiting: interface eth0 does not exist/);
    await service.close();
    // Each state once per change, never the same twice in a row.
    const texts = changes.map(describeStatus);
    assert.ok(
      texts.every((t, i) => i === 0 || t !== texts[i - 1]),
      texts.join(' | '),
    );
  });

  it('retries a refused bind with its back-off, failed meanwhile, and serves once it binds', async () => {
    let refusals = 3;
    const taken = Object.assign(new Error('bind EADDRINUSE 0.0.0.0:67'), { code: 'EADDRINUSE' });
    const { links, state, changes, opened, service } = harness({
      refuse: () => (refusals-- > 0 ? taken : undefined),
    });
    await service.start();
    links.set(table(eth0()));
    await waitFor('serving after the retries', () => state.status.state === 'serving', 2000);
    assert.equal(opened.length, 1);
    assert.deepEqual(
      changes.map((c) => c.state),
      ['waiting', 'failed', 'serving'],
      'the failure is reported once, not once per retry',
    );
    await service.close();
  });

  it('reports an address that is not here as waiting, not failed', async () => {
    const gone = Object.assign(new Error('bind EADDRNOTAVAIL 10.0.0.2:67'), { code: 'EADDRNOTAVAIL' });
    let refusals = 1;
    const { links, state, changes, service } = harness({ refuse: () => (refusals-- > 0 ? gone : undefined) });
    await service.start();
    links.set(table(eth0()));
    await waitFor('serving', () => state.status.state === 'serving', 2000);
    assert.deepEqual(
      changes.map((c) => describeStatus(c)),
      [
        'waiting: interface eth0 does not exist (interfaces here: )',
        'waiting: bind EADDRNOTAVAIL 10.0.0.2:67',
        'serving',
      ],
    );
    await service.close();
  });

  it('counts the node as serving only when every configured service serves', () => {
    const a = new BootServiceState('dhcp', silent, { state: 'serving' });
    const b = new BootServiceState('tftp', silent, { state: 'waiting', reason: 'x' });
    assert.equal(allServing(new Map()), true);
    assert.equal(allServing(new Map([['dhcp', a]])), true);
    assert.equal(
      allServing(
        new Map([
          ['dhcp', a],
          ['tftp', b],
        ]),
      ),
      false,
    );
  });

  it('backs off exponentially up to its bound, and from the start after a reset', () => {
    const b = new Backoff(100, 500);
    assert.deepEqual([b.next(), b.next(), b.next(), b.next(), b.next()], [100, 200, 400, 500, 500]);
    b.reset();
    assert.equal(b.next(), 100);
  });
});

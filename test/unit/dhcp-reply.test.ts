// Goal: buildReply answers each request as RFC 2131 says (OFFER/ACK/NAK or no reply), copies
// what must be copied, echoes options 82 and 61, sends the reply where §4.1 says, and in proxy
// mode adds boot information only.
// Method: hand-built requests through buildReply, checking the packet fields, the destination
// table and the reasons for ignoring; replies are also encoded and decoded again to show they
// go on the wire intact, and one golden iPXE DISCOVER runs decode -> policy -> reply -> encode.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { decodeDhcpPacket, encodeDhcpPacket, type DhcpPacket } from '../../src/boot/dhcp/codec.js';
import { DhcpSettingsError } from '../../src/boot/dhcp/errors.js';
import type { DhcpOptions } from '../../src/boot/dhcp/options.js';
import { decideBoot, type BootDecision } from '../../src/boot/dhcp/pxe-policy.js';
import {
  buildReply,
  type ReplyInput,
  type ReplyOutcome,
  type ReservedLease,
} from '../../src/boot/dhcp/reply.js';

const serverId = '10.0.0.100';
const chaddr = Uint8Array.from([0x52, 0x54, 0x00, 0x12, 0x34, 0x56, ...new Array<number>(10).fill(0)]);
const lease: ReservedLease = {
  ip: '10.0.0.50',
  mask: '255.255.255.0',
  gateway: '10.0.0.1',
  dns: ['10.0.0.2', '10.0.0.3'],
  hostname: 'node-50',
  domain: 'lab.example',
  leaseTimeS: 3600,
};
const pxeBoot: BootDecision = {
  kind: 'boot',
  client: 'pxe',
  bootfile: 'undionly.kpxe',
  nextServer: serverId,
  pxeDiscoveryControl: 8,
  reason: 'PXE, architecture 0 (x86 BIOS): undionly.kpxe over TFTP',
};
const noBoot: BootDecision = { kind: 'no-boot', reason: 'allowPXE is off for this hardware' };
const agentInfo = Uint8Array.from([1, 4, 0x65, 0x74, 0x68, 0x30, 2, 2, 0xab, 0xcd]);

interface RequestSpec {
  readonly flags?: number;
  readonly ciaddr?: string;
  readonly giaddr?: string;
  readonly options: DhcpOptions;
}

function request(spec: RequestSpec): DhcpPacket {
  return {
    op: 'request',
    htype: 1,
    hlen: 6,
    hops: spec.giaddr === undefined ? 0 : 1,
    xid: 0x5eed1234,
    secs: 7,
    flags: spec.flags ?? 0,
    ciaddr: spec.ciaddr ?? '0.0.0.0',
    yiaddr: '0.0.0.0',
    siaddr: '0.0.0.0',
    giaddr: spec.giaddr ?? '0.0.0.0',
    chaddr,
    sname: '',
    file: '',
    options: spec.options,
  };
}

const discover = (options: DhcpOptions = {}, extra: Omit<RequestSpec, 'options'> = {}): DhcpPacket =>
  request({
    ...extra,
    options: { messageType: 'DISCOVER', vendorClass: 'PXEClient:Arch:00000:UNDI:002001', ...options },
  });

function reservation(
  req: DhcpPacket,
  boot: BootDecision = pxeBoot,
  leaseInfo: ReservedLease = lease,
): ReplyOutcome {
  return buildReply({ mode: 'reservation', request: req, serverId, lease: leaseInfo, boot });
}

function proxy(req: DhcpPacket, boot: BootDecision = pxeBoot): ReplyOutcome {
  return buildReply({ mode: 'proxy', request: req, serverId, boot });
}

function replied(outcome: ReplyOutcome): Extract<ReplyOutcome, { kind: 'reply' }> {
  assert.equal(outcome.kind, 'reply', outcome.reason);
  if (outcome.kind !== 'reply') throw new Error('unreachable');
  return outcome;
}

function ignoredBecause(outcome: ReplyOutcome): string {
  assert.equal(outcome.kind, 'ignore', `expected no reply, got ${outcome.reason}`);
  return outcome.reason;
}

/** [code, data] of each option instance in the main options field, walked by length bytes. */
function mainFieldOptions(bytes: Uint8Array): [number, number[]][] {
  const found: [number, number[]][] = [];
  let i = 240;
  while (bytes[i] !== 255) {
    const length = bytes[i + 1]!;
    found.push([bytes[i]!, Array.from(bytes.subarray(i + 2, i + 2 + length))]);
    i += 2 + length;
  }
  return found;
}

/** The reply as the client would see it. */
function onTheWire(outcome: Extract<ReplyOutcome, { kind: 'reply' }>): DhcpPacket {
  const bytes = encodeDhcpPacket(outcome.packet, { maxMessageSize: outcome.maxMessageSize });
  assert.ok(bytes.length <= outcome.maxMessageSize - 28);
  const decoded = decodeDhcpPacket(bytes);
  assert.deepEqual(decoded, outcome.packet);
  return decoded;
}

void describe('reservation mode', () => {
  void it('answers DISCOVER with an OFFER of the reserved address, lease options and boot information', () => {
    const req = discover({}, { flags: 0x8000 });
    const r = replied(reservation(req));
    const p = onTheWire(r);
    assert.equal(p.op, 'reply');
    assert.equal(p.xid, req.xid);
    assert.deepEqual(p.chaddr, req.chaddr);
    assert.equal(p.flags, 0x8000);
    assert.equal(p.hops, 0);
    assert.equal(p.yiaddr, '10.0.0.50');
    assert.equal(p.ciaddr, '0.0.0.0');
    assert.equal(p.siaddr, serverId);
    assert.equal(p.file, 'undionly.kpxe');
    assert.deepEqual(p.options, {
      messageType: 'OFFER',
      serverId,
      leaseTimeS: 3600,
      renewalTimeS: 1800,
      rebindingTimeS: 3150,
      subnetMask: '255.255.255.0',
      broadcastAddress: '10.0.0.255',
      routers: ['10.0.0.1'],
      dnsServers: ['10.0.0.2', '10.0.0.3'],
      hostname: 'node-50',
      domainName: 'lab.example',
      vendorSpecific: Uint8Array.of(6, 1, 8, 255),
    });
  });

  void it('ACKs a SELECTING REQUEST that names this server and the reserved address', () => {
    const req = request({ options: { messageType: 'REQUEST', serverId, requestedIp: lease.ip } });
    const p = onTheWire(replied(reservation(req)));
    assert.equal(p.options.messageType, 'ACK');
    assert.equal(p.yiaddr, lease.ip);
  });

  void it('ACKs a RENEWING REQUEST (address in ciaddr) by unicast to ciaddr, copying ciaddr', () => {
    const r = replied(reservation(request({ ciaddr: lease.ip, options: { messageType: 'REQUEST' } })));
    assert.equal(r.packet.ciaddr, lease.ip);
    assert.deepEqual(r.destination, { address: lease.ip, port: 68, via: 'client-address' });
  });

  void it('ignores a REQUEST that selected another server', () => {
    const req = request({ options: { messageType: 'REQUEST', serverId: '10.0.0.9', requestedIp: lease.ip } });
    assert.match(ignoredBecause(reservation(req)), /selected server 10\.0\.0\.9/);
  });

  void it('NAKs a REQUEST for an address that is not reserved, broadcast, with option 56 saying why', () => {
    const req = request({ ciaddr: '10.9.9.9', options: { messageType: 'REQUEST', requestedIp: '10.9.9.9' } });
    const r = replied(reservation(req));
    const p = onTheWire(r);
    assert.equal(p.options.messageType, 'NAK');
    assert.equal(p.options.serverId, serverId);
    assert.equal(p.yiaddr, '0.0.0.0');
    assert.equal(p.ciaddr, '0.0.0.0');
    assert.equal(p.siaddr, '0.0.0.0');
    assert.equal(p.file, '');
    assert.equal(p.options.leaseTimeS, undefined);
    const message = p.options.other?.find((o) => o.code === 56);
    assert.match(
      String.fromCharCode(...(message?.data ?? [])),
      /requested 10\.9\.9\.9 but 10\.0\.0\.50 is this client's address/,
    );
    assert.deepEqual(r.destination, { address: '255.255.255.255', port: 68, via: 'broadcast' });
  });

  void it('ignores a REQUEST that names no address', () => {
    assert.match(
      ignoredBecause(reservation(request({ options: { messageType: 'REQUEST' } }))),
      /names no address/,
    );
  });

  void it('answers INFORM with an ACK carrying configuration but no address or lease time', () => {
    const r = replied(reservation(request({ ciaddr: lease.ip, options: { messageType: 'INFORM' } })));
    const p = onTheWire(r);
    assert.equal(p.options.messageType, 'ACK');
    assert.equal(p.yiaddr, '0.0.0.0');
    assert.equal(p.options.leaseTimeS, undefined);
    assert.equal(p.options.renewalTimeS, undefined);
    assert.equal(p.options.subnetMask, lease.mask);
    assert.equal(r.destination.via, 'client-address');
  });

  void it('sends no reply to DECLINE, RELEASE, server messages, BOOTP or BOOTREPLY packets', () => {
    assert.match(
      ignoredBecause(reservation(request({ options: { messageType: 'DECLINE', requestedIp: lease.ip } }))),
      /declined 10\.0\.0\.50/,
    );
    assert.match(ignoredBecause(reservation(request({ options: { messageType: 'RELEASE' } }))), /RELEASE/);
    assert.match(
      ignoredBecause(reservation(request({ options: { messageType: 'OFFER' } }))),
      /server message/,
    );
    assert.match(ignoredBecause(reservation(request({ options: {} }))), /BOOTP request without option 53/);
    assert.match(ignoredBecause(reservation({ ...discover(), op: 'reply' })), /BOOTREPLY/);
  });

  void it('omits T1/T2 for an infinite lease', () => {
    const p = replied(reservation(discover(), pxeBoot, { ...lease, leaseTimeS: 0xffffffff })).packet;
    assert.equal(p.options.leaseTimeS, 0xffffffff);
    assert.equal(p.options.renewalTimeS, undefined);
    assert.equal(p.options.rebindingTimeS, undefined);
  });

  void it('gives an address but no boot information when the policy says no boot', () => {
    const p = replied(reservation(discover(), noBoot)).packet;
    assert.equal(p.yiaddr, lease.ip);
    assert.equal(p.siaddr, '0.0.0.0');
    assert.equal(p.file, '');
    assert.equal(p.options.vendorSpecific, undefined);
    assert.equal(p.options.bootfileName, undefined);
  });

  void it('puts a URL too long for the file field in option 67, and adds 67 when the client asks for it', () => {
    const longUrl = `http://10.0.0.100:8080/ipxe/${'x'.repeat(120)}/boot.ipxe`;
    const ipxe: BootDecision = {
      kind: 'boot',
      client: 'ipxe',
      bootfile: longUrl,
      nextServer: serverId,
      reason: 'iPXE',
    };
    const long = onTheWire(replied(reservation(discover(), ipxe)));
    assert.equal(long.file, '');
    assert.equal(long.options.bootfileName, longUrl);
    const asked = replied(reservation(discover({ parameterRequestList: [1, 3, 67] }))).packet;
    assert.equal(asked.file, 'undionly.kpxe');
    assert.equal(asked.options.bootfileName, 'undionly.kpxe');
  });

  void it('echoes option 60 "HTTPClient" for UEFI HTTP boot', () => {
    const http: BootDecision = {
      kind: 'boot',
      client: 'http-boot',
      bootfile: 'http://10.0.0.100:8080/ipxe/binary/ipxe.efi',
      nextServer: serverId,
      vendorClassEcho: 'HTTPClient',
      reason: 'HTTP boot',
    };
    const p = onTheWire(
      replied(reservation(discover({ vendorClass: 'HTTPClient:Arch:00016:UNDI:003001' }), http)),
    );
    assert.equal(p.options.vendorClass, 'HTTPClient');
    assert.equal(p.file, 'http://10.0.0.100:8080/ipxe/binary/ipxe.efi');
  });
});

void describe('echoed options', () => {
  void it('echoes option 82 verbatim as the last option, and option 61 (RFC 6842)', () => {
    const relayAgentInfo = { raw: agentInfo, subOptions: [], circuitId: agentInfo.subarray(2, 6) };
    const clientId = Uint8Array.of(1, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56);
    const req = discover({ relayAgentInfo, clientId }, { giaddr: '10.1.0.1' });
    const r = replied(reservation(req));
    const bytes = encodeDhcpPacket(r.packet, { maxMessageSize: r.maxMessageSize });
    const p = decodeDhcpPacket(bytes);
    assert.deepEqual(p.options.relayAgentInfo?.raw, agentInfo);
    assert.deepEqual(p.options.clientId, clientId);
    const instances = mainFieldOptions(bytes);
    assert.deepEqual(instances.at(-1), [82, Array.from(agentInfo)], 'option 82 is the last option');
  });

  void it('echoes option 82 in a NAK too', () => {
    const req = request({
      giaddr: '10.1.0.1',
      options: {
        messageType: 'REQUEST',
        requestedIp: '10.9.9.9',
        relayAgentInfo: { raw: agentInfo, subOptions: [] },
      },
    });
    const p = replied(reservation(req)).packet;
    assert.deepEqual(p.options.relayAgentInfo?.raw, agentInfo);
  });

  void it('sends no 82 or 61 when the request had none', () => {
    const p = replied(reservation(discover())).packet;
    assert.equal(p.options.relayAgentInfo, undefined);
    assert.equal(p.options.clientId, undefined);
  });
});

void describe('RFC 2131 §4.1 destination', () => {
  const cases: [string, DhcpPacket, ReplyInput['mode'], { address: string; port: number; via: string }][] = [
    [
      'relayed: giaddr on port 67',
      discover({}, { giaddr: '10.1.0.1', flags: 0x8000 }),
      'reservation',
      { address: '10.1.0.1', port: 67, via: 'relay' },
    ],
    [
      'ciaddr set: unicast to ciaddr',
      request({ ciaddr: lease.ip, options: { messageType: 'REQUEST' } }),
      'reservation',
      { address: lease.ip, port: 68, via: 'client-address' },
    ],
    [
      'broadcast flag: broadcast',
      discover({}, { flags: 0x8000 }),
      'reservation',
      { address: '255.255.255.255', port: 68, via: 'broadcast' },
    ],
    [
      'proxy offer, no yiaddr: broadcast',
      discover(),
      'proxy',
      { address: '255.255.255.255', port: 68, via: 'broadcast' },
    ],
  ];
  for (const [name, req, mode, expected] of cases) {
    void it(name, () => {
      const r = replied(mode === 'proxy' ? proxy(req) : reservation(req));
      assert.deepEqual(r.destination, expected);
    });
  }

  void it('no flag, no ciaddr: unicast to yiaddr, with a broadcast fallback and a note about ARP', () => {
    const r = replied(reservation(discover()));
    assert.equal(r.destination.via, 'assigned-address');
    assert.equal(r.destination.address, lease.ip);
    assert.equal(r.destination.port, 68);
    assert.deepEqual(r.destination.fallback, { address: '255.255.255.255', port: 68 });
    assert.match(r.destination.note ?? '', /ARP/);
  });

  void it('a relayed NAK goes to the relay with the broadcast flag set (§4.3.2)', () => {
    const req = request({ giaddr: '10.1.0.1', options: { messageType: 'REQUEST', requestedIp: '10.9.9.9' } });
    const r = replied(reservation(req));
    assert.deepEqual(r.destination, { address: '10.1.0.1', port: 67, via: 'relay' });
    assert.equal(r.packet.flags & 0x8000, 0x8000);
    assert.equal(r.packet.giaddr, '10.1.0.1');
  });
});

void describe('proxyDHCP mode', () => {
  const uuid = { type: 0, guid: '4c4c4544-004a-1080-8036-b4c04f4e4832' };

  void it('offers boot information only: no yiaddr, option 60 "PXEClient", 43, 54 and the echoed 97', () => {
    const r = replied(proxy(discover({ clientArch: [0], clientUuid: uuid })));
    const p = onTheWire(r);
    assert.equal(p.yiaddr, '0.0.0.0');
    assert.equal(p.siaddr, serverId);
    assert.equal(p.file, 'undionly.kpxe');
    assert.deepEqual(p.options, {
      messageType: 'OFFER',
      serverId,
      vendorClass: 'PXEClient',
      vendorSpecific: Uint8Array.of(6, 1, 8, 255),
      clientUuid: uuid,
    });
  });

  void it('ACKs a REQUEST (e.g. to port 4011) with the same boot information', () => {
    const req = request({
      ciaddr: '192.168.5.20',
      options: { messageType: 'REQUEST', vendorClass: 'PXEClient' },
    });
    const r = replied(proxy(req));
    assert.equal(r.packet.options.messageType, 'ACK');
    assert.equal(r.packet.yiaddr, '0.0.0.0');
    assert.equal(r.packet.ciaddr, '192.168.5.20');
    assert.equal(r.destination.via, 'client-address');
  });

  void it('echoes "HTTPClient" instead of "PXEClient" for UEFI HTTP boot', () => {
    const http: BootDecision = {
      kind: 'boot',
      client: 'http-boot',
      bootfile: 'http://vip/ipxe.efi',
      nextServer: serverId,
      vendorClassEcho: 'HTTPClient',
      reason: 'HTTP boot',
    };
    const p = replied(proxy(discover({ vendorClass: 'HTTPClient:Arch:00016:UNDI:003001' }), http)).packet;
    assert.equal(p.options.vendorClass, 'HTTPClient');
  });

  void it('does not answer non-PXE clients, no-boot decisions, REQUESTs for the address server, or RELEASE', () => {
    assert.match(
      ignoredBecause(proxy(discover({ vendorClass: 'udhcp 1.35.0' }))),
      /only PXEClient and HTTPClient/,
    );
    assert.match(ignoredBecause(proxy(discover(), noBoot)), /allowPXE is off/);
    const selecting = request({
      options: { messageType: 'REQUEST', vendorClass: 'PXEClient', serverId: '10.0.0.9' },
    });
    assert.match(ignoredBecause(proxy(selecting)), /selected server 10\.0\.0\.9/);
    assert.match(
      ignoredBecause(proxy(request({ options: { messageType: 'RELEASE', vendorClass: 'PXEClient' } }))),
      /does not answer RELEASE/,
    );
  });
});

void describe('limits and settings', () => {
  void it('encodes within the client option 57, bounded by 576 and 1500', () => {
    assert.equal(replied(reservation(discover())).maxMessageSize, 576);
    assert.equal(replied(reservation(discover({ maxMessageSize: 1472 }))).maxMessageSize, 1472);
    assert.equal(replied(reservation(discover({ maxMessageSize: 9000 }))).maxMessageSize, 1500);
  });

  void it('refuses invalid settings with DhcpSettingsError naming the field, leaving the request untouched', () => {
    const req = discover();
    const before = structuredClone(req);
    const bad: [Partial<ReservedLease> | { serverId: string }, string][] = [
      [{ mask: '255.0.255.0' }, 'lease.mask'],
      [{ ip: '10.0.0' }, 'lease.ip'],
      [{ dns: ['10.0.0.2', 'dns.example'] }, 'lease.dns[1]'],
      [{ leaseTimeS: 0 }, 'lease.leaseTimeS'],
      [{ hostname: '' }, 'lease.hostname'],
      [{ serverId: 'vip' }, 'serverId'],
    ];
    for (const [change, field] of bad) {
      const input: ReplyInput =
        'serverId' in change
          ? { mode: 'reservation', request: req, serverId: change.serverId, lease, boot: pxeBoot }
          : { mode: 'reservation', request: req, serverId, lease: { ...lease, ...change }, boot: pxeBoot };
      assert.throws(
        () => buildReply(input),
        (e: unknown) => e instanceof DhcpSettingsError && e.field === field,
        field,
      );
    }
    assert.throws(
      () => proxy(req, { ...pxeBoot, nextServer: 'tftp.example' }),
      (e: unknown) => e instanceof DhcpSettingsError && e.field === 'boot.nextServer',
    );
    assert.deepEqual(req, before);
  });
});

void describe('golden iPXE DISCOVER end to end', () => {
  void it('decode -> policy -> reply -> encode gives the HTTP script, never a binary', () => {
    const cookie = [99, 130, 83, 99];
    const headerBytes = new Array<number>(236).fill(0);
    headerBytes.splice(0, 3, 1, 1, 6);
    headerBytes.splice(4, 4, 0x0b, 0xad, 0xca, 0xfe);
    headerBytes.splice(10, 1, 0x80);
    headerBytes.splice(28, 6, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56);
    const vendor = Array.from('PXEClient:Arch:00000:UNDI:002001', (c) => c.charCodeAt(0));
    const bytes = Uint8Array.from([
      ...headerBytes,
      ...cookie,
      ...[53, 1, 1],
      ...[57, 2, 0x05, 0xc0],
      ...[93, 2, 0, 0],
      ...[60, vendor.length, ...vendor],
      ...[77, 4, 0x69, 0x50, 0x58, 0x45],
      ...[175, 3, 0x13, 1, 1],
      255,
    ]);
    const req = decodeDhcpPacket(bytes);
    const script = 'http://10.0.0.100:8080/ipxe/52-54-00-12-34-56/boot.ipxe';
    const boot = decideBoot(req, {
      allowPXE: true,
      arch: 'x86_64',
      uefi: false,
      ipxeScriptUrl: script,
      tftpServer: serverId,
      httpBinaryBaseUrl: 'http://10.0.0.100:8080/ipxe/binary',
    });
    const r = replied(reservation(req, boot));
    assert.equal(r.maxMessageSize, 1472);
    const p = onTheWire(r);
    assert.equal(p.file, script);
    assert.equal(p.options.vendorSpecific, undefined, 'no PXE discovery options for iPXE');
    assert.equal(r.destination.via, 'broadcast');
    // no-pxedhcp: the server handing out the address is the only one with boot information, so
    // iPXE requests at once instead of waiting about 2 s for ProxyDHCP offers.
    assert.deepEqual(Array.from(p.options.ipxe?.raw ?? []), [176, 1, 1, 255]);
    assert.deepEqual(
      p.options.ipxe?.subOptions.map((o) => [o.code, Array.from(o.data)]),
      [[176, [1]]],
    );
    // Not from a ProxyDHCP server (whose offer iPXE waits for), nor to a PXE ROM.
    const fromProxy = onTheWire(replied(proxy(req, boot)));
    assert.equal(fromProxy.file, script);
    assert.equal(fromProxy.options.ipxe, undefined);
    const rom = onTheWire(replied(reservation(discover())));
    assert.equal(rom.options.ipxe, undefined);
  });
});

void describe('reservation replies built once per lease and boot answer', () => {
  const asksBootfile = { parameterRequestList: [1, 3, 6, 67] };

  void it('share one frozen options object, and encode to the bytes an unshared copy gives', () => {
    const first = replied(reservation(discover(asksBootfile)));
    const other = request({ flags: 0x8000, options: { messageType: 'DISCOVER', ...asksBootfile } });
    const second = replied(
      reservation({
        ...other,
        xid: 0x0badcafe,
        chaddr: Uint8Array.of(2, 0, 0, 0, 0, 9, ...new Array<number>(10).fill(0)),
      }),
    );
    assert.equal(first.packet.options, second.packet.options);
    assert.ok(Object.isFrozen(first.packet.options));
    for (const r of [first, second]) {
      for (const maxMessageSize of [576, 1500]) {
        const copy = { ...r.packet, options: { ...r.packet.options } };
        assert.deepEqual(
          encodeDhcpPacket(r.packet, { maxMessageSize }),
          encodeDhcpPacket(copy, { maxMessageSize }),
        );
      }
    }
    // What differs per request is still each request's own.
    const p = onTheWire(second);
    assert.equal(p.xid, 0x0badcafe);
    assert.deepEqual(Array.from(p.chaddr.subarray(0, 6)), [2, 0, 0, 0, 0, 9]);
    assert.equal(p.flags, 0x8000);
  });

  void it('keep each boot answer and message type apart', () => {
    const plainBoot: BootDecision = {
      kind: 'boot',
      client: 'pxe',
      bootfile: 'a|b',
      nextServer: serverId,
      reason: 'a bootfile name with the separator in it',
    };
    const answers: BootDecision[] = [
      pxeBoot,
      plainBoot,
      { ...plainBoot, bootfile: 'a', vendorClassEcho: 'HTTPClient' },
      noBoot,
    ];
    for (const boot of answers) {
      for (const req of [
        discover(asksBootfile),
        request({ options: { messageType: 'REQUEST', requestedIp: lease.ip, ...asksBootfile } }),
      ]) {
        const p = onTheWire(replied(reservation(req, boot)));
        assert.equal(p.options.messageType, req.options.messageType === 'DISCOVER' ? 'OFFER' : 'ACK');
        assert.equal(p.options.bootfileName, boot.kind === 'boot' ? boot.bootfile : undefined);
        assert.equal(p.options.vendorClass, boot.kind === 'boot' ? boot.vendorClassEcho : undefined);
        assert.equal(
          p.options.vendorSpecific === undefined,
          boot.kind !== 'boot' || boot.pxeDiscoveryControl === undefined,
        );
      }
    }
  });

  void it('still echo option 61 and 82, and leave the shared options without them', () => {
    const clientId = Uint8Array.of(1, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56);
    const relayAgentInfo = { raw: agentInfo, subOptions: [] };
    const echoed = replied(reservation(discover({ clientId, relayAgentInfo }))).packet;
    assert.deepEqual(echoed.options.clientId, clientId);
    assert.deepEqual(echoed.options.relayAgentInfo?.raw, agentInfo);
    const plain = onTheWire(replied(reservation(discover())));
    assert.equal(plain.options.clientId, undefined);
    assert.equal(plain.options.relayAgentInfo, undefined);
  });

  void it('follow a changed lease: a new record brings a new lease object', () => {
    const before = onTheWire(replied(reservation(discover())));
    const after = onTheWire(
      replied(reservation(discover(), pxeBoot, { ...lease, leaseTimeS: 7200, gateway: '10.0.0.9' })),
    );
    assert.equal(before.options.leaseTimeS, 3600);
    assert.equal(after.options.leaseTimeS, 7200);
    assert.deepEqual(after.options.routers, ['10.0.0.9']);
  });
});

// Goal: the DHCPv4 codec reads real clients' packets correctly, frames replies within the
// client's size limit, and refuses every malformed packet with a DhcpDecodeError that names
// the offset and the problem.
// Method: golden packets are written here byte by byte (a udhcpc DISCOVER, an iPXE DISCOVER,
// a relayed REQUEST, overloaded and split-option packets) and decoded; each malformed case
// is one targeted edit of a valid packet; fast-check checks encode -> decode round trips over
// random option sets and that random mutations of valid packets never throw anything else.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';

import {
  clientHardwareAddress,
  decodeDhcpPacket,
  encodeDhcpPacket,
  hasBroadcastFlag,
  messageBytesMax,
  type DhcpPacket,
} from '../../src/boot/dhcp/codec.js';
import { DhcpDecodeError, DhcpEncodeError } from '../../src/boot/dhcp/errors.js';
import { messageTypeCode, type DhcpMessageType, type DhcpOptions } from '../../src/boot/dhcp/options.js';
import { decodeSubOptions, encodeSubOptions } from '../../src/boot/dhcp/sub-options.js';

// --- byte-level builders --------------------------------------------------------------------

const cookie = [99, 130, 83, 99];
const end = 255;
const mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];

interface HeaderSpec {
  readonly op?: number;
  readonly hlen?: number;
  readonly hops?: number;
  readonly xid: number;
  readonly secs?: number;
  readonly flags?: number;
  readonly ciaddr?: readonly number[];
  readonly giaddr?: readonly number[];
  readonly sname?: readonly number[];
  readonly file?: readonly number[];
}

/** The 236-byte BOOTP header, written field by field (RFC 2131 figure 1). */
function header(spec: HeaderSpec): number[] {
  const h = new Array<number>(236).fill(0);
  h[0] = spec.op ?? 1;
  h[1] = 1; // htype Ethernet
  h[2] = spec.hlen ?? 6;
  h[3] = spec.hops ?? 0;
  h.splice(
    4,
    4,
    (spec.xid >>> 24) & 0xff,
    (spec.xid >>> 16) & 0xff,
    (spec.xid >>> 8) & 0xff,
    spec.xid & 0xff,
  );
  h.splice(8, 2, ((spec.secs ?? 0) >>> 8) & 0xff, (spec.secs ?? 0) & 0xff);
  h.splice(10, 2, ((spec.flags ?? 0) >>> 8) & 0xff, (spec.flags ?? 0) & 0xff);
  h.splice(12, 4, ...(spec.ciaddr ?? [0, 0, 0, 0]));
  h.splice(24, 4, ...(spec.giaddr ?? [0, 0, 0, 0]));
  h.splice(28, 6, ...mac);
  const sname = spec.sname ?? [];
  h.splice(44, sname.length, ...sname);
  const file = spec.file ?? [];
  h.splice(108, file.length, ...file);
  return h;
}

function packet(spec: HeaderSpec, options: readonly number[]): Uint8Array {
  return Uint8Array.from([...header(spec), ...cookie, ...options]);
}

const ascii = (text: string): number[] => Array.from(text, (c) => c.charCodeAt(0));
const opt = (code: number, data: readonly number[]): number[] => [code, data.length, ...data];

function expectDecodeError(bytes: Uint8Array, offset: number, problem: RegExp): void {
  assert.throws(
    () => decodeDhcpPacket(bytes),
    (error: unknown) => {
      assert.ok(error instanceof DhcpDecodeError, `expected DhcpDecodeError, got ${String(error)}`);
      assert.equal(error.offset, offset, `offset for "${error.message}"`);
      assert.match(error.problem, problem);
      assert.match(error.message, new RegExp(`at byte ${offset}`));
      return true;
    },
  );
}

// --- golden packets -------------------------------------------------------------------------

/** busybox udhcpc 1.35 DISCOVER: client id, max size 576, its default request list, vendor class. */
const udhcpcDiscover = packet({ xid: 0x3903f326 }, [
  ...opt(53, [1]),
  ...opt(61, [1, ...mac]),
  ...opt(57, [0x02, 0x40]),
  ...opt(55, [1, 3, 6, 12, 15, 28, 42]),
  ...opt(60, ascii('udhcp 1.35.0')),
  end,
]);

/** iPXE DISCOVER as captured from QEMU's iPXE: 60 PXEClient, 77 "iPXE", 93, 94, 97 and a 175 blob. */
const ipxeFeatures = [
  ...opt(0xb1, [0x01, 0x80, 0x86, 0x10, 0x0e]), // bus id
  ...opt(0xeb, [0x01, 0x00, 0x00]), // version
  ...opt(0x13, [0x01]), // HTTP
  ...opt(0x17, [0x01]), // TFTP
];
const guidBytes = [
  0x4c, 0x4c, 0x45, 0x44, 0x00, 0x4a, 0x10, 0x80, 0x80, 0x36, 0xb4, 0xc0, 0x4f, 0x4e, 0x48, 0x32,
];
const ipxeDiscover = packet({ xid: 0x0badcafe, secs: 4, flags: 0x8000 }, [
  ...opt(53, [1]),
  ...opt(57, [0x05, 0xc0]),
  ...opt(93, [0x00, 0x00]),
  ...opt(94, [0x01, 0x02, 0x01]),
  ...opt(60, ascii('PXEClient:Arch:00000:UNDI:002001')),
  ...opt(77, ascii('iPXE')),
  ...opt(
    55,
    [1, 3, 6, 7, 12, 15, 17, 26, 43, 60, 66, 67, 119, 128, 129, 130, 131, 132, 133, 134, 135, 175, 203],
  ),
  ...opt(175, ipxeFeatures),
  ...opt(97, [0x00, ...guidBytes]),
  end,
]);

/** A REQUEST relayed by 10.1.0.1 with option 82 (circuit id "eth0/7", remote id = relay MAC). */
const relayMac = [0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc];
const agentInfo = [...opt(1, ascii('eth0/7')), ...opt(2, relayMac)];
const relayedRequest = packet({ xid: 0x11223344, hops: 1, giaddr: [10, 1, 0, 1] }, [
  ...opt(53, [3]),
  ...opt(50, [10, 1, 0, 23]),
  ...opt(54, [10, 0, 0, 1]),
  ...opt(12, ascii('node-7')),
  ...opt(82, agentInfo),
  end,
]);

void describe('decoding golden packets', () => {
  void it('reads a udhcpc DISCOVER', () => {
    const p = decodeDhcpPacket(udhcpcDiscover);
    assert.equal(p.op, 'request');
    assert.equal(p.xid, 0x3903f326);
    assert.equal(clientHardwareAddress(p), '52:54:00:12:34:56');
    assert.equal(hasBroadcastFlag(p), false);
    assert.equal(p.ciaddr, '0.0.0.0');
    assert.deepEqual(p.options, {
      messageType: 'DISCOVER',
      clientId: Uint8Array.from([1, ...mac]),
      maxMessageSize: 576,
      parameterRequestList: [1, 3, 6, 12, 15, 28, 42],
      vendorClass: 'udhcp 1.35.0',
    });
  });

  void it('reads an iPXE DISCOVER with 60, 77 (plain form), 93, 94, 97 and 175', () => {
    const p = decodeDhcpPacket(ipxeDiscover);
    const o = p.options;
    assert.equal(hasBroadcastFlag(p), true);
    assert.equal(p.secs, 4);
    assert.equal(o.messageType, 'DISCOVER');
    assert.equal(o.maxMessageSize, 1472);
    assert.deepEqual(o.clientArch, [0]);
    assert.deepEqual(o.clientNdi, { type: 1, major: 2, minor: 1 });
    assert.equal(o.vendorClass, 'PXEClient:Arch:00000:UNDI:002001');
    assert.deepEqual(o.userClass, { format: 'plain', classes: ['iPXE'] });
    assert.deepEqual(o.clientUuid, { type: 0, guid: '4c4c4544-004a-1080-8036-b4c04f4e4832' });
    assert.deepEqual(o.ipxe?.raw, Uint8Array.from(ipxeFeatures));
    assert.deepEqual(
      o.ipxe?.subOptions.map((s) => [s.code, Array.from(s.data)]),
      [
        [0xb1, [0x01, 0x80, 0x86, 0x10, 0x0e]],
        [0xeb, [0x01, 0x00, 0x00]],
        [0x13, [0x01]],
        [0x17, [0x01]],
      ],
    );
  });

  void it('reads a relayed REQUEST and keeps option 82 raw with its circuit and remote ids', () => {
    const p = decodeDhcpPacket(relayedRequest);
    assert.equal(p.giaddr, '10.1.0.1');
    assert.equal(p.hops, 1);
    assert.equal(p.options.messageType, 'REQUEST');
    assert.equal(p.options.requestedIp, '10.1.0.23');
    assert.equal(p.options.serverId, '10.0.0.1');
    assert.equal(p.options.hostname, 'node-7');
    const info = p.options.relayAgentInfo;
    assert.deepEqual(info?.raw, Uint8Array.from(agentInfo));
    assert.deepEqual(info.circuitId, Uint8Array.from(ascii('eth0/7')));
    assert.deepEqual(info.remoteId, Uint8Array.from(relayMac));
  });

  void it('reads the RFC 3004 user class form as a list of classes', () => {
    const p = decodeDhcpPacket(
      packet({ xid: 1 }, [...opt(53, [1]), ...opt(77, [4, ...ascii('iPXE'), 3, ...ascii('lab')]), end]),
    );
    assert.deepEqual(p.options.userClass, { format: 'rfc3004', classes: ['iPXE', 'lab'] });
  });

  void it('decodes every typed server option', () => {
    const p = decodeDhcpPacket(
      packet({ xid: 2, op: 2, file: ascii('undionly.kpxe'), sname: ascii('boot') }, [
        ...opt(53, [2]),
        ...opt(1, [255, 255, 255, 0]),
        ...opt(3, [10, 0, 0, 1, 10, 0, 0, 2]),
        ...opt(6, [1, 1, 1, 1]),
        ...opt(15, [...ascii('lab.example'), 0]), // a trailing NUL some stacks add
        ...opt(28, [10, 0, 0, 255]),
        ...opt(43, [6, 1, 8, 255]),
        ...opt(51, [0, 0, 0x0e, 0x10]),
        ...opt(58, [0, 0, 0x07, 0x08]),
        ...opt(59, [0, 0, 0x0c, 0x4e]),
        ...opt(66, ascii('10.0.0.9')),
        ...opt(67, ascii('ipxe.efi')),
        ...opt(56, ascii('hello')),
        end,
      ]),
    );
    assert.equal(p.op, 'reply');
    assert.equal(p.file, 'undionly.kpxe');
    assert.equal(p.sname, 'boot');
    assert.deepEqual(p.options, {
      messageType: 'OFFER',
      subnetMask: '255.255.255.0',
      routers: ['10.0.0.1', '10.0.0.2'],
      dnsServers: ['1.1.1.1'],
      domainName: 'lab.example',
      broadcastAddress: '10.0.0.255',
      vendorSpecific: Uint8Array.from([6, 1, 8, 255]),
      leaseTimeS: 3600,
      renewalTimeS: 1800,
      rebindingTimeS: 3150,
      tftpServerName: '10.0.0.9',
      bootfileName: 'ipxe.efi',
      other: [{ code: 56, data: Uint8Array.from(ascii('hello')) }],
    });
    const sub = decodeSubOptions(p.options.vendorSpecific ?? new Uint8Array(0), 'dhcp', 0, 'option 43');
    assert.deepEqual(sub, [{ code: 6, data: Uint8Array.of(8) }]);
  });
});

void describe('framing', () => {
  void it('skips Pad bytes between options and before End', () => {
    const p = decodeDhcpPacket(
      packet({ xid: 3 }, [
        0,
        ...opt(53, [1]),
        0,
        0,
        ...opt(61, [1, ...mac]),
        0,
        ...opt(12, ascii('a')),
        0,
        0,
        end,
      ]),
    );
    assert.equal(p.options.messageType, 'DISCOVER');
    assert.deepEqual(p.options.clientId, Uint8Array.from([1, ...mac]));
    assert.equal(p.options.hostname, 'a');
  });

  void it('ignores bytes after End', () => {
    const p = decodeDhcpPacket(packet({ xid: 3 }, [...opt(53, [1]), end, 0, 0, 0x12, 0x34, 0x56]));
    assert.deepEqual(p.options, { messageType: 'DISCOVER' });
  });

  void it('tolerates a missing End when the last option runs exactly to the end of the datagram', () => {
    const p = decodeDhcpPacket(packet({ xid: 3 }, [...opt(53, [1]), ...opt(12, ascii('x1'))]));
    assert.deepEqual(p.options, { messageType: 'DISCOVER', hostname: 'x1' });
  });

  void it('reads options overloaded into file then sname, concatenating in that order', () => {
    // Option 60 is split in three: options field, file field, sname field (RFC 3396 §5 order).
    const file = [...opt(60, ascii('Client')), ...opt(12, ascii('from-file')), end];
    const sname = [...opt(60, ascii(':Arch:00007')), end];
    const p = decodeDhcpPacket(
      packet({ xid: 4, file, sname }, [...opt(53, [1]), ...opt(52, [3]), ...opt(60, ascii('PXE')), end]),
    );
    assert.equal(p.options.vendorClass, 'PXEClient:Arch:00007');
    assert.equal(p.options.hostname, 'from-file');
    assert.equal(p.file, '');
    assert.equal(p.sname, '');
  });

  void it('overload 1 leaves sname as a name', () => {
    const p = decodeDhcpPacket(
      packet({ xid: 5, file: [...opt(12, ascii('h')), end], sname: ascii('server-a') }, [
        ...opt(53, [1]),
        ...opt(52, [1]),
        end,
      ]),
    );
    assert.equal(p.options.hostname, 'h');
    assert.equal(p.sname, 'server-a');
    assert.equal(p.file, '');
  });

  void it('concatenates repeated instances of a long option (RFC 3396)', () => {
    const data = Array.from({ length: 300 }, (_, i) => i & 0xff);
    const p = decodeDhcpPacket(
      packet({ xid: 6 }, [
        ...opt(53, [1]),
        ...opt(224, data.slice(0, 255)),
        ...opt(224, data.slice(255)),
        end,
      ]),
    );
    assert.deepEqual(p.options.other, [{ code: 224, data: Uint8Array.from(data) }]);
  });
});

// --- encoding -------------------------------------------------------------------------------

const baseReply: DhcpPacket = {
  op: 'reply',
  htype: 1,
  hlen: 6,
  hops: 0,
  xid: 0xdeadbeef,
  secs: 0,
  flags: 0,
  ciaddr: '0.0.0.0',
  yiaddr: '10.0.0.50',
  siaddr: '10.0.0.1',
  giaddr: '0.0.0.0',
  chaddr: Uint8Array.from([...mac, ...new Array<number>(10).fill(0)]),
  sname: '',
  file: '',
  options: { messageType: 'OFFER', serverId: '10.0.0.1' },
};

/** The option instances in the main options field, in order, checking there is no Pad before End. */
function mainFieldCodes(bytes: Uint8Array): number[] {
  const codes: number[] = [];
  let i = 240;
  while (bytes[i] !== end) {
    assert.notEqual(bytes[i], 0, `Pad byte at ${i} before End`);
    codes.push(bytes[i]!);
    i += 2 + bytes[i + 1]!;
  }
  return codes;
}

void describe('encoding', () => {
  void it('writes a minimal reply padded to the 300-byte BOOTP minimum, with no Pad before End', () => {
    const bytes = encodeDhcpPacket(baseReply);
    assert.equal(bytes.length, 300);
    assert.deepEqual(Array.from(bytes.subarray(236, 240)), cookie);
    assert.deepEqual(mainFieldCodes(bytes), [53, 54]);
    assert.deepEqual(decodeDhcpPacket(bytes), baseReply);
  });

  void it('puts option 53 first and option 82 last', () => {
    const relayAgentInfo = decodeDhcpPacket(relayedRequest).options.relayAgentInfo!;
    const bytes = encodeDhcpPacket({
      ...baseReply,
      options: {
        relayAgentInfo,
        hostname: 'n',
        serverId: '10.0.0.1',
        messageType: 'ACK',
        other: [{ code: 150, data: Uint8Array.of(1) }],
      },
    });
    const codes = mainFieldCodes(bytes);
    assert.equal(codes[0], 53);
    assert.equal(codes.at(-1), 82);
  });

  void it('splits an option over 255 bytes into consecutive instances and reads it back whole', () => {
    const data = Uint8Array.from({ length: 600 }, (_, i) => (i * 7) & 0xff);
    const reply = { ...baseReply, options: { ...baseReply.options, other: [{ code: 224, data }] } };
    const bytes = encodeDhcpPacket(reply, { maxMessageSize: 1500 });
    assert.deepEqual(mainFieldCodes(bytes), [53, 54, 224, 224, 224]);
    assert.deepEqual(decodeDhcpPacket(bytes), reply);
  });

  void it('overloads file and sname when options exceed the default 576-byte limit', () => {
    const other = [
      { code: 200, data: new Uint8Array(250).fill(1) },
      { code: 201, data: new Uint8Array(120).fill(2) },
      { code: 202, data: new Uint8Array(40).fill(3) },
    ];
    const reply = { ...baseReply, options: { ...baseReply.options, other } };
    const bytes = encodeDhcpPacket(reply);
    assert.ok(bytes.length <= 576 - 28, `${bytes.length} bytes exceeds the 548-byte DHCP payload`);
    assert.deepEqual(mainFieldCodes(bytes).slice(0, 3), [53, 52, 54], 'message type stays first');
    assert.equal(bytes[245], 3, 'overload value: file and sname');
    assert.equal(bytes[108], 201, 'file field starts with the next option');
    assert.equal(bytes[44], 202, 'sname field carries the last option');
    assert.deepEqual(decodeDhcpPacket(bytes), reply);
  });

  void it('uses no overload when the client allows a larger message', () => {
    const other = [{ code: 200, data: new Uint8Array(400).fill(9) }];
    const reply = { ...baseReply, options: { ...baseReply.options, other } };
    const bytes = encodeDhcpPacket(reply, { maxMessageSize: 1472 });
    assert.deepEqual(mainFieldCodes(bytes), [53, 54, 200, 200]);
    assert.deepEqual(decodeDhcpPacket(bytes), reply);
  });

  void it('overloads only sname when file carries a boot file name', () => {
    const other = [
      { code: 200, data: new Uint8Array(250).fill(1) },
      { code: 201, data: new Uint8Array(60).fill(2) },
    ];
    const reply = { ...baseReply, file: 'undionly.kpxe', options: { ...baseReply.options, other } };
    const bytes = encodeDhcpPacket(reply);
    assert.deepEqual(mainFieldCodes(bytes), [53, 52, 54, 200]);
    assert.equal(bytes[245], 2, 'overload value: sname only');
    assert.equal(bytes[44], 201, 'sname field carries the option that did not fit');
    assert.deepEqual(decodeDhcpPacket(bytes), reply);
  });

  void it('refuses options that cannot fit, and invalid header fields, with DhcpEncodeError', () => {
    const tooMuch = {
      ...baseReply,
      options: { ...baseReply.options, other: [{ code: 200, data: new Uint8Array(900) }] },
    };
    assert.throws(
      () => encodeDhcpPacket(tooMuch),
      (e: unknown) => e instanceof DhcpEncodeError && e.field === 'options',
    );
    const cases: [Partial<DhcpPacket>, string][] = [
      [{ yiaddr: '10.0.0.256' }, 'yiaddr'],
      [{ xid: -1 }, 'xid'],
      [{ file: 'x'.repeat(128) }, 'file'],
      [{ sname: 'é€' }, 'sname'],
      [{ chaddr: new Uint8Array(17) }, 'chaddr'],
      [{ options: { leaseTimeS: 2 ** 32 } }, 'option 51 (lease time)'],
      [{ options: { routers: [] } }, 'option 3 (routers)'],
      [{ options: { hostname: '' } }, 'option 12 (hostname)'],
      [{ options: { other: [{ code: 52, data: Uint8Array.of(1) }] } }, 'option 52 (option overload)'],
      [{ options: { other: [{ code: 53, data: Uint8Array.of(1) }] } }, 'option 53 (message type)'],
    ];
    for (const [change, field] of cases) {
      assert.throws(
        () => encodeDhcpPacket({ ...baseReply, ...change }),
        (e: unknown) => e instanceof DhcpEncodeError && e.field === field,
        field,
      );
    }
    assert.throws(() => encodeDhcpPacket(baseReply, { maxMessageSize: 500 }), DhcpEncodeError);
  });
});

// --- malformed input ------------------------------------------------------------------------

void describe('malformed packets are refused with the offset and the problem', () => {
  const ok = (options: readonly number[]): Uint8Array =>
    packet({ xid: 9 }, [...opt(53, [1]), ...options, end]);
  const cases: [string, Uint8Array, number, RegExp][] = [
    ['truncated header', udhcpcDiscover.subarray(0, 200), 200, /truncated: 200 bytes/],
    ['header without cookie', udhcpcDiscover.subarray(0, 238), 238, /truncated/],
    [
      'bad magic cookie',
      (() => {
        const b = udhcpcDiscover.slice();
        b[239] = 0x64;
        return b;
      })(),
      236,
      /bad magic cookie/,
    ],
    ['oversized packet', new Uint8Array(messageBytesMax + 1), messageBytesMax, /over the 4096-byte limit/],
    [
      'unknown op',
      (() => {
        const b = udhcpcDiscover.slice();
        b[0] = 3;
        return b;
      })(),
      0,
      /op is 3/,
    ],
    [
      'hlen over 16',
      (() => {
        const b = udhcpcDiscover.slice();
        b[2] = 17;
        return b;
      })(),
      2,
      /hlen is 17/,
    ],
    [
      'option running past the end',
      packet({ xid: 9 }, [...opt(53, [1]), 12, 10, 0x61]),
      243,
      /option 12 \(hostname\) claims 10 bytes/,
    ],
    ['option without a length byte', packet({ xid: 9 }, [...opt(53, [1]), 12]), 243, /has no length byte/],
    [
      'message type of 2 bytes',
      ok([]).map((b, i) => (i === 241 ? 2 : b)),
      240,
      /option 53 \(message type\) must be 1 byte, got 2/,
    ],
    [
      'message type split in two instances',
      packet({ xid: 9 }, [...opt(53, [1]), ...opt(53, [1]), end]),
      240,
      /option 53 \(message type\) must be 1 byte, got 2/,
    ],
    [
      'unknown message type',
      packet({ xid: 9 }, [...opt(53, [99]), end]),
      240,
      /value 99 is not a message type/,
    ],
    ['lease time of 3 bytes', ok(opt(51, [0, 0, 1])), 243, /option 51 \(lease time\) must be 4 bytes, got 3/],
    [
      'routers not a multiple of 4',
      ok(opt(3, [10, 0, 0, 1, 10, 0])),
      243,
      /option 3 \(routers\) must be a multiple of 4/,
    ],
    ['subnet mask of 5 bytes', ok(opt(1, [255, 255, 255, 0, 0])), 243, /must be 4 bytes, got 5/],
    ['empty DNS list', ok(opt(6, [])), 243, /option 6 \(DNS servers\) must be at least 4 bytes/],
    [
      'max message size below 576',
      ok(opt(57, [0x01, 0x00])),
      243,
      /value 256 is below the legal minimum 576/,
    ],
    ['odd-length client architecture', ok(opt(93, [0, 7, 0])), 243, /option 93 .* multiple of 2/],
    ['client NDI of 2 bytes', ok(opt(94, [1, 3])), 243, /option 94 .* must be 3 bytes/],
    ['client UUID of 5 bytes', ok(opt(97, [0, 1, 2, 3, 4])), 243, /option 97 .* must be 0 or 17 bytes/],
    ['hostname of only NULs', ok(opt(12, [0, 0])), 243, /holds only NUL bytes/],
    ['client id of 1 byte', ok(opt(61, [1])), 243, /option 61 .* at least 2 bytes/],
    [
      'relay sub-option overrun',
      ok(opt(82, [1, 9, 0x61, 0x62])),
      243,
      /option 82 .* sub-option 1 at data byte 0 claims 9 bytes/,
    ],
    [
      'iPXE sub-option overrun',
      ok(opt(175, [0x13, 4, 1])),
      243,
      /option 175 .* sub-option 19 .* claims 4 bytes/,
    ],
    [
      'overload option twice',
      ok([...opt(52, [1]), ...opt(52, [1])]),
      246,
      /option 52 .* appears more than once/,
    ],
    ['overload option of 2 bytes', ok(opt(52, [1, 1])), 243, /option 52 .* must be 1 byte, got 2/],
    ['overload value 4', ok(opt(52, [4])), 243, /value 4 is not 1, 2 or 3/],
    [
      'overload inside the overloaded file field (a loop)',
      packet({ xid: 9, file: [...opt(52, [3]), end] }, [...opt(53, [1]), ...opt(52, [1]), end]),
      108,
      /option 52 .* inside the overloaded file field/,
    ],
    [
      'overloaded file field without End',
      packet({ xid: 9, file: new Array<number>(128).fill(0).map((_, i) => (i % 2 === 0 ? 150 : 0)) }, [
        ...opt(53, [1]),
        ...opt(52, [1]),
        end,
      ]),
      236,
      /overloaded file field has no End/,
    ],
    [
      'option running past the overloaded sname field',
      packet({ xid: 9, sname: [...new Array<number>(60).fill(0), 12, 8, 0x61, 0x61] }, [
        ...opt(53, [1]),
        ...opt(52, [2]),
        end,
      ]),
      104,
      /option 12 .* sname field ends after 2/,
    ],
  ];
  for (const [name, bytes, offset, problem] of cases) {
    void it(name, () => expectDecodeError(bytes, offset, problem));
  }
});

// --- properties -----------------------------------------------------------------------------

const latin1 = (maxLength: number): fc.Arbitrary<string> =>
  fc
    .array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength })
    .map((codes) => String.fromCharCode(...codes))
    .filter((s) => !s.endsWith('\0'));
const latin1NoNul = (maxLength: number): fc.Arbitrary<string> =>
  fc.array(fc.integer({ min: 1, max: 255 }), { maxLength }).map((codes) => String.fromCharCode(...codes));
const address = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((a) => a.join('.'));
// size 'max' so lengths reach the limits: long options get split and big sets overload.
const bytes = (minLength: number, maxLength: number): fc.Arbitrary<Uint8Array> =>
  fc.uint8Array({ minLength, maxLength, size: 'max' });
const subOptions = (minCode: number, maxCode: number) =>
  fc.array(
    fc.record(
      { code: fc.integer({ min: minCode, max: maxCode }), data: bytes(0, 20) },
      { noNullPrototype: true },
    ),
    {
      minLength: 1,
      maxLength: 4,
    },
  );
// Codes outside the catalogue, each used once (a repeated code would be concatenated).
const catalogued = new Set([
  0, 1, 3, 6, 12, 15, 28, 43, 50, 51, 52, 53, 54, 55, 57, 58, 59, 60, 61, 66, 67, 77, 82, 93, 94, 97, 175,
  255,
]);
const otherOptions = fc.uniqueArray(
  fc.record(
    { code: fc.integer({ min: 1, max: 254 }).filter((c) => !catalogued.has(c)), data: bytes(0, 300) },
    { noNullPrototype: true },
  ),
  { selector: (o) => o.code, minLength: 1, maxLength: 3 },
);

const optionsArbitrary: fc.Arbitrary<DhcpOptions> = fc.record(
  {
    messageType: fc.constantFrom(...(Object.keys(messageTypeCode) as DhcpMessageType[])),
    subnetMask: address,
    routers: fc.array(address, { minLength: 1, maxLength: 3 }),
    dnsServers: fc.array(address, { minLength: 1, maxLength: 3 }),
    hostname: latin1(40),
    domainName: latin1(40),
    broadcastAddress: address,
    vendorSpecific: bytes(1, 80),
    requestedIp: address,
    leaseTimeS: fc.nat({ max: 0xffffffff }),
    serverId: address,
    parameterRequestList: fc.array(fc.nat(255), { minLength: 1, maxLength: 20 }),
    maxMessageSize: fc.integer({ min: 576, max: 65535 }),
    renewalTimeS: fc.nat({ max: 0xffffffff }),
    rebindingTimeS: fc.nat({ max: 0xffffffff }),
    vendorClass: latin1(40),
    clientId: bytes(2, 20),
    tftpServerName: latin1(30),
    bootfileName: latin1(60),
    // The plain form: printable text whose first byte is larger than what follows, so it
    // cannot be mistaken for RFC 3004 length-prefixed data.
    userClass: fc.oneof(
      fc.stringMatching(/^[ -~]{1,30}$/).map((s) => ({ format: 'plain' as const, classes: [s] })),
      fc
        .array(latin1(20), { minLength: 1, maxLength: 3 })
        .map((classes) => ({ format: 'rfc3004' as const, classes })),
    ),
    relayAgentInfo: subOptions(0, 255).map((list) => {
      const raw = encodeSubOptions(list, 'tlv', 'test');
      const circuitId = list.find((s) => s.code === 1)?.data;
      const remoteId = list.find((s) => s.code === 2)?.data;
      return {
        raw,
        subOptions: list,
        ...(circuitId === undefined ? {} : { circuitId }),
        ...(remoteId === undefined ? {} : { remoteId }),
      };
    }),
    clientArch: fc.array(fc.nat(0xffff), { minLength: 1, maxLength: 4 }),
    clientNdi: fc.record(
      { type: fc.nat(255), major: fc.nat(255), minor: fc.nat(255) },
      { noNullPrototype: true },
    ),
    clientUuid: fc.oneof(
      fc.constant({ type: 0, guid: null }),
      fc.record({ type: fc.nat(255), guid: fc.uuid() }, { noNullPrototype: true }),
    ),
    ipxe: subOptions(1, 254).map((list) => ({
      raw: encodeSubOptions(list, 'dhcp', 'test'),
      subOptions: list,
    })),
    other: otherOptions,
  },
  { requiredKeys: [], noNullPrototype: true },
);

const packetArbitrary: fc.Arbitrary<DhcpPacket> = fc.record(
  {
    op: fc.constantFrom('request' as const, 'reply' as const),
    htype: fc.nat(255),
    hlen: fc.nat(16),
    hops: fc.nat(255),
    xid: fc.nat({ max: 0xffffffff }),
    secs: fc.nat(0xffff),
    flags: fc.nat(0xffff),
    ciaddr: address,
    yiaddr: address,
    siaddr: address,
    giaddr: address,
    chaddr: bytes(16, 16),
    sname: fc.oneof(fc.constant(''), latin1NoNul(63)),
    file: fc.oneof(fc.constant(''), latin1NoNul(127)),
    options: optionsArbitrary,
  },
  { noNullPrototype: true },
);

void describe('properties', () => {
  void it('encode -> decode returns the same packet, within the size limit', () => {
    fc.assert(
      fc.property(
        packetArbitrary,
        fc.oneof(fc.constant(576), fc.integer({ min: 576, max: 1500 })),
        (p, maxMessageSize) => {
          let bytes: Uint8Array;
          try {
            bytes = encodeDhcpPacket(p, { maxMessageSize });
          } catch (error) {
            // Only a size problem is acceptable, and then a bigger limit must work.
            assert.ok(error instanceof DhcpEncodeError && error.field === 'options', String(error));
            bytes = encodeDhcpPacket(p, { maxMessageSize: 65535 });
            assert.deepEqual(decodeDhcpPacket(bytes), p);
            return;
          }
          assert.ok(bytes.length <= maxMessageSize - 28);
          assert.deepEqual(decodeDhcpPacket(bytes), p);
        },
      ),
      { numRuns: 400 },
    );
  });

  void it('random mutations of valid packets throw nothing but DhcpDecodeError', () => {
    const seeds = [udhcpcDiscover, ipxeDiscover, relayedRequest, encodeDhcpPacket(baseReply)];
    const mutation = fc.oneof(
      fc.record({ kind: fc.constant('set' as const), at: fc.nat(600), value: fc.nat(255) }),
      fc.record({ kind: fc.constant('cut' as const), at: fc.nat(600), value: fc.nat(255) }),
      fc.record({ kind: fc.constant('insert' as const), at: fc.nat(600), value: fc.nat(255) }),
    );
    fc.assert(
      fc.property(
        fc.nat(seeds.length - 1),
        fc.array(mutation, { minLength: 1, maxLength: 8 }),
        (seed, edits) => {
          let b = Array.from(seeds[seed]!);
          for (const { kind, at, value } of edits) {
            const i = at % (b.length + 1);
            if (kind === 'set') b[i] = value;
            else if (kind === 'cut') b = b.slice(0, i);
            else b.splice(i, 0, value);
          }
          try {
            decodeDhcpPacket(Uint8Array.from(b));
          } catch (error) {
            assert.ok(error instanceof DhcpDecodeError, `unexpected ${String(error)}`);
          }
        },
      ),
      { numRuns: 3000 },
    );
  });

  void it('random bytes after a valid header throw nothing but DhcpDecodeError', () => {
    const head = udhcpcDiscover.subarray(0, 240);
    fc.assert(
      fc.property(bytes(0, 400), (tail) => {
        try {
          decodeDhcpPacket(Uint8Array.from([...head, ...tail]));
        } catch (error) {
          assert.ok(error instanceof DhcpDecodeError, `unexpected ${String(error)}`);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

// Goal: the TFTP codec reads exactly what RFC 1350/2347 clients send, round-trips every packet
// it can encode, and turns every malformed datagram into a typed failure instead of a throw.
// Method: golden byte strings written out by hand from the RFC layouts, fast-check round-trips
// over generated packets, and decoding of truncated, mutated and random bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  TftpErrorCode,
  decodePacket,
  encodePacket,
  type DecodeFailureReason,
  type TftpPacket,
} from '../../src/boot/tftp/packet.js';

const bytes = (...parts: (string | number[])[]): Uint8Array =>
  Uint8Array.from(
    parts.flatMap((part) => (typeof part === 'string' ? Array.from(part, (c) => c.charCodeAt(0)) : part)),
  );

function decodeOk(input: Uint8Array): TftpPacket {
  const result = decodePacket(input);
  if (!result.ok) assert.fail(`expected a packet, got ${result.error.reason}: ${result.error.message}`);
  return result.packet;
}

function decodeFails(input: Uint8Array): DecodeFailureReason {
  const result = decodePacket(input);
  if (result.ok) assert.fail(`expected a failure, got ${JSON.stringify(result.packet)}`);
  assert.ok(result.error.message.length > 0);
  return result.error.reason;
}

void test('decodes an RRQ with options, lower-casing option names and the mode', () => {
  const packet = decodeOk(bytes([0, 1], 'ipxe.efi\0', 'OCTET\0', 'BlkSize\0', '1468\0', 'tsize\0', '0\0'));
  assert.deepEqual(packet, {
    type: 'rrq',
    filename: 'ipxe.efi',
    mode: 'octet',
    options: new Map([
      ['blksize', '1468'],
      ['tsize', '0'],
    ]),
  });
});

void test('decodes a WRQ without options and a netascii mode', () => {
  assert.deepEqual(decodeOk(bytes([0, 2], 'up.txt\0', 'NetAscii\0')), {
    type: 'wrq',
    filename: 'up.txt',
    mode: 'netascii',
    options: new Map(),
  });
});

void test('keeps unknown options with non-numeric values, which the server ignores', () => {
  const packet = decodeOk(bytes([0, 1], 'f\0', 'octet\0', 'multicast\0', '\0'));
  assert.equal(packet.type, 'rrq');
  assert.deepEqual(packet.type === 'rrq' ? [...packet.options] : null, [['multicast', '']]);
});

void test('tolerates NUL padding after the last option, as some firmware sends', () => {
  const packet = decodeOk(bytes([0, 1], 'f\0', 'octet\0', 'blksize\0', '512\0', [0, 0, 0]));
  assert.deepEqual(packet.type === 'rrq' ? [...packet.options] : null, [['blksize', '512']]);
});

void test('encodes DATA, ACK, ERROR and OACK to the RFC layouts', () => {
  assert.deepEqual(encodePacket({ type: 'data', block: 258, data: bytes('hi') }), bytes([0, 3, 1, 2], 'hi'));
  assert.deepEqual(encodePacket({ type: 'ack', block: 65535 }), bytes([0, 4, 255, 255]));
  assert.deepEqual(
    encodePacket({ type: 'error', code: TftpErrorCode.fileNotFound, message: 'no' }),
    bytes([0, 5, 0, 1], 'no\0'),
  );
  assert.deepEqual(
    encodePacket({ type: 'oack', options: new Map([['blksize', '1468']]) }),
    bytes([0, 6], 'blksize\0', '1468\0'),
  );
});

void test('refuses to encode what the wire cannot carry', () => {
  assert.throws(() => encodePacket({ type: 'ack', block: 65536 }), RangeError);
  assert.throws(() => encodePacket({ type: 'error', code: 1, message: 'a\0b' }), RangeError);
  assert.throws(() => encodePacket({ type: 'error', code: 1, message: 'snowman ☃' }), RangeError);
  assert.throws(() => encodePacket({ type: 'data', block: 1, data: new Uint8Array(65465) }), RangeError);
});

const failures: readonly [string, Uint8Array, DecodeFailureReason][] = [
  ['empty datagram', bytes(), 'truncated'],
  ['one byte', bytes([0]), 'truncated'],
  ['ACK without block', bytes([0, 4, 0]), 'truncated'],
  ['DATA without block', bytes([0, 3, 1]), 'truncated'],
  ['ERROR without code', bytes([0, 5, 0]), 'truncated'],
  ['opcode 0', bytes([0, 0, 0, 1]), 'unknownOpcode'],
  ['opcode 7', bytes([0, 7, 0, 1]), 'unknownOpcode'],
  ['opcode 256', bytes([1, 0, 0, 1]), 'unknownOpcode'],
  ['filename without NUL', bytes([0, 1], 'ipxe.efi'), 'unterminatedString'],
  ['mode without NUL', bytes([0, 1], 'ipxe.efi\0', 'octet'), 'unterminatedString'],
  ['no mode at all', bytes([0, 1], 'ipxe.efi\0'), 'unterminatedString'],
  ['unknown mode', bytes([0, 1], 'f\0', 'binary\0'), 'unknownMode'],
  ['option name without value', bytes([0, 1], 'f\0', 'octet\0', 'blksize\0'), 'oddOptionList'],
  ['option name without NUL', bytes([0, 1], 'f\0', 'octet\0', 'blksize'), 'unterminatedString'],
  ['option value without NUL', bytes([0, 1], 'f\0', 'octet\0', 'blksize\0', '512'), 'unterminatedString'],
  ['empty option name before more', bytes([0, 1], 'f\0', 'octet\0', '\0', '512\0'), 'emptyOptionName'],
  [
    'duplicate option',
    bytes([0, 1], 'f\0', 'octet\0', 'tsize\0', '0\0', 'TSIZE\0', '0\0'),
    'duplicateOption',
  ],
  ['blksize not decimal', bytes([0, 1], 'f\0', 'octet\0', 'blksize\0', '12a\0'), 'optionValueNotDecimal'],
  ['tsize negative', bytes([0, 1], 'f\0', 'octet\0', 'tsize\0', '-1\0'), 'optionValueNotDecimal'],
  ['timeout empty', bytes([0, 1], 'f\0', 'octet\0', 'timeout\0', '\0'), 'optionValueNotDecimal'],
  ['windowsize hex', bytes([0, 1], 'f\0', 'octet\0', 'windowsize\0', '0x10\0'), 'optionValueNotDecimal'],
  [
    'blksize too long',
    bytes([0, 1], 'f\0', 'octet\0', 'blksize\0', '1234567890123456\0'),
    'optionValueNotDecimal',
  ],
  ['OACK with odd list', bytes([0, 6], 'blksize\0'), 'oddOptionList'],
  ['OACK value not decimal', bytes([0, 6], 'windowsize\0', 'many\0'), 'optionValueNotDecimal'],
  ['ACK with trailing bytes', bytes([0, 4, 0, 1, 0]), 'trailingBytes'],
  ['ERROR message without NUL', bytes([0, 5, 0, 8], 'declined'), 'unterminatedString'],
  ['ERROR with bytes after message', bytes([0, 5, 0, 8], 'x\0', 'y'), 'trailingBytes'],
  ['DATA over 65464 bytes', Uint8Array.from([0, 3, 0, 1, ...new Uint8Array(65465)]), 'dataTooLong'],
];

for (const [name, input, reason] of failures) {
  void test(`decode failure: ${name} → ${reason}`, () => {
    assert.equal(decodeFails(input), reason);
  });
}

// Generators for packets encodePacket accepts: strings of bytes 1..255, unique lower-case option names.
const wireChar = fc.integer({ min: 1, max: 255 }).map((code) => String.fromCharCode(code));
const wireString = fc.string({ unit: wireChar, maxLength: 40 });
const optionName = fc
  .string({ unit: wireChar, minLength: 1, maxLength: 12 })
  .map((s) => s.toLowerCase())
  .filter((s) => s.length > 0 && !['blksize', 'tsize', 'timeout', 'windowsize'].includes(s));
const optionValue = (name: string): fc.Arbitrary<string> =>
  ['blksize', 'tsize', 'timeout', 'windowsize'].includes(name)
    ? fc.integer({ min: 0, max: 999_999_999 }).map(String)
    : wireString;
const options = fc
  .uniqueArray(fc.oneof(optionName, fc.constantFrom('blksize', 'tsize', 'timeout', 'windowsize')), {
    maxLength: 6,
  })
  .chain((names) =>
    fc.tuple(...names.map((name) => optionValue(name).map((value) => [name, value] as const))),
  )
  .map((pairs) => new Map(pairs));
const block = fc.integer({ min: 0, max: 65535 });

const packet: fc.Arbitrary<TftpPacket> = fc.oneof(
  fc.record({
    type: fc.constantFrom('rrq' as const, 'wrq' as const),
    filename: wireString,
    mode: fc.constantFrom('netascii' as const, 'octet' as const, 'mail' as const),
    options,
  }),
  fc.record({ type: fc.constant('data' as const), block, data: fc.uint8Array({ maxLength: 1500 }) }),
  fc.record({ type: fc.constant('ack' as const), block }),
  fc.record({ type: fc.constant('error' as const), code: block, message: wireString }),
  fc.record({ type: fc.constant('oack' as const), options }),
);

void test('property: decode(encode(p)) equals p for every encodable packet', () => {
  fc.assert(
    fc.property(packet, (p) => {
      assert.deepEqual(decodeOk(encodePacket(p)), { ...p }); // fast-check records have a null prototype
    }),
    { numRuns: 500 },
  );
});

void test('property: every strict prefix of an encoded RRQ, ACK or ERROR is refused, never thrown', () => {
  const complete = packet.filter((p) => p.type !== 'data' && p.type !== 'oack');
  fc.assert(
    fc.property(complete, (p) => {
      const encoded = encodePacket(p);
      for (let length = 0; length < encoded.length; length++) {
        const result = decodePacket(encoded.subarray(0, length));
        // A request cut right after an option value still decodes, with fewer options.
        if (result.ok) {
          assert.equal(result.packet.type, p.type);
          assert.ok(p.type === 'rrq' || p.type === 'wrq');
          assert.equal(encoded[length - 1], 0);
        }
      }
    }),
    { numRuns: 200 },
  );
});

void test('property: arbitrary bytes decode to a packet or a typed failure, never an exception', () => {
  const reasons = new Set<string>();
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 64 }), (input) => {
      const result = decodePacket(input);
      if (!result.ok) reasons.add(result.error.reason);
      else assert.ok(['rrq', 'wrq', 'data', 'ack', 'error', 'oack'].includes(result.packet.type));
    }),
    { numRuns: 2000 },
  );
  assert.ok(reasons.has('unknownOpcode'), 'random bytes should mostly hit unknown opcodes');
});

// Goal: the hand-written address parser accepts exactly the canonical dotted quads and gives
// their value; the derived helpers (masks, broadcast, hex) agree with their definitions.
// Method: fast-check compares parseIpv4 over random strings, near-misses and real addresses
// with a reference written from the definition (four decimal octets 0-255, no leading zeros).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';

import {
  hexWithColons,
  ipv4FromNumber,
  ipv4ToBytes,
  isContiguousMask,
  subnetBroadcast,
} from '../../src/boot/dhcp/wire-values.js';
import { isIpv4, parseIpv4 } from '../../src/platform/addresses.js';

function referenceParse(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0;
  for (const part of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(part) || Number(part) > 255) return undefined;
    value = value * 256 + Number(part);
  }
  return value;
}

const octetText = fc.oneof(
  fc.integer({ min: 0, max: 255 }).map(String),
  fc.constantFrom('256', '999', '00', '01', '010', '0001', '', '-1', '+1', ' 1', '1 ', 'a', '1e2', '０'),
);
const nearQuad = fc
  .array(octetText, { minLength: 3, maxLength: 5 })
  .chain((parts) => fc.constantFrom('.', '..', ':').map((sep) => parts.join(sep)));

describe('parseIpv4', () => {
  it('agrees with the definition on near-misses and random text', () => {
    fc.assert(
      fc.property(fc.oneof(nearQuad, fc.string({ maxLength: 20 })), (text) => {
        assert.equal(parseIpv4(text), referenceParse(text), JSON.stringify(text));
        assert.equal(isIpv4(text), referenceParse(text) !== undefined);
      }),
      { numRuns: 5000 },
    );
  });

  it('round-trips every address through its number and bytes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), (value) => {
        const text = ipv4FromNumber(value);
        assert.equal(parseIpv4(text), value);
        const bytes = ipv4ToBytes(text);
        assert.deepEqual(Array.from(bytes ?? []), [
          value >>> 24,
          (value >>> 16) & 255,
          (value >>> 8) & 255,
          value & 255,
        ]);
      }),
    );
  });

  it('gives the documented answers at the edges', () => {
    assert.equal(parseIpv4('0.0.0.0'), 0);
    assert.equal(parseIpv4('255.255.255.255'), 0xffffffff);
    assert.equal(parseIpv4('10.0.0.1'), 0x0a000001);
    for (const bad of [
      '10.0.0.01',
      '10.0.0',
      '10.0.0.1.',
      '.10.0.0.1',
      '10.0.0.256',
      '1.2.3.4 ',
      '1234.1.1.1',
    ]) {
      assert.equal(parseIpv4(bad), undefined, bad);
    }
  });
});

describe('mask and broadcast helpers', () => {
  it('accepts exactly the contiguous masks', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), (value) => {
        const contiguous = Array.from({ length: 33 }, (_, prefix) =>
          prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0,
        ).includes(value);
        assert.equal(isContiguousMask(ipv4FromNumber(value)), contiguous);
      }),
    );
    assert.equal(isContiguousMask('not a mask'), false);
  });

  it('computes the directed broadcast', () => {
    assert.equal(subnetBroadcast('10.96.0.7', '255.255.255.0'), '10.96.0.255');
    assert.equal(subnetBroadcast('10.96.0.7', '255.255.0.0'), '10.96.255.255');
    assert.equal(subnetBroadcast('10.96.0.7', '255.255.255.255'), '10.96.0.7');
    assert.equal(subnetBroadcast('10.96.0.7', '0.0.0.0'), '255.255.255.255');
    assert.equal(subnetBroadcast('10.96.0', '255.255.255.0'), undefined);
  });

  it('writes hardware addresses as lower-case colon hex', () => {
    assert.equal(hexWithColons(Uint8Array.of(0x52, 0x54, 0, 0xab, 0xcd, 0xef)), '52:54:00:ab:cd:ef');
    assert.equal(hexWithColons(new Uint8Array(0)), '');
    assert.equal(hexWithColons(Uint8Array.of(255)), 'ff');
  });
});

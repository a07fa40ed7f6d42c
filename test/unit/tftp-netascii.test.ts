// Goal: netascii translation turns Unix text into the RFC 764 wire form: LF → CR LF, CR → CR NUL.
// Method: hand-written examples, plus a fast-check property that decoding the output with the
// inverse rules gives back the input.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { toNetascii } from '../../src/boot/tftp/netascii.js';

const text = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0));

void test('LF becomes CR LF and a bare CR becomes CR NUL', () => {
  assert.deepEqual(toNetascii(text('a\nb\rc\r\n')), text('a\r\nb\r\0c\r\0\r\n'));
});

void test('content without line ends is returned as is', () => {
  const input = text('#!ipxe');
  assert.equal(toNetascii(input), input);
});

void test('property: reversing the translation yields the original bytes', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), (input) => {
      const wire = toNetascii(input);
      const back: number[] = [];
      for (let i = 0; i < wire.length; i++) {
        if (wire[i] === 0x0d) {
          const next = wire[i + 1];
          assert.ok(next === 0x0a || next === 0, 'CR is always followed by LF or NUL');
          back.push(next === 0x0a ? 0x0a : 0x0d);
          i += 1;
        } else {
          back.push(wire[i]!);
        }
      }
      assert.deepEqual(Uint8Array.from(back), input);
    }),
  );
});

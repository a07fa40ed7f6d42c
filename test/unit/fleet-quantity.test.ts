// Goal: prove that selector quantities read Kubernetes' units exactly (binary Ki..Ei, decimal
// k/K..E, plain bytes), refuse what is not a whole number of bytes below 2^53 with a reason, and
// that the canonical text written for any byte count reads back to the same count.
// Method: a table of texts and their byte counts or refusals, and fast-check over byte counts.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  describeBytes,
  formatBytes,
  parseBytes,
  parseWhole,
  unitFamilyOf,
  unitsHint,
} from '../../src/fleet/quantity.js';

describe('quantities', () => {
  it('reads binary, decimal and plain quantities exactly', () => {
    const table: readonly [string, number][] = [
      ['0', 0],
      ['512', 512],
      ['1Ki', 1024],
      ['64Gi', 64 * 2 ** 30],
      ['1.5Ti', 1.5 * 2 ** 40],
      ['7Pi', 7 * 2 ** 50],
      ['1k', 1000],
      ['1K', 1000],
      ['1T', 1e12],
      ['1.92T', 1.92e12],
      ['960G', 960e9],
      ['2.5M', 2_500_000],
      ['0064Gi', 64 * 2 ** 30],
      ['1.000Gi', 2 ** 30],
      [String(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER],
    ];
    for (const [text, bytes] of table) assert.equal(parseBytes(text), bytes, text);
  });

  it('refuses unknown units, fractions of a byte and sizes past 2^53 - 1, saying why', () => {
    const refused: readonly [string, RegExp][] = [
      ['64Gx', /^unknown unit "Gx"$/],
      ['64gi', /^unknown unit "gi"$/],
      ['1m', /^unknown unit "m"$/],
      ['1e3', /^"1e3" is not a quantity$/],
      ['0.1Ki', /^0\.1Ki is not a whole number of bytes$/],
      ['1.5', /^1\.5 is not a whole number of bytes$/],
      ['8Pi', /^8Pi is more than a selector compares/],
      ['1Ei', /is more than a selector compares/],
      ['9007199254740992', /is more than a selector compares/],
      ['-1Gi', /^"-1Gi" is not a quantity$/],
      ['Gi', /^"Gi" is not a quantity$/],
      ['1.Gi', /is not a quantity/],
      ['', /is not a quantity/],
    ];
    for (const [text, problem] of refused) {
      const result = parseBytes(text);
      assert.ok(typeof result === 'object', `${text} was accepted as ${JSON.stringify(result)}`);
      assert.match(result.problem, problem, text);
    }
    const unit = parseBytes('64Gx');
    assert.equal(typeof unit === 'object' ? unit.hint : undefined, unitsHint);
  });

  it('reads plain whole numbers for counts and refuses units there', () => {
    assert.equal(parseWhole('16', 'cores'), 16);
    const withUnit = parseWhole('16k', 'cpu.cores');
    assert.ok(typeof withUnit === 'object');
    assert.equal(withUnit.problem, '"16k" is not a whole number');
    assert.equal(withUnit.hint, 'cpu.cores takes a plain number, with no unit');
    assert.ok(typeof parseWhole('99999999999999999', 'x') === 'object');
  });

  it('writes the shortest exact text, which reads back to the same bytes', () => {
    assert.equal(formatBytes(64 * 2 ** 30), '64Gi');
    assert.equal(formatBytes(1e12), '1T');
    assert.equal(formatBytes(1.5 * 2 ** 40), '1536Gi');
    assert.equal(formatBytes(1536), '1536');
    assert.equal(formatBytes(1024000), '1024k');
    assert.equal(formatBytes(0), '0');
    fc.assert(
      fc.property(
        fc.oneof(
          fc.maxSafeNat(),
          fc
            .tuple(
              fc.integer({ min: 1, max: 9999 }),
              fc.constantFrom(2 ** 10, 2 ** 20, 2 ** 30, 2 ** 40, 1e3, 1e6, 1e9, 1e12),
            )
            .map(([n, u]) => n * u)
            .filter((n) => n <= Number.MAX_SAFE_INTEGER),
        ),
        (bytes) => {
          const text = formatBytes(bytes);
          assert.equal(parseBytes(text), bytes, text);
          assert.ok(text.length <= String(bytes).length);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('describes sizes for people: exact when two decimals say it, else approximate with the bytes', () => {
    assert.equal(describeBytes(32 * 2 ** 30, 'binary'), '32Gi');
    assert.equal(describeBytes(1.5 * 2 ** 30, 'binary'), '1.5Gi');
    assert.equal(describeBytes(960e9, 'decimal'), '960G');
    assert.equal(describeBytes(1.92e12, 'decimal'), '1.92T');
    // Just under or over a round size never reads as that size.
    assert.equal(describeBytes(64 * 2 ** 30 - 2 ** 20, 'binary'), '63.9Gi (68718428160 bytes)');
    assert.equal(describeBytes(64 * 2 ** 30 + 2 ** 20, 'binary'), '64.0Gi (68720525312 bytes)');
    assert.equal(describeBytes(960197124096, 'decimal'), '960.1G (960197124096 bytes)');
    assert.equal(describeBytes(500, 'decimal'), '500 bytes');
    assert.equal(unitFamilyOf(64 * 2 ** 30), 'binary');
    assert.equal(unitFamilyOf(1e12), 'decimal');
  });
});

// Goal: prove how selectors are read and written (docs/decisions/0027): Kubernetes' label
// syntax, inventory facts with units, canonical text that round-trips, errors that point at the
// term and column with the fix, and the bounds on size, terms and values.
// Method: tables for the exact texts operators see, and fast-check over generated selectors and
// over arbitrary text (never a throw; an error's column lies inside the text).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { formatSelector, parseSelector, SelectorError, type Selector } from '../../src/fleet/selector.js';
import { factNames } from '../../src/model/labels.js';
import { selectorBytesMax, selectorTermsMax, selectorValuesMax } from '../../src/model/limits.js';
import { selectorArbitrary } from '../support/selector-arbitrary.js';

function parsed(text: string): Selector {
  const result = parseSelector(text);
  if (result instanceof SelectorError) assert.fail(`${text}: ${result.message}`);
  return result;
}

function refused(text: string): SelectorError {
  const result = parseSelector(text);
  assert.ok(result instanceof SelectorError, `${text} was accepted as ${JSON.stringify(result)}`);
  return result;
}

describe('parseSelector and formatSelector', () => {
  it('reads Kubernetes label syntax, facts with units and quoted values into canonical text', () => {
    const table: readonly [string, string][] = [
      ['rack=a', 'rack=a'],
      ['rack==a', 'rack=a'],
      [' rack != a ', 'rack!=a'],
      ['rack in (a, b)', 'rack in (a,b)'],
      ['rack notin(a)', 'rack notin (a)'],
      ['gpu', 'gpu'],
      ['! gpu', '!gpu'],
      ['example.com/role=db', 'example.com/role=db'],
      ['note=""', 'note=""'],
      ['slot>=4', 'slot>=4'],
      ['memory>=64Gi', 'memory>=64Gi'],
      ['memory>=68719476736', 'memory>=64Gi'],
      ['memory>=65536Mi', 'memory>=64Gi'],
      ['disks.size>=1000G', 'disks.size>=1T'],
      ['disks.size>=1.5Ti', 'disks.size>=1536Gi'],
      ['cpu.cores>=16,disks.count>=2', 'cpu.cores>=16,disks.count>=2'],
      ['firmware=uefi, arch=x86_64', 'firmware=uefi,arch=x86_64'],
      ['system.vendor="Dell Inc."', 'system.vendor="Dell Inc."'],
      ['system.product="a \\"b\\" \\\\ c"', 'system.product="a \\"b\\" \\\\ c"'],
      ['system.vendor in (QEMU, "Dell Inc.")', 'system.vendor in (QEMU,"Dell Inc.")'],
      ['disks.rotational=false', 'disks.rotational=false'],
      ['nics.speed>=10000', 'nics.speed>=10000'],
      ['', ''],
      ['   ', ''],
    ];
    for (const [text, canonical] of table) {
      const selector = parsed(text);
      assert.equal(formatSelector(selector), canonical, text);
      assert.deepEqual(parsed(canonical), selector, canonical);
    }
    assert.deepEqual(parsed('memory>=64Gi,!gpu').terms, [
      { kind: 'fact', key: 'memory', op: '>=', values: [64 * 2 ** 30] },
      { kind: 'label', key: 'gpu', op: 'absent', values: [] },
    ]);
  });

  it('points at the term, its column and the fix', () => {
    const table: readonly [string, string][] = [
      [
        'memory>=64Gx',
        'memory>=64Gx: unknown unit "Gx" at column 9; units are Ki Mi Gi Ti Pi Ei (binary), k M G T P E (decimal), or none for bytes',
      ],
      [
        'rack=a,memory>=64Gx',
        'memory>=64Gx: unknown unit "Gx" at column 16; units are Ki Mi Gi Ti Pi Ei (binary), k M G T P E (decimal), or none for bytes',
      ],
      [
        'cpu.core>=16',
        `cpu.core>=16: unknown fact "cpu.core" at column 1; did you mean cpu.cores? facts are ${factNames.join(', ')}`,
      ],
      ['firmware=efi', 'firmware=efi: unknown value "efi" at column 10; firmware is bios or uefi'],
      [
        'cpu.cores>=16k',
        'cpu.cores>=16k: "16k" is not a whole number at column 12; cpu.cores counts physical cores, so it takes a plain number, with no unit',
      ],
      [
        'system.vendor>=D',
        'system.vendor>=D: system.vendor is text, not a number at column 14; compare it with = != in notin',
      ],
      [
        'memory',
        'memory: memory is an inventory fact, and only a label can be tested for presence at column 1; compare it, e.g. memory>=64Gi',
      ],
      ['rack=a,,gpu', 'selector: an empty term at column 8; terms are joined by single commas'],
      ['rack=a,', 'selector: an empty term at column 8; terms are joined by single commas'],
      [
        'rack=a b',
        'rack=a b: expected "," or the end after the term, found "b" at column 8; quote a value with spaces',
      ],
      [
        'rack~a',
        'rack~a: expected an operator after "rack", found "~" at column 5; operators are = == != > >= < <= in notin',
      ],
      ['rack in (a,b', 'rack in (a,b: expected "," or ")" in the in list, found the end at column 13'],
      ['rack in a', 'rack in a: expected "(" after in, found "a" at column 9; write e.g. rack in (a,b)'],
      [
        '!rack=a',
        '!rack=a: "!rack" tests that a label is absent and takes no operator at column 6; write rack!=VALUE to compare',
      ],
      ['rack="a', 'rack="a: the quoted value has no closing " at column 6'],
      [
        'rack="a\\nb"',
        'rack="a\\nb": unknown escape in a quoted value at column 8; only \\" and \\\\ are escapes',
      ],
      [
        'rack="Dell Inc."',
        'rack="Dell Inc.": label value "Dell Inc." is not letters, digits, "-", "_" and "." (starting and ending with a letter or digit) at column 6',
      ],
      ['cpu.cache=1', `cpu.cache=1: unknown fact "cpu.cache" at column 1; facts are ${factNames.join(', ')}`],
      [
        'Example.com/rack=a',
        'Example.com/rack=a: label key "Example.com/rack" has the prefix "Example.com", which is not a DNS subdomain (lower-case, e.g. example.com) at column 1',
      ],
      [
        'slot>four',
        'slot>four: "four" is not a whole number at column 6; a label compared with > takes a plain number, with no unit',
      ],
      ['memory>=0.5', 'memory>=0.5: 0.5 is not a whole number of bytes at column 9'],
      [', rack=a', 'selector: an empty term at column 1; terms are joined by single commas'],
      ['=a', '=a: expected a label key or a fact name, found "=" at column 1'],
    ];
    for (const [text, message] of table) {
      const error = refused(text);
      assert.equal(error.message, message, text);
      assert.ok(error.column >= 1 && error.column <= text.length + 1);
    }
    const error = refused('rack=a, memory>=64Gx');
    assert.equal(error.term, 'memory>=64Gx');
    assert.equal(error.column, 17);
    assert.equal(error.problem, 'unknown unit "Gx"');
  });

  it('refuses a selector over its bounds and accepts one at them', () => {
    const terms = (n: number): string => Array.from({ length: n }, (_, i) => `k${i}=v`).join(',');
    assert.equal(parsed(terms(selectorTermsMax)).terms.length, selectorTermsMax);
    const tooMany = refused(terms(selectorTermsMax + 1));
    assert.equal(
      tooMany.message,
      `k64=v: more than 64 terms at column ${terms(selectorTermsMax).length + 2}`,
    );
    const values = (n: number): string =>
      `rack in (${Array.from({ length: n }, (_, i) => `v${i}`).join(',')})`;
    assert.equal(parsed(values(selectorValuesMax)).terms[0]?.values.length, selectorValuesMax);
    assert.match(
      refused(values(selectorValuesMax + 1)).message,
      /more than 256 values in one in list at column/,
    );
    const long = `rack=${'a'.repeat(40)},${'x=1,'.repeat(1100)}y=1`;
    assert.ok(long.length > selectorBytesMax);
    assert.equal(refused(long).message, `selector: is ${long.length} bytes; at most 4096 at column 1`);
    assert.match(
      refused(`system.vendor="${'é'.repeat(2041)}"`).message,
      /^selector: is 4098 bytes; at most 4096/,
    );
  });

  it('reads its own canonical text back to an equal selector, for any selector', () => {
    fc.assert(
      fc.property(selectorArbitrary, (selector) => {
        const text = formatSelector(selector);
        assert.deepEqual(parsed(text), selector, text);
      }),
      { numRuns: 1000 },
    );
  });

  it('never throws on arbitrary text: a selector that round-trips, or an error inside the text', () => {
    const alphabet = fc.constantFrom(...'rack=!,() inotGi"\\<>.-_a0 19memorydisks.size'.split(''));
    const text = fc.oneof(fc.string({ unit: alphabet, maxLength: 40 }), fc.string({ maxLength: 40 }));
    fc.assert(
      fc.property(text, (t) => {
        const result = parseSelector(t);
        if (result instanceof SelectorError) {
          assert.ok(result.column >= 1 && result.column <= t.length + 1, `${t}: column ${result.column}`);
          assert.ok(result.message.includes(`at column ${result.column}`));
          return;
        }
        assert.deepEqual(parsed(formatSelector(result)), result, t);
      }),
      { numRuns: 3000 },
    );
  });
});

// Goal: prove the selector language as docs/decisions/0027 states it: Kubernetes' label syntax
// and semantics, inventory facts with units, canonical text that round-trips, errors that point
// at the term, bounds, list-valued facts (some item satisfies; != and notin negate = and in),
// machines without inventory failing every inventory term, and explain naming the first failure.
// Method: tables for the exact texts operators see, and fast-check properties over generated
// selectors, machines and arbitrary text, with small independent oracles for the facts.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  explain,
  formatSelector,
  labelKeyAllowed,
  machineFacts,
  matches,
  parseSelector,
  SelectorError,
  type MachineFacts,
  type Selector,
  type Term,
} from '../../src/fleet/selector.js';
import { factSpecs } from '../../src/fleet/facts.js';
import { factNames, type FactName } from '../../src/model/labels.js';
import { selectorBytesMax, selectorTermsMax, selectorValuesMax } from '../../src/model/limits.js';
import { exampleInventory, inventoryArbitrary } from '../support/inventory-arbitrary.js';

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

const server = machineFacts({
  arch: 'x86_64',
  uefi: true,
  labels: { rack: 'a', gpu: 'true', slot: '7', role: 'db-1', note: '' },
  inventory: exampleInventory,
});
const uninspected = machineFacts({ arch: 'arm64', uefi: false, labels: { rack: 'b' } });

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

describe('matches and explain', () => {
  it('follows Kubernetes for labels: != and notin hold when the label is missing', () => {
    const table: readonly [string, boolean, boolean][] = [
      ['rack=a', true, false],
      ['rack!=a', false, true],
      ['rack!=c', true, true],
      ['rack in (a,b)', true, true],
      ['rack notin (b)', true, false],
      ['gpu', true, false],
      ['!gpu', false, true],
      ['zone!=x', true, true],
      ['zone notin (x)', true, true],
      ['zone=x', false, false],
      ['slot>6,slot<=7', true, false],
      ['role>1', false, false],
      ['note=""', true, false],
      ['arch=x86_64,firmware=uefi', true, false],
      ['arch=arm64,firmware=bios', false, true],
    ];
    for (const [text, onServer, onUninspected] of table) {
      assert.equal(matches(parsed(text), server), onServer, `${text} on the server`);
      assert.equal(matches(parsed(text), uninspected), onUninspected, `${text} on the uninspected machine`);
    }
  });

  it('says why a machine is left out, naming the first term it fails', () => {
    const table: readonly [string, MachineFacts, string][] = [
      ['memory>=256Gi', server, 'memory>=256Gi: has 128Gi'],
      ['rack=a,memory>=1T', server, 'memory>=1T: has 137.4G (137438953472 bytes)'],
      ['cpu.cores>=64', server, 'cpu.cores>=64: has 32'],
      ['disks.size>=2T', server, 'disks.size>=2T: no disk matches; disks: 960G, 1.92T'],
      ['disks.size<500G', server, 'disks.size<500G: no disk matches; disks: 960G, 1.92T'],
      ['disks.size!=960G', server, 'disks.size!=960G: a disk has 960G'],
      ['disks.rotational=true', server, 'disks.rotational=true: no disk matches; disks: false'],
      ['nics.driver notin (ixgbe)', server, 'nics.driver notin (ixgbe): a NIC has ixgbe'],
      ['nics.speed>=25000', server, 'nics.speed>=25000: no NIC matches; NICs: 10000'],
      ['system.vendor=QEMU', server, 'system.vendor=QEMU: has Supermicro'],
      ['rack=b', server, 'rack=b: has rack=a'],
      ['!gpu', server, '!gpu: has gpu=true'],
      ['zone', server, 'zone: has no label zone'],
      ['role>3', server, 'role>3: has role=db-1, not a whole number'],
      ['firmware=bios', server, 'firmware=bios: has uefi'],
      [
        'rack=b,memory>=1Gi',
        uninspected,
        'memory>=1Gi: no inventory yet: the machine has not been inspected',
      ],
      ['disks.model!=X', uninspected, 'disks.model!=X: no inventory yet: the machine has not been inspected'],
    ];
    for (const [text, facts, reason] of table) {
      assert.equal(explain(parsed(text), facts)?.text, reason, text);
    }
    const small = machineFacts({
      arch: 'x86_64',
      uefi: true,
      inventory: { ...exampleInventory, memory: { totalBytes: 32 * 2 ** 30, usableBytes: 31 * 2 ** 30 } },
    });
    assert.equal(explain(parsed('memory>=64Gi'), small)?.text, 'memory>=64Gi: has 32Gi');
    const failure = explain(parsed('rack=a,gpu,cpu.threads<8'), server);
    assert.deepEqual(failure, {
      index: 2,
      term: 'cpu.threads<8',
      reason: 'has 64',
      text: 'cpu.threads<8: has 64',
    });
    assert.equal(explain(parsed('rack=a,memory>=128Gi'), server), undefined);
  });

  it('says when a machine reports no item for a list-valued fact', () => {
    const bare = machineFacts({
      arch: 'x86_64',
      uefi: false,
      inventory: { ...exampleInventory, disks: [], nics: [{ ...exampleInventory.nics[1]! }], system: {} },
    });
    assert.equal(explain(parsed('disks.size>=1'), bare)?.reason, 'has no disks');
    assert.equal(
      explain(parsed('nics.speed>=1'), bare)?.reason,
      'no NIC reports a speed (a NIC whose link is down has none)',
    );
    assert.equal(explain(parsed('system.vendor=QEMU'), bare)?.reason, 'system.vendor is not reported');
    assert.equal(matches(parsed('system.vendor!=QEMU,disks.count=0,disks.total=0'), bare), true);
  });

  it('fails every inventory term on a machine with no inventory, and names that', () => {
    fc.assert(
      fc.property(factTermArbitrary, (term) => {
        const selector = { terms: [term] };
        const inventoryFact = term.key !== 'arch' && term.key !== 'firmware';
        if (!inventoryFact) return;
        assert.equal(matches(selector, uninspected), false);
        assert.match(explain(selector, uninspected)?.reason ?? '', /^no inventory yet/);
      }),
      { numRuns: 300 },
    );
  });

  it('explains exactly the machines it does not match, at the first failing term', () => {
    fc.assert(
      fc.property(selectorArbitrary, machineArbitrary, (selector, facts) => {
        const failure = explain(selector, facts);
        assert.equal(failure === undefined, matches(selector, facts));
        if (failure === undefined) return;
        assert.equal(matches({ terms: selector.terms.slice(0, failure.index) }, facts), true);
        assert.equal(matches({ terms: [selector.terms[failure.index]!] }, facts), false);
      }),
      { numRuns: 1000 },
    );
  });

  it('negates = with != and in with notin, for labels and inventory facts alike', () => {
    fc.assert(
      fc.property(selectorArbitrary, machineArbitrary, (selector, facts) => {
        for (const term of selector.terms) {
          const twin = negations[term.op];
          if (twin === undefined) continue;
          const positive = matches({ terms: [term] }, facts);
          const negative = matches({ terms: [{ ...term, op: twin }] }, facts);
          const unknown =
            term.kind === 'fact' &&
            facts.inventory === undefined &&
            term.key !== 'arch' &&
            term.key !== 'firmware';
          if (unknown) assert.deepEqual([positive, negative], [false, false]);
          else assert.equal(negative, !positive, formatSelector({ terms: [term] }));
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('compares numbers and units as the inventory says: some disk, some NIC, the memory installed', () => {
    fc.assert(
      fc.property(
        inventoryArbitrary,
        fc.nat({ max: 5e12 }),
        fc.nat({ max: 100_000 }),
        (inventory, bytes, n) => {
          const facts = machineFacts({ arch: 'x86_64', uefi: true, inventory });
          const sel = (text: string): boolean => matches(parsed(text), facts);
          assert.equal(
            sel(`disks.size>=${bytes}`),
            inventory.disks.some((d) => d.sizeBytes >= bytes),
          );
          assert.equal(
            sel(`disks.size<${bytes}`),
            inventory.disks.some((d) => d.sizeBytes < bytes),
          );
          assert.equal(
            sel(`disks.total>${bytes}`),
            inventory.disks.reduce((s, d) => s + d.sizeBytes, 0) > bytes,
          );
          assert.equal(sel(`memory>=${bytes}`), inventory.memory.totalBytes >= bytes);
          assert.equal(
            sel(`nics.speed>=${n}`),
            inventory.nics.some((x) => x.speedMbps !== undefined && x.speedMbps >= n),
          );
          assert.equal(sel(`cpu.threads<=${n}`), inventory.cpu.threads <= n);
          assert.equal(sel(`disks.count=${n % 8}`), inventory.disks.length === n % 8);
          assert.equal(sel(`nics.count>=${n % 8}`), inventory.nics.length >= n % 8);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('labels and facts', () => {
  it('says whether a label key is allowed, with a reason', () => {
    assert.deepEqual(labelKeyAllowed('rack'), { allowed: true });
    assert.deepEqual(labelKeyAllowed('example.com/memory'), { allowed: true });
    const memory = labelKeyAllowed('memory');
    assert.equal(memory.allowed, false);
    assert.match(memory.allowed ? '' : memory.reason, /"memory" is an inventory fact/);
  });

  it('builds MachineFacts from a record with or without labels and inventory', () => {
    assert.deepEqual(machineFacts({ arch: 'arm64', uefi: false }), {
      labels: {},
      arch: 'arm64',
      firmware: 'bios',
    });
    const hardware = {
      id: 'm1',
      arch: 'x86_64',
      uefi: true,
      labels: { rack: 'a' },
      inventory: exampleInventory,
      version: 3,
    };
    assert.deepEqual(machineFacts(hardware), {
      labels: { rack: 'a' },
      inventory: exampleInventory,
      arch: 'x86_64',
      firmware: 'uefi',
    });
  });
});

// ---- generators ----

const negations: Partial<Record<Term['op'], Term['op']>> = { '=': '!=', '!=': '=', in: 'notin', notin: 'in' };
const labelKeys = ['rack', 'zone', 'gpu', 'slot', 'example.com/role'];
const labelValues = ['a', 'b', 'c', '', 'rack-2', '7', '12'];

const labelTermArbitrary: fc.Arbitrary<Term> = fc.oneof(
  fc.record({
    kind: fc.constant('label' as const),
    key: fc.constantFrom(...labelKeys),
    op: fc.constantFrom('exists' as const, 'absent' as const),
    values: fc.constant([]),
  }),
  fc.record({
    kind: fc.constant('label' as const),
    key: fc.constantFrom(...labelKeys),
    op: fc.constantFrom('=' as const, '!=' as const),
    values: fc.tuple(fc.constantFrom(...labelValues)),
  }),
  fc.record({
    kind: fc.constant('label' as const),
    key: fc.constantFrom(...labelKeys),
    op: fc.constantFrom('in' as const, 'notin' as const),
    values: fc.array(fc.constantFrom(...labelValues), { minLength: 1, maxLength: 4 }),
  }),
  fc.record({
    kind: fc.constant('label' as const),
    key: fc.constantFrom(...labelKeys),
    op: fc.constantFrom('>' as const, '>=' as const, '<' as const, '<=' as const),
    values: fc.tuple(fc.nat({ max: 20 })),
  }),
);

function factValue(name: FactName): fc.Arbitrary<number | string> {
  const spec = factSpecs[name];
  switch (spec.kind) {
    case 'bytes':
      return fc.oneof(fc.constantFrom(0, 2 ** 30, 128 * 2 ** 30, 960e9, 1.92e12, 1e12), fc.maxSafeNat());
    case 'count':
      return fc.nat({ max: 100_000 });
    case 'choice':
      return fc.constantFrom(...(spec.choices ?? []));
    case 'text':
      return fc.oneof(
        fc.constantFrom('Supermicro', 'QEMU', 'ixgbe', 'SAMSUNG MZ7LH960', 'a "quoted" \\ value'),
        fc
          .string({ minLength: 1, maxLength: 12 })
          .filter((s) => !Array.from(s).some((c) => c < ' ' || c === '\x7f')),
      );
  }
}

const factTermArbitrary: fc.Arbitrary<Term> = fc.constantFrom(...factNames).chain((key) => {
  const numeric = factSpecs[key].kind === 'bytes' || factSpecs[key].kind === 'count';
  const ops = numeric ? (['=', '!=', '>', '>=', '<', '<='] as const) : (['=', '!='] as const);
  return fc.oneof(
    fc.record({
      kind: fc.constant('fact' as const),
      key: fc.constant(key),
      op: fc.constantFrom(...ops),
      values: fc.tuple(factValue(key)),
    }),
    fc.record({
      kind: fc.constant('fact' as const),
      key: fc.constant(key),
      op: fc.constantFrom('in' as const, 'notin' as const),
      values: fc.array(factValue(key), { minLength: 1, maxLength: 4 }),
    }),
  );
});

const selectorArbitrary: fc.Arbitrary<Selector> = fc
  .array(fc.oneof(labelTermArbitrary, factTermArbitrary), { maxLength: 6 })
  // Plain objects, as parseSelector makes them (fast-check's records have no prototype).
  .map((terms) => ({ terms: terms.map((t) => ({ ...t, values: [...t.values] })) }));

const machineArbitrary: fc.Arbitrary<MachineFacts> = fc
  .record(
    {
      arch: fc.constantFrom('x86_64', 'arm64'),
      uefi: fc.boolean(),
      labels: fc.dictionary(fc.constantFrom(...labelKeys), fc.constantFrom(...labelValues)),
      inventory: inventoryArbitrary,
    },
    { requiredKeys: ['arch', 'uefi', 'labels'] },
  )
  .map((source) => machineFacts(JSON.parse(JSON.stringify(source)) as Parameters<typeof machineFacts>[0]));

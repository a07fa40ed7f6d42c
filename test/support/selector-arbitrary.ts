// Selectors and machines for property tests (fast-check), shared by the selector tests.
import fc from 'fast-check';
import { factSpecs } from '../../src/fleet/facts.js';
import { machineFacts, type MachineFacts, type Selector, type Term } from '../../src/fleet/selector.js';
import { factNames, type FactName } from '../../src/model/labels.js';
import { inventoryArbitrary } from './inventory-arbitrary.js';

export const negations: Partial<Record<Term['op'], Term['op']>> = {
  '=': '!=',
  '!=': '=',
  in: 'notin',
  notin: 'in',
};
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

function factTermFor(key: FactName): fc.Arbitrary<Term> {
  const numeric = factSpecs[key].kind === 'bytes' || factSpecs[key].kind === 'count';
  const ops = numeric ? (['=', '!=', '>', '>=', '<', '<='] as const) : (['=', '!='] as const);
  const value = factValue(key);
  return fc.oneof(
    fc.record({
      kind: fc.constant('fact' as const),
      key: fc.constant(key),
      op: fc.constantFrom(...ops),
      values: fc.tuple(value),
    }),
    fc.record({
      kind: fc.constant('fact' as const),
      key: fc.constant(key),
      op: fc.constantFrom('in' as const, 'notin' as const),
      values: fc.array(value, { minLength: 1, maxLength: 4 }),
    }),
  );
}

// Built once per fact: making arbitraries inside a chain, per sample, is what costs.
export const factTermArbitrary: fc.Arbitrary<Term> = fc.oneof(...factNames.map(factTermFor));

export const selectorArbitrary: fc.Arbitrary<Selector> = fc
  .array(fc.oneof(labelTermArbitrary, factTermArbitrary), { maxLength: 6 })
  // Plain objects, as parseSelector makes them (fast-check's records have no prototype).
  .map((terms) => ({ terms: terms.map((t) => ({ ...t, values: [...t.values] })) }));

export const machineArbitrary: fc.Arbitrary<MachineFacts> = fc
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

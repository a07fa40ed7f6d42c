// Goal: prove the label rules operators meet in `hardware label` and selectors: Kubernetes' key
// and value syntax, and that no label key can be taken for an inventory fact (a fact name, or
// anything under a fact root), while a prefixed key is always a label.
// Method: tables of keys and values with the reason each refusal must give, and a fast-check
// property over keys built from Kubernetes' grammar.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  factNames,
  factRoots,
  isFactName,
  isFactNamespace,
  labelKeyProblem,
  labelValueProblem,
} from '../../src/model/labels.js';

describe('label keys', () => {
  it('accepts Kubernetes keys outside the facts namespace', () => {
    for (const key of [
      'rack',
      'gpu',
      'Rack_2',
      'zone.a',
      'example.com/role',
      'a',
      'memory-class',
      'cpus',
      'k8s.io/cpu.cores',
      'x'.repeat(63),
    ]) {
      assert.equal(labelKeyProblem(key), undefined, key);
    }
  });

  const refused: readonly [string, RegExp][] = [
    ['', /^label key "" has an empty name$/],
    ['-rack', /has the name "-rack"; a name is letters, digits/],
    ['rack.', /has the name "rack\."/],
    ['rack a', /has the name "rack a"/],
    ['x'.repeat(64), /has a name of 64 characters; at most 63/],
    ['/rack', /has an empty prefix before "\/"/],
    ['Example.com/rack', /prefix "Example\.com", which is not a DNS subdomain/],
    ['a/b/c', /has more than one "\/"/],
    ['example.com/', /has an empty name/],
    [`${'a'.repeat(254)}/x`, /has a prefix of 254 characters; at most 253/],
    [
      'memory',
      /label key "memory" is an inventory fact \(arch, firmware, memory, cpu, disks, nics, system, bmc\); use another key or a prefixed one such as example\.com\/memory/,
    ],
    ['cpu.cores', /"cpu\.cores" is an inventory fact/],
    ['cpu.cache', /"cpu\.cache" is in the inventory facts' namespace/],
    ['bmc', /"bmc" is in the inventory facts' namespace/],
    ['system', /"system" is in the inventory facts' namespace/],
  ];
  for (const [key, reason] of refused) {
    it(`refuses ${JSON.stringify(key.length > 20 ? `${key.slice(0, 20)}…` : key)}`, () => {
      assert.match(labelKeyProblem(key) ?? 'accepted', reason);
    });
  }

  it('reserves every fact name and every name under a fact root, never a prefixed key', () => {
    for (const name of factNames) {
      assert.ok(isFactName(name));
      assert.ok(isFactNamespace(name));
      assert.match(labelKeyProblem(name) ?? '', /is an inventory fact/);
      assert.equal(labelKeyProblem(`example.com/${name}`), undefined);
      assert.ok(
        factRoots.some((root) => name === root || name.startsWith(`${root}.`)),
        name,
      );
    }
    const segment = fc.stringMatching(/^[a-z0-9]{1,8}$/);
    fc.assert(
      fc.property(fc.constantFrom(...factRoots), fc.array(segment, { maxLength: 3 }), (root, rest) => {
        const key = [root, ...rest].join('.');
        assert.ok(isFactNamespace(key));
        assert.notEqual(labelKeyProblem(key), undefined);
        assert.equal(isFactNamespace(`example.com/${key}`), false);
      }),
    );
  });

  it('accepts exactly the keys of the grammar that are not in the facts namespace', () => {
    const name = fc.stringMatching(/^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/);
    const prefix = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?(\.[a-z0-9]{1,10}){0,3}$/);
    fc.assert(
      fc.property(fc.option(prefix), name, (p, n) => {
        const key = p === null ? n : `${p}/${n}`;
        assert.equal(labelKeyProblem(key) === undefined, !isFactNamespace(key), key);
      }),
      { numRuns: 500 },
    );
  });
});

describe('label values', () => {
  it('accepts the empty value and names of up to 63 characters', () => {
    for (const value of ['', 'a', 'rack-2', 'v1.2_3', 'z'.repeat(63)])
      assert.equal(labelValueProblem(value), undefined);
  });

  it('refuses others, saying why', () => {
    assert.match(labelValueProblem('z'.repeat(64)) ?? '', /has 64 characters; at most 63/);
    assert.match(labelValueProblem('Dell Inc.') ?? '', /label value "Dell Inc\." is not letters, digits/);
    assert.match(labelValueProblem('a/b') ?? '', /is not letters/);
    assert.match(labelValueProblem('-a') ?? '', /is not letters/);
  });
});

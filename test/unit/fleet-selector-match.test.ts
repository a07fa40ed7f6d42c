// Goal: prove what selectors select (docs/decisions/0027): Kubernetes' semantics for labels,
// list-valued facts held by some disk or NIC with != and notin as the negations of = and in,
// machines without inventory failing every inventory term, and explain naming the first term a
// machine fails, in the term's units; plus the label-key rule and the MachineFacts builder.
// Method: tables for the exact reasons operators read, and fast-check properties over generated
// selectors and machines, with small independent oracles for the numeric facts.
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
} from '../../src/fleet/selector.js';
import { exampleInventory, inventoryArbitrary } from '../support/inventory-arbitrary.js';
import {
  factTermArbitrary,
  machineArbitrary,
  negations,
  selectorArbitrary,
} from '../support/selector-arbitrary.js';

function parsed(text: string): Selector {
  const result = parseSelector(text);
  if (result instanceof SelectorError) assert.fail(`${text}: ${result.message}`);
  return result;
}

const server = machineFacts({
  arch: 'x86_64',
  uefi: true,
  labels: { rack: 'a', gpu: 'true', slot: '7', role: 'db-1', note: '' },
  inventory: exampleInventory,
});
const uninspected = machineFacts({ arch: 'arm64', uefi: false, labels: { rack: 'b' } });

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

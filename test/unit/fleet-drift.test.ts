// Goal: prove that inventory drift names, in operator words, every change of the hardware that
// docs/decisions/0027 says matters (memory, CPU, firmware, system identity, disks by serial, NICs
// by MAC) and nothing that legitimately changes (link, speed, driver, names, paths, usable
// memory, the BMC's address).
// Method: a table of single changes with the exact lines expected, and fast-check properties:
// no drift against itself or against a copy with only the ignored fields changed, and one
// meaningful change always named.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { inventoryDrift } from '../../src/fleet/drift.js';
import type { Inventory } from '../../src/model/inventory.js';
import { exampleInventory, inventoryArbitrary } from '../support/inventory-arbitrary.js';

const base = exampleInventory;
const messages = (after: Inventory, before: Inventory = base): string[] =>
  inventoryDrift(before, after).map((d) => `${d.part}: ${d.message}`);

describe('inventoryDrift', () => {
  it('names each change that matters', () => {
    const disk0 = base.disks[0]!;
    const disk1 = base.disks[1]!;
    const table: readonly [string, Inventory, string[]][] = [
      [
        'memory halved',
        { ...base, memory: { totalBytes: 64 * 2 ** 30, usableBytes: 62 * 2 ** 30 } },
        ['memory: memory 128Gi → 64Gi'],
      ],
      [
        'cores lost',
        { ...base, cpu: { ...base.cpu, cores: 16, threads: 32 } },
        ['cpu: CPU cores 32 → 16', 'cpu: CPU threads 64 → 32'],
      ],
      ['a socket gone', { ...base, cpu: { ...base.cpu, sockets: 1 } }, ['cpu: CPU sockets 2 → 1']],
      [
        'a new CPU',
        { ...base, cpu: { ...base.cpu, model: 'AMD EPYC 7313 16-Core Processor' } },
        ['cpu: CPU model "AMD EPYC 7302 16-Core Processor" → "AMD EPYC 7313 16-Core Processor"'],
      ],
      [
        'a disk missing',
        { ...base, disks: [disk0] },
        ['disk: disk serial S45NNE0M2 missing (was /dev/sdb, 1.92T)'],
      ],
      [
        'a new disk',
        {
          ...base,
          disks: [
            ...base.disks,
            { path: '/dev/sdc', serial: 'S45NNE0M3', sizeBytes: 1.92e12, rotational: false },
          ],
        },
        ['disk: new disk /dev/sdc 1.92T (serial S45NNE0M3)'],
      ],
      [
        'a disk replaced',
        { ...base, disks: [disk0, { ...disk1, serial: 'S45NNE0M9', wwn: 'naa.5002538e40a1b2c9' }] },
        [
          'disk: disk serial S45NNE0M2 missing (was /dev/sdb, 1.92T)',
          'disk: new disk /dev/sdb 1.92T (serial S45NNE0M9)',
        ],
      ],
      [
        'a disk resized',
        { ...base, disks: [disk0, { ...disk1, sizeBytes: 960e9 }] },
        ['disk: disk serial S45NNE0M2 (/dev/sdb) size 1.92T → 960G'],
      ],
      [
        'a disk turned rotational',
        { ...base, disks: [{ ...disk0, rotational: true }, disk1] },
        ['disk: disk serial S45NNE0M1 (/dev/sda) solid-state → rotational'],
      ],
      [
        'a NIC replaced',
        { ...base, nics: [base.nics[0]!, { ...base.nics[1]!, mac: '3c:ec:ef:00:00:09' }] },
        [
          'nic: NIC 3c:ec:ef:00:00:02 missing (was eno2, ixgbe)',
          'nic: new NIC 3c:ec:ef:00:00:09 (eno2, ixgbe)',
        ],
      ],
      ['firmware switched', { ...base, firmware: 'bios' }, ['firmware: firmware UEFI → BIOS']],
      [
        'a new board',
        {
          ...base,
          system: {
            ...base.system,
            uuid: '4c4c4544-0042-3510-8051-b7c04f4d3799',
            serial: undefined as unknown as string,
          },
        },
        [
          'system: system serial S392884X1 → none',
          'system: system UUID 4c4c4544-0042-3510-8051-b7c04f4d3732 → 4c4c4544-0042-3510-8051-b7c04f4d3799',
        ],
      ],
    ];
    for (const [what, after, expected] of table) {
      assert.deepEqual(messages(JSON.parse(JSON.stringify(after)) as Inventory), expected, what);
    }
  });

  it('tells disks without serials apart by path', () => {
    const vm: Inventory = {
      ...base,
      disks: [{ path: '/dev/vda', sizeBytes: 8 * 2 ** 30, rotational: true }],
    };
    assert.deepEqual(messages(vm, vm), []);
    assert.deepEqual(
      messages({ ...vm, disks: [{ path: '/dev/vda', sizeBytes: 16 * 2 ** 30, rotational: true }] }, vm),
      ['disk: disk /dev/vda (/dev/vda) size 8Gi → 16Gi'],
    );
    assert.deepEqual(messages({ ...vm, disks: [] }, vm), ['disk: disk /dev/vda missing (8Gi)']);
    assert.deepEqual(
      messages({ ...vm, disks: [...vm.disks, { path: '/dev/vdb', sizeBytes: 1e12, rotational: true }] }, vm),
      ['disk: new disk /dev/vdb 1T (no serial)'],
    );
  });

  it('names nothing when only what legitimately changes changed', () => {
    const after: Inventory = {
      ...base,
      memory: { ...base.memory, usableBytes: base.memory.usableBytes - 2 ** 27 },
      disks: [
        { ...base.disks[1]!, path: '/dev/sda' },
        { ...base.disks[0]!, path: '/dev/sdb' },
      ],
      nics: [
        { name: 'enp1s0f1', mac: base.nics[1]!.mac, driver: 'ice', speedMbps: 25000, linkUp: true },
        { name: 'enp1s0f0', mac: base.nics[0]!.mac, linkUp: false },
      ],
      bmc: { address: '10.0.9.99' },
    };
    assert.deepEqual(inventoryDrift(base, after), []);
  });

  it('finds no drift against itself or against a copy with only ignored fields changed', () => {
    fc.assert(
      fc.property(inventoryArbitrary, fc.boolean(), fc.nat(), (inventory, reverse, salt) => {
        assert.deepEqual(inventoryDrift(inventory, inventory), []);
        const disks = inventory.disks.map((d, i) =>
          d.serial === undefined && d.wwn === undefined
            ? d
            : { ...d, path: `/dev/nvme${(i + salt) % 100}n1` },
        );
        const nics = inventory.nics.map((n, i) => ({
          ...n,
          name: `en${(i + salt) % 100}`,
          linkUp: !n.linkUp,
          speedMbps: 100 + (salt % 1000),
          driver: 'other',
        }));
        const copy: Inventory = {
          ...inventory,
          memory: { ...inventory.memory, usableBytes: Math.max(1, inventory.memory.usableBytes - salt) },
          disks: reverse ? [...disks].reverse() : disks,
          nics: reverse ? [...nics].reverse() : nics,
          bmc: { address: '192.0.2.1' },
        };
        assert.deepEqual(inventoryDrift(inventory, copy), []);
      }),
      { numRuns: 500 },
    );
  });

  it('names one change that matters, whichever it is', () => {
    const changes: readonly [string, (i: Inventory) => Inventory | undefined, RegExp][] = [
      [
        'memory',
        (i) => ({ ...i, memory: { ...i.memory, totalBytes: i.memory.totalBytes * 2 } }),
        /^memory: memory /,
      ],
      [
        'threads',
        (i) => ({ ...i, cpu: { ...i.cpu, threads: i.cpu.threads + 1 } }),
        /^cpu: CPU threads \d+ → \d+$/,
      ],
      [
        'firmware',
        (i) => ({ ...i, firmware: i.firmware === 'uefi' ? 'bios' : 'uefi' }),
        /^firmware: firmware (UEFI → BIOS|BIOS → UEFI)$/,
      ],
      [
        'last disk gone',
        (i) => (i.disks.length === 0 ? undefined : { ...i, disks: i.disks.slice(0, -1) }),
        /^disk: disk .* missing \(/,
      ],
      [
        'a disk added',
        (i) => ({
          ...i,
          disks: [...i.disks, { path: '/dev/extra', serial: 'EXTRA-1', sizeBytes: 1e12, rotational: true }],
        }),
        /^disk: new disk \/dev\/extra 1T \(serial EXTRA-1\)$/,
      ],
      [
        'a NIC added',
        (i) => ({ ...i, nics: [...i.nics, { name: 'extra0', mac: '0a:00:00:00:00:ff', linkUp: false }] }),
        /^nic: new NIC 0a:00:00:00:00:ff \(extra0\)$/,
      ],
      [
        'vendor',
        (i) => ({ ...i, system: { ...i.system, vendor: 'Other Vendor' } }),
        /^system: system vendor .* → "Other Vendor"$/,
      ],
    ];
    fc.assert(
      fc.property(inventoryArbitrary, fc.constantFrom(...changes), (inventory, [, change, expected]) => {
        const after = change(inventory);
        if (after === undefined) return;
        const found = messages(after, inventory);
        assert.equal(found.length, 1, found.join('\n'));
        assert.match(found[0]!, expected);
      }),
      { numRuns: 500 },
    );
  });
});

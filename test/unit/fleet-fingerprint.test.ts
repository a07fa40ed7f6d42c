// Goal: prove the fingerprint rule of docs/decisions/0027: a known machine is recognised by any
// evident identifier (system UUID or serial, disk serial or WWN, MAC) even after a part is
// replaced; placeholders are never evidence; a report claimed by two machines, or whose system
// identity contradicts the one machine it shares parts with, is refused with a reason naming them.
// Method: hand-made machines for each case, then fast-check over fleets of generated inventories
// (unique identifiers per machine) with random part replacements, and over index updates.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  FingerprintIndex,
  fingerprintOf,
  fingerprintOfMachine,
  isEvidentMac,
  isEvidentSerial,
  isEvidentUuid,
  matchFingerprint,
  type Fingerprint,
} from '../../src/fleet/fingerprint.js';
import type { Inventory } from '../../src/model/inventory.js';
import { exampleInventory, inventoryArbitrary } from '../support/inventory-arbitrary.js';

const other: Inventory = {
  ...exampleInventory,
  disks: [{ path: '/dev/sda', serial: 'WD-OTHER1', sizeBytes: 4e12, rotational: true }],
  nics: [{ name: 'eth0', mac: '52:54:00:00:00:99', linkUp: true }],
  system: { vendor: 'QEMU', uuid: '11111111-2222-3333-4444-555555555555', serial: 'OTHER-1' },
};

const known = (entries: Record<string, Fingerprint>): { machineId: string; fingerprint: Fingerprint }[] =>
  Object.entries(entries).map(([machineId, fingerprint]) => ({ machineId, fingerprint }));

describe('fingerprints', () => {
  it('keeps only evidence: placeholders, multicast and zero MACs are not', () => {
    for (const s of [
      'To be filled by O.E.M.',
      'Default string',
      'System Serial Number',
      '0000000',
      'FFFFFFFF',
      'QM00001',
      'N/A',
      '',
      '  ',
      'ab',
      'Not Specified',
    ]) {
      assert.equal(isEvidentSerial(s), false, s);
    }
    for (const s of ['S45NNE0M1', 'WD-WCC4N1234567', 'drive-1', 'QM0001X'])
      assert.equal(isEvidentSerial(s), true, s);
    for (const u of [
      '00000000-0000-0000-0000-000000000000',
      'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF',
      '03000200-0400-0500-0006-000700080009',
    ]) {
      assert.equal(isEvidentUuid(u), false, u);
    }
    assert.equal(isEvidentUuid('4c4c4544-0042-3510-8051-b7c04f4d3732'), true);
    assert.equal(isEvidentMac('00:00:00:00:00:00'), false);
    assert.equal(isEvidentMac('01:00:5e:00:00:01'), false);
    assert.equal(isEvidentMac('ff:ff:ff:ff:ff:ff'), false);
    assert.equal(isEvidentMac('52:54:00:12:34:56'), true);
    const junk: Inventory = {
      ...exampleInventory,
      disks: [
        {
          path: '/dev/sda',
          serial: 'QM00001',
          wwn: 'naa.0000000000000000',
          sizeBytes: 1e12,
          rotational: true,
        },
      ],
      nics: [],
      system: { serial: 'To be filled by O.E.M.', uuid: '03000200-0400-0500-0006-000700080009' },
    };
    assert.deepEqual(fingerprintOf(junk), { identifiers: [] });
  });

  it('lists the evidence canonically, whatever the order of parts, with the record MACs', () => {
    const fp = fingerprintOf(exampleInventory);
    assert.deepEqual(fp.identifiers, [
      { kind: 'system-uuid', value: '4c4c4544-0042-3510-8051-b7c04f4d3732' },
      { kind: 'system-serial', value: 'S392884X1' },
      { kind: 'disk-serial', value: 'S45NNE0M1' },
      { kind: 'disk-serial', value: 'S45NNE0M2' },
      { kind: 'disk-wwn', value: 'naa.5002538e40a1b2c3' },
      { kind: 'mac', value: '3c:ec:ef:00:00:01' },
      { kind: 'mac', value: '3c:ec:ef:00:00:02' },
    ]);
    const reversed = {
      ...exampleInventory,
      disks: [...exampleInventory.disks].reverse(),
      nics: [...exampleInventory.nics].reverse(),
    };
    assert.deepEqual(fingerprintOf(reversed), fp);
    const typedIn = fingerprintOfMachine({
      interfaces: [{ mac: '52:54:00:AA:00:01' }, { mac: '3c:ec:ef:00:00:01' }],
    });
    assert.deepEqual(
      typedIn.identifiers,
      [
        { kind: 'mac', value: '52:54:00:aa:00:01' },
        { kind: 'mac', value: '3c:ec:ef:00:00:01' },
      ].sort((a, b) => (a.value < b.value ? -1 : 1)),
    );
  });

  it('recognises a machine whose NIC was replaced, by its UUID and disks', () => {
    const newNic: Inventory = {
      ...exampleInventory,
      nics: [{ name: 'eno1', mac: '3c:ec:ef:99:99:99', linkUp: true }],
    };
    const result = matchFingerprint(
      fingerprintOf(newNic),
      known({ m1: fingerprintOf(exampleInventory), m2: fingerprintOf(other) }),
    );
    assert.equal(result.kind, 'match');
    assert.equal(result.kind === 'match' ? result.machineId : '', 'm1');
    assert.deepEqual(result.kind === 'match' ? result.by.map((id) => id.kind) : [], [
      'system-uuid',
      'system-serial',
      'disk-serial',
      'disk-serial',
      'disk-wwn',
    ]);
  });

  it('recognises a QEMU machine without system identity by a disk serial after its NIC changed, and by its MAC after its disk changed', () => {
    const vm: Inventory = {
      ...exampleInventory,
      disks: [{ path: '/dev/vda', serial: 'lab-m1-disk', sizeBytes: 8 * 2 ** 30, rotational: true }],
      nics: [{ name: 'eth0', mac: '52:54:00:00:00:01', linkUp: true }],
      system: { vendor: 'QEMU', uuid: '00000000-0000-0000-0000-000000000000' },
    };
    const fleet = known({ m1: fingerprintOf(vm), m2: fingerprintOf(other) });
    const nicSwapped = { ...vm, nics: [{ name: 'eth0', mac: '52:54:00:00:00:77', linkUp: true }] };
    assert.deepEqual(matchFingerprint(fingerprintOf(nicSwapped), fleet), {
      kind: 'match',
      machineId: 'm1',
      by: [{ kind: 'disk-serial', value: 'lab-m1-disk' }],
    });
    const diskSwapped = {
      ...vm,
      disks: [{ path: '/dev/vda', serial: 'lab-m1-new', sizeBytes: 8 * 2 ** 30, rotational: true }],
    };
    assert.deepEqual(matchFingerprint(fingerprintOf(diskSwapped), fleet), {
      kind: 'match',
      machineId: 'm1',
      by: [{ kind: 'mac', value: '52:54:00:00:00:01' }],
    });
    // A machine known only by the MAC typed into its record is found by that MAC.
    const typed = known({ m3: fingerprintOfMachine({ interfaces: [{ mac: '52:54:00:00:00:33' }] }) });
    const first = { ...vm, disks: [], nics: [{ name: 'eth0', mac: '52:54:00:00:00:33', linkUp: true }] };
    assert.equal(matchFingerprint(fingerprintOf(first), typed).kind, 'match');
  });

  it('calls a report with no shared evidence new, placeholders shared by every board included', () => {
    const boardA: Inventory = {
      ...other,
      system: { serial: 'To be filled by O.E.M.', uuid: '03000200-0400-0500-0006-000700080009' },
      disks: [{ path: '/dev/sda', serial: 'QM00001', sizeBytes: 1e12, rotational: true }],
    };
    const boardB: Inventory = { ...boardA, nics: [{ name: 'eth0', mac: '52:54:00:00:00:98', linkUp: true }] };
    assert.deepEqual(matchFingerprint(fingerprintOf(boardB), known({ a: fingerprintOf(boardA) })), {
      kind: 'none',
    });
    assert.deepEqual(matchFingerprint(fingerprintOf(exampleInventory), []), { kind: 'none' });
  });

  it('refuses a report whose parts two known machines claim, naming both', () => {
    const mixed: Inventory = {
      ...exampleInventory,
      system: {},
      nics: [...exampleInventory.nics, other.nics[0]!],
    };
    const result = matchFingerprint(
      fingerprintOf(mixed),
      known({ m2: fingerprintOf(other), m1: fingerprintOf(exampleInventory) }),
    );
    assert.equal(result.kind, 'ambiguous');
    if (result.kind !== 'ambiguous') return;
    assert.deepEqual(
      result.claims.map((c) => c.machineId),
      ['m1', 'm2'],
    );
    assert.equal(
      result.reason,
      'the report matches 2 known machines (m1 by disk serial S45NNE0M1, disk serial S45NNE0M2, disk WWN naa.5002538e40a1b2c3 and 2 more; m2 by MAC 52:54:00:00:00:99): a part moved between machines, or two records describe one machine; remove the part from the other record or delete the stale one, then inspect again',
    );
  });

  it('refuses a report sharing a disk with a machine whose system UUID differs', () => {
    const moved: Inventory = { ...other, disks: [...other.disks, exampleInventory.disks[0]!] };
    const result = matchFingerprint(fingerprintOf(moved), known({ m1: fingerprintOf(exampleInventory) }));
    assert.equal(result.kind, 'ambiguous');
    assert.equal(
      result.kind === 'ambiguous' ? result.reason : '',
      "the report shares disk serial S45NNE0M1 with m1, but its system UUID is 11111111-2222-3333-4444-555555555555, not 4c4c4544-0042-3510-8051-b7c04f4d3732: a part moved from m1 into another machine, or m1's board was replaced; an operator decides which",
    );
  });

  it('recognises every machine of a fleet after random part replacements that keep some evidence', () => {
    const fleet = fc.array(inventoryArbitrary, { minLength: 1, maxLength: 8 });
    fc.assert(
      fc.property(
        fleet,
        fc.nat(),
        fc.array(fc.boolean(), { minLength: 20, maxLength: 20 }),
        (inventories, pick, keep) => {
          // Make every machine's identifiers its own: prefix them with the machine's number.
          const machines = inventories.map((inv, m) => uniquely(inv, m));
          const prints = machines.map((inv) => fingerprintOf(inv));
          const index = new FingerprintIndex();
          prints.forEach((fp, m) => index.set(`m${m}`, fp));
          const m = pick % machines.length;
          const changed = replaceParts(machines[m]!, keep);
          const result = index.match(fingerprintOf(changed));
          const kept = fingerprintOf(changed).identifiers.filter((id) =>
            prints[m]!.identifiers.some((k) => k.kind === id.kind && k.value === id.value),
          );
          if (kept.length === 0) assert.deepEqual(result, { kind: 'none' });
          else assert.deepEqual(result, { kind: 'match', machineId: `m${m}`, by: kept });
          assert.deepEqual(
            matchFingerprint(
              fingerprintOf(changed),
              prints.map((fingerprint, i) => ({ machineId: `m${i}`, fingerprint })),
            ),
            result,
          );
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps its index in step through set, replace and delete', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat({ max: 4 }), fc.option(inventoryArbitrary)), { maxLength: 20 }),
        inventoryArbitrary,
        (steps, probe) => {
          const index = new FingerprintIndex();
          const current = new Map<string, Fingerprint>();
          for (const [n, inventory] of steps) {
            if (inventory === null) {
              index.delete(`m${n}`);
              current.delete(`m${n}`);
            } else {
              index.set(`m${n}`, fingerprintOf(inventory));
              current.set(`m${n}`, fingerprintOf(inventory));
            }
          }
          assert.equal(index.size, current.size);
          const fresh = matchFingerprint(
            fingerprintOf(probe),
            [...current].map(([machineId, fingerprint]) => ({ machineId, fingerprint })),
          );
          assert.deepEqual(index.match(fingerprintOf(probe)), fresh);
        },
      ),
      { numRuns: 300 },
    );
  });
});

function uniquely(inventory: Inventory, m: number): Inventory {
  return {
    ...inventory,
    disks: inventory.disks.map((d, i) => ({
      ...d,
      ...(d.serial === undefined ? {} : { serial: `M${m}D${i}${d.serial}` }),
      ...(d.wwn === undefined ? {} : { wwn: `naa.${m}${i}${d.wwn.slice(6)}` }),
    })),
    nics: inventory.nics.map((n, i) => ({
      ...n,
      mac: `02:00:00:00:${m.toString(16).padStart(2, '0')}:${i.toString(16).padStart(2, '0')}`,
    })),
    system: {
      ...inventory.system,
      ...(inventory.system.uuid === undefined
        ? {}
        : { uuid: `${m.toString(16).padStart(8, '0')}${inventory.system.uuid.slice(8)}` }),
      ...(inventory.system.serial === undefined ? {} : { serial: `M${m}${inventory.system.serial}` }),
    },
  };
}

/** Replace disks and NICs where keep says false (new serials, WWNs, MACs); the system stays. */
function replaceParts(inventory: Inventory, keep: readonly boolean[]): Inventory {
  return {
    ...inventory,
    disks: inventory.disks.map((d, i) =>
      (keep[i] ?? true) ? d : { ...d, serial: `NEW${i}`, wwn: `naa.9${i}0000000000001` },
    ),
    nics: inventory.nics.map((n, i) =>
      (keep[10 + i] ?? true) ? n : { ...n, mac: `0a:00:00:00:99:${i.toString(16).padStart(2, '0')}` },
    ),
  };
}

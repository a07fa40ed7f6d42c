// Goal: prove that parseInventory accepts every well-formed report unchanged (through JSON, as
// it travels), normalises MACs, UUIDs and spaces, drops fields it does not know, and refuses
// each bad field with an InventoryError naming that field, within the bounds of limits.ts.
// Method: fast-check over generated valid inventories and over random corruptions of them, plus
// a table of hand-made bad reports, each with the field its error must name.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { InventoryError, parseInventory, type Inventory } from '../../src/model/inventory.js';
import { inventoryDisksMax, inventoryNicsMax, inventoryTextBytesMax } from '../../src/model/limits.js';
import { exampleInventory, inventoryArbitrary } from '../support/inventory-arbitrary.js';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function asJson(inventory: Inventory): { [k: string]: Json } {
  return JSON.parse(JSON.stringify(inventory)) as { [k: string]: Json };
}

function refusal(value: unknown): InventoryError {
  try {
    parseInventory(value);
  } catch (error) {
    assert.ok(error instanceof InventoryError, `expected an InventoryError, got ${String(error)}`);
    return error;
  }
  assert.fail(`expected a refusal of ${JSON.stringify(value)}`);
}

/** The example as JSON with one change made at a path such as ['disks', 1, 'serial']. */
function withChange(path: readonly (string | number)[], value: Json | undefined): Json {
  const copy = asJson(exampleInventory);
  let at: Json = copy;
  for (const step of path.slice(0, -1)) at = (at as Record<string | number, Json>)[step]!;
  const last = path[path.length - 1]!;
  if (value === undefined) Reflect.deleteProperty(at as object, last);
  else (at as Record<string | number, Json>)[last] = value;
  return copy;
}

describe('parseInventory', () => {
  it('accepts every valid inventory unchanged, through JSON', () => {
    fc.assert(
      fc.property(inventoryArbitrary, (inventory) => {
        assert.deepEqual(parseInventory(asJson(inventory)), inventory);
      }),
      { numRuns: 300 },
    );
  });

  it('normalises MACs, UUIDs and surrounding spaces, and drops fields it does not know', () => {
    const report = withChange(['nics', 0, 'mac'], '3C-EC-EF-00-00-01') as { [k: string]: Json };
    (report['system'] as { [k: string]: Json })['uuid'] = '4C4C4544-0042-3510-8051-B7C04F4D3732';
    (report['system'] as { [k: string]: Json })['vendor'] = '  Supermicro \t';
    (report['bmc'] as { [k: string]: Json })['mac'] = '3C:EC:EF:00:00:0F';
    report['pciDevices'] = [{ id: '8086:1572' }];
    (report['cpu'] as { [k: string]: Json })['flags'] = 'avx2';
    const parsed = parseInventory(report);
    assert.deepEqual(parsed, exampleInventory);
    assert.equal('pciDevices' in parsed, false);
  });

  it('takes a report without system identity or BMC (absent is not an error)', () => {
    const report = withChange(['system'], undefined) as { [k: string]: Json };
    delete report['bmc'];
    const parsed = parseInventory(report);
    assert.deepEqual(parsed.system, {});
    assert.equal(parsed.bmc, undefined);
  });

  const bad: readonly [string, readonly (string | number)[], Json | undefined, RegExp][] = [
    ['a missing CPU', ['cpu'], undefined, /^inventory cpu: is undefined; want an object$/],
    ['zero sockets', ['cpu', 'sockets'], 0, /cpu\.sockets: is 0; want 1 to 16384/],
    ['fewer threads than cores', ['cpu', 'threads'], 16, /cpu\.threads: is 16, fewer than 32 cores/],
    ['fewer cores than sockets', ['cpu', 'cores'], 1, /cpu\.cores: is 1, fewer than 2 sockets/],
    ['a fractional core count', ['cpu', 'cores'], 31.5, /cpu\.cores: .*want a whole number/],
    ['an odd architecture', ['cpu', 'arch'], 'X86-64', /cpu\.arch: is "X86-64"; want a machine name/],
    [
      'memory as text',
      ['memory', 'totalBytes'],
      '128Gi',
      /memory\.totalBytes: is the text "128Gi"; want a whole number/,
    ],
    ['disks not a list', ['disks'], { sda: 1 }, /^inventory disks: is an object; want a list$/],
    ['a negative disk size', ['disks', 0, 'sizeBytes'], -1, /disks\[0\]\.sizeBytes: is -1/],
    ['a disk size past 2^53', ['disks', 1, 'sizeBytes'], 2 ** 53, /disks\[1\]\.sizeBytes/],
    [
      'a disk path outside /dev',
      ['disks', 1, 'path'],
      '/etc/passwd',
      /disks\[1\]\.path: .*want a \/dev path/,
    ],
    ['a disk path climbing out', ['disks', 1, 'path'], '/dev/../etc', /disks\[1\]\.path/],
    ['a repeated disk path', ['disks', 1, 'path'], '/dev/sda', /disks\[1\]: repeats the path "\/dev\/sda"/],
    ['an empty serial', ['disks', 0, 'serial'], ' ', /disks\[0\]\.serial: is empty; leave the field out/],
    [
      'a control character',
      ['disks', 0, 'model'],
      'SAMSUNG\u0000',
      /disks\[0\]\.model: holds a control character/,
    ],
    ['rotational as text', ['disks', 0, 'rotational'], 'yes', /disks\[0\]\.rotational: .*want true or false/],
    [
      'a bad MAC',
      ['nics', 1, 'mac'],
      '3c:ec:ef:00:00',
      /nics\[1\]\.mac: is "3c:ec:ef:00:00"; want a MAC address/,
    ],
    ['a NIC name with a slash', ['nics', 0, 'name'], 'eth/0', /nics\[0\]\.name/],
    ['a repeated NIC name', ['nics', 1, 'name'], 'eno1', /nics\[1\]: repeats the name "eno1"/],
    ['a zero speed', ['nics', 0, 'speedMbps'], 0, /nics\[0\]\.speedMbps: is 0/],
    ['linkUp missing', ['nics', 0, 'linkUp'], undefined, /nics\[0\]\.linkUp: is undefined/],
    ['firmware efi', ['firmware'], 'efi', /^inventory firmware: is the text "efi"; want bios or uefi$/],
    ['a UUID with no dashes', ['system', 'uuid'], '4c4c454400423510', /system\.uuid: .*want a UUID/],
    [
      'a BMC host name',
      ['bmc', 'address'],
      'bmc.example',
      /bmc\.address: is "bmc\.example"; want an IPv4 address/,
    ],
    ['a BMC with no address', ['bmc', 'address'], undefined, /bmc\.address: is undefined; want text/],
  ];
  for (const [what, path, value, expected] of bad) {
    it(`refuses ${what}, naming ${path.join('.')}`, () => {
      const error = refusal(withChange(path, value));
      assert.match(error.message, expected);
      assert.ok(error.field.startsWith(String(path[0])), error.field);
    });
  }

  it('refuses a report that is not an object', () => {
    for (const value of [null, [], 'inventory', 42]) {
      assert.match(refusal(value).message, /^inventory \(report\): is .*; want an object$/);
    }
  });

  it('bounds the counts of disks and NICs and the length of text', () => {
    const disk = exampleInventory.disks[0]!;
    const disks = (n: number): Json =>
      Array.from({ length: n }, (_, i) => ({ ...disk, path: `/dev/disk${i}` }));
    assert.equal(
      parseInventory(withChange(['disks'], disks(inventoryDisksMax))).disks.length,
      inventoryDisksMax,
    );
    assert.match(
      refusal(withChange(['disks'], disks(inventoryDisksMax + 1))).message,
      /disks: has 257 entries; at most 256/,
    );
    const nic = exampleInventory.nics[1]!;
    const nics = Array.from({ length: inventoryNicsMax + 1 }, (_, i) => ({
      ...nic,
      name: `eth${i}`,
      mac: `02:00:00:00:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`,
    }));
    assert.match(refusal(withChange(['nics'], nics)).message, /nics: has 129 entries; at most 128/);
    assert.equal(parseInventory(withChange(['nics'], nics.slice(1))).nics.length, inventoryNicsMax);
    const longest = 'é'.repeat(inventoryTextBytesMax / 2);
    assert.equal(parseInventory(withChange(['cpu', 'model'], longest)).cpu.model, longest);
    assert.match(
      refusal(withChange(['cpu', 'model'], `${longest}x`)).message,
      /cpu\.model: is 257 bytes; at most 256/,
    );
  });

  it('either accepts a corrupted report as a valid inventory or names a field that exists', () => {
    const leafPaths = (value: Json, prefix: (string | number)[] = []): (string | number)[][] =>
      value !== null && typeof value === 'object'
        ? Object.entries(value).flatMap(([k, v]) =>
            leafPaths(v, [...prefix, Array.isArray(value) ? Number(k) : k]),
          )
        : [prefix];
    const junk = fc.oneof(
      fc.constant(null),
      fc.boolean(),
      fc.double(),
      fc.integer(),
      fc.string(),
      fc.constant([]),
      fc.constant({}),
    );
    fc.assert(
      fc.property(inventoryArbitrary, fc.nat(), junk, (inventory, pick, replacement) => {
        const paths = leafPaths(asJson(inventory));
        const path = paths[pick % paths.length]!;
        const report = asJson(inventory);
        let at: Json = report;
        for (const step of path.slice(0, -1)) at = (at as Record<string | number, Json>)[step]!;
        (at as Record<string | number, Json>)[path[path.length - 1]!] = replacement as Json;
        let parsed: Inventory;
        try {
          parsed = parseInventory(report);
        } catch (error) {
          assert.ok(error instanceof InventoryError);
          const named = path
            .map((s) => (typeof s === 'number' ? `[${s}]` : `.${s}`))
            .join('')
            .slice(1);
          // The field at fault, or a sibling checked against it (cores against sockets).
          const parent = error.field.replace(/(\.[^.[\]]+|\[\d+\])$/, '');
          assert.ok(named.startsWith(parent), `${error.field} vs ${named}`);
          return;
        }
        assert.deepEqual(parseInventory(asJson(parsed)), parsed);
      }),
      { numRuns: 500 },
    );
  });
});

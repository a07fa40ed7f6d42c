// Valid machine inventories for property tests (fast-check), and one fixed example, shared by
// the inventory, selector, fingerprint and drift tests.
import fc from 'fast-check';
import type { DiskInventory, Inventory, NicInventory } from '../../src/model/inventory.js';

const hex = (n: number): fc.Arbitrary<string> => fc.stringMatching(new RegExp(`^[0-9a-f]{${n}}$`));

export const macArbitrary: fc.Arbitrary<string> = fc
  .array(hex(2), { minLength: 6, maxLength: 6 })
  .map((parts) => parts.join(':'));

export const uuidArbitrary: fc.Arbitrary<string> = fc
  .tuple(hex(8), hex(4), hex(4), hex(4), hex(12))
  .map((parts) => parts.join('-'));

const word: fc.Arbitrary<string> = fc.stringMatching(/^[A-HJ-NP-Z0-9]{4,16}$/);

const sizes = [0, 1 << 30, 480e9, 960e9, 1.92e12, 3.84e12, 2 ** 40, 4 * 2 ** 40];

const hex16 = hex(16);

// Built once: making arbitraries per sample (a regular expression each) is what costs.
const diskFields = fc.record(
  {
    model: fc.constantFrom('QEMU HARDDISK', 'SAMSUNG MZ7LH960', 'ST4000NM0035'),
    serial: word,
    sizeBytes: fc.constantFrom(...sizes),
    rotational: fc.boolean(),
    wwn: hex16.map((h) => `naa.5${h.slice(1)}`),
  },
  { requiredKeys: ['sizeBytes', 'rotational'] },
);

const nicFields = fc.record(
  {
    mac: macArbitrary,
    driver: fc.constantFrom('virtio_net', 'ixgbe', 'e1000e', 'mlx5_core'),
    speedMbps: fc.constantFrom(1000, 10000, 25000, 100000),
    linkUp: fc.boolean(),
  },
  { requiredKeys: ['mac', 'linkUp'] },
);

const disksArbitrary: fc.Arbitrary<readonly DiskInventory[]> = fc
  .array(diskFields, { maxLength: 6 })
  .map((disks) => disks.map((d, i) => ({ path: `/dev/sd${String.fromCharCode(97 + i)}`, ...d })));

const nicsArbitrary: fc.Arbitrary<readonly NicInventory[]> = fc
  .array(nicFields, { maxLength: 4 })
  .map((nics) => nics.map((n, i) => ({ name: `eth${i}`, ...n })));

export const inventoryArbitrary: fc.Arbitrary<Inventory> = fc
  .record(
    {
      cpu: fc
        .record({
          model: fc.constantFrom(
            'AMD EPYC 7302 16-Core Processor',
            'Intel(R) Xeon(R) Gold 6338',
            'QEMU Virtual CPU',
          ),
          sockets: fc.integer({ min: 1, max: 4 }),
          coresPerSocket: fc.integer({ min: 1, max: 64 }),
          smt: fc.constantFrom(1, 2),
          arch: fc.constantFrom('x86_64', 'arm64'),
        })
        .map(({ model, sockets, coresPerSocket, smt, arch }) => ({
          model,
          sockets,
          cores: sockets * coresPerSocket,
          threads: sockets * coresPerSocket * smt,
          arch,
        })),
      memory: fc.constantFrom(2, 16, 32, 64, 128, 512).chain((gi) =>
        fc.record({
          totalBytes: fc.constant(gi * 2 ** 30),
          usableBytes: fc.constant(gi * 2 ** 30 - 2 ** 27),
        }),
      ),
      disks: disksArbitrary,
      nics: nicsArbitrary,
      firmware: fc.constantFrom('bios' as const, 'uefi' as const),
      system: fc.record(
        {
          vendor: fc.constantFrom('QEMU', 'Dell Inc.', 'Supermicro'),
          product: fc.constantFrom('Standard PC (Q35 + ICH9, 2009)', 'PowerEdge R650'),
          serial: word,
          uuid: uuidArbitrary,
        },
        { requiredKeys: [] },
      ),
      bmc: fc.record({ address: fc.ipV4(), mac: macArbitrary }, { requiredKeys: ['address'] }),
    },
    { requiredKeys: ['cpu', 'memory', 'disks', 'nics', 'firmware', 'system'] },
  )
  // Plain objects, as JSON gives them (fast-check's optional-key records have no prototype).
  .map((inventory) => JSON.parse(JSON.stringify(inventory)) as Inventory);

/** A 2-socket server with two SSDs and two NICs: the example most tests start from. */
export const exampleInventory: Inventory = {
  cpu: { model: 'AMD EPYC 7302 16-Core Processor', sockets: 2, cores: 32, threads: 64, arch: 'x86_64' },
  memory: { totalBytes: 128 * 2 ** 30, usableBytes: 125 * 2 ** 30 },
  disks: [
    { path: '/dev/sda', model: 'SAMSUNG MZ7LH960', serial: 'S45NNE0M1', sizeBytes: 960e9, rotational: false },
    {
      path: '/dev/sdb',
      model: 'SAMSUNG MZ7LH1T9',
      serial: 'S45NNE0M2',
      sizeBytes: 1.92e12,
      rotational: false,
      wwn: 'naa.5002538e40a1b2c3',
    },
  ],
  nics: [
    { name: 'eno1', mac: '3c:ec:ef:00:00:01', driver: 'ixgbe', speedMbps: 10000, linkUp: true },
    { name: 'eno2', mac: '3c:ec:ef:00:00:02', driver: 'ixgbe', linkUp: false },
  ],
  firmware: 'uefi',
  system: {
    vendor: 'Supermicro',
    product: 'AS -1114S-WN10RT',
    serial: 'S392884X1',
    uuid: '4c4c4544-0042-3510-8051-b7c04f4d3732',
  },
  bmc: { address: '10.0.9.17', mac: '3c:ec:ef:00:00:0f' },
};

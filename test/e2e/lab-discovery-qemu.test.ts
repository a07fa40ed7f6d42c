// Goal: discovery in the machine lab, on real (virtual) hardware: two QEMU machines Slipway has
// never been told about, with different memory, disk size and bus, firmware and NIC, network-boot
// through PXE, enrol themselves, and their inventory is exactly what QEMU was given: installed
// memory, the disk's path, size, serial (and a SCSI disk's model and WWN), the NIC's MAC and
// driver, BIOS or UEFI, the SMBIOS vendor, product, serial and UUID, and the BMC's LAN address
// and MAC, read by the boot OS through the machine's own KCS interface (/dev/ipmi0, ipmitool lan
// print). Then `hardware accept` makes each ready. The times are reported as diagnostics.
// Method: `MachineLab.up` with `unregistered` (cluster/machine-lab.ts: three nodes with dynamic
// DHCP and --discovery behind the VIP and HAProxy, each machine behind OpenIPMI's ipmi_sim) on
// its own /24, so it never meets a `slipway lab up` on the default one; the machines are powered
// on into PXE through their BMCs with ipmitool, as an operator would before Slipway knows them.
// QEMU runs TCG. Every wait has a deadline; down() stops everything by PID and deletes the
// namespaces.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { MachineLab, type LabMachine, type LabMachineSpec } from '../../cluster/machine-lab.js';
import { buildBootOs } from '../../src/bootos/build.js';
import { ipmiSimMissing } from '../support/ipmi-sim.js';
import { NetnsLab, requireCommands } from '../support/netns.js';
import { waitFor } from '../support/wait.js';

const mib = 1024 * 1024;
/** Two machines as unlike as the lab makes them, each small enough for the boot OS. */
const specs: readonly LabMachineSpec[] = [
  { memoryMiB: 1024, diskBytes: 2048 * mib, diskBus: 'virtio', firmware: 'bios' },
  { memoryMiB: 1280, diskBytes: 3072 * mib, diskBus: 'scsi', firmware: 'uefi' },
];
/** From power-on to enrolled: ~1 min each here, both at once on 2 cores under TCG. */
const enrolMs = 480_000;

interface HardwareView {
  readonly id: string;
  readonly inventory?: {
    readonly cpu: { readonly arch: string; readonly threads: number };
    readonly memory: { readonly totalBytes: number; readonly usableBytes: number };
    readonly disks: readonly Record<string, unknown>[];
    readonly nics: readonly { mac: string; driver?: string; linkUp: boolean; name: string }[];
    readonly firmware: string;
    readonly system: Record<string, unknown>;
    readonly bmc?: Record<string, unknown>;
  };
  readonly lifecycle?: { readonly state: string; readonly reason?: string };
}

let lab: MachineLab | undefined;
let scratch: NetnsLab | undefined;

describe('discovery in the machine lab', () => {
  after(async () => {
    await lab?.down();
    await scratch?.destroy();
  });

  it(
    'two unknown VMs enrol with the inventory QEMU gave them, and accept makes them ready',
    { timeout: 900_000 },
    async (t) => {
      await requireCommands({ ip: 'iproute2', haproxy: 'haproxy', radvd: 'radvd' });
      assert.equal(ipmiSimMissing(), undefined);
      const times: Record<string, number> = {};
      const since = (start: number): number => Math.round((Date.now() - start) / 100) / 10;

      let start = Date.now();
      scratch = await NetnsLab.create();
      const bootOsDir = path.join(scratch.dir, 'bootos');
      await buildBootOs({ outDir: bootOsDir });
      times['boot OS build s'] = since(start);

      start = Date.now();
      lab = await MachineLab.up({ machines: 2, unregistered: true, specs, bootOsDir, subnet: '10.214.0' });
      times['lab up s'] = since(start);
      const up = lab;
      const get = async (id: string): Promise<HardwareView | undefined> => {
        try {
          return JSON.parse(await up.slipway(['-o', 'json', 'hardware', 'get', id])) as HardwareView;
        } catch {
          return undefined;
        }
      };
      // Slipway has never been told about them: it knows no machine at all.
      const known = JSON.parse(await up.slipway(['-o', 'json', 'hardware', 'list'])) as unknown;
      assert.deepEqual(Array.isArray(known) ? known : (known as { hardware: unknown }).hardware, []);

      start = Date.now();
      for (const m of up.machines) await up.netboot(m);
      const enrolled = new Map<string, HardwareView>();
      await waitFor(
        'both machines to enrol with an inventory',
        async () => {
          for (const m of up.machines) {
            if (enrolled.has(m.id)) continue;
            const view = await get(m.id);
            if (view?.inventory !== undefined) {
              enrolled.set(m.id, view);
              times[`${m.id} power-on to enrolled s`] = since(start);
            }
          }
          return enrolled.size === up.machines.length;
        },
        enrolMs,
        1000,
      );
      for (const m of up.machines) {
        const view = enrolled.get(m.id);
        assert.ok(view !== undefined);
        assert.equal(view.lifecycle?.state, 'enrolled', JSON.stringify(view.lifecycle));
        assert.match(view.lifecycle?.reason ?? '', /discovered/);
        checkInventory(m, view);
      }

      start = Date.now();
      for (const m of up.machines) {
        await up.slipway(['hardware', 'accept', m.id, '--reason', 'inventory checked in the lab']);
      }
      for (const m of up.machines) assert.equal((await get(m.id))?.lifecycle?.state, 'ready');
      times['accept both s'] = since(start);
      const listed = await up.slipway(['-o', 'json', 'hardware', 'list', '--state', 'ready']);
      for (const m of up.machines) assert.ok(listed.includes(m.id), listed);
      t.diagnostic(`times: ${JSON.stringify(times)}`);
    },
  );
});

/** The machine's inventory is what QEMU was given, field by field. */
function checkInventory(m: LabMachine, view: HardwareView): void {
  const inventory = view.inventory;
  assert.ok(inventory !== undefined);
  const want = m.identity;
  const scsi = want.diskBus === 'scsi';
  assert.equal(inventory.memory.totalBytes, want.memoryMiB * mib, `${m.id} installed memory`);
  assert.ok(inventory.memory.usableBytes <= inventory.memory.totalBytes);
  assert.deepEqual(inventory.disks, [
    {
      path: scsi ? '/dev/sda' : '/dev/vda',
      ...(want.diskModel === undefined ? {} : { model: want.diskModel }),
      serial: want.diskSerial,
      sizeBytes: want.diskBytes,
      rotational: true,
      ...(want.diskWwn === undefined ? {} : { wwn: want.diskWwn }),
    },
  ]);
  assert.deepEqual(
    inventory.nics.map((n) => ({ mac: n.mac, driver: n.driver, linkUp: n.linkUp })),
    [{ mac: m.mac, driver: want.nicDriver, linkUp: true }],
  );
  assert.equal(inventory.firmware, want.firmware);
  assert.deepEqual(inventory.system, want.system);
  assert.deepEqual(inventory.bmc, want.bmcLan);
  assert.equal(inventory.cpu.arch, 'x86_64');
  assert.equal(inventory.cpu.threads, 1);
}

// Goal: prove that the worker's inventory collector reads what Linux exposes: CPU topology,
// installed and usable memory, hardware disks only (virtio-blk serials from /sys/block/X/serial,
// NVMe from the controller, SCSI and SATA from VPD page 0x80, WWNs from wwid), physical NICs only,
// UEFI or BIOS, SMBIOS identity, and the BMC's address from `ipmitool lan print`, with no BMC
// (and a note, not an error) when there is no IPMI device or no ipmitool.
// Method: the pure parsers on captured texts; the collector on a fixture tree laid out as sysfs
// is (symlinks included) under a temp dir; the collector on this machine, checked against
// lsblk, lscpu and /proc/meminfo; and a real ipmitool talking to a real BMC (OpenIPMI's
// ipmi_sim over RMCP+ on 127.0.0.1) for the BMC part. Every result passes parseInventory.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { cpus, machine, tmpdir } from 'node:os';
import path from 'node:path';
import { collectInventory } from '../../src/worker/inventory.js';
import {
  byDeviceName,
  cleanText,
  normalizeArch,
  parseCpuinfo,
  parseIpmiLanPrint,
  parseMemTotalBytes,
  parseVpdSerial,
  wwnOf,
} from '../../src/worker/inventory-parse.js';
import { parseInventory, type Inventory } from '../../src/model/inventory.js';
import { IpmiSim, ipmiSimMissing } from '../support/ipmi-sim.js';

// `ipmitool lan print` (ipmitool 1.8.19) against OpenIPMI's ipmi_sim, as captured here.
const lanPrint = (address: string, mac: string): string =>
  [
    'Set in Progress         : Set Complete',
    'Auth Type Support       : NONE MD2 MD5 PASSWORD ',
    'Auth Type Enable        : Callback : NONE MD2 MD5 PASSWORD ',
    '                        : User     : NONE MD2 MD5 PASSWORD ',
    'IP Address Source       : Static Address',
    `IP Address              : ${address}`,
    'Subnet Mask             : 255.255.255.0',
    `MAC Address             : ${mac}`,
    'SNMP Community String   : public',
    'Default Gateway IP      : 0.0.0.0',
    'Default Gateway MAC     : 00:00:00:00:00:00',
    '',
  ].join('\n');

const x86Cpuinfo = [0, 1, 2, 3]
  .map((n) =>
    [
      `processor\t: ${n}`,
      'vendor_id\t: AuthenticAMD',
      'model name\t: AMD EPYC 7302 16-Core Processor',
      `physical id\t: ${n >> 1}`,
      `core id\t\t: ${n & 1}`,
      'flags\t\t: fpu vme lm',
    ].join('\n'),
  )
  .join('\n\n');

const armCpuinfo = [0, 1]
  .map((n) =>
    [`processor\t: ${n}`, 'BogoMIPS\t: 50.00', 'CPU implementer\t: 0x41', 'CPU part\t: 0xd0c'].join('\n'),
  )
  .join('\n\n');

function vpdPage(serial: string): Uint8Array {
  const text = Buffer.from(serial, 'latin1');
  return Uint8Array.from([0x00, 0x80, text.length >> 8, text.length & 0xff, ...text]);
}

describe('inventory parsers', () => {
  it('reads /proc/cpuinfo on x86 and ARM', () => {
    assert.deepEqual(parseCpuinfo(x86Cpuinfo), {
      model: 'AMD EPYC 7302 16-Core Processor',
      processors: 4,
      sockets: 2,
      cores: 4,
    });
    assert.deepEqual(parseCpuinfo(armCpuinfo), { model: 'ARM implementer 0x41 part 0xd0c', processors: 2 });
    assert.deepEqual(parseCpuinfo(''), { processors: 0 });
  });

  it('reads MemTotal, VPD serials, WWNs, architectures and text', () => {
    assert.equal(parseMemTotalBytes('MemTotal:       24683620 kB\nMemFree: 1 kB\n'), 24683620 * 1024);
    assert.equal(parseMemTotalBytes('MemFree: 1 kB\n'), undefined);
    assert.equal(parseVpdSerial(vpdPage('   WD-WCC4N1234567')), 'WD-WCC4N1234567');
    assert.equal(parseVpdSerial(vpdPage('QM00002 ')), 'QM00002');
    assert.equal(parseVpdSerial(Uint8Array.from([0, 0x83, 0, 2, 65, 66])), undefined);
    assert.equal(parseVpdSerial(Uint8Array.from([0, 0x80, 0, 40, 65, 66])), 'AB');
    assert.equal(wwnOf('naa.5000C500A1B2C3D4\n'), 'naa.5000c500a1b2c3d4');
    assert.equal(wwnOf('eui.0025388b71b0e1c2'), 'eui.0025388b71b0e1c2');
    assert.equal(wwnOf('t10.ATA     QEMU HARDDISK                           QM00002'), undefined);
    assert.equal(wwnOf('nvme.8086-5048'), undefined);
    assert.equal(normalizeArch('aarch64'), 'arm64');
    assert.equal(normalizeArch('x86_64'), 'x86_64');
    assert.equal(normalizeArch('riscv64'), 'riscv64');
    assert.equal(cleanText('  QEMU\u0000\u0000 HARDDISK  \n'), 'QEMU HARDDISK');
    assert.equal(cleanText(' \n'), undefined);
    assert.equal(cleanText('x'.repeat(300))?.length, 254);
    assert.deepEqual(['sdaa', 'sdb', 'sda', 'eth10', 'eth2'].sort(byDeviceName), [
      'sda',
      'sdb',
      'eth2',
      'sdaa',
      'eth10',
    ]);
  });

  it('reads the BMC address from ipmitool lan print, and none from an unconfigured BMC', () => {
    assert.deepEqual(parseIpmiLanPrint(lanPrint('10.0.9.17', '3C:EC:EF:00:00:0F')), {
      address: '10.0.9.17',
      mac: '3c:ec:ef:00:00:0f',
    });
    assert.equal(parseIpmiLanPrint(lanPrint('0.0.0.0', '00:00:00:00:00:00')), undefined);
    assert.deepEqual(parseIpmiLanPrint(lanPrint('10.0.9.17', '00:00:00:00:00:00')), { address: '10.0.9.17' });
    assert.equal(parseIpmiLanPrint('Error: Unable to establish IPMI v2 / RMCP+ session\n'), undefined);
  });
});

/** Writes a file under root, creating its directories. */
function put(root: string, file: string, content: string | Uint8Array): void {
  mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
  writeFileSync(path.join(root, file), content);
}

/** A symlink at `link` (under root) pointing at `target` (under root), written relative as sysfs does. */
function link(root: string, linkPath: string, target: string): void {
  const at = path.join(root, linkPath);
  mkdirSync(path.dirname(at), { recursive: true });
  mkdirSync(path.join(root, target), { recursive: true });
  symlinkSync(path.relative(path.dirname(at), path.join(root, target)), at);
}

/** A block device at devicePath/block/NAME, /sys/block/NAME pointing at it, with its files. */
function blockDevice(
  root: string,
  name: string,
  devicePath: string,
  files: Record<string, string | Uint8Array>,
): void {
  const dir = `sys/${devicePath}/block/${name}`;
  link(root, `sys/block/${name}`, dir);
  if (!devicePath.startsWith('devices/virtual')) link(root, `${dir}/device`, `sys/${devicePath}`);
  for (const [file, content] of Object.entries(files)) put(root, `${dir}/${file}`, content);
}

function nic(
  root: string,
  name: string,
  devicePath: string | undefined,
  files: Record<string, string>,
  driver?: string,
): void {
  const dir = devicePath === undefined ? `sys/devices/virtual/net/${name}` : `sys/${devicePath}/net/${name}`;
  link(root, `sys/class/net/${name}`, dir);
  if (devicePath !== undefined) link(root, `${dir}/device`, `sys/${devicePath}`);
  if (devicePath !== undefined && driver !== undefined)
    link(root, `sys/${devicePath}/driver`, `sys/bus/pci/drivers/${driver}`);
  for (const [file, content] of Object.entries(files)) put(root, `${dir}/${file}`, content);
}

function buildFixture(root: string): void {
  put(root, 'proc/cpuinfo', x86Cpuinfo);
  put(root, 'proc/meminfo', 'MemTotal:        2013852 kB\nMemFree:          100000 kB\n');
  for (const n of [0, 1, 2, 3]) {
    put(root, `sys/devices/system/cpu/cpu${n}/topology/physical_package_id`, `${n >> 1}\n`);
    put(root, `sys/devices/system/cpu/cpu${n}/topology/core_id`, `${n & 1}\n`);
  }
  mkdirSync(path.join(root, 'sys/devices/system/cpu/cpufreq'), { recursive: true });
  put(root, 'sys/devices/system/memory/block_size_bytes', '8000000\n');
  for (let n = 0; n < 16; n++)
    mkdirSync(path.join(root, `sys/devices/system/memory/memory${n}`), { recursive: true });
  // Disks as QEMU 7.2 presents them to Linux 6.1 (captured from a boot with virtio-blk, AHCI,
  // virtio-scsi and NVMe disks, each given a serial): where each keeps its serial, model and wwid.
  const common = { 'queue/rotational': '1\n', removable: '0\n' };
  blockDevice(root, 'vda', 'devices/pci0000:00/0000:00:04.0/virtio1', {
    ...common,
    size: '16777216\n',
    serial: 'vblk-serial-1',
  });
  const scsi = 'devices/pci0000:00/0000:00:05.0/virtio2/host0/target0:0:0/0:0:0:0';
  blockDevice(root, 'sda', scsi, { size: '2097152\n', 'queue/rotational': '0\n' });
  put(root, `sys/${scsi}/model`, 'QEMU HARDDISK   \n');
  put(root, `sys/${scsi}/vpd_pg80`, vpdPage('scsi-serial-3'));
  put(root, `sys/${scsi}/wwid`, 'naa.5000c500a1b2c3d4\n');
  const sata = 'devices/pci0000:00/0000:00:1f.2/ata1/host1/target1:0:0/1:0:0:0';
  blockDevice(root, 'sdb', sata, { ...common, size: '4194304\n' });
  put(root, `sys/${sata}/model`, 'QEMU HARDDISK   \n');
  put(root, `sys/${sata}/vpd_pg80`, vpdPage('sata-serial-2       '));
  put(root, `sys/${sata}/wwid`, 't10.ATA     QEMU HARDDISK                           sata-serial-2       \n');
  const nvme = 'devices/pci0000:00/0000:00:06.0/nvme/nvme0';
  blockDevice(root, 'nvme0n1', nvme, {
    size: '1875385008\n',
    'queue/rotational': '0\n',
    wwid: 'nvme.1b36-6e766d652d73657269616c2d34-51454d55204e564d65204374726c-00000001\n',
  });
  put(root, `sys/${nvme}/serial`, 'nvme-serial-4       \n');
  put(root, `sys/${nvme}/model`, 'QEMU NVMe Ctrl                          \n');
  blockDevice(root, 'sr0', 'devices/pci0000:00/0000:00:1f.2/ata2/host2/target2:0:0/2:0:0:0', {
    ...common,
    size: '0\n',
  });
  blockDevice(root, 'loop0', 'devices/virtual', { size: '2048\n' });
  blockDevice(root, 'zram0', 'devices/virtual', { size: '2048\n' });
  nic(
    root,
    'eth0',
    'devices/pci0000:00/0000:00:03.0/virtio0',
    { address: '52:54:00:12:34:56\n', type: '1\n', speed: '-1\n', carrier: '1\n' },
    'virtio_net',
  );
  nic(
    root,
    'eth1',
    'devices/pci0000:00/0000:00:07.0',
    { address: '3C:EC:EF:00:00:02\n', type: '1\n', carrier: '0\n' },
    'e1000e',
  );
  nic(
    root,
    'eth2',
    'devices/pci0000:00/0000:00:08.0',
    { address: '3c:ec:ef:00:00:03\n', type: '1\n', speed: '10000\n', carrier: '1\n' },
    'ixgbe',
  );
  nic(
    root,
    'eth3',
    'devices/pci0000:00/0000:00:08.2',
    { address: '3c:ec:ef:00:00:04\n', type: '1\n', speed: '10000\n', carrier: '1\n' },
    'ixgbevf',
  );
  mkdirSync(path.join(root, 'sys/devices/pci0000:00/0000:00:08.2/physfn'), { recursive: true });
  nic(
    root,
    'ib0',
    'devices/pci0000:00/0000:00:09.0',
    { address: '80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:01:02:03\n', type: '32\n' },
    'mlx4_core',
  );
  nic(root, 'lo', undefined, { address: '00:00:00:00:00:00\n', type: '772\n' });
  nic(root, 'br0', undefined, { address: '52:54:00:aa:bb:cc\n', type: '1\n' });
  mkdirSync(path.join(root, 'sys/firmware/efi/efivars'), { recursive: true });
  put(root, 'sys/class/dmi/id/sys_vendor', 'QEMU\n');
  put(root, 'sys/class/dmi/id/product_name', 'Standard PC (Q35 + ICH9, 2009)\n');
  put(root, 'sys/class/dmi/id/product_serial', 'lab-m1\n');
  put(root, 'sys/class/dmi/id/product_uuid', '5A6B7C8D-0000-4000-8000-00000000AB01\n');
}

const fixtureInventory: Inventory = {
  cpu: { model: 'AMD EPYC 7302 16-Core Processor', sockets: 2, cores: 4, threads: 4, arch: 'x86_64' },
  memory: { totalBytes: 2 * 2 ** 30, usableBytes: 2013852 * 1024 },
  disks: [
    {
      path: '/dev/sda',
      model: 'QEMU HARDDISK',
      serial: 'scsi-serial-3',
      sizeBytes: 2097152 * 512,
      rotational: false,
      wwn: 'naa.5000c500a1b2c3d4',
    },
    {
      path: '/dev/sdb',
      model: 'QEMU HARDDISK',
      serial: 'sata-serial-2',
      sizeBytes: 4194304 * 512,
      rotational: true,
    },
    { path: '/dev/vda', serial: 'vblk-serial-1', sizeBytes: 16777216 * 512, rotational: true },
    {
      path: '/dev/nvme0n1',
      model: 'QEMU NVMe Ctrl',
      serial: 'nvme-serial-4',
      sizeBytes: 1875385008 * 512,
      rotational: false,
    },
  ],
  nics: [
    { name: 'eth0', mac: '52:54:00:12:34:56', driver: 'virtio_net', linkUp: true },
    { name: 'eth1', mac: '3c:ec:ef:00:00:02', driver: 'e1000e', linkUp: false },
    { name: 'eth2', mac: '3c:ec:ef:00:00:03', driver: 'ixgbe', speedMbps: 10000, linkUp: true },
  ],
  firmware: 'uefi',
  system: {
    vendor: 'QEMU',
    product: 'Standard PC (Q35 + ICH9, 2009)',
    serial: 'lab-m1',
    uuid: '5a6b7c8d-0000-4000-8000-00000000ab01',
  },
};

describe('collectInventory on a fixture tree', () => {
  let root = '';
  before(() => {
    root = mkdtempSync(path.join(tmpdir(), 'slipway-inventory-'));
    buildFixture(root);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('reads hardware disks and NICs only, each serial where Linux keeps it, and no BMC without an IPMI device', async () => {
    const { inventory, notes } = await collectInventory({ root, machine: 'x86_64' });
    assert.deepEqual(inventory, fixtureInventory);
    assert.deepEqual(parseInventory(JSON.parse(JSON.stringify(inventory))), inventory);
    assert.deepEqual(notes, [
      'skipped sr0: no medium (size 0)',
      'skipped NIC ib0: not Ethernet',
      'no IPMI device (/dev/ipmi0): no BMC',
    ]);
  });

  it('falls back to /proc when /sys lacks topology and memory blocks, and reads BIOS without /sys/firmware/efi', async () => {
    const bare = mkdtempSync(path.join(tmpdir(), 'slipway-inventory-bare-'));
    try {
      put(bare, 'proc/cpuinfo', armCpuinfo);
      put(bare, 'proc/meminfo', 'MemTotal:        1000000 kB\n');
      const { inventory, notes } = await collectInventory({ root: bare, machine: 'aarch64' });
      assert.deepEqual(inventory.cpu, {
        model: 'ARM implementer 0x41 part 0xd0c',
        sockets: 1,
        cores: 2,
        threads: 2,
        arch: 'arm64',
      });
      assert.deepEqual(inventory.memory, { totalBytes: 1000000 * 1024, usableBytes: 1000000 * 1024 });
      assert.equal(inventory.firmware, 'bios');
      assert.deepEqual(inventory.disks, []);
      assert.deepEqual(inventory.system, {});
      assert.deepEqual(notes, [
        'no CPU topology in /sys: sockets and cores from /proc/cpuinfo',
        'no memory blocks in /sys: installed memory is taken as MemTotal',
        'no SMBIOS (/sys/class/dmi/id): no system identity',
        'no IPMI device (/dev/ipmi0): no BMC',
      ]);
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
  });

  it('reports no BMC, with a note, when ipmitool is not installed', async () => {
    put(root, 'dev/ipmi0', '');
    try {
      const { inventory, notes } = await collectInventory({
        root,
        machine: 'x86_64',
        ipmitool: { program: 'ipmitool-not-installed', args: ['lan', 'print'] },
      });
      assert.equal(inventory.bmc, undefined);
      assert.ok(notes.includes('ipmitool-not-installed is not installed: no BMC'), notes.join('\n'));
    } finally {
      rmSync(path.join(root, 'dev'), { recursive: true, force: true });
    }
  });

  it('reads the BMC address through a real ipmitool from a real BMC', async (t) => {
    const missing = ipmiSimMissing();
    assert.equal(missing, undefined, `the BMC simulator needs: ${String(missing)}`);
    const sim = await IpmiSim.start({ lan: { address: '10.0.9.17', mac: '3c:ec:ef:00:00:0f' } });
    t.after(() => sim.stop());
    put(root, 'dev/ipmi0', '');
    try {
      // The boot OS runs `ipmitool lan print` on /dev/ipmi0; here the same command goes over RMCP+.
      const args = [
        '-I',
        'lanplus',
        '-C',
        '3',
        '-H',
        sim.host,
        '-p',
        String(sim.port),
        '-U',
        sim.username,
        '-P',
        sim.password,
        'lan',
        'print',
      ];
      const { inventory, notes } = await collectInventory({
        root,
        machine: 'x86_64',
        ipmitool: { program: 'ipmitool', args },
      });
      assert.deepEqual(inventory.bmc, { address: '10.0.9.17', mac: '3c:ec:ef:00:00:0f' });
      assert.deepEqual(notes, ['skipped sr0: no medium (size 0)', 'skipped NIC ib0: not Ethernet']);
      const unconfigured = await IpmiSim.start();
      t.after(() => unconfigured.stop());
      const other = args.map((a) => (a === String(sim.port) ? String(unconfigured.port) : a));
      const none = await collectInventory({
        root,
        machine: 'x86_64',
        ipmitool: { program: 'ipmitool', args: other },
      });
      assert.equal(none.inventory.bmc, undefined);
      assert.ok(none.notes.includes('the BMC on /dev/ipmi0 reports no IP address'), none.notes.join('\n'));
    } finally {
      rmSync(path.join(root, 'dev'), { recursive: true, force: true });
    }
  });
});

describe('collectInventory on this machine', () => {
  it('agrees with /proc/meminfo, lscpu, lsblk and the kernel’s NICs', async () => {
    const { inventory } = await collectInventory();
    assert.deepEqual(parseInventory(JSON.parse(JSON.stringify(inventory))), inventory);
    assert.equal(inventory.cpu.arch, normalizeArch(machine()));

    const memTotal = /^MemTotal:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1];
    assert.equal(inventory.memory.usableBytes, Number(memTotal) * 1024);
    const blockSize = Number.parseInt(
      readFileSync('/sys/devices/system/memory/block_size_bytes', 'utf8'),
      16,
    );
    const blocks = readdirSync('/sys/devices/system/memory').filter((e) => /^memory\d+$/.test(e)).length;
    assert.equal(inventory.memory.totalBytes, blockSize * blocks);
    assert.ok(inventory.memory.totalBytes >= inventory.memory.usableBytes);

    const lscpu = JSON.parse(execFileSync('lscpu', ['-J'], { encoding: 'utf8' })) as {
      lscpu: { field: string; data: string }[];
    };
    const field = (name: string): number => Number(lscpu.lscpu.find((f) => f.field === name)?.data);
    assert.equal(inventory.cpu.threads, cpus().length);
    assert.equal(inventory.cpu.sockets, field('Socket(s):'));
    assert.equal(inventory.cpu.cores, field('Socket(s):') * field('Core(s) per socket:'));

    type Block = { name: string; size: number; rota: boolean; type: string };
    const lsblk = JSON.parse(
      execFileSync('lsblk', ['-b', '-d', '-J', '-o', 'NAME,SIZE,ROTA,TYPE'], { encoding: 'utf8' }),
    ) as { blockdevices: Block[] };
    const hardware = lsblk.blockdevices.filter(
      (b) => b.type === 'disk' && b.size > 0 && !realpathSync(`/sys/block/${b.name}`).includes('/virtual/'),
    );
    assert.deepEqual(inventory.disks.map((d) => d.path).sort(), hardware.map((b) => `/dev/${b.name}`).sort());
    assert.ok(inventory.disks.length > 0, 'this machine has a disk');
    for (const disk of inventory.disks) {
      const name = path.basename(disk.path);
      const block = hardware.find((b) => b.name === name)!;
      assert.equal(disk.sizeBytes, block.size, name);
      assert.equal(disk.rotational, block.rota, name);
      const serialFile = `/sys/block/${name}/serial`;
      if (existsSync(serialFile))
        assert.equal(disk.serial, readFileSync(serialFile, 'utf8').trim() || undefined, name);
    }

    type Link = { ifname: string; address: string };
    const links = JSON.parse(execFileSync('ip', ['-j', 'link', 'show'], { encoding: 'utf8' })) as Link[];
    const physical = links.filter(
      (l) =>
        existsSync(`/sys/class/net/${l.ifname}/device`) &&
        !existsSync(`/sys/class/net/${l.ifname}/device/physfn`),
    );
    assert.deepEqual(
      inventory.nics.map((n) => [n.name, n.mac]),
      physical.map((l) => [l.ifname, l.address.toLowerCase()]).sort((a, b) => byDeviceName(a[0]!, b[0]!)),
    );
    assert.equal(inventory.firmware, existsSync('/sys/firmware/efi') ? 'uefi' : 'bios');
    assert.equal(inventory.bmc === undefined, !existsSync('/dev/ipmi0'));
  });
});

// A sysfs and procfs tree under a temp dir, laid out as Linux lays it out (symlinks included),
// and captured texts, for the tests of the worker's inventory collector.
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Inventory } from '../../src/model/inventory.js';

// `ipmitool lan print` (ipmitool 1.8.19) against OpenIPMI's ipmi_sim, as captured here.
export const lanPrint = (address: string, mac: string): string =>
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

export const x86Cpuinfo = [0, 1, 2, 3]
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

export const armCpuinfo = [0, 1]
  .map((n) =>
    [`processor\t: ${n}`, 'BogoMIPS\t: 50.00', 'CPU implementer\t: 0x41', 'CPU part\t: 0xd0c'].join('\n'),
  )
  .join('\n\n');

export function vpdPage(serial: string): Uint8Array {
  const text = Buffer.from(serial, 'latin1');
  return Uint8Array.from([0x00, 0x80, text.length >> 8, text.length & 0xff, ...text]);
}

/** Writes a file under root, creating its directories. */
export function put(root: string, file: string, content: string | Uint8Array): void {
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

export function buildFixture(root: string): void {
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

export const fixtureInventory: Inventory = {
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

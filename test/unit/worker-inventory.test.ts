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
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
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
import { parseInventory } from '../../src/model/inventory.js';
import { IpmiSim, ipmiSimMissing } from '../support/ipmi-sim.js';
import {
  armCpuinfo,
  buildFixture,
  fixtureInventory,
  lanPrint,
  put,
  vpdPage,
  x86Cpuinfo,
} from '../support/sysfs-fixture.js';

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
    // Installed memory is what the memory blocks cover, where the kernel lists them.
    const memoryDir = '/sys/devices/system/memory';
    const installed = existsSync(`${memoryDir}/block_size_bytes`)
      ? Number.parseInt(readFileSync(`${memoryDir}/block_size_bytes`, 'utf8'), 16) *
        readdirSync(memoryDir).filter((e) => /^memory\d+$/.test(e)).length
      : inventory.memory.usableBytes;
    assert.equal(inventory.memory.totalBytes, installed);
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

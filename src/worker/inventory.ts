// Collects the machine's inventory on the running Linux system, as the boot OS does in inventory
// mode: /proc and /sys for CPU, memory, disks, NICs, firmware and system identity, and
// `ipmitool lan print` through /dev/ipmi0 for the BMC's address. Everything is read under `root`
// (default '/'), so tests can point it at a fixture tree. A part that cannot be read is left out
// with a note, never an error: no ipmitool, or no IPMI device, means no BMC. The result passes
// the same validator as a report off the wire (src/model/inventory.ts).
import { execFile } from 'node:child_process';
import { access, readFile, readdir, readlink, realpath } from 'node:fs/promises';
import { machine as osMachine } from 'node:os';
import path from 'node:path';
import {
  parseInventory,
  type BmcInventory,
  type CpuInventory,
  type DiskInventory,
  type Inventory,
  type NicInventory,
  type SystemInventory,
} from '../model/inventory.js';
import { inventoryDisksMax, inventoryNicsMax } from '../model/limits.js';
import { normalizeMac } from '../platform/addresses.js';
import {
  byDeviceName,
  cleanText,
  normalizeArch,
  parseCpuinfo,
  parseIpmiLanPrint,
  parseMemTotalBytes,
  parseVpdSerial,
  wwnOf,
} from './inventory-parse.js';

export interface InventoryOptions {
  /** Where the system's /proc, /sys and /dev are; default '/'. */
  readonly root?: string;
  /** The kernel's machine name (uname -m); default this process's. */
  readonly machine?: string;
  /** How to ask the BMC; default `ipmitool lan print` (the open interface, /dev/ipmi0). */
  readonly ipmitool?: { readonly program: string; readonly args: readonly string[] };
  readonly ipmitoolTimeoutMs?: number;
}

export interface CollectedInventory {
  readonly inventory: Inventory;
  /** What was left out and why ("no IPMI device: no BMC"), for the worker's log. */
  readonly notes: readonly string[];
}

const ipmiDevices = ['dev/ipmi0', 'dev/ipmi/0', 'dev/ipmidev/0'];

class SystemReader {
  readonly root: string;
  readonly notes: string[] = [];
  constructor(root: string) {
    this.root = root;
  }
  at(...parts: string[]): string {
    return path.join(this.root, ...parts);
  }
  /** A file's text, or undefined when it cannot be read (absent, EINVAL on a down link, ...). */
  async text(...parts: string[]): Promise<string | undefined> {
    try {
      return await readFile(this.at(...parts), 'utf8');
    } catch {
      return undefined;
    }
  }
  async bytes(...parts: string[]): Promise<Uint8Array | undefined> {
    try {
      return await readFile(this.at(...parts));
    } catch {
      return undefined;
    }
  }
  async entries(...parts: string[]): Promise<string[]> {
    try {
      return await readdir(this.at(...parts));
    } catch {
      return [];
    }
  }
  async exists(...parts: string[]): Promise<boolean> {
    try {
      await access(this.at(...parts));
      return true;
    } catch {
      return false;
    }
  }
  async linkName(...parts: string[]): Promise<string | undefined> {
    try {
      return path.basename(await readlink(this.at(...parts)));
    } catch {
      return undefined;
    }
  }
  async resolved(...parts: string[]): Promise<string | undefined> {
    try {
      return await realpath(this.at(...parts));
    } catch {
      return undefined;
    }
  }
}

async function readCpu(sys: SystemReader, machine: string): Promise<CpuInventory> {
  const cpuinfo = parseCpuinfo((await sys.text('proc/cpuinfo')) ?? '');
  // sysfs topology is the same on every architecture; /proc/cpuinfo has it only on x86.
  const cpuDirs = (await sys.entries('sys/devices/system/cpu')).filter((e) => /^cpu[0-9]+$/.test(e));
  const places: string[] = [];
  for (const cpu of cpuDirs) {
    const pkg = (await sys.text('sys/devices/system/cpu', cpu, 'topology/physical_package_id'))?.trim();
    const core = (await sys.text('sys/devices/system/cpu', cpu, 'topology/core_id'))?.trim();
    if (pkg !== undefined && core !== undefined) places.push(`${pkg === '-1' ? '0' : pkg}:${core}`);
  }
  const threads = places.length > 0 ? places.length : Math.max(1, cpuinfo.processors);
  const sockets =
    places.length > 0 ? new Set(places.map((p) => p.split(':')[0])).size : (cpuinfo.sockets ?? 1);
  const cores = places.length > 0 ? new Set(places).size : (cpuinfo.cores ?? threads);
  if (places.length === 0) sys.notes.push('no CPU topology in /sys: sockets and cores from /proc/cpuinfo');
  return { model: cpuinfo.model ?? 'unknown', sockets, cores, threads, arch: normalizeArch(machine) };
}

async function readMemory(sys: SystemReader): Promise<Inventory['memory']> {
  const usableBytes = parseMemTotalBytes((await sys.text('proc/meminfo')) ?? '') ?? 0;
  const blockSize = Number.parseInt((await sys.text('sys/devices/system/memory/block_size_bytes')) ?? '', 16);
  const blocks = (await sys.entries('sys/devices/system/memory')).filter((e) =>
    /^memory[0-9]+$/.test(e),
  ).length;
  if (!(blockSize > 0) || blocks === 0) {
    sys.notes.push('no memory blocks in /sys: installed memory is taken as MemTotal');
    return { totalBytes: usableBytes, usableBytes };
  }
  // Installed memory is what the memory blocks cover; MemTotal leaves out the kernel's own share.
  return { totalBytes: Math.max(blockSize * blocks, usableBytes), usableBytes };
}

/** A disk's serial as Linux exposes it: virtio-blk, then NVMe and others, then SCSI/SATA VPD. */
async function diskSerial(sys: SystemReader, name: string): Promise<string | undefined> {
  const direct = cleanText(await sys.text('sys/block', name, 'serial'));
  if (direct !== undefined) return direct;
  const device = cleanText(await sys.text('sys/block', name, 'device/serial'));
  if (device !== undefined) return device;
  const page = await sys.bytes('sys/block', name, 'device/vpd_pg80');
  return page === undefined ? undefined : parseVpdSerial(page);
}

async function readDisk(sys: SystemReader, name: string): Promise<DiskInventory | undefined> {
  const real = await sys.resolved('sys/block', name);
  if (
    real === undefined ||
    real.includes('/devices/virtual/') ||
    !(await sys.exists('sys/block', name, 'device'))
  ) {
    return undefined; // loop, ram, zram, device-mapper, md: not hardware
  }
  if ((await sys.text('sys/block', name, 'hidden'))?.trim() === '1') return undefined;
  const sectors = Number((await sys.text('sys/block', name, 'size'))?.trim());
  if (!Number.isSafeInteger(sectors) || sectors <= 0) {
    sys.notes.push(`skipped ${name}: no medium (size 0)`);
    return undefined;
  }
  const model = cleanText(await sys.text('sys/block', name, 'device/model'));
  const serial = await diskSerial(sys, name);
  const wwn = wwnOf(
    (await sys.text('sys/block', name, 'wwid')) ?? (await sys.text('sys/block', name, 'device/wwid')),
  );
  return {
    path: `/dev/${name.replaceAll('!', '/')}`,
    ...(model === undefined ? {} : { model }),
    ...(serial === undefined ? {} : { serial }),
    sizeBytes: Math.min(sectors * 512, Number.MAX_SAFE_INTEGER),
    rotational: (await sys.text('sys/block', name, 'queue/rotational'))?.trim() === '1',
    ...(wwn === undefined ? {} : { wwn }),
  };
}

async function readDisks(sys: SystemReader): Promise<DiskInventory[]> {
  const disks: DiskInventory[] = [];
  for (const name of (await sys.entries('sys/block')).sort(byDeviceName)) {
    const disk = await readDisk(sys, name);
    if (disk !== undefined) disks.push(disk);
  }
  if (disks.length > inventoryDisksMax)
    sys.notes.push(`${disks.length} disks: kept the first ${inventoryDisksMax}`);
  return disks.slice(0, inventoryDisksMax);
}

async function readNic(sys: SystemReader, name: string): Promise<NicInventory | undefined> {
  const dir = ['sys/class/net', name];
  // No device link: virtual (lo, bridges, bonds, veth, ifb). A physfn link: an SR-IOV function.
  if (!(await sys.exists(...dir, 'device')) || (await sys.exists(...dir, 'device/physfn'))) return undefined;
  const type = (await sys.text(...dir, 'type'))?.trim();
  const mac = normalizeMac((await sys.text(...dir, 'address'))?.trim() ?? '');
  if ((type !== undefined && type !== '1') || mac === undefined) {
    sys.notes.push(`skipped NIC ${name}: not Ethernet`);
    return undefined;
  }
  const driver = await sys.linkName(...dir, 'device/driver');
  const speed = Number((await sys.text(...dir, 'speed'))?.trim());
  return {
    name,
    mac,
    ...(driver === undefined ? {} : { driver }),
    ...(Number.isSafeInteger(speed) && speed > 0 ? { speedMbps: speed } : {}),
    linkUp: (await sys.text(...dir, 'carrier'))?.trim() === '1',
  };
}

async function readNics(sys: SystemReader): Promise<NicInventory[]> {
  const nics: NicInventory[] = [];
  for (const name of (await sys.entries('sys/class/net')).sort(byDeviceName)) {
    if (name.length > 15 || name.includes(':')) continue;
    const nic = await readNic(sys, name);
    if (nic !== undefined) nics.push(nic);
  }
  if (nics.length > inventoryNicsMax)
    sys.notes.push(`${nics.length} NICs: kept the first ${inventoryNicsMax}`);
  return nics.slice(0, inventoryNicsMax);
}

async function readSystem(sys: SystemReader): Promise<SystemInventory> {
  const dmi = async (file: string): Promise<string | undefined> =>
    cleanText(await sys.text('sys/class/dmi/id', file));
  const vendor = await dmi('sys_vendor');
  const product = await dmi('product_name');
  const serial = await dmi('product_serial');
  const uuidText = (await dmi('product_uuid'))?.toLowerCase();
  const uuid =
    uuidText !== undefined && /^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$/.test(uuidText)
      ? uuidText
      : undefined;
  if (vendor === undefined && product === undefined)
    sys.notes.push('no SMBIOS (/sys/class/dmi/id): no system identity');
  return {
    ...(vendor === undefined ? {} : { vendor }),
    ...(product === undefined ? {} : { product }),
    ...(serial === undefined ? {} : { serial }),
    ...(uuid === undefined ? {} : { uuid }),
  };
}

function run(program: string, args: readonly string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      program,
      args,
      { timeout: timeoutMs, maxBuffer: 1 << 20, encoding: 'utf8' },
      (error, stdout, stderr) => {
        if (error === null) resolve(stdout);
        else reject(new Error(`${error.message.split('\n')[0] ?? ''} ${stderr.trim().slice(0, 200)}`.trim()));
      },
    );
  });
}

async function readBmc(sys: SystemReader, options: InventoryOptions): Promise<BmcInventory | undefined> {
  let device: string | undefined;
  for (const d of ipmiDevices) if (device === undefined && (await sys.exists(d))) device = d;
  if (device === undefined) {
    sys.notes.push('no IPMI device (/dev/ipmi0): no BMC');
    return undefined;
  }
  const { program, args } = options.ipmitool ?? { program: 'ipmitool', args: ['lan', 'print'] };
  let output: string;
  try {
    output = await run(program, args, options.ipmitoolTimeoutMs ?? 20_000);
  } catch (error) {
    const missing = (error as Error).message.includes('ENOENT');
    sys.notes.push(
      missing
        ? `${program} is not installed: no BMC`
        : `${program} ${args.join(' ')} failed: ${(error as Error).message}`,
    );
    return undefined;
  }
  const bmc = parseIpmiLanPrint(output);
  if (bmc === undefined) sys.notes.push(`the BMC on /${device} reports no IP address`);
  return bmc;
}

/** The inventory of the machine this runs on (or of the tree under options.root). */
export async function collectInventory(options: InventoryOptions = {}): Promise<CollectedInventory> {
  const sys = new SystemReader(options.root ?? '/');
  const [cpu, memory, disks, nics, system, bmc] = [
    await readCpu(sys, options.machine ?? osMachine()),
    await readMemory(sys),
    await readDisks(sys),
    await readNics(sys),
    await readSystem(sys),
    await readBmc(sys, options),
  ];
  const firmware = (await sys.exists('sys/firmware/efi')) ? 'uefi' : 'bios';
  const inventory = parseInventory({
    cpu,
    memory,
    disks,
    nics,
    firmware,
    system,
    ...(bmc === undefined ? {} : { bmc }),
  });
  return { inventory, notes: sys.notes };
}

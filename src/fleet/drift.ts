// What drifted between a machine's last accepted inventory and a new one, in operator words
// ("memory 64Gi → 32Gi", "disk serial X missing (was /dev/sdb, 1.92T)"), so that a machine whose
// hardware changed is held back until someone accepts it (docs/decisions/0027).
// Compared: installed memory; CPU model, architecture, sockets, cores and threads; firmware mode;
// system vendor, product, serial and UUID; disks (by serial, else WWN, else path when a disk has
// neither) and their size, model and kind; NICs, by MAC. Not compared, because they change
// without the hardware changing: usable memory (the kernel's share), device paths and interface
// names (the kernel's enumeration), NIC drivers (the boot OS's kernel), link state and speed (the
// cable and the switch port), and the BMC's address (its own DHCP or an operator's setting).
import type { DiskInventory, Inventory, NicInventory } from '../model/inventory.js';
import { describeBytes, unitFamilyOf } from './quantity.js';

export type DriftPart = 'memory' | 'cpu' | 'firmware' | 'system' | 'disk' | 'nic';

export interface Drift {
  readonly part: DriftPart;
  /** One change, as an operator reads it. */
  readonly message: string;
}

/** In the units the size is exact in: 8Gi for a virtual disk, 1.92T for a sold one. */
const size = (bytes: number): string => describeBytes(bytes, unitFamilyOf(bytes));

function shown(value: string | number | undefined): string {
  if (value === undefined) return 'none';
  return typeof value === 'number' || /^[A-Za-z0-9._:-]+$/.test(value)
    ? String(value)
    : JSON.stringify(value);
}

function scalarDrift(before: Inventory, after: Inventory): Drift[] {
  const out: Drift[] = [];
  const compare = (
    part: DriftPart,
    what: string,
    a: string | number | undefined,
    b: string | number | undefined,
  ): void => {
    if (a !== b) out.push({ part, message: `${what} ${shown(a)} → ${shown(b)}` });
  };
  if (before.memory.totalBytes !== after.memory.totalBytes) {
    out.push({
      part: 'memory',
      message: `memory ${size(before.memory.totalBytes)} → ${size(after.memory.totalBytes)}`,
    });
  }
  compare('cpu', 'CPU model', before.cpu.model, after.cpu.model);
  compare('cpu', 'CPU architecture', before.cpu.arch, after.cpu.arch);
  compare('cpu', 'CPU sockets', before.cpu.sockets, after.cpu.sockets);
  compare('cpu', 'CPU cores', before.cpu.cores, after.cpu.cores);
  compare('cpu', 'CPU threads', before.cpu.threads, after.cpu.threads);
  if (before.firmware !== after.firmware) {
    out.push({
      part: 'firmware',
      message: `firmware ${before.firmware.toUpperCase()} → ${after.firmware.toUpperCase()}`,
    });
  }
  compare('system', 'system vendor', before.system.vendor, after.system.vendor);
  compare('system', 'system product', before.system.product, after.system.product);
  compare('system', 'system serial', before.system.serial, after.system.serial);
  compare('system', 'system UUID', before.system.uuid, after.system.uuid);
  return out;
}

/** Pairs of the same disk before and after; those left over went missing or are new. */
function pairDisks(
  before: readonly DiskInventory[],
  after: readonly DiskInventory[],
): { pairs: [DiskInventory, DiskInventory][]; missing: DiskInventory[]; added: DiskInventory[] } {
  const left = [...after];
  const pairs: [DiskInventory, DiskInventory][] = [];
  const missing: DiskInventory[] = [];
  const take = (same: (d: DiskInventory) => boolean, path: string): DiskInventory | undefined => {
    const candidates = left.filter(same);
    const chosen = candidates.find((d) => d.path === path) ?? candidates[0];
    if (chosen !== undefined) left.splice(left.indexOf(chosen), 1);
    return chosen;
  };
  for (const disk of before) {
    const match =
      disk.serial !== undefined
        ? take((d) => d.serial === disk.serial, disk.path)
        : disk.wwn !== undefined
          ? take((d) => d.wwn === disk.wwn, disk.path)
          : take((d) => d.serial === undefined && d.wwn === undefined && d.path === disk.path, disk.path);
    if (match === undefined) missing.push(disk);
    else pairs.push([disk, match]);
  }
  return { pairs, missing, added: left };
}

function diskName(disk: DiskInventory): string {
  if (disk.serial !== undefined) return `disk serial ${shown(disk.serial)}`;
  if (disk.wwn !== undefined) return `disk WWN ${disk.wwn}`;
  return `disk ${disk.path}`;
}

function diskDrift(before: readonly DiskInventory[], after: readonly DiskInventory[]): Drift[] {
  const { pairs, missing, added } = pairDisks(before, after);
  const out: Drift[] = [];
  for (const [a, b] of pairs) {
    const name = `${diskName(a)} (${b.path})`;
    if (a.sizeBytes !== b.sizeBytes)
      out.push({ part: 'disk', message: `${name} size ${size(a.sizeBytes)} → ${size(b.sizeBytes)}` });
    if (a.model !== b.model)
      out.push({ part: 'disk', message: `${name} model ${shown(a.model)} → ${shown(b.model)}` });
    if (a.rotational !== b.rotational) {
      const kind = (rotational: boolean): string => (rotational ? 'rotational' : 'solid-state');
      out.push({ part: 'disk', message: `${name} ${kind(a.rotational)} → ${kind(b.rotational)}` });
    }
  }
  for (const d of missing) {
    const was =
      d.serial === undefined && d.wwn === undefined
        ? size(d.sizeBytes)
        : `was ${d.path}, ${size(d.sizeBytes)}`;
    out.push({ part: 'disk', message: `${diskName(d)} missing (${was})` });
  }
  for (const d of added) {
    const serial =
      d.serial !== undefined
        ? `serial ${shown(d.serial)}`
        : d.wwn !== undefined
          ? `WWN ${d.wwn}`
          : 'no serial';
    out.push({ part: 'disk', message: `new disk ${d.path} ${size(d.sizeBytes)} (${serial})` });
  }
  return out;
}

function nicDetail(nic: NicInventory): string {
  return nic.driver === undefined ? nic.name : `${nic.name}, ${nic.driver}`;
}

function nicDrift(before: readonly NicInventory[], after: readonly NicInventory[]): Drift[] {
  const afterMacs = new Set(after.map((n) => n.mac));
  const beforeMacs = new Set(before.map((n) => n.mac));
  return [
    ...before
      .filter((n) => !afterMacs.has(n.mac))
      .map((n) => ({ part: 'nic' as const, message: `NIC ${n.mac} missing (was ${nicDetail(n)})` })),
    ...after
      .filter((n) => !beforeMacs.has(n.mac))
      .map((n) => ({ part: 'nic' as const, message: `new NIC ${n.mac} (${nicDetail(n)})` })),
  ];
}

/**
 * What changed that matters, memory and CPU first, then firmware, system, disks and NICs; an
 * empty list when nothing that matters did.
 */
export function inventoryDrift(before: Inventory, after: Inventory): readonly Drift[] {
  return [
    ...scalarDrift(before, after),
    ...diskDrift(before.disks, after.disks),
    ...nicDrift(before.nics, after.nics),
  ];
}

// The inventory a machine reports when it boots in inventory mode: CPU, memory, disks, NICs,
// firmware, system identity and the BMC's address. Plain JSON-shaped data, because it travels
// inside replicated commands and snapshots and is read by templates and selectors.
// parseInventory is the one gate a report passes on its way in from the wire: it bounds every
// count and string (src/model/limits.ts), normalises MACs and UUIDs, and names the field at fault.
import { isIpv4, normalizeMac } from '../platform/addresses.js';
import { isWellFormed, utf8Length } from '../platform/utf8-text.js';
import {
  inventoryCpuThreadsMax,
  inventoryDisksMax,
  inventoryNicSpeedMbpsMax,
  inventoryNicsMax,
  inventoryTextBytesMax,
} from './limits.js';

export const firmwareModes = ['bios', 'uefi'] as const;
export type FirmwareMode = (typeof firmwareModes)[number];

export interface CpuInventory {
  /** As the processor names itself ("AMD EPYC 7302 16-Core Processor"). */
  readonly model: string;
  readonly sockets: number;
  /** Physical cores across all sockets. */
  readonly cores: number;
  /** Logical CPUs (hardware threads) across all sockets. */
  readonly threads: number;
  /** The kernel's machine name, with aarch64 written arm64 as Slipway's records do. */
  readonly arch: string;
}

export interface MemoryInventory {
  /** Installed memory (the memory blocks the kernel sees): what `memory>=64Gi` compares. */
  readonly totalBytes: number;
  /** MemTotal: what the kernel keeps for use; smaller, and varies with the kernel. */
  readonly usableBytes: number;
}

export interface DiskInventory {
  /** /dev/sda, /dev/nvme0n1, /dev/vda. Not stable across boots: identity is the serial. */
  readonly path: string;
  readonly model?: string;
  readonly serial?: string;
  readonly sizeBytes: number;
  readonly rotational: boolean;
  /** A world-wide name (naa.…, eui.…) when the disk has one. */
  readonly wwn?: string;
}

export interface NicInventory {
  /** The kernel's name for it (eth0, enp1s0); not stable across kernels: identity is the MAC. */
  readonly name: string;
  /** Lower-case colon form. */
  readonly mac: string;
  readonly driver?: string;
  /** Absent while the link is down (the kernel does not know it then). */
  readonly speedMbps?: number;
  readonly linkUp: boolean;
}

/** From the firmware's SMBIOS tables (/sys/class/dmi/id); each may be absent or a placeholder. */
export interface SystemInventory {
  readonly vendor?: string;
  readonly product?: string;
  readonly serial?: string;
  /** Lower-case 8-4-4-4-12 form. */
  readonly uuid?: string;
}

/** The BMC's LAN settings as the machine reads them through its own IPMI interface. */
export interface BmcInventory {
  /** IPv4 dotted quad. */
  readonly address: string;
  readonly mac?: string;
}

export interface Inventory {
  readonly cpu: CpuInventory;
  readonly memory: MemoryInventory;
  readonly disks: readonly DiskInventory[];
  readonly nics: readonly NicInventory[];
  readonly firmware: FirmwareMode;
  readonly system: SystemInventory;
  readonly bmc?: BmcInventory;
}

/** A report refused: which field (`disks[2].serial`) and what is wrong with it. */
export class InventoryError extends Error {
  readonly field: string;
  readonly problem: string;
  constructor(field: string, problem: string) {
    super(`inventory ${field}: ${problem}`);
    this.name = 'InventoryError';
    this.field = field;
    this.problem = problem;
  }
}

type Fields = { readonly [key: string]: unknown };

function fields(value: unknown, field: string): Fields {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InventoryError(field, `is ${describe(value)}; want an object`);
  }
  return value as Fields;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return `the text ${JSON.stringify(value.slice(0, 40))}`;
  if (typeof value === 'number' || typeof value === 'boolean') return `the ${typeof value} ${value}`;
  return typeof value === 'object' ? 'an object' : typeof value;
}

function join(field: string, key: string): string {
  return field === '' ? key : `${field}.${key}`;
}

function hasControl(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

/** Text, trimmed; never empty, never a control character, at most inventoryTextBytesMax bytes. */
function text(value: unknown, field: string): string {
  if (typeof value !== 'string') throw new InventoryError(field, `is ${describe(value)}; want text`);
  const trimmed = value.trim();
  if (trimmed === '') throw new InventoryError(field, 'is empty; leave the field out instead');
  if (!isWellFormed(trimmed) || hasControl(trimmed)) {
    throw new InventoryError(field, 'holds a control character or broken Unicode');
  }
  const bytes = utf8Length(trimmed);
  if (bytes > inventoryTextBytesMax) {
    throw new InventoryError(field, `is ${bytes} bytes; at most ${inventoryTextBytesMax}`);
  }
  return trimmed;
}

function optionalText(record: Fields, key: string, field: string): string | undefined {
  const value = record[key];
  return value === undefined ? undefined : text(value, join(field, key));
}

function whole(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
    throw new InventoryError(field, `is ${describe(value)}; want a whole number`);
  }
  if (value < min || value > max) throw new InventoryError(field, `is ${value}; want ${min} to ${max}`);
  // -0 (which JSON writes as 0) is 0: what is stored reads back the same.
  return value === 0 ? 0 : value;
}

function flag(value: unknown, field: string): boolean {
  if (typeof value !== 'boolean')
    throw new InventoryError(field, `is ${describe(value)}; want true or false`);
  return value;
}

function list(value: unknown, field: string, max: number): readonly unknown[] {
  if (!Array.isArray(value)) throw new InventoryError(field, `is ${describe(value)}; want a list`);
  if (value.length > max) throw new InventoryError(field, `has ${value.length} entries; at most ${max}`);
  return value;
}

function matching(value: string, pattern: RegExp, field: string, want: string): string {
  if (!pattern.test(value)) throw new InventoryError(field, `is ${JSON.stringify(value)}; want ${want}`);
  return value;
}

function mac(value: unknown, field: string): string {
  const normal = normalizeMac(text(value, field));
  if (normal === undefined)
    throw new InventoryError(field, `is ${JSON.stringify(value)}; want a MAC address`);
  return normal;
}

function readCpu(value: unknown, field: string): CpuInventory {
  const cpu = fields(value, field);
  const sockets = whole(cpu['sockets'], join(field, 'sockets'), 1, inventoryCpuThreadsMax);
  const cores = whole(cpu['cores'], join(field, 'cores'), 1, inventoryCpuThreadsMax);
  const threads = whole(cpu['threads'], join(field, 'threads'), 1, inventoryCpuThreadsMax);
  if (cores < sockets)
    throw new InventoryError(join(field, 'cores'), `is ${cores}, fewer than ${sockets} sockets`);
  if (threads < cores)
    throw new InventoryError(join(field, 'threads'), `is ${threads}, fewer than ${cores} cores`);
  const arch = matching(
    text(cpu['arch'], join(field, 'arch')),
    /^[a-z0-9_]{1,32}$/,
    join(field, 'arch'),
    'a machine name such as x86_64 or arm64',
  );
  return { model: text(cpu['model'], join(field, 'model')), sockets, cores, threads, arch };
}

function readMemory(value: unknown, field: string): MemoryInventory {
  const memory = fields(value, field);
  const max = Number.MAX_SAFE_INTEGER;
  return {
    totalBytes: whole(memory['totalBytes'], join(field, 'totalBytes'), 1, max),
    usableBytes: whole(memory['usableBytes'], join(field, 'usableBytes'), 1, max),
  };
}

const devicePathPattern = /^\/dev\/(?!.*\.\.)[A-Za-z0-9._+:/-]{1,200}$/;

function readDisk(value: unknown, field: string): DiskInventory {
  const disk = fields(value, field);
  const path = matching(
    text(disk['path'], join(field, 'path')),
    devicePathPattern,
    join(field, 'path'),
    'a /dev path',
  );
  const model = optionalText(disk, 'model', field);
  const serial = optionalText(disk, 'serial', field);
  const wwn = optionalText(disk, 'wwn', field);
  return {
    path,
    ...(model === undefined ? {} : { model }),
    ...(serial === undefined ? {} : { serial }),
    sizeBytes: whole(disk['sizeBytes'], join(field, 'sizeBytes'), 0, Number.MAX_SAFE_INTEGER),
    rotational: flag(disk['rotational'], join(field, 'rotational')),
    ...(wwn === undefined ? {} : { wwn }),
  };
}

function readNic(value: unknown, field: string): NicInventory {
  const nic = fields(value, field);
  const name = matching(
    text(nic['name'], join(field, 'name')),
    /^[^\s/:]{1,15}$/,
    join(field, 'name'),
    'an interface name of at most 15 characters',
  );
  const driver = optionalText(nic, 'driver', field);
  const speed = nic['speedMbps'];
  return {
    name,
    mac: mac(nic['mac'], join(field, 'mac')),
    ...(driver === undefined ? {} : { driver }),
    ...(speed === undefined
      ? {}
      : { speedMbps: whole(speed, join(field, 'speedMbps'), 1, inventoryNicSpeedMbpsMax) }),
    linkUp: flag(nic['linkUp'], join(field, 'linkUp')),
  };
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function readSystem(value: unknown, field: string): SystemInventory {
  const system = fields(value, field);
  const vendor = optionalText(system, 'vendor', field);
  const product = optionalText(system, 'product', field);
  const serial = optionalText(system, 'serial', field);
  const uuidText = optionalText(system, 'uuid', field);
  const uuid =
    uuidText === undefined
      ? undefined
      : matching(uuidText.toLowerCase(), uuidPattern, join(field, 'uuid'), 'a UUID (8-4-4-4-12 hex digits)');
  return {
    ...(vendor === undefined ? {} : { vendor }),
    ...(product === undefined ? {} : { product }),
    ...(serial === undefined ? {} : { serial }),
    ...(uuid === undefined ? {} : { uuid }),
  };
}

function readBmc(value: unknown, field: string): BmcInventory {
  const bmc = fields(value, field);
  const address = text(bmc['address'], join(field, 'address'));
  if (!isIpv4(address))
    throw new InventoryError(join(field, 'address'), `is ${JSON.stringify(address)}; want an IPv4 address`);
  return { address, ...(bmc['mac'] === undefined ? {} : { mac: mac(bmc['mac'], join(field, 'mac')) }) };
}

function unique<T>(items: readonly T[], key: (item: T) => string, field: string, what: string): readonly T[] {
  const seen = new Set<string>();
  items.forEach((item, i) => {
    const k = key(item);
    if (seen.has(k)) throw new InventoryError(`${field}[${i}]`, `repeats the ${what} ${JSON.stringify(k)}`);
    seen.add(k);
  });
  return items;
}

/**
 * The inventory in a report off the wire, validated and normalised, or an InventoryError naming
 * the field. Fields it does not know are dropped, so a newer boot OS can report to an older
 * node; what it returns holds only what it checked.
 */
export function parseInventory(value: unknown): Inventory {
  const report = fields(value, '(report)');
  const disks = list(report['disks'], 'disks', inventoryDisksMax).map((d, i) => readDisk(d, `disks[${i}]`));
  const nics = list(report['nics'], 'nics', inventoryNicsMax).map((n, i) => readNic(n, `nics[${i}]`));
  const firmware = report['firmware'];
  if (firmware !== 'bios' && firmware !== 'uefi') {
    throw new InventoryError('firmware', `is ${describe(firmware)}; want bios or uefi`);
  }
  return {
    cpu: readCpu(report['cpu'], 'cpu'),
    memory: readMemory(report['memory'], 'memory'),
    disks: unique(disks, (d) => d.path, 'disks', 'path'),
    nics: unique(nics, (n) => n.name, 'nics', 'name'),
    firmware,
    system: readSystem(report['system'] === undefined ? {} : report['system'], 'system'),
    ...(report['bmc'] === undefined ? {} : { bmc: readBmc(report['bmc'], 'bmc') }),
  };
}

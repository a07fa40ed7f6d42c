// The storage layout Tinkerbell's rootio action works from: a machine's `metadata.instance.storage`
// as Tinkerbell's Hardware holds it (Equinix Metal's custom partitioning), read and checked.
//
//   disks:        [{ device: /dev/sda, wipe_table: true,
//                    partitions: [{ label: BIOS, number: 1, size: 4096 }, ...] }]
//   filesystems:  [{ mount: { device: /dev/sda3, format: ext4, point: /,
//                             create: { options: [-L, ROOT] } } }]
//
// Sizes count 512-byte sectors, 0 meaning the rest of the disk; partitions are numbered from 1 in
// order. Pure: every problem is returned as one line naming where it is, so `workflow create`
// refuses a layout the machine would fail on, with the field named.
import type { JsonValue } from '../model/records.js';

export interface StoragePartition {
  readonly label: string;
  readonly number: number;
  /** 512-byte sectors; 0: the rest of the disk. */
  readonly sizeSectors: number;
}

export interface StorageDisk {
  readonly device: string;
  readonly wipeTable: boolean;
  readonly partitions: readonly StoragePartition[];
}

export interface StorageFilesystem {
  readonly device: string;
  readonly format: RootioFormat;
  /** Where it is mounted; "none" (or absent) for swap. */
  readonly point: string;
  readonly createOptions: readonly string[];
}

export interface Storage {
  readonly disks: readonly StorageDisk[];
  readonly filesystems: readonly StorageFilesystem[];
}

/** The formats rootio makes, as Tinkerbell's does (mke2fs, mkfs.fat, mkfs.xfs, mkswap). */
export const rootioFormats = ['ext4', 'ext3', 'ext2', 'vfat', 'xfs', 'swap'] as const;
export type RootioFormat = (typeof rootioFormats)[number];

/** Bounds on what one layout may hold: far above any real machine's. */
const disksMax = 64;
const partitionsMax = 128;
const filesystemsMax = 256;
const optionsMax = 64;
const devicePattern = /^\/dev\/[A-Za-z0-9._/:-]{1,200}$/;

type Fields = Readonly<Record<string, unknown>>;

export type StorageReading = { readonly storage: Storage } | { readonly problems: readonly string[] };

/** Reads a layout (parsed JSON); `where` names it in problems ("metadata.instance.storage"). */
export function readStorage(value: unknown, where: string): StorageReading {
  const problems: string[] = [];
  const report = (path: string, message: string): void => {
    if (problems.length < 20) problems.push(`${where}.${path} ${message}`);
  };
  if (!isFields(value)) return { problems: [`${where} must be a mapping with disks and filesystems`] };
  const disks = list(value['disks'], 'disks', disksMax, report).map((disk, i) =>
    readDisk(disk, `disks[${i}]`, report),
  );
  const filesystems = list(value['filesystems'], 'filesystems', filesystemsMax, report).map((fs, i) =>
    readFilesystem(fs, `filesystems[${i}]`, report),
  );
  if (disks.length === 0 && filesystems.length === 0 && problems.length === 0) {
    problems.push(`${where} lists no disks and no filesystems`);
  }
  return problems.length > 0 ? { problems } : { storage: { disks, filesystems } };
}

/** The layout a template's ROOTIO_STORAGE holds, as JSON text. */
export function readStorageJson(text: string, where: string): StorageReading {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { problems: [`${where} is not JSON: ${(error as Error).message}`] };
  }
  return readStorage(value, where);
}

/** The layout in a machine's metadata (Tinkerbell's Hardware spec.metadata.instance.storage). */
export function storageOfMetadata(metadata: Readonly<Record<string, JsonValue>>): unknown {
  const instance = metadata['instance'];
  return isFields(instance) ? instance['storage'] : undefined;
}

type Report = (path: string, message: string) => void;

function readDisk(value: unknown, path: string, report: Report): StorageDisk {
  const fields = isFields(value) ? value : {};
  if (!isFields(value)) report(path, 'must be a mapping with device and partitions');
  const device = deviceField(fields['device'], `${path}.device`, report);
  const wipe = fields['wipe_table'];
  if (wipe !== undefined && typeof wipe !== 'boolean') report(`${path}.wipe_table`, 'must be true or false');
  const partitions = list(fields['partitions'], `${path}.partitions`, partitionsMax, report).map((p, i) =>
    readPartition(p, `${path}.partitions[${i}]`, report),
  );
  partitions.forEach((partition, i) => {
    // Tinkerbell's rootio skips a partition numbered out of order; here that is an error.
    if (partition.number !== i + 1) {
      report(
        `${path}.partitions[${i}].number`,
        `is ${partition.number}; partitions are numbered 1, 2, ... in order`,
      );
    }
    if (partition.sizeSectors === 0 && i !== partitions.length - 1) {
      report(
        `${path}.partitions[${i}].size`,
        'is 0 (the rest of the disk), so it must be the last partition',
      );
    }
  });
  return { device, wipeTable: wipe === true, partitions };
}

function readPartition(value: unknown, path: string, report: Report): StoragePartition {
  const fields = isFields(value) ? value : {};
  if (!isFields(value)) report(path, 'must be a mapping with label, number and size');
  const label = fields['label'] ?? '';
  // sfdisk's script quotes the name: no quote, backslash or control character in it.
  // eslint-disable-next-line no-control-regex
  if (typeof label !== 'string' || label.length > 36 || /["\\\u0000-\u001f]/.test(label)) {
    report(`${path}.label`, 'must be a name of at most 36 characters, without quotes or backslashes');
  }
  const number = fields['number'];
  const size = fields['size'] ?? 0;
  if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 1) {
    report(`${path}.number`, 'must be a whole number from 1');
  }
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) {
    report(`${path}.size`, 'must be a whole number of 512-byte sectors (0: the rest of the disk)');
  }
  return {
    label: typeof label === 'string' ? label : '',
    number: typeof number === 'number' ? number : 0,
    sizeSectors: typeof size === 'number' ? size : 0,
  };
}

function readFilesystem(value: unknown, path: string, report: Report): StorageFilesystem {
  const mount = isFields(value) && isFields(value['mount']) ? value['mount'] : undefined;
  if (mount === undefined) report(path, 'must be a mapping with mount: {device, format, point}');
  const fields = mount ?? {};
  const device = deviceField(fields['device'], `${path}.mount.device`, report);
  const format = fields['format'];
  if (typeof format !== 'string' || !(rootioFormats as readonly string[]).includes(format)) {
    report(`${path}.mount.format`, `is ${JSON.stringify(format)}, not one of ${rootioFormats.join(', ')}`);
  }
  const point = fields['point'] ?? 'none';
  if (typeof point !== 'string' || (format !== 'swap' && !isMountPoint(point))) {
    report(`${path}.mount.point`, 'must be an absolute path without ".." (or "none" for swap)');
  }
  const create = isFields(fields['create']) ? fields['create'] : {};
  const options = list(create['options'], `${path}.mount.create.options`, optionsMax, report);
  options.forEach((option, i) => {
    if (typeof option !== 'string' || option.includes('\u0000')) {
      report(`${path}.mount.create.options[${i}]`, 'must be a string');
    }
  });
  return {
    device,
    format: format as RootioFormat,
    point: typeof point === 'string' ? point : 'none',
    createOptions: options.filter((option): option is string => typeof option === 'string'),
  };
}

function deviceField(value: unknown, path: string, report: Report): string {
  if (typeof value === 'string' && devicePattern.test(value) && !value.split('/').includes('..'))
    return value;
  report(path, `is ${JSON.stringify(value) ?? 'missing'}, not a device path such as /dev/sda`);
  return '';
}

function isMountPoint(point: string): boolean {
  return point.startsWith('/') && !point.split('/').includes('..') && !point.includes('\u0000');
}

function list(value: unknown, path: string, itemsMax: number, report: Report): readonly unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) {
    report(path, 'must be a list');
    return [];
  }
  if (value.length > itemsMax) {
    report(path, `has ${value.length} entries; at most ${itemsMax} are allowed`);
    return [];
  }
  return value as readonly unknown[];
}

function isFields(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

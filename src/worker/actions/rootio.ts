// rootio: partitions, formats and mounts the machine's disks from its storage layout, as
// Tinkerbell's hub action does (docs/decisions/0041-hub-actions.md).
//
//   command      ["partition"], ["format"], ["mount"] or ["wipe"] (a hub image's form), or
//   ACTION       the same word, for `action: rootio`
//   ROOTIO_STORAGE  the layout as JSON: filled in from the hardware's metadata.instance.storage
//                when the workflow is created (Tinkerbell's rootio asks Hegel for it; MIRROR_HOST
//                and METADATA_SERVICE_PORT are accepted and not needed)
//   MBR          true: an MBR (DOS) partition table instead of GPT
//   MOUNT_ROOT   Slipway's own: where `mount` mounts the filesystems, each at its point below it
//                (default /mnt/target; Tinkerbell's mounts inside its container, gone after it)
//
// partition: for each disk, wipe_table zeroes its first GiB (as Tinkerbell's does), then a new
// table: from sector 2048, each partition `size` 512-byte sectors right after the previous one,
// 0 meaning the rest of the disk; GPT types by label (BIOS, EFI, SWAP, else Linux filesystem),
// MBR types by label (LINUX, FAT32, SWAP; _ACTIVE marks it bootable). format: mke2fs, mkfs.fat,
// mkfs.xfs or mkswap with the layout's create options. mount: each filesystem at MOUNT_ROOT plus
// its point, shallowest first, and swapon for swap; they stay mounted for the actions after it.
// wipe: only the zeroing. Unlike Tinkerbell's, the first failure fails the action, naming the disk
// or filesystem; `mount` then unmounts what it had mounted.
import { mkdir, open } from 'node:fs/promises';
import path from 'node:path';
import { rootioCommand, rootioStorageSetting, type BuiltinAction } from '../../workflow/builtin-actions.js';
import {
  readStorageJson,
  type StorageDisk,
  type StorageFilesystem,
  type StoragePartition,
} from '../../workflow/rootio-storage.js';
import { ActionError, type BuiltinContext, type BuiltinDone } from './action.js';
import { runProgram } from './program.js';
import { checkChoiceSettings, optionalSetting } from './settings.js';
import { deviceKind } from './target-disk.js';

const builtin: BuiltinAction = 'rootio';
const sectorBytes = 512;
const firstSector = 2048;
/** Tinkerbell's wipe zeroes this much of the disk's start. */
const wipeBytes = 1024 * 1024 * 1024;
const wipeChunkBytes = 4 * 1024 * 1024;
export const mountRootDefault = '/mnt/target';

const gptTypes: Readonly<Record<string, string>> = {
  BIOS: '21686148-6EF6-4944-8A83-4E2A5F9ABC45',
  EFI: 'C12A7328-F81F-11D2-BA4B-00A0C93EC93B',
  SWAP: '0657FD6D-A4AB-43C4-84E5-0933C84B4F4F',
};
const gptLinux = '0FC63DAF-8483-4772-8E79-3D69D8477DE4';
const mbrTypes: Readonly<Record<string, string>> = { SWAP: '82', LINUX: '83', FAT32: 'c' };

export async function rootio(ctx: BuiltinContext): Promise<BuiltinDone> {
  checkChoiceSettings(builtin, ctx.env);
  const command = rootioCommand(ctx.argv, ctx.env);
  if (typeof command !== 'string') throw new ActionError(command.problem);
  const text = optionalSetting(ctx.env, rootioStorageSetting);
  if (text === undefined) {
    throw new ActionError(
      `${rootioStorageSetting} is not set; Slipway fills it in from the hardware's ` +
        'metadata.instance.storage when the workflow is created',
    );
  }
  const reading = readStorageJson(text, rootioStorageSetting);
  if ('problems' in reading) throw new ActionError(reading.problems.join('; '));
  const { disks, filesystems } = reading.storage;
  switch (command) {
    case 'partition': {
      const mbr = optionalSetting(ctx.env, 'MBR')?.trim() === 'true';
      for (const disk of disks) await partition(disk, mbr, ctx);
      return { message: `partitioned ${names(disks.map((d) => d.device))} (${mbr ? 'MBR' : 'GPT'})` };
    }
    case 'format':
      for (const fs of filesystems) await format(fs, ctx);
      return { message: `formatted ${names(filesystems.map((fs) => `${fs.device} as ${fs.format}`))}` };
    case 'mount':
      return { message: await mountAll(filesystems, mountRootSetting(ctx.env), ctx) };
    case 'wipe':
      for (const disk of disks) await wipe(disk.device, ctx);
      return { message: `wiped ${names(disks.map((d) => d.device))}` };
    default:
      throw new ActionError(`command ${command} is not one of partition, format, mount, wipe`);
  }
}

function names(items: readonly string[]): string {
  return items.length === 0 ? 'nothing (the layout lists none)' : items.join(', ');
}

async function partition(disk: StorageDisk, mbr: boolean, ctx: BuiltinContext): Promise<void> {
  const bytes = await blockDeviceBytes(disk.device, ctx.signal);
  const sectors = Math.floor(bytes / sectorBytes);
  const wanted = firstSector + disk.partitions.reduce((sum, p) => sum + p.sizeSectors, 0);
  // GPT keeps a copy of its table in the disk's last 33 sectors.
  if (wanted > sectors - (mbr ? 0 : 33)) {
    throw new ActionError(
      `disk ${disk.device} holds ${sectors} sectors; its partitions need ${wanted} (sizes count 512-byte sectors)`,
    );
  }
  if (mbr && disk.partitions.length > 4) {
    throw new ActionError(
      `disk ${disk.device} lists ${disk.partitions.length} partitions; an MBR table holds 4`,
    );
  }
  if (disk.wipeTable) await wipe(disk.device, ctx);
  const script = partitionScript(disk.partitions, mbr);
  await runProgram(['sfdisk', '--quiet', '--wipe', 'always', disk.device], ctx.signal, script).catch(
    (error: unknown) => {
      throw error instanceof ActionError
        ? new ActionError(`cannot partition ${disk.device}: ${error.message}`)
        : error;
    },
  );
  ctx.progress(`partitioned ${disk.device}: ${disk.partitions.map(describePartition).join(', ')}`);
}

/** sfdisk's script for the table: starts and sizes in sectors, as the layout gives them. */
export function partitionScript(partitions: readonly StoragePartition[], mbr: boolean): string {
  const lines = [`label: ${mbr ? 'dos' : 'gpt'}`];
  let start = firstSector;
  for (const p of partitions) {
    const size = p.sizeSectors === 0 ? '' : `, size=${p.sizeSectors}`;
    lines.push(`start=${start}${size}, ${mbr ? mbrType(p.label) : gptType(p.label)}`);
    start += p.sizeSectors;
  }
  return `${lines.join('\n')}\n`;
}

function gptType(label: string): string {
  return `type=${gptTypes[label] ?? gptLinux}, name="${label}"`;
}

function mbrType(label: string): string {
  const active = label.endsWith('_ACTIVE');
  const type = mbrTypes[active ? label.slice(0, -'_ACTIVE'.length) : label] ?? mbrTypes['LINUX'];
  return `type=${type}${active ? ', bootable' : ''}`;
}

function describePartition(p: StoragePartition): string {
  return `${p.number} ${p.label === '' ? '(no label)' : p.label} ${p.sizeSectors === 0 ? 'rest' : `${p.sizeSectors} sectors`}`;
}

async function format(fs: StorageFilesystem, ctx: BuiltinContext): Promise<void> {
  await checkBlockDevice(fs.device);
  const argv = formatCommand(fs);
  try {
    await runProgram(argv, ctx.signal);
  } catch (error) {
    if (!(error instanceof ActionError)) throw error;
    throw new ActionError(`cannot format ${fs.device} as ${fs.format}: ${error.message}`);
  }
  ctx.progress(`formatted ${fs.device} as ${fs.format}`);
}

/** The program Tinkerbell's rootio runs for the format, with the layout's create options. */
function formatCommand(fs: StorageFilesystem): string[] {
  switch (fs.format) {
    case 'swap':
      return ['mkswap', fs.device];
    case 'ext4':
    case 'ext3':
    case 'ext2':
      return ['mke2fs', ...fs.createOptions, '-t', fs.format, '-F', fs.device];
    case 'vfat':
      return ['mkfs.fat', ...fs.createOptions, fs.device];
    case 'xfs':
      return ['mkfs.xfs', ...fs.createOptions, '-f', fs.device];
    default: {
      const never: never = fs.format;
      throw new Error(`unknown format ${String(never)}`);
    }
  }
}

async function mountAll(
  filesystems: readonly StorageFilesystem[],
  root: string,
  ctx: BuiltinContext,
): Promise<string> {
  const depth = (point: string): number => point.split('/').filter((part) => part !== '').length;
  const ordered = [...filesystems].sort((a, b) => depth(a.point) - depth(b.point));
  const mounted: string[] = [];
  const done: string[] = [];
  try {
    for (const fs of ordered) {
      await checkBlockDevice(fs.device);
      if (fs.format === 'swap') {
        await runProgram(['swapon', fs.device], ctx.signal);
        done.push(`swap on ${fs.device}`);
        continue;
      }
      const target = path.resolve(root, `.${fs.point}`);
      await mkdir(target, { recursive: true });
      await runProgram(['mount', '-t', fs.format, fs.device, target], ctx.signal);
      mounted.push(target);
      done.push(`${fs.device} on ${target}`);
      ctx.progress(`mounted ${fs.device} (${fs.format}) on ${target}`);
    }
  } catch (error) {
    // All or nothing: a half-mounted tree would mislead the actions after this one.
    const never = new AbortController().signal;
    for (const target of mounted.reverse())
      await runProgram(['umount', target], never).catch(() => undefined);
    if (error instanceof ActionError)
      throw new ActionError(`mount: ${error.message}; nothing is left mounted`);
    throw error;
  }
  return `mounted ${names(done)}`;
}

function mountRootSetting(env: Readonly<Record<string, string>>): string {
  const value = optionalSetting(env, 'MOUNT_ROOT')?.trim() ?? mountRootDefault;
  if (!value.startsWith('/') || value.split('/').includes('..') || path.normalize(value) === '/') {
    throw new ActionError(`MOUNT_ROOT=${value} must be an absolute directory other than /, without ".."`);
  }
  return path.normalize(value);
}

/** Zeroes the disk's first GiB (or all of a smaller disk): old tables and filesystems go. */
async function wipe(device: string, ctx: BuiltinContext): Promise<void> {
  const bytes = Math.min(wipeBytes, await blockDeviceBytes(device, ctx.signal));
  const disk = await open(device, 'r+');
  try {
    const zeroes = Buffer.alloc(wipeChunkBytes);
    for (let at = 0; at < bytes; at += wipeChunkBytes) {
      ctx.signal.throwIfAborted();
      await disk.write(zeroes, 0, Math.min(wipeChunkBytes, bytes - at), at);
    }
    await disk.sync();
  } finally {
    await disk.close();
  }
  ctx.progress(`wiped the first ${bytes} bytes of ${device}`);
}

async function blockDeviceBytes(device: string, signal: AbortSignal): Promise<number> {
  await checkBlockDevice(device);
  const text = await runProgram(['blockdev', '--getsize64', device], signal);
  const bytes = Number(text.trim());
  if (!Number.isSafeInteger(bytes))
    throw new ActionError(`cannot tell the size of ${device}: ${text.trim()}`);
  return bytes;
}

/** As Tinkerbell's rootio: the layout's devices must be block devices. */
async function checkBlockDevice(device: string): Promise<void> {
  const kind = await deviceKind(device);
  if (kind === 'missing') throw new ActionError(`${device} (in ${rootioStorageSetting}) does not exist`);
  if (kind !== 'block') throw new ActionError(`${device} (in ${rootioStorageSetting}) is not a block device`);
}

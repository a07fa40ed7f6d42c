// The disk image2disk writes to, checked before anything is written: it must exist and be a
// block device (or, for tests and VM images, a regular file), and a block device's size bounds
// what may be written to it.
import { readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { ActionError } from './action.js';

export interface TargetDisk {
  readonly path: string;
  /** A block device's size in bytes; undefined for a regular file, which may grow. */
  readonly capacityBytes: number | undefined;
}

const sectorBytes = 512;

/** What a device setting names, for the action to say what is wrong with it. */
export async function deviceKind(device: string): Promise<'block' | 'file' | 'other' | 'missing'> {
  try {
    const kind = await stat(device);
    return kind.isBlockDevice() ? 'block' : kind.isFile() ? 'file' : 'other';
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    throw error;
  }
}

export async function inspectTarget(dest: string): Promise<TargetDisk> {
  let kind;
  try {
    kind = await stat(dest);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new ActionError(`DEST_DISK ${dest} does not exist; name the machine's disk, such as /dev/sda`);
    }
    throw error;
  }
  if (kind.isFile()) return { path: dest, capacityBytes: undefined };
  if (!kind.isBlockDevice()) {
    throw new ActionError(`DEST_DISK ${dest} is neither a block device nor a file`);
  }
  return { path: dest, capacityBytes: await blockDeviceBytes(dest) };
}

/** From sysfs, which counts 512-byte sectors whatever the device's own sector size. */
async function blockDeviceBytes(device: string): Promise<number> {
  // /dev/disk/by-id/... links to the kernel's name, which is what sysfs lists.
  const name = path.basename(await realpath(device));
  const file = path.join('/sys/class/block', name, 'size');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new ActionError(
      `cannot tell the size of DEST_DISK ${device}: ${file}: ${(error as Error).message}`,
    );
  }
  return Number(text.trim()) * sectorBytes;
}

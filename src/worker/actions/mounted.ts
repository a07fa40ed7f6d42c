// A filesystem mounted on a fresh temporary directory for the length of one callback, with the
// `mount` program (it knows every filesystem's options and loop setup; the syscall would not).
// It is always unmounted and the directory removed, whatever the callback does.
import { mkdtemp, rmdir, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ActionError } from './action.js';
import { runProgram } from './program.js';

export interface MountRequest {
  readonly device: string;
  readonly fsType: string;
  readonly readOnly: boolean;
  /** The setting that named the device, for error messages (DEST_DISK, BLOCK_DEVICE). */
  readonly deviceSetting: string;
}

export async function withMounted<T>(
  request: MountRequest,
  signal: AbortSignal,
  use: (dir: string) => Promise<T>,
): Promise<T> {
  await checkDevice(request.device, request.deviceSetting);
  if (!/^[a-z0-9_.]{1,32}$/.test(request.fsType)) {
    throw new ActionError(`FS_TYPE=${request.fsType} is not a filesystem type such as ext4 or vfat`);
  }
  const dir = await mkdtemp(path.join(tmpdir(), 'slipway-mount-'));
  try {
    const options = request.readOnly ? ['-o', 'ro'] : [];
    try {
      await runProgram(['mount', '-t', request.fsType, ...options, request.device, dir], signal);
    } catch (error) {
      if (!(error instanceof ActionError)) throw error;
      throw new ActionError(
        `cannot mount ${request.deviceSetting} ${request.device} as ${request.fsType}: ${error.message}`,
      );
    }
    try {
      return await use(dir);
    } finally {
      // Not abortable: a timeout must not leave the filesystem mounted.
      await runProgram(['umount', dir], new AbortController().signal);
    }
  } finally {
    await rmdir(dir).catch(() => undefined);
  }
}

async function checkDevice(device: string, setting: string): Promise<void> {
  let kind;
  try {
    kind = await stat(device);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new ActionError(`${setting} ${device} does not exist`);
    }
    throw error;
  }
  if (!kind.isBlockDevice() && !kind.isFile()) {
    throw new ActionError(`${setting} ${device} is neither a block device nor a file`);
  }
}

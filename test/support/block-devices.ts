// Real block devices for tests of the built-in actions: loop devices over small files, detached
// in every case. They need root and util-linux's losetup; a test without them fails, naming what
// it needs (`sudo npm test` installs the packages: test/setup.sh).
import { execFileSync } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export function canUseLoopDevices(): boolean {
  try {
    return (
      process.getuid?.() === 0 && execFileSync('losetup', ['-f'], { encoding: 'utf8' }).startsWith('/dev/')
    );
  } catch {
    return false;
  }
}

export function hasCommand(command: string): boolean {
  try {
    execFileSync('sh', ['-c', 'command -v "$0"', command], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * A loop device over a fresh zeroed file of `bytes` in `dir`; `use` runs with its path. With
 * `partitions`, the kernel scans it for partitions (/dev/loopNpM) as it does a disk.
 */
export async function withLoopDevice<T>(
  dir: string,
  bytes: number,
  use: (device: string) => Promise<T>,
  options: { readonly partitions?: boolean } = {},
): Promise<T> {
  const backing = path.join(dir, `loop-${process.pid}-${Date.now()}.img`);
  writeFileSync(backing, Buffer.alloc(0));
  execFileSync('truncate', ['-s', String(bytes), backing]);
  const scan = options.partitions === true ? ['--partscan'] : [];
  const device = execFileSync('losetup', ['-f', '--show', ...scan, backing], { encoding: 'utf8' }).trim();
  // A partition another test added with partx can outlive its loop device's detach, and then
  // mkfs on the next user of the device refuses ("partitions on device"): none before, none after.
  dropPartitions(device);
  try {
    return await use(device);
  } finally {
    dropPartitions(device);
    execFileSync('losetup', ['-d', device]);
  }
}

/**
 * Lines of /proc/mounts for `device`, or for anything mounted under `dir`: what an action left
 * mounted. A test file gives its actions a temporary directory of its own (ownTmpdir), so that
 * the mounts of another file's actions, running beside it, are not counted.
 */
export function leftMounted(device: string, dir: string): string[] {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .filter((line) => line.startsWith(`${device} `) || (line.split(' ')[1]?.startsWith(`${dir}/`) ?? false));
}

/**
 * Points this test process's temporary files (os.tmpdir(), which the actions' mount directories
 * are made in) at `dir`, a directory of its own.
 */
export function ownTmpdir(dir: string): void {
  process.env['TMPDIR'] = dir;
}

/** Removes every partition the kernel holds for `device` (none there: nothing to do). */
function dropPartitions(device: string): void {
  const name = path.basename(device);
  let held: string[];
  try {
    held = readdirSync(`/sys/block/${name}`).filter((entry) => entry.startsWith(`${name}p`));
  } catch {
    return;
  }
  if (held.length > 0) execFileSync('partx', ['-d', device], { stdio: 'ignore' });
}

/** Whether the running kernel can mount `fsType` (a test VM's kernel may lack vfat). */
export function kernelHasFilesystem(fsType: string): boolean {
  try {
    return readFileSync('/proc/filesystems', 'utf8')
      .split('\n')
      .some((line) => line.split('\t')[1] === fsType);
  } catch {
    return false;
  }
}

/** `bytes` bytes of a disk or file from `offset`: a boot sector, a partition table. */
export function readBytes(file: string, offset: number, bytes: number): Buffer {
  const fd = openSync(file, 'r');
  try {
    const data = Buffer.alloc(bytes);
    readSync(fd, data, 0, bytes, offset);
    return data;
  } finally {
    closeSync(fd);
  }
}

// Goal: prove that the built-in grub2disk installs GRUB's boot code onto a real disk's MBR (its
// partition table kept) and writes /boot/grub/grub.cfg, running the installed system's own
// grub-install and grub-mkconfig chrooted into it, as Tinkerbell's hub action does; that nothing
// stays mounted; and that a system without grub-install and an unknown FS_TYPE are refused naming
// them, the disk untouched.
// Method: a disk file partitioned by sfdisk (MBR, one Linux partition) behind a loop device
// scanned for partitions; the partition holds a minimal "installed system" made with mkfs.ext4 -d:
// a static busybox, Debian's GRUB (grub-pc-bin, grub2-common: binaries with the libraries they
// link, modules, /etc/grub.d) and a udevadm that answers from sysfs as udev would (GRUB asks it
// which disk a partition is on). Afterwards the MBR and the filesystem are read back.
// Runs in a process of its own: it points TMPDIR at a directory of its own (ownTmpdir) and
// deletes that directory at the end.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runBuiltin } from '../../src/worker/actions/builtin.js';
import {
  canUseLoopDevices,
  hasCommand,
  readBytes,
  withLoopDevice,
  leftMounted,
  ownTmpdir,
} from '../support/block-devices.js';
import { waitFor } from '../support/wait.js';

const mib = 1024 * 1024;
const dir = mkdtempSync(path.join(tmpdir(), 'slipway-grub2disk-'));
// The actions' mount directories are made in it: leftMounted counts this file's mounts only.
ownTmpdir(dir);
const grubPrograms = [
  '/usr/sbin/grub-install',
  '/usr/sbin/grub-probe',
  '/usr/sbin/grub-mkconfig',
  '/usr/bin/grub-mkimage',
  '/usr/bin/grub-editenv',
  '/usr/bin/grub-mkrelpath',
  '/usr/bin/grub-file',
  '/usr/bin/grub-script-check',
];
const usable =
  canUseLoopDevices() &&
  hasCommand('sfdisk') &&
  hasCommand('mkfs.ext4') &&
  grubPrograms.every((program) => existsSync(program)) &&
  existsSync('/usr/lib/grub/i386-pc/boot.img');
const why =
  'needs root, losetup, sfdisk, mkfs.ext4 and GRUB (Debian fdisk, e2fsprogs, grub-pc-bin, grub2-common)';
const system = path.join(dir, 'system');
const noGrub = path.join(dir, 'no-grub');

function copyWithLibraries(file: string): void {
  copyFileSync(file, path.join(system, file));
  let ldd: string;
  try {
    ldd = execFileSync('ldd', [file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return; // a script (grub-mkconfig): no libraries
  }
  for (const library of ldd.match(/\/\S+/g) ?? []) {
    mkdirSync(path.join(system, path.dirname(library)), { recursive: true });
    copyFileSync(library, path.join(system, library));
  }
}

before(() => {
  for (const root of [system, noGrub]) {
    for (const sub of ['bin', 'usr/bin', 'usr/sbin', 'usr/lib', 'usr/share', 'etc/default', 'boot']) {
      mkdirSync(path.join(root, sub), { recursive: true });
    }
    copyFileSync('/usr/bin/busybox', path.join(root, 'bin/busybox'));
    execFileSync('chroot', [root, '/bin/busybox', '--install', '-s', '/bin']);
  }
  if (!usable) return;
  for (const program of grubPrograms) copyWithLibraries(program);
  cpSync('/usr/lib/grub', path.join(system, 'usr/lib/grub'), { recursive: true });
  cpSync('/usr/share/grub', path.join(system, 'usr/share/grub'), { recursive: true });
  cpSync('/etc/grub.d', path.join(system, 'etc/grub.d'), { recursive: true });
  writeFileSync(path.join(system, 'etc/default/grub'), 'GRUB_TIMEOUT=1\n');
  // `udevadm info --query path --name DEV`, as udev answers it: DEV's path under /sys.
  const udevadm = path.join(system, 'bin/udevadm');
  writeFileSync(
    udevadm,
    '#!/bin/sh\np=$(readlink -f "/sys/class/block/$(basename "$5")")\necho "${p#/sys}"\n',
  );
  chmodSync(udevadm, 0o755);
});

after(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A 64 MiB disk with one Linux partition from 1 MiB holding `root`. */
async function withSystemDisk(
  root: string,
  use: (disk: string, partition: string) => Promise<void>,
): Promise<void> {
  await withLoopDevice(
    dir,
    64 * mib,
    async (disk) => {
      execFileSync('sfdisk', ['-q', disk], { input: 'label: dos\nstart=2048, type=83, bootable\n' });
      const partition = `${disk}p1`;
      // A kernel built without partition-table parsers does not read the table: partx adds it.
      if (!existsSync(partition)) execFileSync('partx', ['-a', disk]);
      await waitFor(`${partition} to appear`, () => existsSync(partition));
      execFileSync('mkfs.ext4', ['-q', '-F', '-d', root, partition]);
      await use(disk, partition);
    },
    { partitions: true },
  );
}

describe('grub2disk', () => {
  it("installs GRUB onto the disk's MBR and writes grub.cfg, with the system's own GRUB", async () => {
    assert.ok(usable, why);
    await withSystemDisk(system, async (disk, partition) => {
      const tableBefore = readBytes(disk, 440, 72);
      const outcome = await runBuiltin(
        'grub2disk',
        { GRUB_INSTALL_PATH: disk, GRUB_DISK: partition, FS_TYPE: 'ext4' },
        { timeoutMs: 120_000 },
      );
      assert.equal(outcome.success, true, `${outcome.message}\n${outcome.outputTail}`);
      assert.equal(
        outcome.message,
        `installed GRUB on ${disk} and wrote /boot/grub/grub.cfg on ${partition}`,
      );
      assert.match(outcome.outputTail, /Installation finished\. No error reported\./);
      const mbr = readBytes(disk, 0, 440);
      const bootImg = readFileSync('/usr/lib/grub/i386-pc/boot.img');
      assert.ok(mbr.subarray(0, 3).equals(bootImg.subarray(0, 3)), "the MBR starts with GRUB's boot.img");
      assert.ok(mbr.includes(Buffer.from('GRUB ')), "the MBR holds GRUB's boot code");
      assert.ok(readBytes(disk, 440, 72).equals(tableBefore), 'the partition table is kept');
      assert.equal(readBytes(disk, 512, 2).toString('latin1'), 'RV', "GRUB's core image follows the MBR");
      assert.deepEqual(leftMounted(partition, dir), [], 'nothing left mounted');
      const check = mkdtempSync(path.join(dir, 'check-'));
      execFileSync('mount', ['-o', 'ro', partition, check]);
      try {
        assert.match(readFileSync(path.join(check, 'boot/grub/grub.cfg'), 'utf8'), /set timeout=1/);
        assert.ok(existsSync(path.join(check, 'boot/grub/i386-pc/normal.mod')));
      } finally {
        execFileSync('umount', [check]);
      }
    });
  });

  it('refuses a system without grub-install and an unknown FS_TYPE, the disk untouched', async () => {
    assert.ok(usable, why);
    await withSystemDisk(noGrub, async (disk, partition) => {
      const before = readBytes(disk, 0, 512);
      const env = { GRUB_INSTALL_PATH: disk, GRUB_DISK: partition, FS_TYPE: 'ext4' };
      for (const [bad, message] of [
        [
          {},
          `grub2disk: the system on GRUB_DISK ${partition} has no grub-install (/usr/sbin/grub-install or ` +
            '/sbin/grub-install); install GRUB in its image (grub-pc for BIOS, grub-efi for UEFI)',
        ],
        [
          { FS_TYPE: 'etx4' },
          'grub2disk: FS_TYPE=etx4 is not one of ext4, ext3, ext2, xfs, btrfs, vfat, msdos, exfat, f2fs, ntfs3',
        ],
        [
          { GRUB_INSTALL_PATH: '/dev/slipway-none' },
          "grub2disk: GRUB_INSTALL_PATH /dev/slipway-none does not exist; name the machine's disk, such as /dev/sda",
        ],
      ] as const) {
        const outcome = await runBuiltin('grub2disk', { ...env, ...bad }, { timeoutMs: 60_000 });
        assert.equal(outcome.success, false);
        assert.equal(outcome.message, message);
      }
      assert.ok(readBytes(disk, 0, 512).equals(before), "the disk's first sector is untouched");
      assert.deepEqual(leftMounted(partition, dir), [], 'nothing left mounted');
    });
  });
});

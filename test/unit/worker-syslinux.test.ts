// Goal: prove that the built-in syslinux writes SYSLINUX's MBR boot code to a real disk, leaving
// its partition table and signature as they were, and installs the loader (its boot sector,
// ldlinux.sys) on the disk's FAT partition, as Tinkerbell's hub action does; and that a missing
// partition, one without a FAT filesystem and an unknown SYSLINUX_VERSION are refused naming them.
// Method: a file partitioned by sfdisk (MBR, one bootable FAT partition) behind two loop devices,
// the whole disk and the partition (at its offset); the disk's first sector and the partition's
// boot sector are read back, its files listed with mtools.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runBuiltin } from '../../src/worker/actions/builtin.js';
import { mbrCodePaths } from '../../src/worker/actions/syslinux.js';
import { canUseLoopDevices, hasCommand, readBytes } from '../support/block-devices.js';

const mib = 1024 * 1024;
const dir = mkdtempSync(path.join(tmpdir(), 'slipway-syslinux-'));
const usable =
  canUseLoopDevices() && ['sfdisk', 'mkfs.fat', 'syslinux', 'mdir'].every((tool) => hasCommand(tool));
const why =
  'needs root, losetup, sfdisk, mkfs.fat, syslinux and mtools (Debian fdisk, dosfstools, syslinux, mtools)';

after(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A 32 MiB disk with one bootable FAT partition from 1 MiB: `use` gets both loop devices. */
async function withDisk(
  format: (partition: string) => void,
  use: (disk: string, partition: string) => Promise<void>,
): Promise<void> {
  const backing = path.join(dir, `disk-${Date.now()}.img`);
  writeFileSync(backing, Buffer.alloc(0));
  execFileSync('truncate', ['-s', String(32 * mib), backing]);
  execFileSync('sfdisk', ['-q', backing], { input: 'label: dos\nstart=2048, type=c, bootable\n' });
  const disk = execFileSync('losetup', ['-f', '--show', backing], { encoding: 'utf8' }).trim();
  try {
    const partition = execFileSync('losetup', ['-f', '--show', '-o', String(mib), backing], {
      encoding: 'utf8',
    }).trim();
    try {
      format(partition);
      await use(disk, partition);
    } finally {
      execFileSync('losetup', ['-d', partition]);
    }
  } finally {
    execFileSync('losetup', ['-d', disk]);
  }
}

describe('syslinux', () => {
  it('writes the MBR boot code and installs the loader on the FAT partition, keeping the table', async () => {
    assert.ok(usable, why);
    await withDisk(
      (partition) => execFileSync('mkfs.fat', ['-n', 'BOOT', partition], { stdio: 'ignore' }),
      async (disk, partition) => {
        const tableBefore = readBytes(disk, 440, 72);
        const outcome = await runBuiltin(
          'syslinux',
          { DEST_DISK: disk, DEST_PARTITION: partition, SYSLINUX_VERSION: '3.86' },
          { timeoutMs: 60_000 },
        );
        assert.equal(outcome.success, true, `${outcome.message}\n${outcome.outputTail}`);
        assert.equal(outcome.message, `installed SYSLINUX on ${partition} and its MBR boot code on ${disk}`);
        const code = readFileSync(mbrCodePaths.find((file) => existsSync(file)) ?? '');
        assert.equal(code.length, 440);
        assert.ok(readBytes(disk, 0, 440).equals(code), "the disk's first 440 bytes are SYSLINUX's MBR code");
        assert.ok(readBytes(disk, 440, 72).equals(tableBefore), 'the signature and partition table are kept');
        assert.equal(readBytes(disk, 510, 2).toString('hex'), '55aa');
        // The partition's boot sector is SYSLINUX's, and its loader files (hidden: -a) are there.
        const bootSector = readBytes(partition, 0, 512);
        assert.ok(bootSector.includes(Buffer.from('SYSLINUX')), bootSector.toString('latin1'));
        const files = execFileSync('mdir', ['-a', '-b', '-i', partition, '::/'], { encoding: 'utf8' });
        assert.match(files, /ldlinux\.sys/i);
        assert.match(files, /ldlinux\.c32/i);
      },
    );
  });

  it('refuses a missing partition, a partition without FAT and an unknown SYSLINUX_VERSION', async () => {
    assert.ok(usable, why);
    await withDisk(
      (partition) => execFileSync('mkfs.ext4', ['-q', '-F', partition]),
      async (disk, partition) => {
        const env = { DEST_DISK: disk, DEST_PARTITION: partition, SYSLINUX_VERSION: '386' };
        const before = readBytes(disk, 0, 512);
        const notFat = await runBuiltin('syslinux', env, { timeoutMs: 60_000 });
        assert.equal(notFat.success, false);
        assert.match(
          notFat.message,
          new RegExp(
            `^syslinux: cannot install SYSLINUX on DEST_PARTITION ${partition} \\(it must hold a FAT filesystem\\): `,
          ),
        );
        for (const [bad, message] of [
          [
            { DEST_PARTITION: '/dev/slipway-none' },
            'syslinux: DEST_PARTITION /dev/slipway-none does not exist',
          ],
          [{ SYSLINUX_VERSION: '4.07' }, 'syslinux: SYSLINUX_VERSION=4.07 is not one of 3.86, 386, 6.04'],
          [
            { SYSLINUX_VERSION: '' },
            "syslinux: SYSLINUX_VERSION is not set; give it in the action's environment",
          ],
        ] as const) {
          const outcome = await runBuiltin('syslinux', { ...env, ...bad }, { timeoutMs: 60_000 });
          assert.equal(outcome.success, false);
          assert.equal(outcome.message, message);
        }
        assert.ok(readBytes(disk, 0, 512).equals(before), "the disk's first sector is untouched");
      },
    );
  });
});

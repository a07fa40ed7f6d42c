// Goal: prove that the built-in rootio partitions, formats and mounts a real disk from a
// Tinkerbell storage layout, as the hub action's partition, format and mount commands do: the GPT
// (or MBR) table with the layout's starts, sizes, types, names and bootable flag; each filesystem
// made with its create options; the filesystems mounted at their points under MOUNT_ROOT; and
// that a missing device, partitions larger than the disk, a bad command and a mount that fails
// halfway are refused naming them, leaving nothing mounted.
// Method: a loop device over a small file, scanned for partitions as a disk is; the command comes
// as Tinkerbell's `command: ["partition"]` (argv) or as ACTION; the table is read back with
// `sfdisk -J`, the filesystems with blkid, the mounts from /proc/mounts.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runBuiltin } from '../../src/worker/actions/builtin.js';
import { canUseLoopDevices, hasCommand, withLoopDevice } from '../support/block-devices.js';
import { waitFor } from '../support/wait.js';

const mib = 1024 * 1024;
const dir = mkdtempSync(path.join(tmpdir(), 'slipway-rootio-'));
const usable =
  canUseLoopDevices() &&
  ['sfdisk', 'mke2fs', 'mkfs.fat', 'mkswap', 'blkid'].every((tool) => hasCommand(tool));
const why =
  'needs root, losetup, sfdisk, mke2fs, mkfs.fat, mkswap and blkid (Debian fdisk, e2fsprogs, dosfstools)';

after(() => {
  rmSync(dir, { recursive: true, force: true });
});

interface TableEntry {
  readonly node: string;
  readonly start: number;
  readonly size: number;
  readonly type: string;
  readonly name?: string;
  readonly bootable?: boolean;
}

function table(device: string): { label: string; partitions: TableEntry[] } {
  const json = JSON.parse(execFileSync('sfdisk', ['-J', device], { encoding: 'utf8' })) as {
    partitiontable: { label: string; partitions: TableEntry[] };
  };
  return json.partitiontable;
}

function blkid(device: string, tag: string): string {
  return execFileSync('blkid', ['-o', 'value', '-s', tag, device], { encoding: 'utf8' }).trim();
}

function rootio(
  argv: readonly string[],
  env: Record<string, string>,
  storage: unknown,
): ReturnType<typeof runBuiltin> {
  return runBuiltin(
    'rootio',
    { ...env, ROOTIO_STORAGE: JSON.stringify(storage) },
    { timeoutMs: 60_000, argv },
  );
}

function mountedUnder(root: string): string[] {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .filter((line) => line.split(' ')[1]?.startsWith(root) === true)
    .map((line) => line.split(' ').slice(0, 3).join(' '));
}

/** Tinkerbell's example layout (rootio/test/standard.json), with an EFI partition added. */
function layout(device: string): { disks: unknown[]; filesystems: unknown[] } {
  return {
    disks: [
      {
        device,
        wipe_table: true,
        partitions: [
          { label: 'BIOS', number: 1, size: 4096 },
          { label: 'EFI', number: 2, size: 65536 },
          { label: 'SWAP', number: 3, size: 8192 },
          { label: 'BOOT', number: 4, size: 16384 },
          { label: 'ROOT', number: 5, size: 0 },
        ],
      },
    ],
    filesystems: [
      { mount: { device: `${device}p5`, format: 'ext4', point: '/', create: { options: ['-L', 'ROOT'] } } },
      {
        mount: { device: `${device}p4`, format: 'ext2', point: '/boot', create: { options: ['-L', 'BOOT'] } },
      },
      {
        mount: {
          device: `${device}p2`,
          format: 'vfat',
          point: '/boot/efi',
          create: { options: ['-n', 'EFI'] },
        },
      },
      {
        mount: { device: `${device}p3`, format: 'swap', point: 'none', create: { options: ['-L', 'SWAP'] } },
      },
    ],
  };
}

describe('rootio', () => {
  it('partitions (GPT), formats and mounts a disk from the layout', async () => {
    assert.ok(usable, why);
    await withLoopDevice(
      dir,
      96 * mib,
      async (device) => {
        // An old filesystem the wipe must take away.
        execFileSync('mkfs.ext4', ['-q', '-F', '-L', 'OLD', device]);
        const storage = layout(device);
        const partitioned = await rootio(['partition'], { MIRROR_HOST: '10.0.0.1' }, storage);
        assert.equal(partitioned.success, true, `${partitioned.message}\n${partitioned.outputTail}`);
        assert.equal(partitioned.message, `partitioned ${device} (GPT)`);
        const got = table(device);
        assert.equal(got.label, 'gpt');
        assert.deepEqual(
          got.partitions.map(({ start, size, type, name }) => ({ start, size, type, name })),
          [
            { start: 2048, size: 4096, type: '21686148-6EF6-4944-8A83-4E2A5F9ABC45', name: 'BIOS' },
            { start: 6144, size: 65536, type: 'C12A7328-F81F-11D2-BA4B-00A0C93EC93B', name: 'EFI' },
            { start: 71680, size: 8192, type: '0657FD6D-A4AB-43C4-84E5-0933C84B4F4F', name: 'SWAP' },
            { start: 79872, size: 16384, type: '0FC63DAF-8483-4772-8E79-3D69D8477DE4', name: 'BOOT' },
            // The rest of the disk but its last MiB (sfdisk's alignment; Tinkerbell's leaves it too).
            {
              start: 96256,
              size: 96 * 2048 - 96256 - 2048,
              type: '0FC63DAF-8483-4772-8E79-3D69D8477DE4',
              name: 'ROOT',
            },
          ],
        );
        // A kernel built without partition-table parsers (this test machine's may be one) does not
        // read the new table: partx adds the partitions to it one by one.
        if (!existsSync(`${device}p5`)) execFileSync('partx', ['-a', device]);
        await waitFor(`${device}p5 to appear`, () => existsSync(`${device}p5`));

        const formatted = await rootio([], { ACTION: 'format' }, storage);
        assert.equal(formatted.success, true, `${formatted.message}\n${formatted.outputTail}`);
        assert.equal(
          formatted.message,
          `formatted ${device}p5 as ext4, ${device}p4 as ext2, ${device}p2 as vfat, ${device}p3 as swap`,
        );
        assert.deepEqual([blkid(`${device}p5`, 'TYPE'), blkid(`${device}p5`, 'LABEL')], ['ext4', 'ROOT']);
        assert.deepEqual([blkid(`${device}p4`, 'TYPE'), blkid(`${device}p4`, 'LABEL')], ['ext2', 'BOOT']);
        assert.deepEqual([blkid(`${device}p2`, 'TYPE'), blkid(`${device}p2`, 'LABEL')], ['vfat', 'EFI']);
        assert.equal(blkid(`${device}p3`, 'TYPE'), 'swap');

        // Swap is left out here (swapon would take it for the whole test machine), and so is vfat,
        // which a test machine's kernel may not mount.
        const root = path.join(dir, 'target');
        const mountable = { filesystems: [storage.filesystems[1], storage.filesystems[0]] };
        const mounted = await rootio(['mount'], { MOUNT_ROOT: root }, mountable);
        try {
          assert.equal(mounted.success, true, `${mounted.message}\n${mounted.outputTail}`);
          // The shallowest first, whatever the layout's order.
          assert.equal(mounted.message, `mounted ${device}p5 on ${root}, ${device}p4 on ${root}/boot`);
          assert.deepEqual(mountedUnder(root), [`${device}p5 ${root} ext4`, `${device}p4 ${root}/boot ext2`]);
        } finally {
          for (const target of [`${root}/boot`, root]) {
            if (mountedUnder(target).length > 0) execFileSync('umount', [target]);
          }
        }
      },
      { partitions: true },
    );
  });

  it('writes an MBR table with bootable partitions when MBR is true', async () => {
    assert.ok(usable, why);
    await withLoopDevice(dir, 32 * mib, async (device) => {
      const storage = {
        disks: [
          {
            device,
            partitions: [
              { label: 'FAT32_ACTIVE', number: 1, size: 20480 },
              { label: 'SWAP', number: 2, size: 4096 },
              { label: 'LINUX', number: 3, size: 0 },
            ],
          },
        ],
      };
      const outcome = await rootio(['partition'], { MBR: 'true' }, storage);
      assert.equal(outcome.success, true, `${outcome.message}\n${outcome.outputTail}`);
      const got = table(device);
      assert.equal(got.label, 'dos');
      assert.deepEqual(
        got.partitions.map(({ start, size, type, bootable }) => ({
          start,
          size,
          type,
          bootable: bootable === true,
        })),
        [
          { start: 2048, size: 20480, type: 'c', bootable: true },
          { start: 22528, size: 4096, type: '82', bootable: false },
          { start: 26624, size: 32 * 2048 - 26624, type: '83', bootable: false },
        ],
      );
    });
  });

  it('refuses a missing device, a layout larger than the disk and a bad command, naming them', async () => {
    assert.ok(usable, why);
    await withLoopDevice(dir, 8 * mib, async (device) => {
      for (const [argv, env, storage, message] of [
        [
          ['partition'],
          {},
          { disks: [{ device: '/dev/slipway-none', partitions: [] }] },
          'rootio: /dev/slipway-none (in ROOTIO_STORAGE) does not exist',
        ],
        [
          ['partition'],
          {},
          { disks: [{ device, partitions: [{ label: 'ROOT', number: 1, size: 20000 }] }] },
          `rootio: disk ${device} holds 16384 sectors; its partitions need 22048 (sizes count 512-byte sectors)`,
        ],
        [
          ['format'],
          {},
          { filesystems: [{ mount: { device: '/dev/null', format: 'ext4', point: '/' } }] },
          'rootio: /dev/null (in ROOTIO_STORAGE) is not a block device',
        ],
        [
          ['explode'],
          {},
          { disks: [{ device }] },
          'rootio: command explode is not one of partition, format, mount, wipe',
        ],
        [
          ['mount'],
          { MOUNT_ROOT: '/' },
          { disks: [{ device }] },
          'rootio: MOUNT_ROOT=/ must be an absolute directory other than /, without ".."',
        ],
      ] as const) {
        const outcome = await rootio(argv, env, storage);
        assert.equal(outcome.success, false);
        assert.equal(outcome.message, message);
      }
      // The disk was not touched by the refused partitioning.
      const head = execFileSync('head', ['-c', String(mib), device]);
      assert.ok(head.equals(Buffer.alloc(mib)), 'the disk is untouched');
    });
  });

  it('unmounts what it mounted when a later filesystem cannot be mounted', async () => {
    assert.ok(usable, why);
    await withLoopDevice(dir, 16 * mib, async (good) => {
      await withLoopDevice(dir, 16 * mib, async (blank) => {
        execFileSync('mkfs.ext4', ['-q', '-F', good]);
        const root = path.join(dir, 'half');
        const storage = {
          filesystems: [
            { mount: { device: good, format: 'ext4', point: '/' } },
            { mount: { device: blank, format: 'ext4', point: '/var' } },
          ],
        };
        const outcome = await rootio(['mount'], { MOUNT_ROOT: root }, storage);
        assert.equal(outcome.success, false);
        assert.match(
          outcome.message,
          new RegExp(
            `^rootio: mount: mount -t ext4 ${blank} ${root}/var failed [^]*; nothing is left mounted$`,
          ),
        );
        assert.deepEqual(mountedUnder(root), []);
      });
    });
  });
});

// Goal: prove that the built-in writefile writes a file with its content, owner and mode into a
// real filesystem on a real block device (ext4, and vfat, which keeps no owner), creating
// parent directories with DIRMODE and leaving nothing mounted; that it refuses bad settings, a
// missing device and a failed mount with messages naming them; and that kexec mounts its
// device read-only and hands the kernel, initrd and command line to `kexec -l`: those given, or
// without KERNEL_PATH those of grub.cfg's default entry (Debian's, and Ubuntu's on a separate
// /boot through GRUBCFG_PATH with grubenv's saved_entry and two initrds joined into one), and
// fails naming the file when no default entry can be read from it.
// Method: loop devices over small files formatted with mkfs.ext4 and mkfs.vfat; after the
// action, the filesystem is mounted again read-only and inspected. kexec runs a stand-in
// `kexec` first on PATH that records its arguments (loading a kernel here would be real).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runBuiltin } from '../../src/worker/actions/builtin.js';
import {
  canUseLoopDevices,
  hasCommand,
  kernelHasFilesystem,
  withLoopDevice,
} from '../support/block-devices.js';

const mib = 1024 * 1024;
const dir = mkdtempSync(path.join(tmpdir(), 'slipway-writefile-'));
const usable = canUseLoopDevices() && hasCommand('mkfs.ext4') && hasCommand('mkfs.vfat');
const why = 'needs root, losetup, mkfs.ext4 and mkfs.vfat (Debian packages e2fsprogs, dosfstools)';

after(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Mounts `device` read-only on a fresh directory for `inspect`, then unmounts. */
function inspectMounted<T>(device: string, fsType: string, inspect: (root: string) => T): T {
  const root = mkdtempSync(path.join(dir, 'check-'));
  execFileSync('mount', ['-t', fsType, '-o', 'ro', device, root]);
  try {
    return inspect(root);
  } finally {
    execFileSync('umount', [root]);
  }
}

function mountedAnywhere(device: string): boolean {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .some((line) => line.startsWith(`${device} `));
}

function writefile(env: Record<string, string>): ReturnType<typeof runBuiltin> {
  return runBuiltin('writefile', env, { timeoutMs: 60_000 });
}

describe('writefile', () => {
  it('writes content, owner and mode on ext4, creating parents with DIRMODE', async () => {
    assert.ok(usable, why);
    await withLoopDevice(dir, 16 * mib, async (device) => {
      execFileSync('mkfs.ext4', ['-q', '-F', device]);
      const outcome = await writefile({
        DEST_DISK: device,
        FS_TYPE: 'ext4',
        DEST_PATH: '/etc/netplan/50-slipway.yaml',
        CONTENTS: 'network:\n  version: 2\n',
        UID: '1234',
        GID: '2345',
        MODE: '0600',
        DIRMODE: '0750',
      });
      assert.equal(outcome.success, true, outcome.message);
      assert.equal(
        outcome.message,
        `wrote 22 bytes to /etc/netplan/50-slipway.yaml on ${device} owner 1234:2345 mode 0600`,
      );
      assert.equal(mountedAnywhere(device), false, 'unmounted afterwards');
      inspectMounted(device, 'ext4', (root) => {
        const file = path.join(root, 'etc/netplan/50-slipway.yaml');
        assert.equal(readFileSync(file, 'utf8'), 'network:\n  version: 2\n');
        const info = statSync(file);
        assert.deepEqual([info.mode & 0o7777, info.uid, info.gid], [0o600, 1234, 2345]);
        assert.equal(statSync(path.join(root, 'etc/netplan')).mode & 0o7777, 0o750);
        assert.equal(statSync(path.join(root, 'etc')).mode & 0o7777, 0o750);
      });
      // A second write replaces the file (YAML's unquoted 0644 arrives as "644").
      const again = await writefile({
        DEST_DISK: device,
        FS_TYPE: 'ext4',
        DEST_PATH: '/etc/netplan/50-slipway.yaml',
        CONTENTS: 'x',
        MODE: '644',
      });
      assert.equal(again.success, true, again.message);
      inspectMounted(device, 'ext4', (root) => {
        const file = path.join(root, 'etc/netplan/50-slipway.yaml');
        assert.equal(readFileSync(file, 'utf8'), 'x');
        const info = statSync(file);
        assert.deepEqual([info.mode & 0o7777, info.uid, info.gid], [0o644, 0, 0]);
      });
    });
  });

  it('writes on vfat, which keeps no owner or mode', async () => {
    assert.ok(usable, why);
    await withLoopDevice(dir, 16 * mib, async (device) => {
      execFileSync('mkfs.vfat', [device], { stdio: 'ignore' });
      if (!kernelHasFilesystem('vfat')) {
        // A kernel without vfat (some CI hosts; the boot OS carries the module): the action
        // must fail saying the mount failed, and leave nothing mounted.
        const refused = await writefile({
          DEST_DISK: device,
          FS_TYPE: 'vfat',
          DEST_PATH: '/x',
          CONTENTS: 'x',
        });
        assert.equal(refused.success, false);
        assert.match(refused.message, /mount/i);
        assert.equal(mountedAnywhere(device), false);
        return;
      }
      const outcome = await writefile({
        DEST_DISK: device,
        FS_TYPE: 'vfat',
        DEST_PATH: '/EFI/slipway/grub.cfg',
        CONTENTS: 'set timeout=1\n',
        UID: '1000',
        MODE: '0600',
      });
      assert.equal(outcome.success, true, outcome.message);
      assert.match(outcome.message, /\(vfat keeps no owner or mode\)$/);
      inspectMounted(device, 'vfat', (root) => {
        assert.equal(readFileSync(path.join(root, 'EFI/slipway/grub.cfg'), 'utf8'), 'set timeout=1\n');
      });
    });
  });

  it('refuses a missing device, a failed mount and bad settings, by name', async () => {
    const missing = await writefile({ DEST_DISK: '/dev/sdz-slipway-test', FS_TYPE: 'ext4', DEST_PATH: '/x' });
    assert.deepEqual(
      [missing.success, missing.message],
      [false, 'writefile: DEST_DISK /dev/sdz-slipway-test does not exist'],
    );
    const settings: [Record<string, string>, RegExp][] = [
      [{ FS_TYPE: 'ext4', DEST_PATH: '/x' }, /DEST_DISK is not set/],
      [
        { DEST_DISK: '/dev/null', FS_TYPE: 'ext4', DEST_PATH: 'etc/x' },
        /DEST_PATH=etc\/x must be an absolute path/,
      ],
      [{ DEST_DISK: '/dev/null', FS_TYPE: 'ext4', DEST_PATH: '/etc/../../x' }, /must not contain "\.\."/],
      [
        { DEST_DISK: '/dev/null', FS_TYPE: 'ext4', DEST_PATH: '/x', MODE: '0999' },
        /MODE=0999 is not an octal permission mode/,
      ],
      [
        { DEST_DISK: '/dev/null', FS_TYPE: 'ext4', DEST_PATH: '/x', UID: 'root' },
        /UID=root is not a numeric id/,
      ],
      [
        { DEST_DISK: '/dev/null', FS_TYPE: 'fat32', DEST_PATH: '/x' },
        /^writefile: FS_TYPE=fat32 is not one of ext4, ext3, ext2, xfs, btrfs, vfat, msdos, exfat, f2fs, ntfs3$/,
      ],
      [
        { DEST_DISK: '/dev/null', FS_TYPE: 'ext4', DEST_PATH: '/x' },
        /DEST_DISK \/dev\/null is neither a block device nor a file/,
      ],
    ];
    for (const [env, message] of settings) {
      const outcome = await writefile(env);
      assert.equal(outcome.success, false);
      assert.match(outcome.message, message);
    }
    assert.ok(usable, why);
    await withLoopDevice(dir, 4 * mib, async (device) => {
      // A blank device: mount finds no ext4 on it and says so.
      const outcome = await writefile({ DEST_DISK: device, FS_TYPE: 'ext4', DEST_PATH: '/x' });
      assert.equal(outcome.success, false);
      assert.match(
        outcome.message,
        new RegExp(
          `^writefile: cannot mount DEST_DISK ${device} as ext4: mount -t ext4 ${device} \\S+ failed \\(status 32\\): .+`,
        ),
      );
      assert.equal(mountedAnywhere(device), false);
    });
  });
});

describe('kexec', () => {
  const bin = path.join(dir, 'bin');
  const record = path.join(dir, 'kexec-args');
  const savedPath = process.env['PATH'];

  before(() => {
    mkdirSync(bin, { recursive: true });
    writeFileSync(
      path.join(bin, 'kexec'),
      `#!/bin/sh\nprintf '%s\\n' "$@" > ${record}\ntest -f "$2" && echo kernel-found >> ${record}\n` +
        `initrd="\${3#--initrd=}"\ntest -f "$initrd" && cat "$initrd" >> ${record}\nexit 0\n`,
    );
    chmodSync(path.join(bin, 'kexec'), 0o755);
    process.env['PATH'] = `${bin}:${savedPath ?? ''}`;
  });

  after(() => {
    process.env['PATH'] = savedPath;
  });

  it('loads the kernel from the mounted device with initrd and command line, and asks for the kexec effect', async () => {
    assert.ok(usable, why);
    await withLoopDevice(dir, 16 * mib, async (device) => {
      execFileSync('mkfs.ext4', ['-q', '-F', device]);
      const put = await writefile({
        DEST_DISK: device,
        FS_TYPE: 'ext4',
        DEST_PATH: '/boot/vmlinuz',
        CONTENTS: 'kernel',
      });
      assert.equal(put.success, true, put.message);
      const outcome = await runBuiltin(
        'kexec',
        {
          BLOCK_DEVICE: device,
          FS_TYPE: 'ext4',
          KERNEL_PATH: '/boot/vmlinuz',
          INITRD_PATH: 'boot/initrd.img',
          CMD_LINE: 'root=/dev/sda2 ro',
        },
        { timeoutMs: 60_000 },
      );
      assert.equal(outcome.success, true, outcome.message);
      assert.equal(outcome.effect, 'kexec');
      const args = readFileSync(record, 'utf8').split('\n');
      assert.equal(args[0], '-l');
      assert.match(args[1] ?? '', /\/slipway-mount-\w+\/boot\/vmlinuz$/);
      assert.match(args[2] ?? '', /^--initrd=\/.+\/slipway-mount-\w+\/boot\/initrd\.img$/);
      assert.equal(args[3], '--append=root=/dev/sda2 ro');
      assert.equal(args[4], 'kernel-found');
      assert.equal(mountedAnywhere(device), false);
    });
  });
  /** Formats an ext4 filesystem on `device` holding `files` (path inside → content). */
  function populate(device: string, files: Record<string, string>): void {
    execFileSync('mkfs.ext4', ['-q', '-F', device]);
    const root = mkdtempSync(path.join(dir, 'fill-'));
    execFileSync('mount', ['-t', 'ext4', device, root]);
    try {
      for (const [file, content] of Object.entries(files)) {
        mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
        writeFileSync(path.join(root, file), content);
      }
    } finally {
      execFileSync('umount', [root]);
    }
  }

  it('refuses an FS_TYPE it does not mount, naming the allowed ones, before touching the device', async () => {
    const outcome = await runBuiltin(
      'kexec',
      { BLOCK_DEVICE: '/dev/sdz-slipway-test', FS_TYPE: 'ext' },
      { timeoutMs: 10_000 },
    );
    assert.equal(outcome.success, false);
    assert.equal(
      outcome.message,
      'kexec: FS_TYPE=ext is not one of ext4, ext3, ext2, xfs, btrfs, vfat, msdos, exfat, f2fs, ntfs3',
    );
  });

  const grubTestdata = (name: string): string =>
    readFileSync(new URL(`testdata/grub/${name}`, import.meta.url), 'utf8');

  it("without KERNEL_PATH loads the default entry of Debian's /boot/grub/grub.cfg", async () => {
    assert.ok(usable, why);
    await withLoopDevice(dir, 16 * mib, async (device) => {
      populate(device, {
        'boot/grub/grub.cfg': grubTestdata('debian-12.cfg'),
        'boot/vmlinuz-6.1.0-18-amd64': 'kernel',
        'boot/initrd.img-6.1.0-18-amd64': 'initrd-6.1.0-18',
      });
      const outcome = await runBuiltin(
        'kexec',
        { BLOCK_DEVICE: device, FS_TYPE: 'ext4' },
        { timeoutMs: 60_000 },
      );
      assert.equal(outcome.success, true, outcome.message);
      assert.equal(outcome.effect, 'kexec');
      const args = readFileSync(record, 'utf8').split('\n');
      assert.match(args[1] ?? '', /\/slipway-mount-\w+\/boot\/vmlinuz-6\.1\.0-18-amd64$/);
      assert.match(args[2] ?? '', /^--initrd=\/.+\/slipway-mount-\w+\/boot\/initrd\.img-6\.1\.0-18-amd64$/);
      assert.equal(args[3], '--append=root=UUID=4f6b1a2c-6a53-4c1e-9b5e-0c1d2e3f4a5b ro quiet');
      assert.deepEqual(args.slice(4, 6), ['kernel-found', 'initrd-6.1.0-18']);
      assert.match(outcome.outputTail, /\(\/boot\/grub\/grub\.cfg: "Debian GNU\/Linux"\)/);
      assert.equal(mountedAnywhere(device), false);
    });
  });

  it('GRUBCFG_PATH on a separate /boot: grubenv saved_entry, two initrds joined, CMD_LINE wins', async () => {
    assert.ok(usable, why);
    await withLoopDevice(dir, 16 * mib, async (device) => {
      populate(device, {
        'grub/grub.cfg': grubTestdata('ubuntu-separate-boot.cfg'),
        'grub/grubenv':
          '# GRUB Environment Block\nsaved_entry=gnulinux-advanced-0d1e2f3a-1111-2222-3333-444455556666>gnulinux-6.5.0-9-generic-advanced-0d1e2f3a-1111-2222-3333-444455556666\n',
        'vmlinuz-6.5.0-9-generic': 'kernel',
        'intel-ucode.img': 'ucode+',
        'initrd.img-6.5.0-9-generic': 'initrd',
      });
      const env = {
        BLOCK_DEVICE: device,
        FS_TYPE: 'ext4',
        GRUBCFG_PATH: 'grub/grub.cfg',
        CMD_LINE: 'root=/dev/sda3 ro',
      };
      const outcome = await runBuiltin('kexec', env, { timeoutMs: 60_000 });
      assert.equal(outcome.success, true, outcome.message);
      const args = readFileSync(record, 'utf8').split('\n');
      assert.match(args[1] ?? '', /\/slipway-mount-\w+\/vmlinuz-6\.5\.0-9-generic$/);
      assert.equal(args[3], '--append=root=/dev/sda3 ro');
      assert.deepEqual(args.slice(4, 6), ['kernel-found', 'ucode+initrd']);
    });
  });

  it('a grub.cfg without a default entry, or none at all, fails naming the file and what it looked for', async () => {
    assert.ok(usable, why);
    await withLoopDevice(dir, 16 * mib, async (device) => {
      populate(device, { 'boot/grub/grub.cfg': 'set default=0\nblscfg\n' });
      const none = await runBuiltin(
        'kexec',
        { BLOCK_DEVICE: device, FS_TYPE: 'ext4' },
        { timeoutMs: 60_000 },
      );
      assert.equal(none.success, false);
      assert.equal(
        none.message,
        `kexec: no default boot entry in /boot/grub/grub.cfg on ${device}: no menuentry in it (looked for \`menuentry TITLE ... {\` lines)`,
      );
      const elsewhere = await runBuiltin(
        'kexec',
        { BLOCK_DEVICE: device, FS_TYPE: 'ext4', GRUBCFG_PATH: '/grub/grub.cfg' },
        { timeoutMs: 60_000 },
      );
      assert.equal(elsewhere.success, false);
      assert.match(
        elsewhere.message,
        new RegExp(
          `^kexec: cannot read /grub/grub.cfg on ${device} \\(ENOENT\\): give KERNEL_PATH, or GRUBCFG_PATH`,
        ),
      );
      assert.equal(mountedAnywhere(device), false);
    });
  });
});

describe('reboot and poweroff', () => {
  it('prepare nothing and ask for their effect', async () => {
    for (const name of ['reboot', 'poweroff'] as const) {
      const outcome = await runBuiltin(name, {}, { timeoutMs: 1000 });
      assert.deepEqual([outcome.success, outcome.effect], [true, name]);
      assert.match(outcome.outputTail, /once the cluster has recorded this result/);
    }
  });
});

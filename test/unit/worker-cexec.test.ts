// Goal: prove that the built-in cexec runs a command inside the system on a real filesystem:
// chrooted into it with the machine's /dev, /proc and /sys bound in, through DEFAULT_INTERPRETER
// or split at spaces as Tinkerbell's hub action does, with its output as the output tail and its
// exit status as the action's; that everything it mounted is unmounted whether the command
// succeeds, fails or times out; and that a CHROOT other than y or an unknown FS_TYPE is refused
// naming the setting and the allowed values.
// Method: a loop device over a small file, formatted ext4 with a minimal root (a static busybox
// and the links the command uses) by mkfs.ext4 -d; afterwards /proc/mounts must hold nothing
// under the action's mount directory, and the filesystem, mounted again, what the command wrote.
// Runs in a process of its own: it points TMPDIR at a directory of its own (ownTmpdir) and
// deletes that directory at the end.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runBuiltin } from '../../src/worker/actions/builtin.js';
import { sharedLibraries } from '../../src/bootos/shared-libraries.js';
import {
  canUseLoopDevices,
  hasCommand,
  withLoopDevice,
  leftMounted,
  ownTmpdir,
} from '../support/block-devices.js';

const mib = 1024 * 1024;
const dir = mkdtempSync(path.join(tmpdir(), 'slipway-cexec-'));
// The actions' mount directories are made in it: leftMounted counts this file's mounts only.
ownTmpdir(dir);
const busybox = '/usr/bin/busybox';
const usable =
  canUseLoopDevices() && hasCommand('mkfs.ext4') && hasCommand('chroot') && (await isStatic(busybox));
const why = 'needs root, losetup, mkfs.ext4, chroot and a static busybox (Debian busybox-static)';
const root = path.join(dir, 'root');

/** Whether `file` runs with no shared library (ldd, which every Debian has; `file` may be absent). */
async function isStatic(file: string): Promise<boolean> {
  try {
    return (await sharedLibraries(file)).length === 0;
  } catch {
    return false;
  }
}

before(() => {
  mkdirSync(path.join(root, 'bin'), { recursive: true });
  copyFileSync(busybox, path.join(root, 'bin/busybox'));
  for (const tool of ['sh', 'echo', 'cat', 'ls', 'test', 'sleep', 'mount']) {
    symlinkSync('busybox', path.join(root, 'bin', tool));
  }
});

after(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function withRoot(use: (device: string) => Promise<void>): Promise<void> {
  await withLoopDevice(dir, 32 * mib, async (device) => {
    execFileSync('mkfs.ext4', ['-q', '-F', '-d', root, device]);
    await use(device);
    assert.deepEqual(leftMounted(device, dir), [], 'nothing left mounted');
  });
}

function cexec(env: Record<string, string>, timeoutMs = 60_000): ReturnType<typeof runBuiltin> {
  return runBuiltin('cexec', env, { timeoutMs });
}

describe('cexec', () => {
  it('runs through DEFAULT_INTERPRETER chrooted into the new system, with /dev, /proc and /sys bound', async () => {
    assert.ok(usable, why);
    await withRoot(async (device) => {
      const outcome = await cexec({
        BLOCK_DEVICE: device,
        FS_TYPE: 'ext4',
        CHROOT: 'y',
        DEFAULT_INTERPRETER: '/bin/sh -c',
        CMD_LINE:
          'echo "in $(ls /bin/busybox) as $MARKER"; test -c /dev/null && echo dev; ' +
          'test -e /proc/self/status && echo proc; test -d /sys/kernel && echo sys; echo "$MARKER" > /marker',
        MARKER: 'cexec-was-here',
      });
      assert.equal(outcome.success, true, `${outcome.message}\n${outcome.outputTail}`);
      assert.equal(outcome.exitStatus, 0);
      assert.equal(outcome.outputTail, 'in /bin/busybox as cexec-was-here\ndev\nproc\nsys\n');
      assert.match(outcome.message, /^ran \/bin\/sh -c .* chrooted into \/dev\/loop/);
      const check = mkdtempSync(path.join(dir, 'check-'));
      execFileSync('mount', ['-t', 'ext4', '-o', 'ro', device, check]);
      try {
        assert.equal(readFileSync(path.join(check, 'marker'), 'utf8'), 'cexec-was-here\n');
      } finally {
        execFileSync('umount', [check]);
      }
    });
  });

  it('splits CMD_LINE at spaces without an interpreter; a failing command gives its status and output', async () => {
    assert.ok(usable, why);
    await withRoot(async (device) => {
      const base = { BLOCK_DEVICE: device, FS_TYPE: 'ext4', CHROOT: 'y' };
      const plain = await cexec({ ...base, CMD_LINE: '/bin/echo  two   words' });
      assert.equal(plain.success, true, plain.message);
      assert.equal(plain.outputTail, 'two words\n');
      const failing = await cexec({
        ...base,
        DEFAULT_INTERPRETER: 'sh -c',
        CMD_LINE: 'echo about to fail; echo on stderr >&2; exit 3',
      });
      assert.equal(failing.success, false);
      assert.equal(failing.exitStatus, 3);
      assert.equal(failing.outputTail, 'about to fail\non stderr\n');
      assert.match(
        failing.message,
        /^cexec: sh -c echo about to fail; .* exited with status 3 \(chrooted into/,
      );
      const missing = await cexec({ ...base, CMD_LINE: '/bin/no-such-program' });
      assert.equal(missing.success, false);
      assert.equal(missing.exitStatus, 127, `${missing.message}\n${missing.outputTail}`);
    });
  });

  it('unmounts everything when the command times out, or exits leaving a process behind', async () => {
    assert.ok(usable, why);
    await withRoot(async (device) => {
      const base = { BLOCK_DEVICE: device, FS_TYPE: 'ext4', CHROOT: 'y', DEFAULT_INTERPRETER: 'sh -c' };
      // The shell waits for one sleep while another runs beside it: both hold the filesystem.
      const outcome = await cexec({ ...base, CMD_LINE: '/bin/sleep 30 & /bin/sleep 30; echo never' }, 1_500);
      assert.equal(outcome.timedOut, true, outcome.message);
      assert.equal(outcome.exitStatus, 124);
      assert.deepEqual(leftMounted(device, dir), [], 'nothing left mounted after the timeout');
      // A daemon left running (its output still open) ends with the command, as in a container.
      const started = Date.now();
      const left = await cexec({ ...base, CMD_LINE: '/bin/sleep 30 & echo started' });
      assert.equal(left.success, true, left.message);
      assert.equal(left.outputTail, 'started\n');
      assert.ok(Date.now() - started < 15_000, 'did not wait for the process left behind');
    });
  });

  it("without CHROOT runs in the agent's system, in the mounted filesystem's directory", async () => {
    assert.ok(usable, why);
    await withRoot(async (device) => {
      const outcome = await cexec({
        BLOCK_DEVICE: device,
        FS_TYPE: 'ext4',
        DEFAULT_INTERPRETER: 'sh -c',
        CMD_LINE: 'pwd; ls bin/busybox; test -e /etc/os-release && echo host',
      });
      assert.equal(outcome.success, true, `${outcome.message}\n${outcome.outputTail}`);
      assert.match(outcome.outputTail, new RegExp(`^${dir}/slipway-mount-[^\\n]+\\nbin/busybox\\nhost\\n$`));
      assert.match(outcome.message, /with \/dev\/loop\d+ mounted$/);
    });
  });

  it('refuses a CHROOT other than y, an unknown FS_TYPE and a missing CMD_LINE, by name', async () => {
    const base = { BLOCK_DEVICE: '/dev/null', FS_TYPE: 'ext4', CMD_LINE: 'true' };
    for (const [env, message] of [
      [{ ...base, CHROOT: 'yes' }, 'cexec: CHROOT=yes is not one of y'],
      [
        { ...base, FS_TYPE: 'ext5' },
        'cexec: FS_TYPE=ext5 is not one of ext4, ext3, ext2, xfs, btrfs, vfat, msdos, exfat, f2fs, ntfs3',
      ],
      [
        { BLOCK_DEVICE: '/dev/null', FS_TYPE: 'ext4' },
        "cexec: CMD_LINE is not set; give it in the action's environment",
      ],
    ] as const) {
      const outcome = await cexec(env);
      assert.equal(outcome.success, false);
      assert.equal(outcome.exitStatus, 1);
      assert.equal(outcome.message, message);
    }
  });
});

// Goal: prove that the built-in archive2disk fetches a real tar, tar.gz and tar.zst archive over
// real HTTP and unpacks it into DEST_PATH on a real ext4 filesystem, keeping modes, numeric
// owners and links, checking TARFILE_CHECKSUM, leaving nothing mounted; and that an unknown
// ARCHIVE_TYPE or FS_TYPE, a 404, a corrupt archive and a wrong checksum fail with messages
// naming them.
// Method: archives built by GNU tar (and zstd) from a small tree made here, served by a node:http
// server on 127.0.0.1; a loop device formatted ext4; afterwards the filesystem is mounted again
// read-only and inspected.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runBuiltin } from '../../src/worker/actions/builtin.js';
import { canUseLoopDevices, hasCommand, withLoopDevice } from '../support/block-devices.js';

const mib = 1024 * 1024;
const dir = mkdtempSync(path.join(tmpdir(), 'slipway-archive2disk-'));
const usable = canUseLoopDevices() && hasCommand('mkfs.ext4') && hasCommand('tar');
const why = 'needs root, losetup, mkfs.ext4 and tar (Debian packages e2fsprogs, tar)';
const served = new Map<string, Buffer>();
let server: Server;
let base: string;

before(async () => {
  const tree = path.join(dir, 'tree');
  mkdirSync(path.join(tree, 'etc/ssh'), { recursive: true });
  writeFileSync(path.join(tree, 'etc/hostname'), 'unpacked\n');
  writeFileSync(path.join(tree, 'etc/ssh/key'), 'secret\n');
  chmodSync(path.join(tree, 'etc/ssh/key'), 0o600);
  chownSync(path.join(tree, 'etc/ssh/key'), 4242, 4343);
  symlinkSync('hostname', path.join(tree, 'etc/name'));
  const tar = path.join(dir, 'root.tar');
  execFileSync('tar', ['-c', '--numeric-owner', '-f', tar, '-C', tree, '.']);
  served.set('/root.tar', readFileSync(tar));
  execFileSync('gzip', ['-k', tar]);
  served.set('/root.tar.gz', readFileSync(`${tar}.gz`));
  if (hasCommand('zstd')) {
    execFileSync('zstd', ['-q', tar, '-o', `${tar}.zst`]);
    served.set('/root.tar.zst', readFileSync(`${tar}.zst`));
  }
  const gz = served.get('/root.tar.gz') ?? Buffer.alloc(0);
  served.set('/corrupt.tar.gz', Buffer.concat([gz.subarray(0, 40), Buffer.alloc(200, 0x55)]));
  server = createServer((request, response) => {
    const body = served.get(request.url ?? '');
    if (body === undefined) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'content-length': body.length }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

function mountedAnywhere(device: string): boolean {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .some((line) => line.startsWith(`${device} `));
}

function inspectMounted<T>(device: string, inspect: (root: string) => T): T {
  const root = mkdtempSync(path.join(dir, 'check-'));
  execFileSync('mount', ['-t', 'ext4', '-o', 'ro', device, root]);
  try {
    return inspect(root);
  } finally {
    execFileSync('umount', [root]);
  }
}

function archive2disk(env: Record<string, string>): ReturnType<typeof runBuiltin> {
  return runBuiltin('archive2disk', env, { timeoutMs: 60_000 });
}

describe('archive2disk', () => {
  for (const [type, file] of [
    ['tar', '/root.tar'],
    ['targz', '/root.tar.gz'],
    ['tarzst', '/root.tar.zst'],
  ] as const) {
    it(`unpacks a ${type} archive into DEST_PATH with modes, numeric owners and links`, async () => {
      assert.ok(usable, why);
      assert.ok(served.has(file), `needs zstd to build ${file} (test/setup.sh installs it)`);
      const sha256 = createHash('sha256')
        .update(served.get(file) ?? '')
        .digest('hex');
      await withLoopDevice(dir, 16 * mib, async (device) => {
        execFileSync('mkfs.ext4', ['-q', '-F', device]);
        const outcome = await archive2disk({
          ARCHIVE_URL: `${base}${file}`,
          ARCHIVE_TYPE: type,
          DEST_DISK: device,
          FS_TYPE: 'ext4',
          DEST_PATH: '/srv/root',
          TARFILE_CHECKSUM: `sha256:${sha256}`,
        });
        assert.equal(outcome.success, true, `${outcome.message}\n${outcome.outputTail}`);
        assert.equal(
          outcome.message,
          `unpacked ${served.get(file)?.length} bytes of ${base}${file} (${type}) into /srv/root on ${device}`,
        );
        assert.equal(mountedAnywhere(device), false, 'unmounted afterwards');
        inspectMounted(device, (root) => {
          const etc = path.join(root, 'srv/root/etc');
          assert.equal(readFileSync(path.join(etc, 'hostname'), 'utf8'), 'unpacked\n');
          const key = statSync(path.join(etc, 'ssh/key'));
          assert.equal(key.mode & 0o7777, 0o600);
          assert.deepEqual([key.uid, key.gid], [4242, 4343]);
          assert.equal(readlinkSync(path.join(etc, 'name')), 'hostname');
        });
      });
    });
  }

  it('fails naming a wrong checksum, a corrupt archive and a 404, leaving nothing mounted', async () => {
    assert.ok(usable, why);
    await withLoopDevice(dir, 16 * mib, async (device) => {
      execFileSync('mkfs.ext4', ['-q', '-F', device]);
      const env = { ARCHIVE_TYPE: 'targz', DEST_DISK: device, FS_TYPE: 'ext4', DEST_PATH: '/' };
      const wrong = await archive2disk({
        ...env,
        ARCHIVE_URL: `${base}/root.tar.gz`,
        TARFILE_CHECKSUM: `sha256:${'0'.repeat(64)}`,
      });
      assert.equal(wrong.success, false);
      assert.match(
        wrong.message,
        /has sha256 [0-9a-f]{64}, not TARFILE_CHECKSUM's 0{64}; its content is already unpacked/,
      );
      const corrupt = await archive2disk({ ...env, ARCHIVE_URL: `${base}/corrupt.tar.gz` });
      assert.equal(corrupt.success, false);
      assert.match(corrupt.message, /^archive2disk: (tar could not unpack|the archive could not be read)/);
      const missing = await archive2disk({ ...env, ARCHIVE_URL: `${base}/none.tar.gz` });
      assert.equal(
        missing.message,
        `archive2disk: ARCHIVE_URL ${base}/none.tar.gz answered 404 Not Found; it must answer 200 with the image`,
      );
      assert.equal(mountedAnywhere(device), false, 'unmounted afterwards');
    });
  });

  it('refuses an unknown ARCHIVE_TYPE or FS_TYPE and a malformed checksum, naming the allowed values', async () => {
    const env = {
      ARCHIVE_URL: `${base}/root.tar`,
      ARCHIVE_TYPE: 'tar',
      DEST_DISK: '/dev/null',
      FS_TYPE: 'ext4',
      DEST_PATH: '/',
    };
    for (const [bad, message] of [
      [{ ARCHIVE_TYPE: 'zip' }, 'archive2disk: ARCHIVE_TYPE=zip is not one of tar, targz, tarzst'],
      [
        { FS_TYPE: 'ext9' },
        'archive2disk: FS_TYPE=ext9 is not one of ext4, ext3, ext2, xfs, btrfs, vfat, msdos, exfat, f2fs, ntfs3',
      ],
      [
        { TARFILE_CHECKSUM: 'md5:abc' },
        'archive2disk: TARFILE_CHECKSUM=md5:abc is not sha256:HEX (64 hex digits) or sha512:HEX (128 hex digits)',
      ],
      [{ DEST_PATH: 'srv' }, 'archive2disk: DEST_PATH=srv must be an absolute path'],
    ] as const) {
      const outcome = await archive2disk({ ...env, ...bad });
      assert.equal(outcome.success, false);
      assert.equal(outcome.message, message);
    }
  });
});

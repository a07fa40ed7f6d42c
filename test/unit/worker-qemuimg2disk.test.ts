// Goal: prove that the built-in qemuimg2disk converts a real qcow2 image (compressed clusters, a
// partition table, data past the first MiB) read over real HTTP by range requests onto a real
// block device and onto a regular file, byte for byte the raw disk it was made from; and that
// what can be checked first is refused before the disk is touched, with messages naming it: an
// image larger than the disk, a 404, a server without range requests, a server not listening, an
// unknown FORMAT.
// Method: qemu-img (Debian's qemu-utils, with qemu-block-extra's curl driver) makes the qcow2
// from a raw disk partitioned by sfdisk; a node:http server on 127.0.0.1 serves it with HEAD and
// Range; the targets are loop devices over small files, read back and compared.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runBuiltin } from '../../src/worker/actions/builtin.js';
import { canUseLoopDevices, hasCommand, readBytes, withLoopDevice } from '../support/block-devices.js';

const mib = 1024 * 1024;
const dir = mkdtempSync(path.join(tmpdir(), 'slipway-qemuimg2disk-'));
const diskBytes = 24 * mib;
const usable = canUseLoopDevices() && hasCommand('qemu-img') && hasCommand('sfdisk');
const why = 'needs root, losetup, qemu-img and sfdisk (Debian qemu-utils, qemu-block-extra, fdisk)';
const raw = path.join(dir, 'disk.raw');
let qcow2 = Buffer.alloc(0);
let server: Server;
let base: string;

before(async () => {
  writeFileSync(raw, Buffer.alloc(0));
  execFileSync('truncate', ['-s', String(diskBytes), raw]);
  execFileSync('sfdisk', ['-q', raw], { input: 'label: gpt\n,8M,L\n,,L\n' });
  // Data in both partitions, and a zeroed stretch qcow2 leaves unallocated between them.
  const fd = openSync(raw, 'r+');
  try {
    writeSync(fd, randomBytes(mib), 0, mib, 2 * mib);
    const second = Buffer.from('the second partition\n');
    writeSync(fd, second, 0, second.length, 13 * mib + 7);
  } finally {
    closeSync(fd);
  }
  if (hasCommand('qemu-img')) {
    const file = path.join(dir, 'disk.qcow2');
    execFileSync('qemu-img', ['convert', '-c', '-f', 'raw', '-O', 'qcow2', raw, file]);
    qcow2 = readFileSync(file);
  }
  server = createServer((request, response) => {
    const ranged = request.url === '/disk.qcow2';
    if (!ranged && request.url !== '/norange.qcow2') {
      response.writeHead(404).end();
      return;
    }
    const headers = ranged ? { 'accept-ranges': 'bytes' } : {};
    const range = /^bytes=(\d+)-(\d*)$/.exec(request.headers.range ?? '');
    const body = request.method === 'HEAD' ? undefined : qcow2;
    if (!ranged || range === null) {
      response.writeHead(200, { ...headers, 'content-length': qcow2.length }).end(body);
      return;
    }
    const start = Number(range[1]);
    const end = range[2] === '' ? qcow2.length - 1 : Math.min(Number(range[2]), qcow2.length - 1);
    response
      .writeHead(206, {
        ...headers,
        'content-range': `bytes ${start}-${end}/${qcow2.length}`,
        'content-length': end - start + 1,
      })
      .end(body?.subarray(start, end + 1));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

function qemuimg2disk(env: Record<string, string>): ReturnType<typeof runBuiltin> {
  return runBuiltin('qemuimg2disk', env, { timeoutMs: 60_000 });
}

describe('qemuimg2disk', () => {
  it('converts a qcow2 image over HTTP onto a block device, byte for byte', async () => {
    assert.ok(usable, why);
    await withLoopDevice(dir, 32 * mib, async (device) => {
      execFileSync('dd', ['if=/dev/urandom', `of=${device}`, 'bs=1M', 'count=32', 'status=none']);
      const lines: string[] = [];
      const outcome = await runBuiltin(
        'qemuimg2disk',
        { IMG_URL: `${base}/disk.qcow2`, DEST_DISK: device },
        { timeoutMs: 60_000, onProgress: (line) => lines.push(line) },
      );
      assert.equal(outcome.success, true, `${outcome.message}\n${outcome.outputTail}`);
      assert.match(
        outcome.message,
        new RegExp(
          `^wrote the qcow2 image ${base}/disk.qcow2 \\(${diskBytes} bytes\\) to ${device} as host_device in `,
        ),
      );
      assert.ok(lines.includes('converted 100%'), lines.join('\n'));
      // The image's zeroes are written as zeroes, whatever the disk held.
      assert.ok(readBytes(device, 0, diskBytes).equals(readFileSync(raw)), 'the device holds the raw disk');
    });
  });

  it('converts onto a regular file as raw by default', async () => {
    assert.ok(usable, why);
    const file = path.join(dir, 'target.img');
    writeFileSync(file, Buffer.alloc(0));
    const outcome = await qemuimg2disk({ IMG_URL: `${base}/disk.qcow2`, DEST_DISK: file });
    assert.equal(outcome.success, true, `${outcome.message}\n${outcome.outputTail}`);
    assert.match(outcome.message, / as raw in /);
    assert.ok(readFileSync(file).equals(readFileSync(raw)));
  });

  it('refuses an image larger than the disk, before writing anything', async () => {
    assert.ok(usable, why);
    await withLoopDevice(dir, 8 * mib, async (device) => {
      const outcome = await qemuimg2disk({ IMG_URL: `${base}/disk.qcow2`, DEST_DISK: device });
      assert.equal(outcome.success, false);
      assert.equal(
        outcome.message,
        `qemuimg2disk: disk too small: the qcow2 image at ${base}/disk.qcow2 holds ${diskBytes} bytes ` +
          `and DEST_DISK ${device} holds ${8 * mib}`,
      );
      assert.ok(readBytes(device, 0, 8 * mib).equals(Buffer.alloc(8 * mib)), 'the disk is untouched');
    });
  });

  it('names a 404, a server without range requests, a closed port and an unknown FORMAT', async () => {
    const file = path.join(dir, 'untouched.img');
    writeFileSync(file, 'before');
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    for (const [env, message] of [
      [
        { IMG_URL: `${base}/none.qcow2` },
        `qemuimg2disk: IMG_URL ${base}/none.qcow2 answered 404 Not Found; it must answer 200 with the image`,
      ],
      [
        { IMG_URL: `${base}/norange.qcow2` },
        `qemuimg2disk: IMG_URL ${base}/norange.qcow2 is served without range requests (no "Accept-Ranges: bytes"), ` +
          'which qemu-img reads the image by; serve it from a server that takes them, or write a raw image with image2disk',
      ],
      [
        { IMG_URL: `http://127.0.0.1:${port}/disk.qcow2` },
        `qemuimg2disk: cannot fetch IMG_URL http://127.0.0.1:${port}/disk.qcow2: connect ECONNREFUSED 127.0.0.1:${port}`,
      ],
      [
        { IMG_URL: `${base}/disk.qcow2`, FORMAT: 'qcow2' },
        'qemuimg2disk: FORMAT=qcow2 is not one of host_device, raw',
      ],
      [
        { IMG_URL: 'ftp://10.0.0.1/disk.qcow2' },
        'qemuimg2disk: IMG_URL ftp://10.0.0.1/disk.qcow2 is not an http:// or https:// URL',
      ],
    ] as const) {
      const outcome = await qemuimg2disk({ DEST_DISK: file, ...env });
      assert.equal(outcome.success, false);
      assert.equal(outcome.message, message);
    }
    assert.equal(readFileSync(file, 'utf8'), 'before');
  });
});

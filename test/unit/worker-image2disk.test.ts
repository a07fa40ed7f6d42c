// Goal: prove that the built-in image2disk streams a real image over real HTTP onto a real
// target, plain, gzip, zstd, xz or bzip2 (the last two through the system's xzcat and bzcat, a
// truncated xz image failing with what xzcat said), verifies IMG_SHA256 (zeroing the first MiB on a mismatch), and
// refuses before touching anything what can be checked first: a missing disk, a 404, an
// uncompressed image larger than a block device; and that a compressed image running past the
// end of a (loop) block device fails as "disk too small".
// Method: a node:http server on 127.0.0.1 serving generated images; runBuiltin as the agent
// calls it; targets are regular files in a temp dir and, for the size checks, a loop device.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { runBuiltin } from '../../src/worker/actions/builtin.js';
import { canUseLoopDevices, hasCommand, withLoopDevice } from '../support/block-devices.js';

const mib = 1024 * 1024;
const dir = mkdtempSync(path.join(tmpdir(), 'slipway-image2disk-'));
/** 5 MiB and a bit: past the held-back first MiB and more than one 4 MiB write chunk. */
const image = Buffer.concat([randomBytes(3 * mib), Buffer.alloc(2 * mib, 7), randomBytes(12_345)]);
const served = new Map<string, Buffer>();
let server: Server;
let base: string;

/** The image compressed by a Debian program: zstd, xz or bzip2. */
function compressedBy(program: string, data: Buffer): Buffer {
  const file = path.join(dir, 'image.raw');
  writeFileSync(file, data);
  return execFileSync(program, ['-q', '-c', file], { maxBuffer: 64 * mib });
}

before(async () => {
  served.set('/image.raw', image);
  served.set('/image.raw.gz', gzipSync(image));
  if (hasCommand('zstd')) served.set('/image.raw.zst', compressedBy('zstd', image));
  if (hasCommand('xz')) served.set('/image.raw.xz', compressedBy('xz', image));
  if (hasCommand('bzip2')) served.set('/image.raw.bz2', compressedBy('bzip2', image));
  const xz = served.get('/image.raw.xz');
  if (xz !== undefined) served.set('/broken.raw.xz', xz.subarray(0, Math.floor(xz.length / 2)));
  server = createServer((request, response) => {
    const body = served.get(request.url ?? '');
    if (body === undefined) {
      response.writeHead(404).end('not found');
      return;
    }
    response.writeHead(200, { 'content-length': body.length }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A target file that exists, as a disk does, filled with something other than the image. */
function targetFile(name: string, bytes = 64 * 1024): string {
  const file = path.join(dir, name);
  writeFileSync(file, Buffer.alloc(bytes, 0xee));
  return file;
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

function run(env: Record<string, string>): ReturnType<typeof runBuiltin> {
  return runBuiltin('image2disk', env, { timeoutMs: 60_000 });
}

describe('image2disk', () => {
  it('writes a plain image and reports what it wrote', async () => {
    const dest = targetFile('plain.disk');
    const outcome = await run({ IMG_URL: `${base}/image.raw`, DEST_DISK: dest });
    assert.equal(outcome.message.startsWith(`wrote ${image.length} bytes`), true, outcome.message);
    assert.deepEqual([outcome.success, outcome.exitStatus], [true, 0]);
    assert.ok(readFileSync(dest).equals(image));
    assert.match(outcome.outputTail, /^streaming http:\/\/127\.0\.0\.1:\d+\/image\.raw \(\d+ bytes\) to /);
  });

  for (const [what, file, compressed] of [
    ['gzip, told by its first bytes', '/image.raw.gz', 'true'],
    ['gzip, named', '/image.raw.gz', 'gzip'],
    ['zstd, told by its first bytes', '/image.raw.zst', 'true'],
    ['zstd, named', '/image.raw.zst', 'zstd'],
    // Tinkerbell's image2disk reads these too; the machine's xzcat and bzcat (busybox's) do it.
    ['xz, told by its first bytes', '/image.raw.xz', 'true'],
    ['xz, named', '/image.raw.xz', 'xz'],
    ['bzip2, told by its first bytes', '/image.raw.bz2', 'true'],
    ['bzip2, named', '/image.raw.bz2', 'bzip2'],
  ] as const) {
    it(`decompresses ${what}`, async () => {
      assert.ok(
        served.has(file),
        'zstd, xz and bzip2 are needed to make the images (Debian packages of those names)',
      );
      const dest = targetFile(`${compressed}-${path.basename(file)}.disk`);
      const outcome = await run({ IMG_URL: `${base}${file}`, DEST_DISK: dest, COMPRESSED: compressed });
      assert.equal(outcome.success, true, outcome.message);
      assert.ok(readFileSync(dest).equals(image));
    });
  }

  it('verifies IMG_SHA256 of the image as served', async () => {
    const dest = targetFile('verified.disk');
    const digest = sha256(served.get('/image.raw.gz') ?? Buffer.alloc(0)).toUpperCase();
    const outcome = await run({
      IMG_URL: `${base}/image.raw.gz`,
      DEST_DISK: dest,
      COMPRESSED: 'true',
      IMG_SHA256: digest,
    });
    assert.equal(outcome.success, true, outcome.message);
    assert.match(outcome.message, /SHA-256 verified/);
    assert.ok(readFileSync(dest).equals(image));
  });

  it('fails a digest mismatch naming both digests, and zeroes the first MiB', async () => {
    const dest = targetFile('mismatch.disk');
    const wrong = 'ab'.repeat(32);
    const outcome = await run({ IMG_URL: `${base}/image.raw`, DEST_DISK: dest, IMG_SHA256: wrong });
    assert.deepEqual([outcome.success, outcome.exitStatus], [false, 1]);
    assert.match(outcome.message, new RegExp(`SHA-256 ${sha256(image)}, expected ${wrong}`));
    const written = readFileSync(dest);
    assert.ok(written.subarray(0, mib).equals(Buffer.alloc(mib)), 'the first MiB is zeroed');
    assert.ok(written.subarray(mib).equals(image.subarray(mib)), 'the rest was written');
  });

  it('refuses a missing DEST_DISK before fetching, creating nothing', async () => {
    const dest = path.join(dir, 'sdz');
    const outcome = await run({ IMG_URL: `${base}/image.raw`, DEST_DISK: dest });
    assert.equal(outcome.success, false);
    assert.equal(
      outcome.message,
      `image2disk: DEST_DISK ${dest} does not exist; name the machine's disk, such as /dev/sda`,
    );
    assert.equal(existsSync(dest), false);
  });

  it('refuses an image URL that does not answer 200, leaving the disk untouched', async () => {
    const dest = targetFile('untouched.disk');
    const outcome = await run({ IMG_URL: `${base}/missing.raw`, DEST_DISK: dest });
    assert.equal(outcome.success, false);
    assert.match(
      outcome.message,
      /IMG_URL http:\/\/127\.0\.0\.1:\d+\/missing\.raw answered 404 Not Found; it must answer 200/,
    );
    assert.ok(readFileSync(dest).equals(Buffer.alloc(64 * 1024, 0xee)));
  });

  it('fails a truncated xz image naming xz and what xzcat said', async () => {
    const dest = targetFile('broken-xz.disk');
    const outcome = await run({ IMG_URL: `${base}/broken.raw.xz`, DEST_DISK: dest, COMPRESSED: 'true' });
    assert.equal(outcome.success, false);
    assert.match(outcome.message, /the xz image is corrupt or truncated: xzcat exited with status 1: .+/);
  });

  it('refuses bad settings by name', async () => {
    const dest = targetFile('settings.disk');
    const cases: [Record<string, string>, RegExp][] = [
      [{ DEST_DISK: dest }, /IMG_URL is not set/],
      [{ IMG_URL: 'ftp://127.0.0.1/x', DEST_DISK: dest }, /not an http:\/\/ or https:\/\/ URL/],
      [
        { IMG_URL: `${base}/image.raw`, DEST_DISK: dest, COMPRESSED: 'lzma' },
        /COMPRESSED=lzma is not supported/,
      ],
      [
        { IMG_URL: `${base}/image.raw`, DEST_DISK: dest, IMG_SHA256: 'abc' },
        /IMG_SHA256=abc is not a SHA-256/,
      ],
      [
        { IMG_URL: `${base}/image.raw`, DEST_DISK: dest, COMPRESSED: 'true' },
        /is not gzip, zstd, xz or bzip2 data/,
      ],
      [{ IMG_URL: `${base}/image.raw.gz`, DEST_DISK: dest, COMPRESSED: 'zstd' }, /is gzip, not zstd/],
    ];
    for (const [env, message] of cases) {
      const outcome = await run(env);
      assert.equal(outcome.success, false);
      assert.match(outcome.message, message);
    }
  });

  it('stops on cancel, reporting it cancelled', async () => {
    const dest = targetFile('cancelled.disk');
    const abort = new AbortController();
    abort.abort();
    const outcome = await runBuiltin(
      'image2disk',
      { IMG_URL: `${base}/image.raw`, DEST_DISK: dest },
      {
        timeoutMs: 60_000,
        signal: abort.signal,
      },
    );
    assert.deepEqual([outcome.success, outcome.cancelled, outcome.exitStatus], [false, true, 130]);
  });

  it('on a block device: refuses a plain image too large before writing, and fails a compressed one past the end', async () => {
    assert.ok(canUseLoopDevices(), 'needs root and losetup (util-linux)');
    await withLoopDevice(dir, 2 * mib, async (device) => {
      const plain = await run({ IMG_URL: `${base}/image.raw`, DEST_DISK: device });
      assert.equal(plain.success, false);
      assert.equal(
        plain.message,
        `image2disk: disk too small: the image is ${image.length} bytes and DEST_DISK ${device} holds ${2 * mib}`,
      );
      assert.ok(readFileSync(device).equals(Buffer.alloc(2 * mib)), 'nothing was written');
      const packed = await run({ IMG_URL: `${base}/image.raw.gz`, DEST_DISK: device, COMPRESSED: 'true' });
      assert.equal(packed.success, false);
      assert.match(packed.message, new RegExp(`disk too small: DEST_DISK ${device} holds ${2 * mib} bytes`));
      assert.ok(readFileSync(device).subarray(0, mib).equals(Buffer.alloc(mib)), 'the head stays blank');
      // And one that fits is written whole.
      const small = image.subarray(0, mib + 4096);
      served.set('/small.raw', small);
      const fits = await run({ IMG_URL: `${base}/small.raw`, DEST_DISK: device });
      assert.equal(fits.success, true, fits.message);
      assert.ok(readFileSync(device).subarray(0, small.length).equals(small));
    });
  });
});

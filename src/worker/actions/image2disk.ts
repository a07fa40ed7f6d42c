// image2disk: streams a disk image from IMG_URL onto DEST_DISK, as Tinkerbell's hub action does.
//
//   IMG_URL     http:// or https://; must answer 200
//   DEST_DISK   a block device (or an existing regular file, for tests and VM images)
//   COMPRESSED  false (default) | true (gzip, zstd, xz or bzip2, told by the first bytes) | gzip |
//               zstd | xz | bzip2 (xz and bzip2 through the machine's xzcat and bzcat)
//   IMG_SHA256  optional: the hex SHA-256 of the image as served (compressed, if it is)
//
// Everything that can be checked is checked before the disk is touched: the disk exists, the
// server answers 200, and an uncompressed image of known length fits. The image then streams
// HTTP → decompression → the disk in large chunks; nothing holds it whole. The disk's first MiB
// is written last, once the digest matches, and zeroed on any failure, so a machine never boots
// an image that was cut short or failed verification.
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { runProgram } from './program.js';
import { ActionError, type BuiltinContext, type BuiltinDone } from './action.js';
import { decompressor, detectCompression, magicBytes, type Compression } from './decompress.js';
import { DiskWriter } from './disk-writer.js';
import { openImage } from './image-source.js';
import { optionalSetting, requiredSetting } from './settings.js';
import { inspectTarget } from './target-disk.js';

/** How often a progress line is written while the image streams. */
export const progressIntervalMs = 3000;

type CompressedSetting = Compression | 'detect' | 'none';

export async function image2disk(ctx: BuiltinContext): Promise<BuiltinDone> {
  const url = requiredSetting(ctx.env, 'IMG_URL');
  const dest = requiredSetting(ctx.env, 'DEST_DISK');
  const compressed = compressedSetting(optionalSetting(ctx.env, 'COMPRESSED'));
  const expected = sha256Setting(optionalSetting(ctx.env, 'IMG_SHA256'));
  const target = await inspectTarget(dest);
  const image = await openImage(url, ctx.signal, { onResume: (message) => ctx.progress(message) });
  try {
    const length = image.lengthBytes;
    if (compressed === 'none' && length !== undefined && target.capacityBytes !== undefined) {
      if (length > target.capacityBytes) {
        throw new ActionError(
          `disk too small: the image is ${length} bytes and DEST_DISK ${dest} holds ${target.capacityBytes}`,
        );
      }
    }
    ctx.progress(`streaming ${url}${length === undefined ? '' : ` (${length} bytes)`} to ${dest}`);
    const hash = createHash('sha256');
    const served = hashed(image.body, hash);
    const head = await peek(served, magicBytes);
    const compression = chooseCompression(compressed, head.first, url);
    const line = await writeImage(
      { source: head.all, compression, dest, capacityBytes: target.capacityBytes },
      ctx,
      () => {
        const actual = hash.digest('hex');
        if (expected !== undefined && actual !== expected) {
          throw new ActionError(
            `IMG_SHA256 mismatch: the image from ${url} has SHA-256 ${actual}, expected ${expected}; ` +
              `the first MiB of ${dest} is zeroed so the machine cannot boot it`,
          );
        }
        return expected === undefined ? '' : ', SHA-256 verified';
      },
    );
    return { message: line };
  } finally {
    image.body.destroy();
  }
}

export interface ImageWrite {
  /** The image's bytes, before decompression. */
  readonly source: AsyncIterable<Buffer>;
  readonly compression: Compression | undefined;
  readonly dest: string;
  /** A block device's size; undefined for a regular file. */
  readonly capacityBytes: number | undefined;
}

/**
 * Streams an image onto the disk (oci2disk does the same): decompressed, in large chunks, with
 * progress lines; the first MiB is written only once `verify` (called when the stream has ended)
 * returns, and zeroed when it throws or anything fails. Returns the line saying what was done,
 * `verify`'s words appended.
 */
export async function writeImage(
  image: ImageWrite,
  ctx: BuiltinContext,
  verify: () => string,
): Promise<string> {
  const { dest } = image;
  const disk = await open(dest, 'r+');
  try {
    const started = Date.now();
    let reported = started;
    const writer = new DiskWriter(disk, {
      capacityBytes: image.capacityBytes,
      name: `DEST_DISK ${dest}`,
      written: (bytes) => {
        const now = Date.now();
        if (now - reported < progressIntervalMs) return;
        reported = now;
        ctx.progress(`wrote ${mebibytes(bytes)} MiB (${rate(bytes, now - started)} MB/s)`);
      },
    });
    const source = Readable.from(image.source);
    let verified: string;
    try {
      const options = { signal: ctx.signal };
      if (image.compression === undefined) await pipeline(source, writer, options);
      else await pipeline(source, decompressor(image.compression), writer, options);
      verified = verify();
      await writer.commitHead();
    } catch (error) {
      // Not abortable: whatever stopped the stream, the head must not stay half-written.
      await writer.blankHead();
      throw error;
    }
    const elapsedMs = Date.now() - started;
    const what = image.compression === undefined ? 'image' : `${image.compression} image`;
    const line =
      `wrote ${writer.bytes} bytes of the ${what} to ${dest} in ${(elapsedMs / 1000).toFixed(1)} s ` +
      `(${rate(writer.bytes, elapsedMs)} MB/s)${verified}`;
    ctx.progress(line);
    await disk.close();
    // The kernel still knows the disk's old (or no) partitions; without udev nothing tells it
    // of the new table, and the next action (writefile on /dev/vda1) would find no partition.
    if (image.capacityBytes !== undefined) await rereadPartitions(dest, ctx);
    return line;
  } finally {
    await disk.close().catch(() => undefined);
  }
}

/** Tells the kernel of the disk's new partition table (qemuimg2disk does the same). */
export async function rereadPartitions(dest: string, ctx: BuiltinContext): Promise<void> {
  try {
    await runProgram(['blockdev', '--rereadpt', dest], ctx.signal);
    ctx.progress(`re-read the partition table of ${dest}`);
  } catch (error) {
    // The image is written and verified; a busy disk keeps its old view until the next boot.
    ctx.progress(`could not re-read the partition table of ${dest}: ${(error as Error).message}`);
  }
}

function compressedSetting(value: string | undefined): CompressedSetting {
  switch (value?.trim().toLowerCase()) {
    case undefined:
    case 'false':
      return 'none';
    case 'true':
      return 'detect';
    case 'gzip':
    case 'zstd':
    case 'xz':
    case 'bzip2':
      return value.trim().toLowerCase() as Compression;
    default:
      throw new ActionError(
        `COMPRESSED=${value} is not supported; use false, true (gzip, zstd, xz or bzip2, told by ` +
          "the image's first bytes), or one of gzip, zstd, xz and bzip2",
      );
  }
}

function sha256Setting(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const digest = value.trim().toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(digest)) {
    throw new ActionError(`IMG_SHA256=${value} is not a SHA-256 digest (64 hexadecimal digits)`);
  }
  return digest;
}

function chooseCompression(setting: CompressedSetting, first: Buffer, url: string): Compression | undefined {
  if (setting === 'none') return undefined;
  const found = detectCompression(first);
  if (setting === 'detect') {
    if (found === undefined) {
      throw new ActionError(
        `the image at ${url} is not gzip, zstd, xz or bzip2 data (COMPRESSED=true); set COMPRESSED=false for a raw image`,
      );
    }
    return found;
  }
  if (found !== setting) {
    throw new ActionError(
      `the image at ${url} is ${found ?? 'not compressed data'}, not ${setting} as COMPRESSED says`,
    );
  }
  return setting;
}

/** Passes the image through unchanged, hashing it as served. */
async function* hashed(
  body: AsyncIterable<Buffer>,
  hash: ReturnType<typeof createHash>,
): AsyncGenerator<Buffer> {
  for await (const chunk of body) {
    hash.update(chunk);
    yield chunk;
  }
}

/** The first `bytes` bytes (fewer if the image is shorter), and all of it again from the start. */
async function peek(
  source: AsyncGenerator<Buffer>,
  bytes: number,
): Promise<{ first: Buffer; all: AsyncGenerator<Buffer> }> {
  const held: Buffer[] = [];
  let length = 0;
  while (length < bytes) {
    const next = await source.next();
    if (next.done === true) break;
    held.push(next.value);
    length += next.value.length;
  }
  async function* all(): AsyncGenerator<Buffer> {
    yield* held.splice(0);
    yield* source;
  }
  return { first: Buffer.concat(held).subarray(0, bytes), all: all() };
}

function mebibytes(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(0);
}

function rate(bytes: number, ms: number): string {
  return (bytes / 1e6 / Math.max(ms / 1000, 0.001)).toFixed(1);
}

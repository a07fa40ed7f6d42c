// Decompression for image2disk, archive2disk and oci2disk: gzip through zlib, zstd through fzstd
// (Node 20's zlib has no zstd), xz and bzip2 (which Tinkerbell's image2disk reads too) through
// the system's xzcat and bzcat (busybox's applets in the boot OS; Node has neither codec).
// Streams only: an image is never held whole in memory.
import { spawn } from 'node:child_process';
import { Duplex } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { Decompress } from 'fzstd';
import { findExecutable } from '../../platform/executable.js';
import { ActionError } from './action.js';

export type Compression = 'gzip' | 'zstd' | 'xz' | 'bzip2';

const gzipMagic = [0x1f, 0x8b];
const zstdMagic = [0x28, 0xb5, 0x2f, 0xfd];
const xzMagic = [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00];
/** "BZh" and the block size, 1-9 (checked below). */
const bzip2Magic = [0x42, 0x5a, 0x68];
/** Bytes needed to tell the compressions apart. */
export const magicBytes = xzMagic.length;
/** What a failed program said last, kept for the error. */
const stderrTailBytes = 400;
/**
 * zstd input is fed in pieces this big: fzstd decodes every whole block it holds at once, and
 * a piece of run-length blocks (a zeroed stretch of disk) can stand for megabytes of output.
 */
const zstdPieceBytes = 4096;

/** The compression the image's first bytes show, or undefined. */
export function detectCompression(head: Uint8Array): Compression | undefined {
  const starts = (magic: readonly number[]): boolean => magic.every((byte, i) => head[i] === byte);
  if (starts(gzipMagic)) return 'gzip';
  if (starts(zstdMagic)) return 'zstd';
  if (starts(xzMagic)) return 'xz';
  const level = head[3] ?? 0;
  if (starts(bzip2Magic) && level >= 0x31 && level <= 0x39) return 'bzip2';
  return undefined;
}

export function decompressor(compression: Compression): Duplex {
  switch (compression) {
    case 'gzip':
      return createGunzip();
    case 'zstd':
      return zstdDecompressor();
    case 'xz':
      return programDecompressor('xz', 'xzcat');
    case 'bzip2':
      return programDecompressor('bzip2', 'bzcat');
  }
}

/**
 * A decompressing program as a stream: bytes in on its stdin, out of its stdout. It is killed
 * when the stream is destroyed (a failed write, a cancel); a status other than 0 fails the
 * stream, naming the program and what it said.
 */
function programDecompressor(what: Compression, name: string): Duplex {
  const found = findExecutable(name, [`/usr/bin/${name}`, `/bin/${name}`]);
  const busybox = findExecutable('busybox', ['/bin/busybox', '/usr/bin/busybox']);
  const argv = found !== undefined ? [found] : busybox !== undefined ? [busybox, name] : undefined;
  if (argv === undefined) {
    throw new ActionError(`${what} images need ${name} (xz-utils or bzip2, or busybox) on the machine`);
  }
  const [program = name, ...args] = argv;
  const child = spawn(program, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let said = '';
  child.stderr.on('data', (data: Buffer) => {
    said = (said + data.toString('utf8')).slice(-stderrTailBytes);
  });
  // The program may exit before reading all its input (corrupt data): its status says why.
  child.stdin.on('error', () => undefined);
  const stream = new Duplex({
    write(chunk: Buffer, _encoding, done) {
      if (child.stdin.write(chunk)) done();
      else child.stdin.once('drain', () => done());
    },
    final(done) {
      child.stdin.end();
      done();
    },
    read() {
      child.stdout.resume();
    },
    destroy(error, done) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      done(error);
    },
  });
  child.stdout.on('data', (data: Buffer) => {
    if (!stream.push(data)) child.stdout.pause();
  });
  child.on('error', (error) => {
    stream.destroy(new ActionError(`${what}: ${program} could not run: ${error.message}`));
  });
  // 'close' comes once the program exited and its output was read whole.
  child.on('close', (code, signal) => {
    if (code === 0) stream.push(null);
    else if (!stream.destroyed) {
      const status = code === null ? `was killed by ${signal ?? 'a signal'}` : `exited with status ${code}`;
      stream.destroy(
        new ActionError(`the ${what} image is corrupt or truncated: ${name} ${status}: ${said.trim()}`),
      );
    }
  });
  return stream;
}

function zstdDecompressor(): Duplex {
  return Duplex.from(async function* (chunks: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    const blocks: Uint8Array[] = [];
    const zstd = new Decompress((block) => {
      blocks.push(block);
    });
    const push = (data: Uint8Array, final: boolean): void => {
      try {
        zstd.push(data, final);
      } catch (error) {
        throw new ActionError(`the zstd image is corrupt or truncated: ${(error as Error).message}`);
      }
    };
    for await (const chunk of chunks) {
      for (let at = 0; at < chunk.length; at += zstdPieceBytes) {
        push(chunk.subarray(at, at + zstdPieceBytes), false);
        for (const block of blocks.splice(0)) yield Buffer.from(block.buffer, block.byteOffset, block.length);
      }
    }
    push(new Uint8Array(0), true);
    for (const block of blocks.splice(0)) yield Buffer.from(block.buffer, block.byteOffset, block.length);
  });
}

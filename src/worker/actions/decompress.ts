// Decompression for image2disk: gzip through zlib, zstd through fzstd (Node 20's zlib has no
// zstd). Streams only: an image is never held whole in memory.
import { Duplex } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { Decompress } from 'fzstd';
import { ActionError } from './action.js';

export type Compression = 'gzip' | 'zstd';

const gzipMagic = [0x1f, 0x8b];
const zstdMagic = [0x28, 0xb5, 0x2f, 0xfd];
/** Bytes needed to tell gzip from zstd. */
export const magicBytes = zstdMagic.length;
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
  return undefined;
}

export function decompressor(compression: Compression): Duplex {
  return compression === 'gzip' ? createGunzip() : zstdDecompressor();
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

// The sink of image2disk: plain positional writes in large chunks (no O_DIRECT: the page cache
// merges them and the final fsync makes them durable), bounded by the device's size.
//
// The first MiB, where the partition table and boot loader live, is held back until the caller
// says the image is good: a machine whose image failed verification (or whose write was cut
// short) then has a blank head and cannot boot a half-written system.
import type { FileHandle } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { ActionError } from './action.js';

export const headBytes = 1024 * 1024;
const chunkBytes = 4 * 1024 * 1024;

export interface DiskWriterOptions {
  /** Bytes the target holds; undefined: no bound (a regular file grows). */
  readonly capacityBytes: number | undefined;
  /** How the target is named in errors: "DEST_DISK /dev/sda". */
  readonly name: string;
  /** Called after each chunk written, with the bytes written so far. */
  readonly written?: (bytes: number) => void;
}

export class DiskWriter extends Writable {
  readonly #disk: FileHandle;
  readonly #o: DiskWriterOptions;
  readonly #head = Buffer.alloc(headBytes);
  readonly #chunk = Buffer.allocUnsafe(chunkBytes);
  #chunkLength = 0;
  /** Image bytes received so far: the offset of the next one. */
  #received = 0;
  /** Where #chunk starts on the disk. */
  #chunkOffset = headBytes;

  constructor(disk: FileHandle, options: DiskWriterOptions) {
    super();
    this.#disk = disk;
    this.#o = options;
  }

  /** Bytes of image received (and, once finished, written but for the head). */
  get bytes(): number {
    return this.#received;
  }

  override _write(data: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.#take(data).then(() => done(), done);
  }

  override _final(done: (error?: Error | null) => void): void {
    this.#flush().then(() => done(), done);
  }

  /** Writes the held-back head: the image is good. Then makes everything durable. */
  async commitHead(): Promise<void> {
    await writeFully(this.#disk, this.#head.subarray(0, Math.min(headBytes, this.#received)), 0);
    await this.#disk.sync();
  }

  /** Zeroes the head instead: the image is bad or incomplete and must not boot. */
  async blankHead(): Promise<void> {
    const size = this.#o.capacityBytes ?? (await this.#disk.stat()).size;
    await writeFully(this.#disk, Buffer.alloc(Math.min(headBytes, size)), 0);
    await this.#disk.sync();
  }

  async #take(data: Buffer): Promise<void> {
    const capacity = this.#o.capacityBytes;
    if (capacity !== undefined && this.#received + data.length > capacity) {
      throw new ActionError(
        `disk too small: ${this.#o.name} holds ${capacity} bytes, and the image runs past that ` +
          `(${this.#received + data.length} bytes so far); use a larger disk or a smaller image`,
      );
    }
    let at = 0;
    while (at < data.length && this.#received < headBytes) {
      const n = Math.min(data.length - at, headBytes - this.#received);
      data.copy(this.#head, this.#received, at, at + n);
      this.#received += n;
      at += n;
    }
    while (at < data.length) {
      const n = Math.min(data.length - at, chunkBytes - this.#chunkLength);
      data.copy(this.#chunk, this.#chunkLength, at, at + n);
      this.#chunkLength += n;
      this.#received += n;
      at += n;
      if (this.#chunkLength === chunkBytes) await this.#flush();
    }
  }

  async #flush(): Promise<void> {
    if (this.#chunkLength === 0) return;
    await writeFully(this.#disk, this.#chunk.subarray(0, this.#chunkLength), this.#chunkOffset);
    this.#chunkOffset += this.#chunkLength;
    this.#chunkLength = 0;
    this.#o.written?.(this.#received);
  }
}

async function writeFully(disk: FileHandle, data: Buffer, offset: number): Promise<void> {
  let done = 0;
  while (done < data.length) {
    const { bytesWritten } = await disk.write(data, done, data.length - done, offset + done);
    if (bytesWritten === 0) throw new ActionError(`no room to write at byte ${offset + done}`);
    done += bytesWritten;
  }
}

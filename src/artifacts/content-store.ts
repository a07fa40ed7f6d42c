// A node's store of artifact content, by digest: DATA_DIR/artifacts/sha256/HEX. A file there is
// complete and verified: content is written to a temporary file (tmp/), fsync'd, its size and
// SHA-256 checked against what was announced, and only then renamed into place (and the
// directory fsync'd), so a crash or a bad upload or peer never leaves a partial or wrong file
// under a digest's name. The HTTP boot server and peers read only files under sha256/.
import { createHash, randomBytes, type Hash } from 'node:crypto';
import { mkdir, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { syncDirectory } from '../platform/sync-directory.js';

const hexDigest = /^[0-9a-f]{64}$/;

/** Content that is not what it was announced to be: nothing was stored. */
export class ContentMismatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ContentMismatchError';
  }
}

export class ContentStore {
  readonly #contentDir: string;
  readonly #tmpDir: string;

  private constructor(root: string) {
    this.#contentDir = join(root, 'sha256');
    this.#tmpDir = join(root, 'tmp');
  }

  /** Opens (creating) the store under `root`; temporary files a crash left behind are removed. */
  static async open(root: string): Promise<ContentStore> {
    const store = new ContentStore(root);
    await mkdir(store.#contentDir, { recursive: true });
    await rm(store.#tmpDir, { recursive: true, force: true });
    await mkdir(store.#tmpDir, { recursive: true });
    return store;
  }

  /** Where the verified content of `sha256` lives (whether or not it is there). */
  pathOf(sha256: string): string {
    if (!hexDigest.test(sha256)) throw new Error(`not a lower-case SHA-256: ${JSON.stringify(sha256)}`);
    return join(this.#contentDir, sha256);
  }

  /** Whether a verified copy of `sha256` with `bytes` bytes is here. */
  async has(sha256: string, bytes: number): Promise<boolean> {
    try {
      const st = await stat(this.pathOf(sha256));
      return st.isFile() && st.size === bytes;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  /** The digests held here (for tests and diagnostics). */
  async list(): Promise<string[]> {
    return (await readdir(this.#contentDir)).filter((name) => hexDigest.test(name)).sort();
  }

  /**
   * Reads up to `length` bytes at `offset` of a verified copy; undefined when there is none.
   * Fewer bytes come back only at the end of the content.
   */
  async read(
    sha256: string,
    offset: number,
    length: number,
  ): Promise<{ data: Buffer; totalBytes: number } | undefined> {
    let handle: FileHandle;
    try {
      handle = await open(this.pathOf(sha256), 'r');
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    try {
      const totalBytes = (await handle.stat()).size;
      const want = Math.max(0, Math.min(length, totalBytes - offset));
      const data = Buffer.alloc(want);
      let got = 0;
      while (got < want) {
        const { bytesRead } = await handle.read(data, got, want - got, offset + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return { data: data.subarray(0, got), totalBytes };
    } finally {
      await handle.close();
    }
  }

  /** A writer for content announced as `sha256` with `bytes` bytes. */
  async writer(sha256: string, bytes: number): Promise<ContentWriter> {
    const target = this.pathOf(sha256);
    const temp = join(this.#tmpDir, `${sha256}.${randomBytes(6).toString('hex')}`);
    const handle = await open(temp, 'wx');
    return new ContentWriter(handle, temp, target, this.#contentDir, sha256, bytes);
  }
}

/**
 * Content being written, in order. finish() stores it under its digest once size and SHA-256
 * match; abort() (or a failed finish) removes the temporary file and stores nothing.
 */
export class ContentWriter {
  readonly #handle: FileHandle;
  readonly #temp: string;
  readonly #target: string;
  readonly #dir: string;
  readonly #hash: Hash = createHash('sha256');
  readonly sha256: string;
  readonly bytes: number;
  #written = 0;
  #closed = false;

  constructor(handle: FileHandle, temp: string, target: string, dir: string, sha256: string, bytes: number) {
    this.#handle = handle;
    this.#temp = temp;
    this.#target = target;
    this.#dir = dir;
    this.sha256 = sha256;
    this.bytes = bytes;
  }

  /** Bytes written so far: where the next piece goes. */
  get written(): number {
    return this.#written;
  }

  /** Appends the next piece; more than the announced size is refused before it is written. */
  async write(data: Uint8Array): Promise<void> {
    if (this.#closed) throw new Error('content writer is closed');
    if (this.#written + data.length > this.bytes) {
      throw new ContentMismatchError(
        `the content is longer than the ${this.bytes} bytes announced for sha256 ${this.sha256}`,
      );
    }
    let done = 0;
    while (done < data.length) {
      const { bytesWritten } = await this.#handle.write(data, done, data.length - done, this.#written + done);
      done += bytesWritten;
    }
    this.#hash.update(data);
    this.#written += data.length;
  }

  /** Verifies size and digest and moves the content into place; throws ContentMismatchError. */
  async finish(): Promise<void> {
    if (this.#closed) throw new Error('content writer is closed');
    try {
      if (this.#written !== this.bytes) {
        throw new ContentMismatchError(
          `the content has ${this.#written} bytes, not the ${this.bytes} announced for sha256 ${this.sha256}`,
        );
      }
      const digest = this.#hash.digest('hex');
      if (digest !== this.sha256) {
        throw new ContentMismatchError(
          `the content's SHA-256 is ${digest}, not the ${this.sha256} announced`,
        );
      }
      await this.#handle.sync();
      await this.#handle.close();
      this.#closed = true;
      await rename(this.#temp, this.#target);
      await syncDirectory(this.#dir);
    } catch (err) {
      await this.abort();
      throw err;
    }
  }

  /** Drops what was written. Safe to call more than once. */
  async abort(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      await this.#handle.close().catch(() => undefined);
    }
    await rm(this.#temp, { force: true });
  }
}

function isNotFound(err: unknown): boolean {
  return err instanceof Error && 'code' in err && (err.code === 'ENOENT' || err.code === 'ENOTDIR');
}

// Serving files from the TFTP root directory: maps a requested filename onto a file that is
// provably inside the root, and reads it through the content cache.
//
// Filename rules (documented in docs/decisions/0006-tftp-server.md):
// - A leading "/" is relative to the root, as with `in.tftpd -s`: DHCP boot file names often
//   carry one, so "/etc/passwd" means <root>/etc/passwd and cannot escape.
// - "\" is a separator too (Windows-style boot file names), so "..\" is caught like "../".
// - Any ".." segment is an access violation, even one that would stay inside the root.
// - A symlink whose target leaves the root is an access violation.
import { readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { TftpErrorCode } from './packet.js';
import type { ContentCache } from './content-cache.js';

export type FileLookup =
  | { readonly kind: 'found'; readonly content: Uint8Array }
  | { readonly kind: 'refused'; readonly code: TftpErrorCode; readonly message: string };

function refused(code: TftpErrorCode, message: string): FileLookup {
  return { kind: 'refused', code, message };
}

/** The root-relative path for a requested filename, or null when it names a parent directory. */
export function rootRelativePath(filename: string): string | null {
  const segments = filename
    .replaceAll('\\', '/')
    .split('/')
    .filter((segment) => segment !== '' && segment !== '.');
  if (segments.includes('..')) return null;
  return segments.join('/');
}

function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root + path.sep);
}

function errorCode(error: unknown): string | undefined {
  if (error instanceof Error && 'code' in error && typeof error.code === 'string') return error.code;
  return undefined;
}

/** Maps filesystem errors a client can cause onto TFTP errors; anything else is rethrown. */
function refusalFor(error: unknown, filename: string): FileLookup {
  switch (errorCode(error)) {
    case 'ENOENT':
    case 'ENOTDIR':
    case 'ENAMETOOLONG':
      return refused(TftpErrorCode.fileNotFound, `file not found: ${filename}`);
    case 'EACCES':
    case 'EPERM':
    case 'ELOOP':
      return refused(TftpErrorCode.accessViolation, `access violation: ${filename}`);
    default:
      throw error;
  }
}

/**
 * The bytes copied once into a SharedArrayBuffer. Transfers run on worker threads, and a
 * SharedArrayBuffer crosses postMessage by reference, so every transfer of a cached file shares
 * one copy instead of cloning it per transfer.
 */
function toSharedBytes(bytes: Uint8Array): Uint8Array {
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.length));
  shared.set(bytes);
  return shared;
}

export class RootDirectory {
  readonly #root: string;
  readonly #cache: ContentCache;
  readonly #fileBytesMax: number;
  /** Reads in progress, so a boot storm missing the cache reads each file once. */
  readonly #reading = new Map<string, Promise<Uint8Array>>();

  private constructor(root: string, cache: ContentCache, fileBytesMax: number) {
    this.#root = root;
    this.#cache = cache;
    this.#fileBytesMax = fileBytesMax;
  }

  /** Resolves the root's real path once; rejects if it is not a directory. */
  static async open(root: string, cache: ContentCache, fileBytesMax: number): Promise<RootDirectory> {
    const real = await realpath(root);
    if (!(await stat(real)).isDirectory()) throw new Error(`TFTP root ${root} is not a directory`);
    return new RootDirectory(real, cache, fileBytesMax);
  }

  get path(): string {
    return this.#root;
  }

  /** Looks a requested filename up under the root. Rejects only on unexpected I/O errors. */
  async read(filename: string): Promise<FileLookup> {
    const relative = rootRelativePath(filename);
    if (relative === null) {
      return refused(TftpErrorCode.accessViolation, `access violation: ${filename} leaves the TFTP root`);
    }
    let real: string;
    try {
      real = await realpath(path.join(this.#root, relative));
    } catch (error) {
      return refusalFor(error, filename);
    }
    if (!isInside(this.#root, real)) {
      return refused(TftpErrorCode.accessViolation, `access violation: ${filename} leaves the TFTP root`);
    }
    try {
      const info = await stat(real);
      if (!info.isFile()) return refused(TftpErrorCode.fileNotFound, `not a regular file: ${filename}`);
      if (info.size > this.#fileBytesMax) {
        return refused(
          TftpErrorCode.notDefined,
          `file too large for TFTP: ${filename} has ${info.size} bytes, the limit is ${this.#fileBytesMax}`,
        );
      }
      const version = `${info.ino}:${info.size}:${info.mtimeMs}`;
      const cached = this.#cache.get(real, version);
      if (cached !== null) return { kind: 'found', content: cached };
      return { kind: 'found', content: await this.#readOnce(real, version) };
    } catch (error) {
      return refusalFor(error, filename);
    }
  }

  #readOnce(real: string, version: string): Promise<Uint8Array> {
    const key = `${real}\0${version}`;
    let reading = this.#reading.get(key);
    if (reading === undefined) {
      reading = readFile(real).then(
        (bytes) => {
          const content = toSharedBytes(bytes);
          this.#reading.delete(key);
          this.#cache.set(real, version, content);
          return content;
        },
        (error: unknown) => {
          this.#reading.delete(key);
          throw error;
        },
      );
      this.#reading.set(key, reading);
    }
    return reading;
  }
}

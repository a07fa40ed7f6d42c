// Opening a requested file under a served directory (artifacts, iPXE binaries) so that it is
// provably inside it. Refused: a name with a NUL, a backslash, an absolute name, any "." or
// ".." segment or an empty one; a path whose real location (symlinks resolved) leaves the
// root; anything that is not a regular file. The file is opened with O_NOFOLLOW after the
// check, so a final symlink swapped in between is refused too, and it is read through the
// handle that was checked.
import { constants, type Stats } from 'node:fs';
import { open, realpath, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';

export type FileOpening =
  | { readonly kind: 'file'; readonly handle: FileHandle; readonly stats: Stats; readonly name: string }
  | { readonly kind: 'refused'; readonly status: 400 | 403 | 404; readonly reason: string };

export class FileRoot {
  readonly path: string;

  private constructor(real: string) {
    this.path = real;
  }

  /** Resolves the root's real path once; rejects if it is not a directory. */
  static async open(root: string): Promise<FileRoot> {
    const real = await realpath(root);
    if (!(await stat(real)).isDirectory()) throw new Error(`${root} is not a directory`);
    return new FileRoot(real);
  }

  /** Opens `name` (already percent-decoded) for reading. The caller closes the handle. */
  async openFile(name: string): Promise<FileOpening> {
    const problem = nameProblem(name);
    if (problem !== undefined)
      return { kind: 'refused', status: 400, reason: `${problem}: ${printable(name)}` };
    let real: string;
    try {
      real = await realpath(path.join(this.path, name));
    } catch (error) {
      return refusal(error, name);
    }
    if (real !== this.path && !real.startsWith(this.path + path.sep)) {
      return {
        kind: 'refused',
        status: 403,
        reason: `${printable(name)} leads outside the served directory`,
      };
    }
    let handle: FileHandle;
    try {
      handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (error) {
      return refusal(error, name);
    }
    try {
      const stats = await handle.stat();
      if (stats.isFile()) return { kind: 'file', handle, stats, name };
    } catch (error) {
      await handle.close();
      throw error;
    }
    await handle.close();
    return { kind: 'refused', status: 404, reason: `${printable(name)} is not a regular file` };
  }
}

function nameProblem(name: string): string | undefined {
  if (name.includes('\0')) return 'NUL in file name';
  if (name.includes('\\')) return 'backslash in file name';
  if (name.startsWith('/')) return 'absolute file name';
  const segments = name.split('/');
  if (segments.includes('..')) return 'parent directory (..) in file name';
  if (segments.some((segment) => segment === '' || segment === '.'))
    return 'empty or "." segment in file name';
  return undefined;
}

function refusal(error: unknown, name: string): FileOpening {
  const code = error instanceof Error && 'code' in error ? error.code : undefined;
  switch (code) {
    case 'ENOENT':
    case 'ENOTDIR':
    case 'ENAMETOOLONG':
      return { kind: 'refused', status: 404, reason: `no such file: ${printable(name)}` };
    case 'EACCES':
    case 'EPERM':
    case 'ELOOP':
      return { kind: 'refused', status: 403, reason: `not readable: ${printable(name)}` };
    default:
      throw error;
  }
}

/** Names come from clients: keep log lines and error bodies to one printable line. */
function printable(name: string): string {
  const text = name.replace(/[^\x20-\x7e]/g, '?');
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

const contentTypes: ReadonlyMap<string, string> = new Map([
  ['.ipxe', 'text/plain; charset=utf-8'],
  ['.txt', 'text/plain; charset=utf-8'],
  ['.cfg', 'text/plain; charset=utf-8'],
  ['.sh', 'text/x-shellscript'],
  ['.json', 'application/json'],
  ['.yaml', 'application/yaml'],
  ['.yml', 'application/yaml'],
  ['.iso', 'application/x-iso9660-image'],
  ['.gz', 'application/gzip'],
  ['.tgz', 'application/gzip'],
  ['.xz', 'application/x-xz'],
  ['.zst', 'application/zstd'],
  ['.tar', 'application/x-tar'],
  ['.cpio', 'application/x-cpio'],
  ['.sha256', 'text/plain; charset=utf-8'],
]);

/** Kernels, initrds, EFI binaries and disk images have no useful type: octet-stream. */
export function contentTypeOf(name: string): string {
  return contentTypes.get(path.extname(name).toLowerCase()) ?? 'application/octet-stream';
}

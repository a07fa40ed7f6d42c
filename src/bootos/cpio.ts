// The initramfs archive: the kernel's "newc" cpio format (ASCII headers, 4-byte alignment), as
// the kernel's initramfs unpacker reads it. Pure: entries in, bytes out.
//
// Written here rather than by running cpio(1) so that the archive depends only on its entries:
// every entry gets owner root, a fixed modification time and an inode number from its position,
// and the entries are written in path order. The same inputs give the same bytes (the boot OS
// build is reproducible), and the build can create /dev/console without being root.

export type CpioEntry =
  | { readonly kind: 'directory'; readonly path: string; readonly mode: number }
  | { readonly kind: 'file'; readonly path: string; readonly mode: number; readonly data: Uint8Array }
  | { readonly kind: 'symlink'; readonly path: string; readonly target: string }
  | {
      readonly kind: 'char-device';
      readonly path: string;
      readonly mode: number;
      readonly major: number;
      readonly minor: number;
    };

const magic = '070701';
const trailerName = 'TRAILER!!!';
const typeBits = { directory: 0o040000, file: 0o100000, symlink: 0o120000, 'char-device': 0o020000 } as const;

/**
 * The archive's pieces in order (headers, names, file data, padding): write them one after
 * another. File data is passed through without a copy, so an 80 MB runtime is never duplicated.
 * `mtimeS` is every entry's modification time (seconds since the epoch).
 */
export function cpioArchive(entries: readonly CpioEntry[], mtimeS: number): Uint8Array[] {
  const sorted = [...entries].sort((a, b) => comparePaths(a.path, b.path));
  checkPaths(sorted);
  const parts: Uint8Array[] = [];
  sorted.forEach((entry, index) => {
    const body = bodyOf(entry);
    parts.push(...record(entry, index + 1, body.length, mtimeS));
    if (body.length > 0) parts.push(body, padding(body.length));
  });
  parts.push(...trailer());
  return parts.filter((part) => part.length > 0);
}

/** Parents before children: a directory entry must precede what it holds. */
function comparePaths(a: string, b: string): number {
  const as = a.split('/');
  const bs = b.split('/');
  for (let i = 0; i < Math.min(as.length, bs.length); i++) {
    const x = as[i]!;
    const y = bs[i]!;
    if (x !== y) return x < y ? -1 : 1;
  }
  return as.length - bs.length;
}

function checkPaths(entries: readonly CpioEntry[]): void {
  const seen = new Set<string>();
  for (const entry of entries) {
    const { path } = entry;
    if (
      path === '' ||
      path.startsWith('/') ||
      path.split('/').some((s) => s === '' || s === '.' || s === '..')
    ) {
      throw new Error(`cpio: "${path}" is not a relative path without . or .. segments`);
    }
    if (seen.has(path)) throw new Error(`cpio: "${path}" appears twice`);
    seen.add(path);
    const parent = path.slice(0, Math.max(0, path.lastIndexOf('/')));
    if (parent !== '' && !seen.has(parent))
      throw new Error(`cpio: "${path}" has no directory entry for "${parent}"`);
  }
}

function bodyOf(entry: CpioEntry): Uint8Array {
  switch (entry.kind) {
    case 'file':
      return entry.data;
    case 'symlink':
      return Buffer.from(entry.target, 'utf8');
    case 'directory':
    case 'char-device':
      return new Uint8Array(0);
  }
}

function record(entry: CpioEntry, inode: number, size: number, mtimeS: number): Uint8Array[] {
  const permissions = entry.kind === 'symlink' ? 0o777 : entry.mode & 0o7777;
  const device = entry.kind === 'char-device' ? entry : undefined;
  return header(entry.path, {
    inode,
    mode: typeBits[entry.kind] | permissions,
    nlink: entry.kind === 'directory' ? 2 : 1,
    mtimeS,
    size,
    rdevMajor: device?.major ?? 0,
    rdevMinor: device?.minor ?? 0,
  });
}

interface HeaderFields {
  readonly inode: number;
  readonly mode: number;
  readonly nlink: number;
  readonly mtimeS: number;
  readonly size: number;
  readonly rdevMajor: number;
  readonly rdevMinor: number;
}

function header(name: string, f: HeaderFields): Uint8Array[] {
  const nameBytes = Buffer.from(`${name}\0`, 'utf8');
  const fields = [
    f.inode,
    f.mode,
    0, // uid: root
    0, // gid: root
    f.nlink,
    f.mtimeS,
    f.size,
    0, // devmajor
    0, // devminor
    f.rdevMajor,
    f.rdevMinor,
    nameBytes.length,
    0, // check: unused by newc
  ];
  const text = magic + fields.map(hex8).join('');
  const head = Buffer.from(text, 'ascii');
  return [head, nameBytes, padding(head.length + nameBytes.length)];
}

function trailer(): Uint8Array[] {
  return header(trailerName, { inode: 0, mode: 0, nlink: 1, mtimeS: 0, size: 0, rdevMajor: 0, rdevMinor: 0 });
}

function hex8(value: number): string {
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw new RangeError(`cpio: ${value} does not fit a header field`);
  }
  return value.toString(16).padStart(8, '0');
}

function padding(length: number): Uint8Array {
  return new Uint8Array((4 - (length % 4)) % 4);
}

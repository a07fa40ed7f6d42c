// Goal: the TFTP root only ever serves regular files inside it: ".." and symlinks out of the
// root are access violations, a leading "/" is root-relative, missing files are "not found",
// and a file replaced on disk is served fresh despite the cache, from one shared copy.
// Method: a temporary root directory with files, a subdirectory and symlinks, read through
// RootDirectory; the temporary directory is removed afterwards.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ContentCache } from '../../src/boot/tftp/content-cache.js';
import { RootDirectory, rootRelativePath, type FileLookup } from '../../src/boot/tftp/file-source.js';
import { TftpErrorCode } from '../../src/boot/tftp/packet.js';

let base = '';
let root: RootDirectory;
const cache = new ContentCache(1024 * 1024);

before(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'slipway-tftp-root-'));
  const rootDir = path.join(base, 'root');
  await mkdir(path.join(rootDir, 'pxelinux.cfg'), { recursive: true });
  await writeFile(path.join(rootDir, 'ipxe.efi'), 'IPXE');
  await writeFile(path.join(rootDir, 'pxelinux.cfg', 'default'), 'DEFAULT');
  await writeFile(path.join(rootDir, 'big.bin'), new Uint8Array(2000));
  await writeFile(path.join(base, 'secret'), 'SECRET');
  await symlink(path.join(base, 'secret'), path.join(rootDir, 'escape'));
  await symlink('ipxe.efi', path.join(rootDir, 'alias.efi'));
  root = await RootDirectory.open(rootDir, cache, 1000);
});

after(async () => {
  await rm(base, { recursive: true, force: true });
});

const text = (lookup: FileLookup): string =>
  lookup.kind === 'found'
    ? Buffer.from(lookup.content).toString()
    : `refused ${lookup.code}: ${lookup.message}`;

function refusedWith(lookup: FileLookup, code: number): void {
  assert.equal(lookup.kind, 'refused', text(lookup));
  assert.equal(lookup.kind === 'refused' ? lookup.code : -1, code);
}

void test('rootRelativePath: leading slashes and backslashes are normalised, ".." is refused', () => {
  assert.equal(rootRelativePath('/ipxe.efi'), 'ipxe.efi');
  assert.equal(rootRelativePath('boot\\x86\\wdsnbp.com'), 'boot/x86/wdsnbp.com');
  assert.equal(rootRelativePath('./a//b/'), 'a/b');
  for (const bad of ['../etc/passwd', 'a/../../b', '..\\..\\secret', 'a/..', '..']) {
    assert.equal(rootRelativePath(bad), null, bad);
  }
});

void test('serves files, nested files, root-relative absolute names and symlinks within the root', async () => {
  assert.equal(text(await root.read('ipxe.efi')), 'IPXE');
  assert.equal(text(await root.read('/ipxe.efi')), 'IPXE');
  assert.equal(text(await root.read('pxelinux.cfg/default')), 'DEFAULT');
  assert.equal(text(await root.read('alias.efi')), 'IPXE');
});

void test('parent-directory traversal and symlinks out of the root are access violations', async () => {
  refusedWith(await root.read('../secret'), TftpErrorCode.accessViolation);
  refusedWith(await root.read('pxelinux.cfg/../../secret'), TftpErrorCode.accessViolation);
  refusedWith(await root.read('escape'), TftpErrorCode.accessViolation);
});

void test('an absolute path names a file under the root, so /etc/passwd is not found there', async () => {
  refusedWith(await root.read('/etc/passwd'), TftpErrorCode.fileNotFound);
});

void test('missing files, directories and files over the size limit are refused', async () => {
  refusedWith(await root.read('nope.efi'), TftpErrorCode.fileNotFound);
  refusedWith(await root.read('ipxe.efi/x'), TftpErrorCode.fileNotFound);
  refusedWith(await root.read('pxelinux.cfg'), TftpErrorCode.fileNotFound);
  refusedWith(await root.read(''), TftpErrorCode.fileNotFound);
  const big = await root.read('big.bin');
  refusedWith(big, TftpErrorCode.notDefined);
  assert.match(big.kind === 'refused' ? big.message : '', /too large/);
});

void test('a file rewritten on disk is served fresh, not from the cache', async () => {
  const file = path.join(root.path, 'menu.ipxe');
  await writeFile(file, 'v1');
  assert.equal(text(await root.read('menu.ipxe')), 'v1');
  assert.ok(cache.size > 0, 'the first read filled the cache');
  await writeFile(file, 'v2-longer'); // another size, so the version differs even within one mtime tick
  assert.equal(text(await root.read('menu.ipxe')), 'v2-longer');
});

void test('concurrent reads of one file share a single read', async () => {
  await writeFile(path.join(root.path, 'storm.efi'), 'STORM');
  const results = await Promise.all(Array.from({ length: 20 }, () => root.read('storm.efi')));
  const contents = results.map((r) => (r.kind === 'found' ? r.content : null));
  assert.ok(
    contents.every((c) => c !== null && c === contents[0]),
    'all callers get the same buffer',
  );
  // Transfer workers receive it by reference: a SharedArrayBuffer is not copied by postMessage.
  assert.ok(contents[0]?.buffer instanceof SharedArrayBuffer, 'the content lives in a SharedArrayBuffer');
});

// Goal: the boot OS's pieces that decide its bytes and its start-up are right: the newc archive
// is what the cpio tool (GNU cpio, the reference reader) unpacks, with parents before children,
// fixed owners and times, and the same bytes for the same entries; the kernel modules come with
// their dependencies first; ldd's output names the libraries to copy, and the runtime's C
// strings the built-in scripts a distribution keeps outside it (Debian 13).
// Method: archives written by cpioArchive unpacked by `cpio -idm` into a temporary directory;
// modules.dep texts of a made-up kernel; ldd texts as the tool prints them.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { cpioArchive, type CpioEntry } from '../../src/bootos/cpio.js';
import { moduleLoadOrder, moduleName } from '../../src/bootos/kernel-modules.js';
import { parseLdd } from '../../src/bootos/shared-libraries.js';
import { embeddedScriptPaths } from '../../src/bootos/externalized-builtins.js';
import { initScript } from '../../src/bootos/init-script.js';

const run = promisify(execFile);

const entries: CpioEntry[] = [
  { kind: 'file', path: 'bin/tool', mode: 0o755, data: Buffer.from('#!/bin/sh\necho hi\n') },
  { kind: 'directory', path: 'bin', mode: 0o755 },
  { kind: 'symlink', path: 'bin/sh', target: 'busybox' },
  { kind: 'directory', path: 'etc', mode: 0o755 },
  { kind: 'file', path: 'etc/odd', mode: 0o600, data: Buffer.from('xyz') },
  { kind: 'file', path: 'etc/empty', mode: 0o644, data: new Uint8Array(0) },
];

describe('cpio newc archive', () => {
  it('unpacks with GNU cpio to exactly the entries, modes and times given', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'slipway-cpio-'));
    try {
      const archive = path.join(dir, 'a.cpio');
      await writeFile(archive, Buffer.concat(cpioArchive(entries, 1_700_000_000)));
      const out = path.join(dir, 'out');
      await run('sh', ['-c', `mkdir ${out} && cd ${out} && cpio -idm --quiet < ${archive}`]);
      assert.equal(await readFile(path.join(out, 'bin/tool'), 'utf8'), '#!/bin/sh\necho hi\n');
      assert.equal(await readFile(path.join(out, 'etc/odd'), 'utf8'), 'xyz');
      assert.equal((await readFile(path.join(out, 'etc/empty'))).length, 0);
      assert.equal(await readlink(path.join(out, 'bin/sh')), 'busybox');
      assert.equal((await stat(path.join(out, 'bin/tool'))).mode & 0o7777, 0o755);
      assert.equal((await stat(path.join(out, 'etc/odd'))).mode & 0o7777, 0o600);
      assert.equal((await stat(path.join(out, 'etc/odd'))).mtimeMs, 1_700_000_000_000);
      const listing = (await run('sh', ['-c', `cpio -t --quiet < ${archive}`])).stdout.trim().split('\n');
      assert.deepEqual(listing, ['bin', 'bin/sh', 'bin/tool', 'etc', 'etc/empty', 'etc/odd']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('gives the same bytes for the same entries in any order', () => {
    const a = Buffer.concat(cpioArchive(entries, 0));
    const b = Buffer.concat(cpioArchive([...entries].reverse(), 0));
    assert.ok(a.equals(b));
    assert.equal(a.length % 4, 0);
    assert.ok(!a.equals(Buffer.concat(cpioArchive(entries, 1))), 'the time is part of the bytes');
  });

  it('refuses paths that escape, repeat or lack their directory', () => {
    const bad: CpioEntry[][] = [
      [{ kind: 'directory', path: '../x', mode: 0o755 }],
      [{ kind: 'directory', path: '/abs', mode: 0o755 }],
      [
        { kind: 'directory', path: 'a', mode: 0o755 },
        { kind: 'directory', path: 'a', mode: 0o700 },
      ],
      [{ kind: 'file', path: 'nodir/f', mode: 0o644, data: new Uint8Array(1) }],
    ];
    for (const list of bad) assert.throws(() => cpioArchive(list, 0), /cpio:/);
  });
});

describe('kernel modules', () => {
  const dep = [
    'kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko',
    'kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko',
    'kernel/net/core/failover.ko:',
    'kernel/drivers/virtio/virtio.ko:',
    'kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/mbcache.ko',
    'kernel/lib/crc16.ko:',
    'kernel/fs/mbcache.ko:',
    'kernel/drivers/ata/pata-acpi.ko:',
  ].join('\n');

  it('orders every module after its dependencies, each once', () => {
    const order = moduleLoadOrder(
      ['virtio_net', 'ext4', 'failover', 'pata_acpi'],
      dep,
      'kernel/drivers/block/loop.ko\n',
    );
    assert.deepEqual(order, [
      'kernel/net/core/failover.ko',
      'kernel/drivers/net/net_failover.ko',
      'kernel/drivers/virtio/virtio.ko',
      'kernel/drivers/net/virtio_net.ko',
      'kernel/lib/crc16.ko',
      'kernel/fs/mbcache.ko',
      'kernel/fs/ext4/ext4.ko',
      'kernel/drivers/ata/pata-acpi.ko',
    ]);
  });

  it('needs nothing for a built-in driver and refuses one the kernel does not have', () => {
    assert.deepEqual(moduleLoadOrder(['loop'], dep, 'kernel/drivers/block/loop.ko\n'), []);
    assert.throws(
      () => moduleLoadOrder(['nosuch'], dep, ''),
      /nosuch is neither a module of this kernel nor built in/,
    );
    assert.equal(moduleName('kernel/drivers/ata/pata-acpi.ko.xz'), 'pata_acpi');
  });
});

describe('shared libraries and init', () => {
  it("reads ldd's output, leaving out the vDSO and refusing a missing library", () => {
    const out = [
      '\tlinux-vdso.so.1 (0x00007ffc)',
      '\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f)',
      '\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)',
      '\t/lib64/ld-linux-x86-64.so.2 (0x00007f)',
    ].join('\n');
    assert.deepEqual(parseLdd(out, 'node'), [
      '/lib/x86_64-linux-gnu/libc.so.6',
      '/lib/x86_64-linux-gnu/libstdc++.so.6',
      '/lib64/ld-linux-x86-64.so.2',
    ]);
    assert.throws(() => parseLdd('\tlibfoo.so.1 => not found', 'node'), /node needs libfoo\.so\.1/);
  });

  it("finds the runtime's externalized built-in scripts among its C strings, and nothing else", () => {
    const cstrings = (...parts: string[]): Buffer => Buffer.from(parts.join('\0'), 'latin1');
    const binary = cstrings(
      '\x7fELF',
      '/usr/share/nodejs/cjs-module-lexer/lexer.js',
      'lib/internal/fs.js', // relative: a source name, not a file to read
      '/home/build/node/lib/fs.js', // not under /usr/
      '/usr/share/nodejs/undici/undici-fetch.js',
      '/usr/share/nodejs/cjs-module-lexer/lexer.js', // again
      '/usr/share/nodejs/x/index.mjs',
      '/usr/share/nodejs/../../etc/passwd.js',
      '/usr/share/nodejs/x/readme.md',
      'tail',
    );
    // A run of printable bytes after other data, not after a NUL, is no C string.
    const embedded = Buffer.concat([binary, Buffer.from('\x01/usr/lib/not-a-string.js\0', 'latin1')]);
    assert.deepEqual(embeddedScriptPaths(embedded), [
      '/usr/share/nodejs/cjs-module-lexer/lexer.js',
      '/usr/share/nodejs/undici/undici-fetch.js',
      '/usr/share/nodejs/x/index.mjs',
    ]);
    assert.deepEqual(embeddedScriptPaths(new Uint8Array()), []);
  });

  it('starts the worker with a claimed credential, never a token', () => {
    const script = initScript({
      kernelVersion: '6.1.0-test',
      workerPath: '/opt/slipway/worker.mjs',
      modulesListPath: '/etc/slipway/modules',
      udhcpcScriptPath: '/etc/slipway/udhcpc.sh',
    });
    assert.match(script, /--claim-url "\$BOOT_HTTP\/credential" --mac "\$BOOT_MAC"/);
    assert.match(script, /--journal-dir \/run\/slipway\/journal/);
    assert.doesNotMatch(script, /token/);
    assert.match(script, /^#!\/bin\/sh\n/);
  });

  it('lets the worker send in plaintext beyond loopback only when the kernel command line says so', async () => {
    const script = initScript({
      kernelVersion: '6.1.0-test',
      workerPath: '/opt/slipway/worker.mjs',
      modulesListPath: '/etc/slipway/modules',
      udhcpcScriptPath: '/etc/slipway/udhcpc.sh',
    });
    assert.match(script, /worker --id "\$WORKER_ID" --server "\$SERVER" \$INSECURE_NETWORK /);
    // The script's own command-line loop, run by sh on a made-up /proc/cmdline.
    const loop = /^for arg in \$\(cat \/proc\/cmdline\); do\n[\s\S]*?^done$/m.exec(script)?.[0];
    assert.ok(loop !== undefined, 'the script reads /proc/cmdline');
    const dir = await mkdtemp(path.join(tmpdir(), 'slipway-cmdline-'));
    try {
      const flagFor = async (cmdline: string): Promise<string> => {
        await writeFile(path.join(dir, 'cmdline'), cmdline);
        const sh = `${loop.replace('/proc/cmdline', path.join(dir, 'cmdline'))}\necho "[$INSECURE_NETWORK]"`;
        return (await run('sh', ['-c', sh])).stdout.trim();
      };
      const base = 'slipway.worker_id=m1 slipway.server=10.0.0.100:7000 slipway.http=http://10.0.0.100';
      assert.equal(await flagFor(base), '[]');
      assert.equal(await flagFor(`${base} slipway.insecure_allow_network=0`), '[]');
      assert.equal(
        await flagFor(`${base} slipway.insecure_allow_network=1 console=ttyS0`),
        '[--insecure-allow-network]',
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

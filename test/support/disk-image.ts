// A small bootable disk image for the end-to-end provisioning test, built from this machine's
// Debian packages: the "operating system" that `image2disk` installs, that `writefile` writes a
// file into, and that the machine then boots from its own disk under BIOS and under UEFI.
//
// Debian packages it needs (.ci/run installs them):
//   fdisk (sfdisk)  dosfstools (mkfs.vfat)  mtools (mcopy, mmd)  syslinux (the mtools installer)
//   syslinux-common (mbr.bin, ldlinux.e64)  syslinux-efi (syslinux.efi)  busybox-static
//   linux-image-amd64 (/boot/vmlinuz-V, /lib/modules/V)
// and, for booting it: qemu-system-x86 and ovmf.
//
// Layout (64 MiB by default, MBR partition table):
//
//   sector 0          syslinux's mbr.bin (boot code, 440 bytes), disk id, the partition table
//   sectors 1-2047    empty (the 1 MiB alignment gap)
//   sector 2048-end   partition 1: type 0xEF (EFI System), active; FAT (FAT16 at this size),
//                     volume id 5117-A000, label SLIPWAY; hidden sectors 2048
//     /ldlinux.sys /ldlinux.c32     SYSLINUX for BIOS (its boot sector is the partition's)
//     /syslinux.cfg                 BIOS: boot /vmlinuz with /initrd, console=ttyS0
//     /EFI/BOOT/BOOTX64.EFI         syslinux.efi (efi64), the UEFI removable-media path
//     /EFI/BOOT/ldlinux.e64         its core module
//     /EFI/BOOT/syslinux.cfg        the same configuration, read beside the EFI program
//     /vmlinuz                      Debian's kernel
//     /initrd                       uncompressed newc cpio (src/bootos/cpio.ts): static busybox,
//                                   /init, and the disk + FAT modules in dependency order
//
// BIOS: SeaBIOS → mbr.bin → the active partition's boot sector → ldlinux.sys → the kernel.
// UEFI: OVMF finds the EFI System partition → \EFI\BOOT\BOOTX64.EFI → the kernel (EFI handover).
// Then /init loads virtio_pci, virtio_blk, ahci, sd_mod, vfat and the NLS tables, finds the
// partition by its FAT volume id (busybox findfs, so /dev/vda1 and /dev/sda1 alike), mounts it
// read-only, prints the marker and `slipway-installed-file: <contents of filePath>`, and powers
// the machine off (`poweroff -f`), so QEMU exits by itself.
//
// After image2disk has written the image to /dev/vda, the first partition is /dev/vda1, FAT:
// writefile with DEST_DISK=/dev/vda1 FS_TYPE=vfat DEST_PATH=<filePath> writes the file the
// installed system prints. The table is MBR, not GPT, so a disk larger than the image needs no
// backup header moved. But the kernel learns of the new partition only when asked: writing the
// image over a blank /dev/vda leaves no /dev/vda1 until BLKRRPART (checked under QEMU: it appears
// after `blockdev --rereadpt /dev/vda`, busybox's, which the boot OS has). image2disk does not
// ask today, so a workflow runs that command between image2disk and writefile.
//
// Mostly zeros: zstd -3 makes the 64 MiB image ~10 MB, for image2disk's COMPRESSED=true.
//
// Nothing is mounted (this host's kernel has no vfat): the filesystem is made in a separate
// file with mkfs.vfat, filled with mtools, made BIOS-bootable by syslinux's mtools installer,
// and copied into the image at the partition's offset. Deterministic: mkfs.vfat --invariant
// with a fixed volume id, a fixed disk id, SOURCE_DATE_EPOCH for mtools and syslinux, and the
// cpio writer's fixed times; the same inputs give the same bytes.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, open, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { cpioArchive, type CpioEntry } from '../../src/bootos/cpio.js';
import { moduleLoadOrder } from '../../src/bootos/kernel-modules.js';
import { sharedLibraries } from '../../src/bootos/shared-libraries.js';
import { findExecutable } from '../../src/platform/executable.js';
import { runTool } from '../../src/platform/run-tool.js';

/** The lines the installed system prints (besides the caller's marker). */
export const diskImageMarkers = {
  /** Followed by the contents of the file at `filePath` on the partition. */
  installedFile: 'slipway-installed-file:',
  /** Printed instead when the file is not there. */
  noFile: 'slipway-disk-image: no file',
  /** Printed when the partition cannot be found or mounted. */
  failed: 'slipway-disk-image: failed',
} as const;

export interface DiskImageOptions {
  /** Work directory; the image is written to `dir/disk.img`. */
  readonly dir: string;
  /** A line the installed system prints when it has booted (one printable line). */
  readonly marker: string;
  /** Absolute path inside the partition whose contents the installed system prints. */
  readonly filePath: string;
  /** Default 64. At least 40 (the kernel alone is ~8 MiB). */
  readonly sizeMiB?: number;
  /** FAT volume id (the partition's UUID as findfs spells it: "5117-A000"). Default 0x5117a000. */
  readonly volumeId?: number;
  /** Default: the newest kernel with both /boot/vmlinuz-V and /lib/modules/V. */
  readonly kernelVersion?: string;
  /** Added to the kernel command line (after console=ttyS0 panic=-1). */
  readonly extraKernelArgs?: readonly string[];
}

export interface DiskImage {
  /** The raw image file. */
  readonly image: string;
  readonly sha256: string;
  readonly bytes: number;
  /** The partition writefile writes into: 1 (/dev/vda1, /dev/sda1). */
  readonly partition: number;
  /** writefile's FS_TYPE for it. */
  readonly fsType: 'vfat';
  /** Where the partition starts in the image, in bytes. */
  readonly partitionOffset: number;
  /** The image's partition as mtools names it: `-i <this>` (`image@@offset`). */
  readonly mtoolsImage: string;
  /** The partition's FAT volume id, as findfs and blkid spell it ("5117-A000"). */
  readonly volumeUuid: string;
  readonly kernelVersion: string;
}

const sectorBytes = 512;
const partitionStartSector = 2048;
const defaultVolumeId = 0x5117a000;
const label = 'SLIPWAY';
/** Every time the image records: 2024-01-01T00:00:00Z (FAT cannot hold times before 1980). */
const epochS = 1_704_067_200;
/** What the installed system needs to find and read its partition. */
const installedModules = [
  'virtio_pci',
  'virtio_blk',
  'ahci',
  'sd_mod',
  'vfat',
  'nls_cp437',
  'nls_iso8859_1',
  'nls_ascii',
  'nls_utf8',
];

const files = {
  mbr: { path: '/usr/lib/syslinux/mbr/mbr.bin', package: 'syslinux-common' },
  efi: { path: '/usr/lib/SYSLINUX.EFI/efi64/syslinux.efi', package: 'syslinux-efi' },
  ldlinuxEfi: { path: '/usr/lib/syslinux/modules/efi64/ldlinux.e64', package: 'syslinux-common' },
  busybox: { path: '/bin/busybox', package: 'busybox-static' },
} as const;

const tools = {
  sfdisk: 'fdisk',
  'mkfs.vfat': 'dosfstools',
  mcopy: 'mtools',
  mmd: 'mtools',
  syslinux: 'syslinux',
} as const;

type Tool = keyof typeof tools;

/** Fails naming the Debian packages to install when a tool or file the build uses is missing. */
export function requireDiskImageTools(): Record<Tool, string> {
  const missing: string[] = [];
  const found: Partial<Record<Tool, string>> = {};
  for (const [name, debianPackage] of Object.entries(tools) as [Tool, string][]) {
    const at = findExecutable(name, [`/usr/sbin/${name}`, `/sbin/${name}`, `/usr/bin/${name}`]);
    if (at === undefined) missing.push(`${name} (apt-get install ${debianPackage})`);
    else found[name] = at;
  }
  for (const file of Object.values(files)) {
    if (!existsSync(file.path)) missing.push(`${file.path} (apt-get install ${file.package})`);
  }
  if (missing.length > 0) {
    throw new Error(`the bootable disk image needs: ${missing.join(', ')}; .ci/run installs them`);
  }
  return found as Record<Tool, string>;
}

export async function buildBootableDiskImage(o: DiskImageOptions): Promise<DiskImage> {
  const tool = requireDiskImageTools();
  checkMarker(o.marker);
  checkFilePath(o.filePath);
  const sizeMiB = o.sizeMiB ?? 64;
  if (!Number.isInteger(sizeMiB) || sizeMiB < 40 || sizeMiB > 4096) {
    throw new Error(`sizeMiB must be a whole number 40-4096, got ${sizeMiB}`);
  }
  const volumeId = o.volumeId ?? defaultVolumeId;
  if (!Number.isInteger(volumeId) || volumeId < 0 || volumeId > 0xffffffff) {
    throw new Error(`volumeId must be a 32-bit number, got ${volumeId}`);
  }
  const volumeHex = volumeId.toString(16).padStart(8, '0');
  const volumeUuid = `${volumeHex.slice(0, 4)}-${volumeHex.slice(4)}`.toUpperCase();
  const kernelVersion = o.kernelVersion ?? (await newestKernel());
  const kernelFile = `/boot/vmlinuz-${kernelVersion}`;
  const modulesDir = `/lib/modules/${kernelVersion}`;
  if (!existsSync(kernelFile) || !existsSync(modulesDir)) {
    throw new Error(
      `kernel ${kernelVersion} is not installed (${kernelFile}, ${modulesDir}): apt-get install linux-image-amd64`,
    );
  }

  const work = path.join(o.dir, 'disk-image.work');
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  const env = { ...process.env, SOURCE_DATE_EPOCH: String(epochS), MTOOLS_SKIP_CHECK: '1' };
  const run = (name: Tool, args: readonly string[], input?: string): Promise<string> =>
    runTool(tool[name], args, { env, ...(input === undefined ? {} : { input }) });

  // The installed system's initramfs.
  const initrd = path.join(work, 'initrd');
  await writeFile(
    initrd,
    Buffer.concat(
      cpioArchive(await initramfsEntries({ kernelVersion, modulesDir, volumeUuid, ...o }), epochS),
    ),
  );
  const kernelArgs = ['console=ttyS0', 'panic=-1', ...(o.extraKernelArgs ?? [])];
  const syslinuxCfg = path.join(work, 'syslinux.cfg');
  await writeFile(
    syslinuxCfg,
    [
      'DEFAULT slipway',
      'PROMPT 0',
      'TIMEOUT 0',
      'LABEL slipway',
      '  LINUX /vmlinuz',
      '  INITRD /initrd',
      `  APPEND ${kernelArgs.join(' ')}`,
      '',
    ].join('\n'),
  );

  // The partition, as a file of its own.
  const partitionSectors = (sizeMiB * 1024 * 1024) / sectorBytes - partitionStartSector;
  const partition = path.join(work, 'partition.img');
  await run('mkfs.vfat', [
    ...['--invariant', '-i', volumeHex, '-n', label, '-h', String(partitionStartSector)],
    ...['-C', partition, String((partitionSectors * sectorBytes) / 1024)],
  ]);
  const into = ['-i', partition];
  await run('mmd', [...into, '::/EFI', '::/EFI/BOOT']);
  const copies: [string, string][] = [
    [kernelFile, '::/vmlinuz'],
    [initrd, '::/initrd'],
    [syslinuxCfg, '::/syslinux.cfg'],
    [files.efi.path, '::/EFI/BOOT/BOOTX64.EFI'],
    [files.ldlinuxEfi.path, '::/EFI/BOOT/ldlinux.e64'],
    [syslinuxCfg, '::/EFI/BOOT/syslinux.cfg'],
  ];
  for (const [from, to] of copies) await run('mcopy', [...into, from, to]);
  // The mtools installer: ldlinux.sys and ldlinux.c32, and the partition's boot sector.
  await run('syslinux', ['--install', partition]);

  // The disk: the table, the MBR boot code, the partition at its offset.
  const image = path.join(o.dir, 'disk.img');
  await rm(image, { force: true });
  const bytes = sizeMiB * 1024 * 1024;
  await writeFile(image, new Uint8Array(0));
  {
    const handle = await open(image, 'r+');
    try {
      await handle.truncate(bytes);
    } finally {
      await handle.close();
    }
  }
  await run(
    'sfdisk',
    ['--no-reread', '--no-tell-kernel', '--wipe', 'never', image],
    [
      'label: dos',
      `label-id: 0x${volumeHex}`,
      'unit: sectors',
      `start=${partitionStartSector}, size=${partitionSectors}, type=ef, bootable`,
      '',
    ].join('\n'),
  );
  const mbr = await readFile(files.mbr.path);
  if (mbr.length > 440) throw new Error(`${files.mbr.path} is ${mbr.length} bytes, more than 440`);
  const partitionOffset = partitionStartSector * sectorBytes;
  const handle = await open(image, 'r+');
  try {
    await handle.write(mbr, 0, mbr.length, 0);
    await handle.write(await readFile(partition), 0, undefined, partitionOffset);
  } finally {
    await handle.close();
  }
  await rm(work, { recursive: true, force: true });

  const data = await readFile(image);
  return {
    image,
    sha256: createHash('sha256').update(data).digest('hex'),
    bytes: data.length,
    partition: 1,
    fsType: 'vfat',
    partitionOffset,
    mtoolsImage: `${image}@@${partitionOffset}`,
    volumeUuid,
    kernelVersion,
  };
}

/**
 * Puts `contents` at `filePath` in the image's partition with mtools, making the directories on
 * the way: what writefile does on the machine, for tests that boot the image without it.
 */
export async function putFileInImage(
  image: DiskImage,
  filePath: string,
  contents: string | Uint8Array,
): Promise<void> {
  const tool = requireDiskImageTools();
  checkFilePath(filePath);
  const env = { ...process.env, SOURCE_DATE_EPOCH: String(epochS), MTOOLS_SKIP_CHECK: '1' };
  const segments = filePath.split('/').filter((s) => s !== '');
  for (let i = 1; i < segments.length; i++) {
    const dir = `::/${segments.slice(0, i).join('/')}`;
    // mmd fails on a directory that is there already; -D s skips it.
    await runTool(tool.mmd, ['-D', 's', '-i', image.mtoolsImage, dir], { env });
  }
  const source = path.join(path.dirname(image.image), `.put-${segments.at(-1) ?? 'file'}`);
  await writeFile(source, contents);
  try {
    await runTool(tool.mcopy, ['-o', '-i', image.mtoolsImage, source, `::${filePath}`], { env });
  } finally {
    await rm(source, { force: true });
  }
}

/** The image as it is now, after putFileInImage changed it: its SHA-256 and size again. */
export async function rehashImage(image: DiskImage): Promise<DiskImage> {
  const data = await readFile(image.image);
  return { ...image, sha256: createHash('sha256').update(data).digest('hex'), bytes: data.length };
}

/** Static busybox, to put in the image as /bin/sh for a command run chrooted into it (cexec). */
export function busyboxBinary(): Promise<Buffer> {
  return readFile(files.busybox.path);
}

interface InitramfsSettings {
  readonly kernelVersion: string;
  readonly modulesDir: string;
  readonly volumeUuid: string;
  readonly marker: string;
  readonly filePath: string;
}

async function initramfsEntries(s: InitramfsSettings): Promise<CpioEntry[]> {
  if ((await sharedLibraries(files.busybox.path)).length > 0) {
    throw new Error(`${files.busybox.path} is not static: apt-get install busybox-static`);
  }
  const busybox = await readFile(files.busybox.path);
  const order = moduleLoadOrder(
    installedModules,
    await readFile(path.join(s.modulesDir, 'modules.dep'), 'utf8'),
    await readFile(path.join(s.modulesDir, 'modules.builtin'), 'utf8'),
  );
  const entries = new Map<string, CpioEntry>();
  const parents = (p: string): void => {
    const segments = p.split('/');
    for (let i = 1; i < segments.length; i++) {
      const dir = segments.slice(0, i).join('/');
      if (!entries.has(dir)) entries.set(dir, { kind: 'directory', path: dir, mode: 0o755 });
    }
  };
  const add = (entry: CpioEntry): void => {
    parents(entry.path);
    entries.set(entry.path, entry);
  };
  for (const dir of ['proc', 'sys', 'dev', 'mnt', 'etc', 'tmp'])
    add({ kind: 'directory', path: dir, mode: 0o755 });
  add({ kind: 'char-device', path: 'dev/console', mode: 0o600, major: 5, minor: 1 });
  add({ kind: 'file', path: 'bin/busybox', mode: 0o755, data: busybox });
  add({ kind: 'symlink', path: 'bin/sh', target: 'busybox' });
  for (const module of order) {
    const data = await readFile(path.join(s.modulesDir, module));
    add({ kind: 'file', path: `lib/modules/${s.kernelVersion}/${module}`, mode: 0o644, data });
  }
  add({
    kind: 'file',
    path: 'etc/modules-order',
    mode: 0o644,
    data: Buffer.from(`${order.join('\n')}\n`),
  });
  add({ kind: 'file', path: 'init', mode: 0o755, data: Buffer.from(initScript(s)) });
  return [...entries.values()];
}

/** The installed system's /init (busybox sh, PID 1). */
function initScript(s: InitramfsSettings): string {
  return `#!/bin/busybox sh
# The Slipway test disk image's init (test/support/disk-image.ts).
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox --install -s /bin
export PATH=/bin
exec </dev/console >/dev/console 2>&1
# From here on the kernel keeps its messages off the console, so ours stay whole lines.
echo 1 > /proc/sys/kernel/printk
fail() {
  echo "${diskImageMarkers.failed}: $*"
  dmesg | tail -n 20
  poweroff -f
}
while read -r module; do
  insmod "/lib/modules/${s.kernelVersion}/$module" || echo "slipway-disk-image: module $module not loaded"
done < /etc/modules-order
dev=""
tries=0
while [ -z "$dev" ]; do
  dev="$(findfs UUID=${s.volumeUuid} 2>/dev/null)"
  if [ -z "$dev" ]; then
    tries=$((tries + 1))
    [ "$tries" -ge 100 ] && fail "no partition with FAT volume id ${s.volumeUuid} in 10 s"
    sleep 0.1
  fi
done
mount -t vfat -o ro "$dev" /mnt || fail "mount -t vfat $dev"
echo "slipway-disk-image: mounted $dev"
echo "slipway-disk-image: cmdline $(cat /proc/cmdline)"
echo ${shellQuote(s.marker)}
if [ -f ${shellQuote(`/mnt${s.filePath}`)} ]; then
  echo "${diskImageMarkers.installedFile} $(cat ${shellQuote(`/mnt${s.filePath}`)})"
else
  echo "${diskImageMarkers.noFile} ${s.filePath} on $dev"
fi
umount /mnt
poweroff -f
`;
}

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

function checkMarker(marker: string): void {
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  if (marker.trim() === '' || /[\x00-\x1f\x7f]/.test(marker)) {
    throw new Error(`the marker must be one printable line, got ${JSON.stringify(marker)}`);
  }
}

function checkFilePath(filePath: string): void {
  if (
    !filePath.startsWith('/') ||
    filePath.endsWith('/') ||
    filePath.split('/').some((s) => s === '.' || s === '..') ||
    // eslint-disable-next-line no-control-regex -- control characters are what is refused
    /[\x00-\x1f\x7f'"\\*?:<>|]/.test(filePath)
  ) {
    throw new Error(`filePath must be an absolute FAT-safe file path, got ${JSON.stringify(filePath)}`);
  }
}

async function newestKernel(): Promise<string> {
  const versions = existsSync('/lib/modules') ? await readdir('/lib/modules') : [];
  const installed = versions
    .filter((v) => existsSync(`/boot/vmlinuz-${v}`))
    .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  const newest = installed.at(-1);
  if (newest === undefined) {
    throw new Error('no kernel is installed (/boot/vmlinuz-*): apt-get install linux-image-amd64');
  }
  return newest;
}

// `slipway bootos build`: the in-memory OS that machines network-boot into, made from this
// machine's Debian packages: the kernel of linux-image-amd64 with the modules for common NICs
// and disks, busybox-static, the Node.js runtime that runs this build (stripped, with the shared
// libraries it links), kexec from kexec-tools, ipmitool, qemu-img (qemu-utils, with
// qemu-block-extra's curl driver), the disk tools rootio runs (sfdisk, mke2fs, mkfs.fat,
// mkfs.xfs) and syslinux with mtools when installed, and the worker agent bundled into one file.
// See docs/decisions/0016-boot-os.md.
//
// Reproducible: the archive is written by src/bootos/cpio.ts with fixed owners and times and
// sorted entries, the bundle by esbuild from the same sources, and zstd compresses
// single-threaded at a fixed level; so the same inputs give the same bytes.
import { createHash } from 'node:crypto';
import { constants, existsSync } from 'node:fs';
import { access, mkdir, mkdtemp, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findExecutable } from '../platform/executable.js';
import { runTool } from '../platform/run-tool.js';
import { cpioArchive, type CpioEntry } from './cpio.js';
import { initScript, udhcpcScript } from './init-script.js';
import { bootModules, moduleLoadOrder } from './kernel-modules.js';
import { sharedLibraries } from './shared-libraries.js';
import { embeddedScriptPaths } from './externalized-builtins.js';

export type BootOsArch = 'x86_64';

export interface BootOsBuildOptions {
  readonly outDir: string;
  readonly arch?: BootOsArch;
  /** Default: the newest kernel with both /boot/vmlinuz-V and /lib/modules/V. */
  readonly kernelVersion?: string;
  /** The cluster CA (PEM file) the worker verifies the nodes with; absent: plaintext to the nodes. */
  readonly caFile?: string;
  /** Default: the Node.js runtime running this build. */
  readonly nodeBinary?: string;
  /** zstd level, 1-19. Default 12: 19 saves ~3 MB and costs ~80 s of CPU more. */
  readonly compressionLevel?: number;
  /** Every archive entry's time (seconds). Default SOURCE_DATE_EPOCH, else 0. */
  readonly mtimeS?: number;
  /** Called with one line per step, for the operator. */
  readonly progress?: (line: string) => void;
}

export interface BootOsFile {
  readonly file: string;
  readonly bytes: number;
  readonly sha256: string;
}

export interface BootOsManifest {
  readonly arch: BootOsArch;
  readonly kernelVersion: string;
  readonly nodeVersion: string;
  readonly modules: number;
  readonly initramfsUncompressedBytes: number;
  readonly kernel: BootOsFile;
  readonly initramfs: BootOsFile;
}

/** The file names the default iPXE script boots (src/boot/http/ipxe-script.ts defaultBootArtifacts). */
export const bootOsFileNames = { kernel: 'vmlinuz-x86_64', initramfs: 'initramfs-x86_64' } as const;
export const manifestFileName = 'manifest.json';

const paths = {
  init: 'init',
  busybox: 'bin/busybox',
  worker: 'opt/slipway/worker.mjs',
  modulesList: 'etc/slipway/modules',
  udhcpcScript: 'etc/slipway/udhcpc.sh',
  ca: 'etc/slipway/ca.crt',
} as const;

export class BootOsBuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BootOsBuildError';
  }
}

export async function buildBootOs(o: BootOsBuildOptions): Promise<BootOsManifest> {
  const say = o.progress ?? ((): void => undefined);
  const level = o.compressionLevel ?? 12;
  if (!Number.isInteger(level) || level < 1 || level > 19) {
    throw new BootOsBuildError(`the compression level must be 1-19, got ${level}`);
  }
  const arch = o.arch ?? 'x86_64';
  const nodeBinary = o.nodeBinary ?? process.execPath;
  await checkNodeRuntime(nodeBinary);
  const kernelVersion = o.kernelVersion ?? (await newestKernel());
  const kernelFile = `/boot/vmlinuz-${kernelVersion}`;
  const modulesDir = `/lib/modules/${kernelVersion}`;
  if (!existsSync(kernelFile) || !existsSync(modulesDir)) {
    throw new BootOsBuildError(
      `kernel ${kernelVersion} is not installed (${kernelFile}, ${modulesDir}): apt-get install linux-image-amd64`,
    );
  }
  const zstd = tool('zstd', 'zstd');
  const image = new ImageTree();

  say(`kernel ${kernelVersion}`);
  const modules = await addKernelModules(image, kernelVersion, modulesDir);
  say(`${modules} kernel modules`);
  await addBusybox(image);

  const scratch = await mkdtemp(path.join(tmpdir(), 'slipway-bootos-'));
  try {
    await addNodeRuntime(image, nodeBinary, scratch, say);
    image.file(paths.worker, 0o644, await bundleWorker());
    say('worker bundled');
    await addInit(image, kernelVersion, o.caFile);

    await mkdir(o.outDir, { recursive: true });
    const mtimeS = o.mtimeS ?? sourceDateEpoch();
    const parts = cpioArchive(image.entries(), mtimeS);
    const uncompressed = parts.reduce((n, p) => n + p.length, 0);
    say(`initramfs: ${(uncompressed / 1e6).toFixed(1)} MB before compression; zstd -${level}`);
    const initramfsPath = path.join(o.outDir, bootOsFileNames.initramfs);
    await compressTo(zstd, level, parts, initramfsPath);
    const kernelPath = path.join(o.outDir, bootOsFileNames.kernel);
    await writeAtomically(kernelPath, await readFile(kernelFile));
    const manifest: BootOsManifest = {
      arch,
      kernelVersion,
      nodeVersion: await nodeVersion(nodeBinary),
      modules,
      initramfsUncompressedBytes: uncompressed,
      kernel: await describeFile(kernelPath),
      initramfs: await describeFile(initramfsPath),
    };
    await writeAtomically(
      path.join(o.outDir, manifestFileName),
      Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`),
    );
    return manifest;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** The boot modules and those they depend on, with the order to load them in; returns how many. */
async function addKernelModules(
  image: ImageTree,
  kernelVersion: string,
  modulesDir: string,
): Promise<number> {
  const order = moduleLoadOrder(
    bootModules,
    await readFile(path.join(modulesDir, 'modules.dep'), 'utf8'),
    await readFile(path.join(modulesDir, 'modules.builtin'), 'utf8'),
  );
  for (const module of order) {
    image.file(
      `lib/modules/${kernelVersion}/${module}`,
      0o644,
      await readFile(path.join(modulesDir, module)),
    );
  }
  image.file(paths.modulesList, 0o644, Buffer.from(`${order.join('\n')}\n`));
  return order.length;
}

/** busybox-static as /bin/busybox and /bin/sh: the boot OS's shell and tools. */
async function addBusybox(image: ImageTree): Promise<void> {
  const busybox = '/bin/busybox';
  if (!existsSync(busybox) || (await sharedLibraries(busybox)).length > 0) {
    throw new BootOsBuildError('a static /bin/busybox is needed: apt-get install busybox-static');
  }
  image.file(paths.busybox, 0o755, await readFile(busybox));
  image.symlink('bin/sh', 'busybox');
}

/**
 * Node.js (stripped, in `scratch`), kexec and ipmitool when installed, and the shared libraries
 * they link. ipmitool reads the BMC's LAN address through /dev/ipmi0 in inventory mode.
 */
async function addNodeRuntime(
  image: ImageTree,
  nodeBinary: string,
  scratch: string,
  say: (line: string) => void,
): Promise<void> {
  const node = await strippedCopy(nodeBinary, scratch);
  image.file('usr/bin/node', 0o755, await readFile(node));
  const programs = [nodeBinary];
  const kexec = findExecutable('kexec', ['/usr/sbin/kexec', '/sbin/kexec']);
  if (kexec !== undefined) {
    image.file('usr/sbin/kexec', 0o755, await readFile(kexec));
    programs.push(kexec);
  } else say('kexec not installed (kexec-tools): the kexec action will not be available');
  const ipmitool = findExecutable('ipmitool', ['/usr/bin/ipmitool']);
  if (ipmitool !== undefined) {
    image.file('usr/bin/ipmitool', 0o755, await readFile(ipmitool));
    programs.push(ipmitool);
  } else say('ipmitool not installed: inventory mode will not read the BMC address');
  programs.push(
    ...(await addQemuImg(image, say)),
    ...(await addDiskTools(image, say)),
    ...(await addSyslinux(image, say)),
  );
  const libraries = new Set<string>();
  for (const program of programs)
    for (const library of await sharedLibraries(program)) libraries.add(library);
  for (const library of [...libraries].sort()) {
    image.file(library.slice(1), 0o755, await readFile(library));
  }
  const builtins = await externalizedBuiltins(nodeBinary);
  for (const script of builtins) image.file(script.slice(1), 0o644, await readFile(script));
  say(
    `node ${await nodeVersion(nodeBinary)}; ${libraries.size} shared libraries` +
      (builtins.length > 0 ? `; ${builtins.length} built-in scripts kept outside the runtime` : ''),
  );
}

/**
 * The JavaScript files the runtime reads at start-up from outside itself (a distribution's
 * externalized builtins): named in node or the libraries it links, and present here.
 */
async function externalizedBuiltins(nodeBinary: string): Promise<string[]> {
  const scripts = new Set<string>();
  for (const file of [nodeBinary, ...(await sharedLibraries(nodeBinary))]) {
    for (const script of embeddedScriptPaths(await readFile(file))) {
      if (existsSync(script)) scripts.add(script);
    }
  }
  return [...scripts].sort();
}

/** Where Debian's qemu-img loads its curl driver from (qemu-block-extra). */
const qemuCurlDriver = '/usr/lib/x86_64-linux-gnu/qemu/block-curl.so';

/**
 * qemu-img with its curl driver, when both are installed: the qemuimg2disk action reads the image
 * over HTTP through it. Returns the files whose shared libraries the image needs.
 */
async function addQemuImg(image: ImageTree, say: (line: string) => void): Promise<string[]> {
  const qemuImg = findExecutable('qemu-img', ['/usr/bin/qemu-img']);
  if (qemuImg === undefined || !existsSync(qemuCurlDriver)) {
    say(
      'qemu-img or its curl driver not installed (qemu-utils, qemu-block-extra): qemuimg2disk will not run',
    );
    return [];
  }
  image.file('usr/bin/qemu-img', 0o755, await readFile(qemuImg));
  image.file(qemuCurlDriver.slice(1), 0o644, await readFile(qemuCurlDriver));
  return [qemuImg, qemuCurlDriver];
}

/** The programs rootio partitions and formats with, which busybox lacks or makes only ext2 with. */
const diskTools: readonly { readonly name: string; readonly packageName: string }[] = [
  { name: 'sfdisk', packageName: 'fdisk' },
  { name: 'mke2fs', packageName: 'e2fsprogs' },
  { name: 'mkfs.fat', packageName: 'dosfstools' },
  { name: 'mkfs.xfs', packageName: 'xfsprogs' },
];

/** Each of diskTools that is installed, in /usr/sbin (ahead of busybox's on the PATH). */
async function addDiskTools(image: ImageTree, say: (line: string) => void): Promise<string[]> {
  const added: string[] = [];
  for (const tool of diskTools) {
    const found = findExecutable(tool.name, [`/usr/sbin/${tool.name}`, `/sbin/${tool.name}`]);
    if (found === undefined) {
      say(`${tool.name} not installed (${tool.packageName}): rootio cannot run it`);
      continue;
    }
    image.file(`usr/sbin/${tool.name}`, 0o755, await readFile(found));
    added.push(found);
  }
  return added;
}

/** Where syslinux-common keeps the MBR boot code: where the syslinux action reads it from. */
const syslinuxMbrCode: readonly string[] = ['/usr/lib/syslinux/mbr/mbr.bin', '/usr/share/syslinux/mbr.bin'];

/** syslinux (Debian's mtools installer), the mtools commands it runs, and its MBR boot code. */
async function addSyslinux(image: ImageTree, say: (line: string) => void): Promise<string[]> {
  const syslinux = findExecutable('syslinux', ['/usr/bin/syslinux']);
  const mtools = findExecutable('mtools', ['/usr/bin/mtools']);
  const mbrCode = syslinuxMbrCode.find((file) => existsSync(file));
  if (syslinux === undefined || mtools === undefined || mbrCode === undefined) {
    say('syslinux, syslinux-common or mtools not installed: the syslinux action will not run');
    return [];
  }
  image.file('usr/bin/syslinux', 0o755, await readFile(syslinux));
  image.file('usr/bin/mtools', 0o755, await readFile(mtools));
  for (const command of ['mattrib', 'mcopy', 'mmove']) image.symlink(`usr/bin/${command}`, 'mtools');
  image.file(mbrCode.slice(1), 0o644, await readFile(mbrCode));
  return [syslinux, mtools];
}

/** /init and its DHCP script, the cluster CA when given, the console and the empty mount points. */
async function addInit(image: ImageTree, kernelVersion: string, caFile: string | undefined): Promise<void> {
  if (caFile !== undefined) image.file(paths.ca, 0o644, await readFile(caFile));
  image.file(
    paths.init,
    0o755,
    Buffer.from(
      initScript({
        kernelVersion,
        workerPath: `/${paths.worker}`,
        modulesListPath: `/${paths.modulesList}`,
        udhcpcScriptPath: `/${paths.udhcpcScript}`,
        ...(caFile === undefined ? {} : { caPath: `/${paths.ca}` }),
      }),
    ),
  );
  image.file(paths.udhcpcScript, 0o755, Buffer.from(udhcpcScript()));
  image.device('dev/console', 0o600, 5, 1);
  for (const dir of ['proc', 'sys', 'run', 'tmp', 'root', 'mnt', 'etc']) image.directory(dir, 0o755);
}

/** The archive's entries by path, with every parent directory added. */
class ImageTree {
  readonly #entries = new Map<string, CpioEntry>();

  file(p: string, mode: number, data: Uint8Array): void {
    this.#parents(p);
    this.#entries.set(p, { kind: 'file', path: p, mode, data });
  }

  symlink(p: string, target: string): void {
    this.#parents(p);
    this.#entries.set(p, { kind: 'symlink', path: p, target });
  }

  device(p: string, mode: number, major: number, minor: number): void {
    this.#parents(p);
    this.#entries.set(p, { kind: 'char-device', path: p, mode, major, minor });
  }

  directory(p: string, mode: number): void {
    this.#parents(p);
    if (!this.#entries.has(p)) this.#entries.set(p, { kind: 'directory', path: p, mode });
  }

  entries(): CpioEntry[] {
    return [...this.#entries.values()];
  }

  #parents(p: string): void {
    const segments = p.split('/');
    for (let i = 1; i < segments.length; i++) {
      const dir = segments.slice(0, i).join('/');
      if (!this.#entries.has(dir)) this.#entries.set(dir, { kind: 'directory', path: dir, mode: 0o755 });
    }
  }
}

async function newestKernel(): Promise<string> {
  const versions = existsSync('/lib/modules') ? await readdir('/lib/modules') : [];
  const installed = versions.filter((v) => existsSync(`/boot/vmlinuz-${v}`)).sort(compareVersions);
  const newest = installed.at(-1);
  if (newest === undefined) {
    throw new BootOsBuildError('no kernel is installed (/boot/vmlinuz-*): apt-get install linux-image-amd64');
  }
  return newest;
}

function compareVersions(a: string, b: string): number {
  return a.localeCompare(b, 'en', { numeric: true });
}

function tool(name: string, debianPackage: string): string {
  const found = findExecutable(name, [`/usr/bin/${name}`]);
  if (found === undefined) {
    throw new BootOsBuildError(`${name} is needed to build the boot OS: apt-get install ${debianPackage}`);
  }
  return found;
}

/** The runtime without its debug symbols (about 13 MB less); the runtime itself when strip is missing. */
async function strippedCopy(binary: string, dir: string): Promise<string> {
  const strip = findExecutable('strip', ['/usr/bin/strip']);
  if (strip === undefined) return binary;
  const out = path.join(dir, 'node');
  await runTool(strip, ['--strip-all', '-o', out, binary]);
  return out;
}

/** The oldest Node.js the worker agent runs on (package.json's engines). */
export const nodeRuntimeMin = { major: 20, minor: 19 } as const;

/**
 * Refuses a Node.js runtime the worker cannot run on, before anything is built: a path that is not
 * an executable, a program that is not Node.js, or one older than nodeRuntimeMin. Returns its version.
 */
export async function checkNodeRuntime(binary: string): Promise<string> {
  let version: string;
  try {
    await access(binary, constants.X_OK);
    version = await nodeVersion(binary);
  } catch (err) {
    throw new BootOsBuildError(
      `--node ${binary} is not a Node.js runtime that runs here: ${(err as Error).message}`,
    );
  }
  const m = /^v(\d+)\.(\d+)\.(\d+)$/.exec(version);
  if (m === null)
    throw new BootOsBuildError(
      `--node ${binary} is not Node.js: --version printed "${version.slice(0, 80)}"`,
    );
  const [major, minor] = [Number(m[1]), Number(m[2])];
  if (major < nodeRuntimeMin.major || (major === nodeRuntimeMin.major && minor < nodeRuntimeMin.minor)) {
    throw new BootOsBuildError(
      `--node ${binary} is Node.js ${version}; the worker needs ${nodeRuntimeMin.major}.${nodeRuntimeMin.minor} or later (24 LTS recommended)`,
    );
  }
  return version;
}

async function nodeVersion(binary: string): Promise<string> {
  return binary === process.execPath ? process.version : (await runTool(binary, ['--version'])).trim();
}

/** The worker agent and every module it imports, in one ES module file. */
async function bundleWorker(): Promise<Uint8Array> {
  const { build } = await import('esbuild');
  const here = path.dirname(fileURLToPath(import.meta.url));
  // The entry lives with the other binaries' entries in src/cli. From the sources (tsx) it is
  // .ts; from a compiled build it is .js.
  const entry = ['worker-main.ts', 'worker-main.js']
    .map((f) => path.join(here, '..', 'cli', f))
    .find((f) => existsSync(f));
  if (entry === undefined)
    throw new BootOsBuildError(`the worker entry point is missing from ${path.join(here, '..', 'cli')}`);
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    minify: true,
    legalComments: 'none',
    write: false,
    logLevel: 'silent',
    // Bundled CommonJS packages (grpc-js) call require() for Node's own modules.
    banner: {
      js: "import { createRequire as __slipwayRequire } from 'node:module'; const require = __slipwayRequire(import.meta.url);",
    },
  });
  const output = result.outputFiles[0];
  if (output === undefined) throw new BootOsBuildError('esbuild produced no worker bundle');
  return output.contents;
}

async function compressTo(
  zstd: string,
  level: number,
  parts: readonly Uint8Array[],
  out: string,
): Promise<void> {
  const temporary = `${out}.partial`;
  await rm(temporary, { force: true });
  // One thread: zstd's output is then fixed by its input and level alone.
  await runTool(zstd, [`-${level}`, '-T1', '-q', '-f', '-o', temporary, '-'], { input: parts });
  await rename(temporary, out);
}

async function writeAtomically(file: string, data: Uint8Array): Promise<void> {
  await writeFile(`${file}.partial`, data);
  await rename(`${file}.partial`, file);
}

async function describeFile(file: string): Promise<BootOsFile> {
  const data = await readFile(file);
  return {
    file: path.basename(file),
    bytes: (await stat(file)).size,
    sha256: createHash('sha256').update(data).digest('hex'),
  };
}

function sourceDateEpoch(): number {
  const text = process.env['SOURCE_DATE_EPOCH'];
  if (text === undefined || text === '') return 0;
  if (!/^[0-9]{1,10}$/.test(text))
    throw new BootOsBuildError(`SOURCE_DATE_EPOCH must be whole seconds, got "${text}"`);
  return Number(text);
}

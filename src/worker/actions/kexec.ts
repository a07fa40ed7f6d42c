// kexec: loads the installed system's kernel (kexec -l) so the machine can boot it without a
// firmware round trip, as Tinkerbell's hub action does. Only the loading happens here; the
// agent jumps into the kernel (kexec -e) once the cluster has recorded this action's success.
//
//   BLOCK_DEVICE  the partition holding the kernel    FS_TYPE      its filesystem
//   KERNEL_PATH   the kernel, inside that filesystem  INITRD_PATH  optional initrd
//   CMD_LINE      the kernel command line (optional)
//   GRUBCFG_PATH  without KERNEL_PATH: the grub.cfg to read, inside that filesystem
//                 (default /boot/grub/grub.cfg; grub/grub.cfg when /boot is its own partition)
//
// Without KERNEL_PATH, as Tinkerbell's kexec, the kernel, initrd and command line are those of
// grub.cfg's default entry (grub-config.ts), grubenv beside it read for saved_entry and
// next_entry; INITRD_PATH and CMD_LINE, when given, still win. Several initrds (microcode first)
// are joined into one, as GRUB loads them.
import { readFile, writeFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ActionError, type BuiltinContext, type BuiltinDone } from './action.js';
import { defaultBootEntry, GrubConfigError } from './grub-config.js';
import { withMounted } from './mounted.js';
import { runProgram } from './program.js';
import { checkChoiceSettings, optionalSetting, requiredSetting } from './settings.js';

export const grubCfgPathDefault = '/boot/grub/grub.cfg';
/** grub.cfg is a few kB; a larger file is not one. */
const grubCfgBytesMax = 4 * 1024 * 1024;

interface BootFiles {
  readonly kernel: string;
  readonly initrds: readonly string[];
  readonly cmdLine: string;
  /** Where they were read from, for the progress line. */
  readonly from: string;
}

export async function kexec(ctx: BuiltinContext): Promise<BuiltinDone> {
  checkChoiceSettings('kexec', ctx.env);
  const device = requiredSetting(ctx.env, 'BLOCK_DEVICE');
  const fsType = requiredSetting(ctx.env, 'FS_TYPE');
  const kernelSetting = optionalSetting(ctx.env, 'KERNEL_PATH');
  const kernel = kernelSetting === undefined ? undefined : insidePath('KERNEL_PATH', kernelSetting);
  const grubCfg = insidePath('GRUBCFG_PATH', optionalSetting(ctx.env, 'GRUBCFG_PATH') ?? grubCfgPathDefault);
  const initrdSetting = optionalSetting(ctx.env, 'INITRD_PATH');
  const initrd = initrdSetting === undefined ? undefined : insidePath('INITRD_PATH', initrdSetting);
  const cmdLine = optionalSetting(ctx.env, 'CMD_LINE');
  const request = { device, fsType, readOnly: true, deviceSetting: 'BLOCK_DEVICE' };
  const files = await withMounted(request, ctx.signal, async (root) => {
    const found =
      kernel === undefined
        ? await fromGrub(root, grubCfg, device)
        : { kernel, initrds: [], cmdLine: '', from: 'KERNEL_PATH' };
    const boot: BootFiles = {
      ...found,
      initrds: initrd === undefined ? found.initrds : [initrd],
      cmdLine: cmdLine ?? found.cmdLine,
    };
    // kexec -l reads the files into the kernel's memory: unmounting afterwards is fine.
    await load(root, boot, ctx.signal);
    return boot;
  });
  const line = `loaded ${files.kernel}${files.initrds.length === 0 ? '' : ` and ${files.initrds.join(', ')}`} from ${device} (${files.from}); the machine boots it once the cluster has recorded this result`;
  ctx.progress(line);
  return { message: `loaded ${files.kernel} from ${device}`, effect: 'kexec' };
}

/** The default entry of grub.cfg on the mounted filesystem; an ActionError naming the file. */
async function fromGrub(root: string, grubCfg: string, device: string): Promise<BootFiles> {
  const where = `${grubCfg} on ${device}`;
  let config: Buffer;
  try {
    config = await readFile(path.join(root, grubCfg));
  } catch (err) {
    throw new ActionError(
      `cannot read ${where} (${(err as NodeJS.ErrnoException).code ?? String(err)}): give KERNEL_PATH, or GRUBCFG_PATH when grub.cfg is elsewhere (grub/grub.cfg when /boot is its own partition)`,
    );
  }
  if (config.length > grubCfgBytesMax)
    throw new ActionError(`${where} is ${config.length} bytes: not a grub.cfg`);
  const grubenv = await readFile(path.join(root, path.posix.dirname(grubCfg), 'grubenv'), 'utf8').catch(
    () => '',
  );
  try {
    const boot = defaultBootEntry(config.toString('utf8'), grubenv);
    return {
      kernel: insidePath(`${where}: the kernel`, boot.kernel),
      initrds: boot.initrds.map((i) => insidePath(`${where}: the initrd`, i)),
      cmdLine: boot.cmdLine,
      from: `${grubCfg}: "${boot.entry.join('>')}"`,
    };
  } catch (err) {
    if (err instanceof GrubConfigError)
      throw new ActionError(`no default boot entry in ${where}: ${err.message}`);
    throw err;
  }
}

/** kexec -l with the files inside `root`; several initrds are joined into one first. */
async function load(root: string, boot: BootFiles, signal: AbortSignal): Promise<void> {
  const argv = ['kexec', '-l', path.join(root, boot.kernel)];
  let joined: string | undefined;
  try {
    if (boot.initrds.length === 1) argv.push(`--initrd=${path.join(root, boot.initrds[0] ?? '')}`);
    if (boot.initrds.length > 1) {
      joined = await mkdtemp(path.join(tmpdir(), 'slipway-initrd-'));
      const parts = await Promise.all(boot.initrds.map((i) => readFile(path.join(root, i))));
      await writeFile(path.join(joined, 'initrd'), Buffer.concat(parts));
      argv.push(`--initrd=${path.join(joined, 'initrd')}`);
    }
    argv.push(`--append=${boot.cmdLine}`);
    await runProgram(argv, signal);
  } finally {
    if (joined !== undefined) await rm(joined, { recursive: true, force: true });
  }
}

function insidePath(name: string, value: string): string {
  if (value.split('/').includes('..')) {
    throw new ActionError(`${name}=${value} must not contain ".." (it would leave the filesystem)`);
  }
  return path.posix.normalize(`/${value}`);
}

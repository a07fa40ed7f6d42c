// cexec: runs a command inside the system just installed on the machine's disk, as Tinkerbell's
// hub action does (grub-install, update-initramfs, a package upgrade).
//
//   BLOCK_DEVICE         the partition holding the new system's root   FS_TYPE  its filesystem
//   CMD_LINE             the command, split at spaces into its arguments
//   DEFAULT_INTERPRETER  a program that takes CMD_LINE as one argument, e.g. "/bin/sh -c" to run
//                        several commands separated by ";" (default none)
//   CHROOT               y: run inside the new system (chroot to its root, with the machine's
//                        /dev, /proc and /sys bound into it); unset: run in the agent's own
//                        system, in the directory where the filesystem is mounted
//
// The command gets the action's environment (PATH the usual one unless given) and its output
// becomes the action's output tail; a status other than 0 fails the action with that status.
// Whatever happens (failure, timeout, cancel) the bound directories and the filesystem are
// unmounted before the action reports.
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { ActionError, type BuiltinContext, type BuiltinDone } from './action.js';
import { withMounted } from './mounted.js';
import { runProgram, runStreamed } from './program.js';
import { checkChoiceSettings, optionalSetting, requiredSetting } from './settings.js';

/** The machine's own trees a chrooted command needs: devices, processes, the kernel's view. */
const boundTrees: readonly string[] = ['/dev', '/proc', '/sys'];
const pathDefault = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export async function cexec(ctx: BuiltinContext): Promise<BuiltinDone> {
  const device = requiredSetting(ctx.env, 'BLOCK_DEVICE');
  const fsType = requiredSetting(ctx.env, 'FS_TYPE');
  const cmdLine = requiredSetting(ctx.env, 'CMD_LINE');
  checkChoiceSettings('cexec', ctx.env);
  const chroot = optionalSetting(ctx.env, 'CHROOT') !== undefined;
  const interpreter = words(optionalSetting(ctx.env, 'DEFAULT_INTERPRETER') ?? '');
  const argv = interpreter.length === 0 ? words(cmdLine) : [...interpreter, cmdLine];
  const env = { PATH: pathDefault, ...ctx.env };
  const request = { device, fsType, readOnly: false, deviceSetting: 'BLOCK_DEVICE' };
  const status = await withMounted(request, ctx.signal, async (root) => {
    if (!chroot) return runStreamed(argv, { env, cwd: root, signal: ctx.signal, onLine: ctx.progress });
    return withBound(root, ctx.signal, () =>
      runStreamed(['chroot', root, ...argv], { env, signal: ctx.signal, onLine: ctx.progress }),
    );
  });
  const where = chroot ? `chrooted into ${device}` : `with ${device} mounted`;
  if (status !== 0)
    throw new ActionError(`${argv.join(' ')} exited with status ${status} (${where})`, status);
  return { message: `ran ${argv.join(' ')} ${where}` };
}

/**
 * Binds the machine's /dev, /proc and /sys into `root` for `use`, and always unbinds them (cexec,
 * grub2disk).
 */
export async function withBound<T>(root: string, signal: AbortSignal, use: () => Promise<T>): Promise<T> {
  const bound: string[] = [];
  try {
    for (const tree of boundTrees) {
      const target = path.join(root, tree);
      await mkdir(target, { recursive: true });
      await runProgram(['mount', '--bind', tree, target], signal);
      bound.push(target);
    }
    return await use();
  } finally {
    // Not abortable, in reverse: a timeout must not leave the machine's trees bound in.
    // A process the command left running keeps a tree busy: detach it lazily then, so the
    // filesystem can still be unmounted.
    const never = new AbortController().signal;
    for (const target of bound.reverse()) {
      await runProgram(['umount', target], never).catch(() => runProgram(['umount', '-l', target], never));
    }
  }
}

/** Tinkerbell's splitting: at spaces, with no quoting; empty words dropped. */
function words(line: string): string[] {
  return line.split(' ').filter((word) => word !== '');
}

// kexec: loads the installed system's kernel (kexec -l) so the machine can boot it without a
// firmware round trip, as Tinkerbell's hub action does. Only the loading happens here; the
// agent jumps into the kernel (kexec -e) once the cluster has recorded this action's success.
//
//   BLOCK_DEVICE  the partition holding the kernel    FS_TYPE      its filesystem
//   KERNEL_PATH   the kernel, inside that filesystem  INITRD_PATH  optional initrd
//   CMD_LINE      the kernel command line (optional)
import path from 'node:path';
import { ActionError, type BuiltinContext, type BuiltinDone } from './builtin.js';
import { withMounted } from './mounted.js';
import { runProgram } from './program.js';
import { optionalSetting, requiredSetting } from './settings.js';

export async function kexec(ctx: BuiltinContext): Promise<BuiltinDone> {
  const device = requiredSetting(ctx.env, 'BLOCK_DEVICE');
  const fsType = requiredSetting(ctx.env, 'FS_TYPE');
  const kernel = insidePath('KERNEL_PATH', requiredSetting(ctx.env, 'KERNEL_PATH'));
  const initrdSetting = optionalSetting(ctx.env, 'INITRD_PATH');
  const initrd = initrdSetting === undefined ? undefined : insidePath('INITRD_PATH', initrdSetting);
  const cmdLine = ctx.env['CMD_LINE'] ?? '';
  const request = { device, fsType, readOnly: true, deviceSetting: 'BLOCK_DEVICE' };
  await withMounted(request, ctx.signal, async (root) => {
    // kexec -l reads the files into the kernel's memory: unmounting afterwards is fine.
    const argv = ['kexec', '-l', path.join(root, kernel)];
    if (initrd !== undefined) argv.push(`--initrd=${path.join(root, initrd)}`);
    argv.push(`--append=${cmdLine}`);
    await runProgram(argv, ctx.signal);
  });
  const line = `loaded ${kernel}${initrd === undefined ? '' : ` and ${initrd}`} from ${device}; the machine boots it once the cluster has recorded this result`;
  ctx.progress(line);
  return { message: `loaded ${kernel} from ${device}`, effect: 'kexec' };
}

function insidePath(name: string, value: string): string {
  if (value.split('/').includes('..')) {
    throw new ActionError(`${name}=${value} must not contain ".." (it would leave the filesystem)`);
  }
  return path.posix.normalize(`/${value}`);
}

// grub2disk: installs GRUB onto a disk and writes its grub.cfg, as Tinkerbell's hub action does:
// GRUB_DISK (the partition holding the installed system) is mounted, the machine's /dev, /proc
// and /sys are bound into it, and inside it (chroot) `grub-install GRUB_INSTALL_PATH` then
// `grub-mkconfig -o /boot/grub/grub.cfg` run.
//
//   GRUB_INSTALL_PATH  the disk GRUB's boot code goes on, e.g. /dev/sda
//   GRUB_DISK          the partition holding the installed system, e.g. /dev/sda1
//   FS_TYPE            its filesystem
//
// The installed system's own GRUB runs (Tinkerbell's action brings one and binds its own /usr,
// /etc, ... over the system's): its grub.cfg then comes from the system's /etc/default/grub and
// /etc/grub.d, as `update-grub` would make it (docs/decisions/0041-hub-actions.md). A system
// without grub-install is refused before anything is written.
import { access } from 'node:fs/promises';
import path from 'node:path';
import { ActionError, type BuiltinContext, type BuiltinDone } from './action.js';
import { withBound } from './cexec.js';
import { withMounted } from './mounted.js';
import { runStreamed } from './program.js';
import { checkChoiceSettings, requiredSetting } from './settings.js';
import { deviceKind } from './target-disk.js';

const pathDefault = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const grubInstallPaths: readonly string[] = ['/usr/sbin/grub-install', '/sbin/grub-install'];

export async function grub2disk(ctx: BuiltinContext): Promise<BuiltinDone> {
  const disk = requiredSetting(ctx.env, 'GRUB_INSTALL_PATH');
  const device = requiredSetting(ctx.env, 'GRUB_DISK');
  const fsType = requiredSetting(ctx.env, 'FS_TYPE');
  checkChoiceSettings('grub2disk', ctx.env);
  await checkDisk(disk);
  const request = { device, fsType, readOnly: false, deviceSetting: 'GRUB_DISK' };
  const env = { PATH: pathDefault };
  await withMounted(request, ctx.signal, async (root) => {
    if (!(await anyExists(root, grubInstallPaths))) {
      throw new ActionError(
        `the system on GRUB_DISK ${device} has no grub-install (${grubInstallPaths.join(' or ')}); ` +
          'install GRUB in its image (grub-pc for BIOS, grub-efi for UEFI)',
      );
    }
    await withBound(root, ctx.signal, async () => {
      for (const argv of [
        ['grub-install', disk],
        ['grub-mkconfig', '-o', '/boot/grub/grub.cfg'],
      ]) {
        ctx.progress(`running ${argv.join(' ')} in the system on ${device}`);
        const status = await runStreamed(['chroot', root, ...argv], {
          env,
          signal: ctx.signal,
          onLine: ctx.progress,
        });
        if (status !== 0) {
          throw new ActionError(
            `${argv.join(' ')} exited with status ${status} (chrooted into ${device})`,
            status,
          );
        }
      }
    });
  });
  return { message: `installed GRUB on ${disk} and wrote /boot/grub/grub.cfg on ${device}` };
}

async function anyExists(root: string, files: readonly string[]): Promise<boolean> {
  for (const file of files) {
    if (
      await access(path.join(root, file)).then(
        () => true,
        () => false,
      )
    )
      return true;
  }
  return false;
}

async function checkDisk(disk: string): Promise<void> {
  const kind = await deviceKind(disk);
  if (kind === 'missing') {
    throw new ActionError(
      `GRUB_INSTALL_PATH ${disk} does not exist; name the machine's disk, such as /dev/sda`,
    );
  }
  if (kind !== 'block') throw new ActionError(`GRUB_INSTALL_PATH ${disk} is not a block device`);
}

// writefile: writes one file into a filesystem on the machine's disk, as Tinkerbell's hub
// action does (a netplan config, an SSH key, a cloud-init seed).
//
//   DEST_DISK  the partition holding the filesystem    FS_TYPE   ext4, vfat, xfs, ...
//   DEST_PATH  absolute path inside that filesystem     CONTENTS  the file's text (default empty)
//   UID, GID   owner (default 0)                        MODE      octal (default 0644)
//   DIRMODE    octal mode of parent directories it creates (default 0755)
//
// The file is written atomically (a temporary file in the same directory, fsync'd, renamed over
// the target, the directory fsync'd), so a machine that loses power meanwhile has the old file
// or the new one. The filesystem is mounted on a fresh temporary directory and always unmounted.
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, realpath, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { ActionError, type BuiltinContext, type BuiltinDone } from './action.js';
import { withMounted } from './mounted.js';
import { checkChoiceSettings, idSetting, modeSetting, requiredSetting } from './settings.js';
import { syncDirectory } from '../../platform/sync-directory.js';

/** Filesystems with no POSIX owner or mode: chown and chmod there fail or mean nothing. */
const ownerlessFilesystems: ReadonlySet<string> = new Set(['vfat', 'msdos', 'fat', 'exfat', 'ntfs3']);

export async function writefile(ctx: BuiltinContext): Promise<BuiltinDone> {
  checkChoiceSettings('writefile', ctx.env);
  const device = requiredSetting(ctx.env, 'DEST_DISK');
  const fsType = requiredSetting(ctx.env, 'FS_TYPE');
  const destPath = destPathSetting(requiredSetting(ctx.env, 'DEST_PATH'));
  const contents = ctx.env['CONTENTS'] ?? '';
  const uid = idSetting(ctx.env, 'UID');
  const gid = idSetting(ctx.env, 'GID');
  const mode = modeSetting(ctx.env, 'MODE', 0o644);
  const dirMode = modeSetting(ctx.env, 'DIRMODE', 0o755);
  const ownerless = ownerlessFilesystems.has(fsType);
  const request = { device, fsType, readOnly: false, deviceSetting: 'DEST_DISK' };
  await withMounted(request, ctx.signal, async (root) => {
    const target = path.join(root, destPath);
    const parent = await makeParents(root, path.dirname(destPath), dirMode, ownerless);
    // rename replaces a symbolic link at the target rather than writing where it points (an
    // absolute link means the installed system's root, not ours).
    const temporary = path.join(
      parent,
      `.${path.basename(target)}.slipway-${randomBytes(4).toString('hex')}`,
    );
    try {
      const file = await open(temporary, 'wx', mode);
      try {
        await file.writeFile(contents);
        if (!ownerless) {
          await file.chown(uid, gid);
          // After chown, which clears set-id bits, and past the umask open applied.
          await file.chmod(mode);
        }
        await file.sync();
      } finally {
        await file.close();
      }
      await rename(temporary, target);
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    }
    await syncDirectory(parent);
  });
  const owner = ownerless ? `(${fsType} keeps no owner or mode)` : `owner ${uid}:${gid} mode ${octal(mode)}`;
  const line = `wrote ${Buffer.byteLength(contents)} bytes to ${destPath} on ${device} ${owner}`;
  ctx.progress(line);
  return { message: line };
}

function destPathSetting(value: string): string {
  if (!value.startsWith('/')) throw new ActionError(`DEST_PATH=${value} must be an absolute path`);
  if (value.split('/').includes('..')) {
    throw new ActionError(`DEST_PATH=${value} must not contain ".." (it would leave the filesystem)`);
  }
  const normal = path.posix.normalize(value);
  if (normal === '/' || value.endsWith('/')) throw new ActionError(`DEST_PATH=${value} names no file`);
  return normal;
}

/**
 * Creates the missing directories of `dir` (inside the mounted `root`) with `dirMode`, and
 * returns the real path of `dir`. A symbolic link on the way that points out of the mounted
 * filesystem (an absolute link means the installed system's root, not ours) is refused.
 */
async function makeParents(root: string, dir: string, dirMode: number, ownerless: boolean): Promise<string> {
  let current = root;
  for (const part of dir.split('/').filter((p) => p !== '')) {
    current = path.join(current, part);
    try {
      await mkdir(current, { mode: dirMode });
      // mkdir's mode passes through the umask; the setting means the mode itself.
      if (!ownerless) await chmod(current, dirMode);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  const real = await realpath(current);
  if (real !== root && !real.startsWith(`${root}/`)) {
    throw new ActionError(`DEST_PATH's directory ${dir} leads out of the filesystem on DEST_DISK (a link)`);
  }
  return real;
}

function octal(mode: number): string {
  return `0${mode.toString(8).padStart(3, '0')}`;
}

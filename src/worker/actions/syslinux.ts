// syslinux: installs the SYSLINUX boot loader, as Tinkerbell's hub action does: the loader (boot
// sector, ldlinux.sys, ldlinux.c32) onto the FAT filesystem of DEST_PARTITION, then its MBR boot
// code at the start of DEST_DISK (Tinkerbell's writes the MBR first; here a partition the loader
// cannot go on leaves the disk untouched).
//
//   DEST_DISK         the disk whose MBR gets the boot code (a block device, or a file)
//   DEST_PARTITION    the FAT partition the loader goes on (mark it bootable: rootio's FAT32_ACTIVE)
//   SYSLINUX_VERSION  3.86 or 386 (Tinkerbell's only version), or 6.04: Debian's syslinux is
//                     installed whichever is named (docs/decisions/0041-hub-actions.md)
//
// Only the boot code is written (440 bytes): the partition table and disk signature after it
// stay. The loader is written by Debian's `syslinux --install` (the mtools installer: the
// partition is not mounted).
import { open, readFile } from 'node:fs/promises';
import { ActionError, type BuiltinContext, type BuiltinDone } from './action.js';
import { rereadPartitions } from './image2disk.js';
import { runProgram } from './program.js';
import { checkChoiceSettings, requiredSetting } from './settings.js';
import { deviceKind, inspectTarget } from './target-disk.js';

/** Debian's syslinux-common keeps the MBR boot code here. */
export const mbrCodePaths: readonly string[] = [
  '/usr/lib/syslinux/mbr/mbr.bin',
  '/usr/share/syslinux/mbr.bin',
];
/** The MBR's boot code: what comes after it is the disk signature and the partition table. */
const mbrCodeBytes = 440;

export async function syslinux(ctx: BuiltinContext): Promise<BuiltinDone> {
  const disk = requiredSetting(ctx.env, 'DEST_DISK');
  const partition = requiredSetting(ctx.env, 'DEST_PARTITION');
  requiredSetting(ctx.env, 'SYSLINUX_VERSION');
  checkChoiceSettings('syslinux', ctx.env);
  const target = await inspectTarget(disk);
  await checkPartition(partition);
  const code = await mbrCode();
  // The loader first: a partition it cannot go on leaves the disk's boot code as it was.
  try {
    await runProgram(['syslinux', '--install', partition], ctx.signal);
  } catch (error) {
    if (!(error instanceof ActionError)) throw error;
    throw new ActionError(
      `cannot install SYSLINUX on DEST_PARTITION ${partition} (it must hold a FAT filesystem): ${error.message}`,
    );
  }
  ctx.progress(`installed SYSLINUX on ${partition}`);
  const handle = await open(disk, 'r+');
  try {
    await handle.write(code, 0, code.length, 0);
    await handle.sync();
  } finally {
    await handle.close();
  }
  if (target.capacityBytes !== undefined) await rereadPartitions(disk, ctx);
  const line = `installed SYSLINUX on ${partition} and its MBR boot code on ${disk}`;
  ctx.progress(line);
  return { message: line };
}

async function mbrCode(): Promise<Buffer> {
  for (const file of mbrCodePaths) {
    const code = await readFile(file).catch(() => undefined);
    if (code === undefined) continue;
    if (code.length !== mbrCodeBytes) {
      throw new ActionError(`${file} is ${code.length} bytes, not the ${mbrCodeBytes} of MBR boot code`);
    }
    return code;
  }
  throw new ActionError(
    `SYSLINUX's MBR boot code is not installed on this machine (${mbrCodePaths.join(' or ')}: syslinux-common)`,
  );
}

async function checkPartition(partition: string): Promise<void> {
  const kind = await deviceKind(partition);
  if (kind === 'missing') throw new ActionError(`DEST_PARTITION ${partition} does not exist`);
  if (kind === 'other')
    throw new ActionError(`DEST_PARTITION ${partition} is neither a block device nor a file`);
}

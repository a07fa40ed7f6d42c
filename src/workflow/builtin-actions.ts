// The built-in actions a template may name, and the Tinkerbell hub images that mean them.
//
// A Tinkerbell template runs its hub actions as containers (quay.io/tinkerbell/actions/image2disk
// and friends). Slipway's agent runs no containers: it does the same work in its own code
// (src/worker/actions/), configured by the same environment variables. Mapping the hub images
// to the built-ins lets such a template run unchanged.
import { builtinActions, type BuiltinAction } from '../model/records.js';

export { builtinActions, type BuiltinAction };

/** The repositories under which Tinkerbell publishes its hub actions, one image per action. */
const hubRepositories: readonly string[] = ['quay.io/tinkerbell/actions/', 'quay.io/tinkerbell-actions/'];

/** Hub images with a built-in counterpart (the hub has no poweroff image). */
const hubImageBuiltins: ReadonlyMap<string, BuiltinAction> = new Map([
  ['image2disk', 'image2disk'],
  ['writefile', 'writefile'],
  ['cexec', 'cexec'],
  ['archive2disk', 'archive2disk'],
  ['kexec', 'kexec'],
  ['reboot', 'reboot'],
  ['qemuimg2disk', 'qemuimg2disk'],
]);

/**
 * Settings a built-in cannot run without. Checked when a template is rendered, so a workflow
 * that would fail on the machine for want of one is refused before it starts.
 */
export const builtinRequiredSettings: Readonly<Record<BuiltinAction, readonly string[]>> = {
  image2disk: ['IMG_URL', 'DEST_DISK'],
  writefile: ['DEST_DISK', 'FS_TYPE', 'DEST_PATH'],
  cexec: ['BLOCK_DEVICE', 'FS_TYPE', 'CMD_LINE'],
  archive2disk: ['ARCHIVE_URL', 'ARCHIVE_TYPE', 'DEST_DISK', 'FS_TYPE', 'DEST_PATH'],
  kexec: ['BLOCK_DEVICE', 'FS_TYPE'],
  reboot: [],
  poweroff: [],
  qemuimg2disk: ['IMG_URL', 'DEST_DISK'],
};

/** FS_TYPE values the built-ins mount: the kernel's names for the filesystems a system installs on. */
export const builtinFilesystems: readonly string[] = [
  'ext4',
  'ext3',
  'ext2',
  'xfs',
  'btrfs',
  'vfat',
  'msdos',
  'exfat',
  'f2fs',
  'ntfs3',
];

/** Settings whose value must be one of a few, with those values. */
const builtinChoiceSettings: Readonly<Record<BuiltinAction, Readonly<Record<string, readonly string[]>>>> = {
  image2disk: {},
  writefile: { FS_TYPE: builtinFilesystems },
  cexec: { FS_TYPE: builtinFilesystems, CHROOT: ['y'] },
  archive2disk: { FS_TYPE: builtinFilesystems, ARCHIVE_TYPE: ['tar', 'targz', 'tarzst'] },
  kexec: { FS_TYPE: builtinFilesystems },
  reboot: {},
  poweroff: {},
  // What lands on the disk is the image's bytes: a block device, or raw into a file.
  qemuimg2disk: { FORMAT: ['host_device', 'raw'] },
};

/**
 * What is wrong with a built-in's settings that the agent would refuse (an unknown FS_TYPE, a
 * CHROOT that is not y): one line per setting, naming it and the values allowed. Values holding
 * placeholders are left to be checked once rendered; an empty value counts as not given.
 */
export function builtinSettingProblems(
  builtin: BuiltinAction,
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  const problems: string[] = [];
  for (const [setting, allowed] of Object.entries(builtinChoiceSettings[builtin])) {
    const value = env[setting]?.trim();
    if (value === undefined || value === '' || value.includes('{{')) continue;
    if (allowed.includes(value)) continue;
    problems.push(`${setting}=${value} is not one of ${allowed.join(', ')}`);
  }
  return problems;
}

export function isBuiltinAction(name: string): name is BuiltinAction {
  return (builtinActions as readonly string[]).includes(name);
}

/**
 * The built-in a hub image stands for: `quay.io/tinkerbell/actions/image2disk:latest` and
 * `quay.io/tinkerbell-actions/image2disk@sha256:…` are image2disk. Any tag or digest; the name
 * must be the one path segment right under a hub repository.
 */
export function builtinForImage(image: string): BuiltinAction | undefined {
  const reference = image.trim().toLowerCase();
  const repository = hubRepositories.find((prefix) => reference.startsWith(prefix));
  if (repository === undefined) return undefined;
  const rest = reference.slice(repository.length);
  const name = /^([a-z0-9._-]+)(?::[\w.-]+)?(?:@[a-z0-9]+:[0-9a-f]+)?$/.exec(rest)?.[1];
  return name === undefined ? undefined : hubImageBuiltins.get(name);
}

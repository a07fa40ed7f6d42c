// The built-in actions a template may name, and the Tinkerbell hub images that mean them.
//
// A Tinkerbell template runs its hub actions as containers (quay.io/tinkerbell/actions/image2disk
// and friends). Slipway's agent runs no containers: it does the same work in its own code
// (src/worker/actions/), configured by the same environment variables. Mapping the hub images
// to the built-ins lets such a template run unchanged.
import { builtinActions, type BuiltinAction, type JsonValue } from '../model/records.js';
import { readStorage, readStorageJson, storageOfMetadata } from './rootio-storage.js';

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
  ['rootio', 'rootio'],
  ['syslinux', 'syslinux'],
  ['oci2disk', 'oci2disk'],
  ['grub2disk', 'grub2disk'],
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
  // ROOTIO_STORAGE is filled in from the machine's metadata when a workflow is created.
  rootio: [],
  syslinux: ['DEST_DISK', 'DEST_PARTITION', 'SYSLINUX_VERSION'],
  oci2disk: ['IMG_URL', 'DEST_DISK'],
  grub2disk: ['GRUB_INSTALL_PATH', 'GRUB_DISK', 'FS_TYPE'],
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

/** What rootio does with the layout: Tinkerbell's commands (its `version` prints nothing useful here). */
export const rootioCommands: readonly string[] = ['partition', 'format', 'mount', 'wipe'];

/** The setting rootio reads its layout from: JSON of Tinkerbell's `metadata.instance.storage`. */
export const rootioStorageSetting = 'ROOTIO_STORAGE';

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
  rootio: { ACTION: rootioCommands, MBR: ['true', 'false'] },
  // Tinkerbell's only version (3.86, or 386), or Debian's: Debian's is installed either way.
  syslinux: { SYSLINUX_VERSION: ['3.86', '386', '6.04'] },
  oci2disk: { COMPRESSED: ['true', 'false'], SKIP_VERIFY: ['true', 'false'] },
  grub2disk: { FS_TYPE: builtinFilesystems },
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
  const storage = builtin === 'rootio' ? env[rootioStorageSetting] : undefined;
  if (storage !== undefined && storage.trim() !== '' && !storage.includes('{{')) {
    const reading = readStorageJson(storage, rootioStorageSetting);
    if ('problems' in reading) problems.push(...reading.problems);
  }
  return problems;
}

/**
 * What is wrong with the command a built-in is given: rootio takes Tinkerbell's `command:
 * ["partition"]` (a hub image's form) or ACTION, one of rootioCommands; the others take none.
 */
export function builtinCommandProblems(
  builtin: BuiltinAction,
  command: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  if (builtin !== 'rootio' || command.some((word) => word.includes('{{'))) return [];
  const chosen = rootioCommand(command, env);
  return typeof chosen === 'string' ? [] : [chosen.problem];
}

/** rootio's command, from its argv (Tinkerbell's form) or ACTION; or why there is none. */
export function rootioCommand(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): string | { readonly problem: string } {
  // A string `command: partition` arrives as a shell command line.
  const words = argv[0] === '/bin/sh' && argv[1] === '-c' ? (argv[2] ?? '').trim().split(/\s+/) : argv;
  const action = env['ACTION']?.trim();
  const given = words.filter((word) => word !== '');
  const allowed = rootioCommands.join(', ');
  if (given.length > 1) return { problem: `command ${given.join(' ')} is more than one of ${allowed}` };
  const [word] = given;
  if (word === undefined) {
    if (action === undefined || action === '') {
      return { problem: `needs what to do: command ["partition"] or ACTION, one of ${allowed}` };
    }
    return action;
  }
  if (!rootioCommands.includes(word)) return { problem: `command ${word} is not one of ${allowed}` };
  if (action !== undefined && action !== '' && action !== word) {
    return { problem: `command ${word} and ACTION=${action} disagree; give one` };
  }
  return word;
}

/**
 * Settings a built-in gets from the machine when a workflow is created: rootio's layout, from
 * the machine's metadata.instance.storage (as Tinkerbell's rootio reads it from Hegel), unless the
 * template gives ROOTIO_STORAGE itself. Throws a message when the machine has no usable layout.
 */
export function builtinMachineSettings(
  builtin: BuiltinAction,
  env: Readonly<Record<string, string>>,
  machine: { readonly id: string; readonly metadata?: Readonly<Record<string, JsonValue>> },
): Readonly<Record<string, string>> {
  if (builtin !== 'rootio' || env[rootioStorageSetting] !== undefined) return {};
  if (machine.metadata === undefined) {
    throw new Error(
      `rootio runs on ${machine.id}, not on the workflow's hardware, whose metadata is the one known ` +
        `when the workflow is created; give ${rootioStorageSetting} in the action's environment`,
    );
  }
  const where = `hardware ${machine.id} metadata.instance.storage`;
  const storage = storageOfMetadata(machine.metadata);
  if (storage === undefined) {
    throw new Error(
      `rootio reads the disk layout from ${where} (Tinkerbell's disks and filesystems), ` +
        `which it does not have; add it to the hardware or give ${rootioStorageSetting}`,
    );
  }
  const reading = readStorage(storage, where);
  if ('problems' in reading) throw new Error(`rootio: ${reading.problems.join('; ')}`);
  return { [rootioStorageSetting]: JSON.stringify(storage) };
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

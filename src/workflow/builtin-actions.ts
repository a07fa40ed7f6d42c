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
  ['kexec', 'kexec'],
  ['reboot', 'reboot'],
]);

/**
 * Settings a built-in cannot run without. Checked when a template is rendered, so a workflow
 * that would fail on the machine for want of one is refused before it starts.
 */
export const builtinRequiredSettings: Readonly<Record<BuiltinAction, readonly string[]>> = {
  image2disk: ['IMG_URL', 'DEST_DISK'],
  writefile: ['DEST_DISK', 'FS_TYPE', 'DEST_PATH'],
  kexec: ['BLOCK_DEVICE', 'FS_TYPE'],
  reboot: [],
  poweroff: [],
};

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

// Workflow templates: Tinkerbell's template YAML, extended with `args` and `retries`.
//
//   version: "0.1"
//   name: ubuntu-install              1-128 of [A-Za-z0-9._-]
//   global_timeout: 1800              seconds, required
//   tasks:                            1-100 tasks, names unique
//     - name: os-install
//       worker: "{{.device_1}}"       a hardware id or MAC; left out: the workflow's hardware
//       environment: {K: v}           numbers and booleans become strings
//       volumes: [/dev:/dev]
//       actions:                      at least one per task, names unique in the task,
//         - name: wipe                1000 in all
//           image: quay.io/x/wipe     a container; without it `command` runs as a process
//           command: [wipefs, -a]     a list is argv; a string is a shell command line (/bin/sh -c)
//           args: [/dev/sda]          appended to command
//           timeout: 90               seconds; optional here (Tinkerbell requires it), default 600
//           retries: 2                extra attempts after a failure or timeout, 0-10, default 0
//           environment: {K: v}       wins over the task's
//           volumes: [/tmp:/tmp]      added to the task's
//           pid: host                 accepted and ignored (Tinkerbell's containers use it)
//         - name: stream-image
//           action: image2disk        a built-in the agent runs itself: image2disk, writefile,
//                                     cexec, archive2disk, reboot, poweroff, kexec or a later one
//                                     (builtin-actions.ts); no image, command or args
//           environment:              its settings, named as Tinkerbell's hub actions name them
//             IMG_URL: http://10.0.0.1:8080/ubuntu.raw.gz
//             DEST_DISK: /dev/sda
//
// Built-in actions (src/worker/actions/) and their settings; those marked * are required and
// checked when a workflow is created, in the action's or the task's environment:
//   image2disk  IMG_URL* (http/https), DEST_DISK* (a block device), COMPRESSED (true|false|gzip|
//               zstd; true detects gzip or zstd), IMG_SHA256 (hex SHA-256 of the image as served)
//   writefile   DEST_DISK* (a partition), FS_TYPE* (ext4, vfat, ...), DEST_PATH* (absolute),
//               CONTENTS, UID, GID (default 0), MODE (octal, default 0644), DIRMODE (default 0755)
//   cexec       BLOCK_DEVICE*, FS_TYPE*, CMD_LINE*, DEFAULT_INTERPRETER (e.g. "/bin/sh -c"), CHROOT
//               (y: chrooted into BLOCK_DEVICE's filesystem with /dev, /proc, /sys bound)
//   archive2disk  ARCHIVE_URL* (http/https), ARCHIVE_TYPE* (tar, targz, tarzst), DEST_DISK*,
//               FS_TYPE*, DEST_PATH* (absolute directory), TARFILE_CHECKSUM (sha256:HEX, sha512:HEX)
//   kexec       BLOCK_DEVICE*, FS_TYPE*, KERNEL_PATH, INITRD_PATH, CMD_LINE, GRUBCFG_PATH: loads the
//               kernel; without KERNEL_PATH, the default entry of /boot/grub/grub.cfg (or
//               GRUBCFG_PATH) on BLOCK_DEVICE names kernel, initrd and command line
//   qemuimg2disk  IMG_URL* (http/https, a server taking range requests), DEST_DISK*, FORMAT
//               (host_device, the default, or raw), EXTRA_ARGS (more `qemu-img convert` arguments)
//   rootio      command ["partition"|"format"|"mount"|"wipe"] (a hub image's) or ACTION, MBR
//               (true|false), MOUNT_ROOT (default /mnt/target), ROOTIO_STORAGE (JSON; filled in
//               from the hardware's metadata.instance.storage when absent, docs/decisions/0041)
//   syslinux    DEST_DISK* (its MBR boot code), DEST_PARTITION* (FAT: the loader), SYSLINUX_VERSION*
//               (3.86 or 386, Tinkerbell's, or 6.04: Debian's syslinux is installed either way)
//   oci2disk    IMG_URL* (REGISTRY/REPOSITORY:TAG or @sha256:…), DEST_DISK*, COMPRESSED (true|false:
//               by IMG_URL's suffix, .gz or .zs), REGISTRY_USERNAME, REGISTRY_PASSWORD, SKIP_VERIFY
//   grub2disk   GRUB_INSTALL_PATH* (the disk), GRUB_DISK* (the system's partition), FS_TYPE*: runs the
//               system's grub-install and grub-mkconfig chrooted into it
//   reboot, poweroff, kexec  take effect only once the cluster has recorded the action's success
// FS_TYPE, CHROOT, ARCHIVE_TYPE, FORMAT, ACTION, MBR, SYSLINUX_VERSION, oci2disk's COMPRESSED and
// SKIP_VERIFY, and rootio's command are checked against the values the agent takes
// (builtin-actions.ts), in the template as written and once rendered.
// A Tinkerbell hub image (quay.io/tinkerbell/actions/NAME or quay.io/tinkerbell-actions/NAME,
// any tag or digest) with a built-in counterpart (image2disk, writefile, cexec, archive2disk,
// kexec, reboot, qemuimg2disk, ...: builtin-actions.ts) means that built-in, so a Tinkerbell
// template runs unchanged; its `image` is kept in the spec for display.
//
// Placeholders (see template-placeholders.ts and template-variables.ts) go inside quoted
// values, as in Tinkerbell: `worker: "{{.device_1}}"`; a value that is one placeholder and
// nothing else may go unquoted (`DEST_DISK: {{ index .Hardware.Disks 0 }}`). The YAML is parsed first, as written, and
// each string value is then rendered on its own (template-render.ts), so a value is only ever
// data: whatever it holds, it stays the one string it replaces, and no value can add a field,
// a task or an action. What that means where a value lands:
//   - list `command`, `args`, `environment`, `worker` and every other field: the value as is,
//     one argument or one environment value;
//   - a string `command` (a shell command line): the value goes into the action's environment as
//     SLIPWAY_VALUE_n and the script gets a quoted reference to it (template-shell.ts), so the
//     shell expands it as data and never runs it as code. A list command that runs a shell
//     (`[sh, -c, "..."]`) is the author's own choice: its script gets the value as written, so
//     pass values to such scripts through `environment` instead;
//   - keys are never rendered; a placeholder in one is refused, as is a NUL in anything that
//     reaches a process (argv and environment are C strings).
// A block (`{{#if}}`, `{{#each}}`) opens and closes inside one value. Around several values or
// around YAML structure (list items), which rendering the text allowed, it is refused with a
// message saying so: one value can no longer become several. Comments are never rendered.
//
// Unknown fields are refused by name, so a typo such as `comand` never passes silently. Every
// refusal is a TemplateError naming the field path and the line.
import type { RenderedTemplate, TaskSpec, ActionSpec, Hardware } from '../model/records.js';
import { normalizeMac } from '../platform/addresses.js';
import { builtinMachineSettings } from './builtin-actions.js';
import { renderedSpecBytesMax, templateSourceBytesMax } from './template-limits.js';
import { goRefusalMessage, rewriteGoForms } from './template-go.js';
import { PlaceholderError } from './template-placeholders.js';
import { actionKey, checkPlaceholders, renderValues, type RenderedValues } from './template-render.js';
import { checkTemplateStructure, type CheckedTask } from './template-schema.js';
import { templateVariables, type PoolVariables } from './template-variables.js';
import {
  describeValue,
  LocatedError,
  YamlSource,
  type FieldPath,
  type FieldProblem,
  type LocatedProblem,
} from './template-yaml.js';

export class TemplateError extends LocatedError {
  constructor(problems: readonly LocatedProblem[]) {
    super(problems);
    this.name = 'TemplateError';
  }

  static of(message: string, line?: number): TemplateError {
    return new TemplateError([line === undefined ? { path: [], message } : { path: [], message, line }]);
  }
}

export interface RenderContext {
  readonly workflowId: string;
  readonly hardware: Hardware;
  /** Extra template variables, e.g. device_1 → a MAC. */
  readonly hardwareMap: Readonly<Record<string, string>>;
  /** Maps a rendered `worker` value (a hardware id or a MAC) to a hardware id. */
  readonly resolveWorker: (value: string) => string | undefined;
  /** A pool's workflow: `{{ pool.name }}`, `{{ pool.image.url }}` (docs/decisions/0036). */
  readonly pool?: PoolVariables;
}

/**
 * Checks a template as the operator wrote it, before any rendering: the YAML, the placeholders
 * in its values, and the structure (a placeholder stands in for any scalar). For `template create`.
 */
export function validateTemplateSource(source: string): { name: string } {
  return { name: checkedSource(source).name };
}

interface CheckedSource {
  readonly name: string;
  readonly yaml: YamlSource;
}

/**
 * Sources that passed the checks lately, parsed. Rendering checks the source first, and a burst
 * of workflows from one template would otherwise parse the same YAML once per workflow. Keyed by
 * the source text itself, which the template record already holds.
 */
const checkedSources = new Map<string, CheckedSource>();
const checkedSourcesMax = 16;

function checkedSourceOnce(source: string): CheckedSource {
  const known = checkedSources.get(source);
  if (known !== undefined) return known;
  const checked = checkedSource(source);
  if (checkedSources.size >= checkedSourcesMax) {
    const oldest = checkedSources.keys().next();
    if (oldest.done !== true) checkedSources.delete(oldest.value);
  }
  checkedSources.set(source, checked);
  return checked;
}

function checkedSource(source: string): CheckedSource {
  const sourceBytes = Buffer.byteLength(source);
  if (sourceBytes > templateSourceBytesMax) {
    throw TemplateError.of(
      `the template is ${sourceBytes} bytes; at most ${templateSourceBytesMax} are allowed`,
    );
  }
  const parsed = YamlSource.parse(source, { unquotedPlaceholders: true });
  if (!parsed.ok)
    throw new TemplateError([...goFormsRefused(source), withPlaceholderHint(parsed.problem, source)]);
  const yaml = parsed.source;
  const placeholderProblems = checkPlaceholders(yaml);
  if (placeholderProblems.length > 0) throw new TemplateError(placeholderProblems);
  const { template, problems } = checkTemplateStructure(yaml.value, 'unrendered');
  if (problems.length > 0) throw new TemplateError(yaml.locateAll(problems));
  return { name: template.name, yaml };
}

/**
 * The Go forms of a template whose YAML does not parse: Tinkerbell renders the text first, so an
 * `{{ if }}` or `{{ range }}` around YAML lines is the likely cause, and is refused anyway.
 */
function goFormsRefused(source: string): LocatedProblem[] {
  return rewriteGoForms(source)
    .refusals.slice(0, 3)
    .map((refusal) => ({ path: [], line: refusal.line, message: goRefusalMessage(refusal) }));
}

/**
 * A YAML syntax error on a line holding a placeholder: most likely an unquoted one, or a block
 * (`{{#each}}`) written around list items, which worked when templates were rendered as text.
 */
function withPlaceholderHint(problem: LocatedProblem, source: string): LocatedProblem {
  const line = problem.line === undefined ? undefined : source.split('\n')[problem.line - 1];
  if (line === undefined || !line.includes('{{')) return problem;
  return {
    ...problem,
    message:
      `${problem.message} (a placeholder goes inside a quoted value, and a {{#block}} must open ` +
      'and close inside one value)',
  };
}

/** Fills the placeholders for one workflow and resolves every field into a RenderedTemplate. */
export function renderTemplate(source: string, ctx: RenderContext): RenderedTemplate {
  const { yaml } = checkedSourceOnce(source);
  let rendered: RenderedValues;
  try {
    rendered = renderValues(yaml, templateVariables(ctx), Buffer.byteLength(source));
  } catch (error) {
    if (error instanceof PlaceholderError) throw TemplateError.of(error.message, error.line);
    if (error instanceof LocatedError) throw new TemplateError(error.problems);
    throw error;
  }
  const { template, problems } = checkTemplateStructure(rendered.value, 'rendered');
  if (problems.length > 0) throw new TemplateError(yaml.locateAll(problems));
  const unresolved: FieldProblem[] = [];
  const tasks = template.tasks.map((task, index) => {
    const worker = resolveTaskWorker(task, ctx);
    if (worker === undefined) {
      unresolved.push({
        path: ['tasks', index, 'worker'],
        message: `${describeValue(task.worker)} of task "${task.name}" is not a known hardware id or MAC address`,
      });
    }
    return taskSpec(task, worker ?? '', (action) => rendered.shellEnv.get(actionKey(index, action)));
  });
  if (unresolved.length > 0) throw new TemplateError(yaml.locateAll(unresolved));
  const machineProblems: FieldProblem[] = [];
  const spec = {
    version: template.version,
    name: template.name,
    globalTimeoutS: template.globalTimeoutS,
    tasks: tasks.map((task, index) =>
      withMachineSettings(task, ['tasks', index], ctx.hardware, machineProblems),
    ),
  };
  if (machineProblems.length > 0) throw new TemplateError(yaml.locateAll(machineProblems));
  const specBytes = Buffer.byteLength(JSON.stringify(spec));
  if (specBytes > renderedSpecBytesMax) {
    throw TemplateError.of(
      `the rendered workflow is ${specBytes} bytes as JSON (environments are copied into every action); ` +
        `at most ${renderedSpecBytesMax} are allowed`,
    );
  }
  return spec;
}

/**
 * Each built-in's settings taken from the machine it runs on (rootio's disk layout from the
 * metadata, builtin-actions.ts), when the template does not give them. Only the workflow's own
 * hardware is known here: a task on another machine must give them itself.
 */
function withMachineSettings(
  task: TaskSpec,
  path: FieldPath,
  hardware: Hardware,
  problems: FieldProblem[],
): TaskSpec {
  const actions = task.actions.map((action, index): ActionSpec => {
    if (action.builtin === undefined) return action;
    try {
      const machine = task.worker === hardware.id ? hardware : { id: task.worker };
      const settings = builtinMachineSettings(action.builtin, action.env, machine);
      return Object.keys(settings).length === 0 ? action : { ...action, env: { ...action.env, ...settings } };
    } catch (error) {
      problems.push({ path: [...path, 'actions', index], message: (error as Error).message });
      return action;
    }
  });
  return { ...task, actions };
}

function resolveTaskWorker(task: CheckedTask, ctx: RenderContext): string | undefined {
  if (task.worker === undefined) return ctx.hardware.id;
  // MACs are stored lower-case with colons; a hardware id never looks like one.
  return ctx.resolveWorker(normalizeMac(task.worker) ?? task.worker);
}

/** `shellEnv(i)`: what action i's shell command line refers to, set beside its environment. */
function taskSpec(
  task: CheckedTask,
  worker: string,
  shellEnv: (action: number) => Readonly<Record<string, string>> | undefined,
): TaskSpec {
  const actions = task.actions.map((action, index): ActionSpec => {
    const spec = {
      name: action.name,
      command: action.command,
      args: action.args,
      env: { ...task.env, ...action.env, ...shellEnv(index) },
      volumes: [...new Set([...task.volumes, ...action.volumes])],
      timeoutS: action.timeoutS,
      retries: action.retries,
    };
    const withImage = action.image === undefined ? spec : { ...spec, image: action.image };
    return action.builtin === undefined ? withImage : { ...withImage, builtin: action.builtin };
  });
  return { name: task.name, worker, env: task.env, volumes: task.volumes, actions };
}

// What a reboot, poweroff or kexec action finally does to the machine, behind one small
// interface: the agent calls it only after the cluster has acknowledged the action's result
// (see agent.ts), and tests put a recording fake in its place.
import { execFile } from 'node:child_process';
import { appendFile, readFile, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The machine-wide effects of the built-in actions reboot, poweroff and kexec. */
export type MachineEffect = 'reboot' | 'poweroff' | 'kexec';
export const machineEffects: readonly MachineEffect[] = ['reboot', 'poweroff', 'kexec'];

export interface MachineControl {
  /**
   * Names this boot of the machine: it changes whenever the machine goes down and up again
   * (a kexec too). The agent compares it to the one journaled with a pending effect to tell
   * "not done yet" from "done, and this is the machine after it".
   */
  bootId(): Promise<string>;
  /** Does it. For a real machine this does not return on success. */
  perform(effect: MachineEffect): Promise<void>;
}

const bootIdFile = '/proc/sys/kernel/random/boot_id';

async function kernelBootId(): Promise<string> {
  return (await readFile(bootIdFile, 'utf8')).trim();
}

/**
 * The real thing. Reboot and poweroff go through magic SysRq rather than `reboot(8)`: the boot
 * OS may have no init to ask, and the disks are already synced here, so an immediate restart
 * loses nothing. kexec boots the kernel the kexec action loaded (`kexec -l`).
 */
export class KernelMachineControl implements MachineControl {
  bootId(): Promise<string> {
    return kernelBootId();
  }

  async perform(effect: MachineEffect): Promise<void> {
    await run('sync', []);
    if (effect === 'kexec') {
      await run('kexec', ['-e']);
      throw new Error('kexec -e returned: no kernel is loaded (the kexec action loads one)');
    }
    await writeFile('/proc/sys/kernel/sysrq', '1\n');
    await writeFile('/proc/sysrq-trigger', effect === 'reboot' ? 'b' : 'o');
  }
}

/**
 * For tests only: appends the effect's name and a newline to `file` instead of acting, so an
 * integration test can run reboot actions on the machine that runs the test.
 */
export class RecordingMachineControl implements MachineControl {
  readonly #file: string;

  constructor(file: string) {
    this.#file = file;
  }

  bootId(): Promise<string> {
    return kernelBootId();
  }

  async perform(effect: MachineEffect): Promise<void> {
    await appendFile(this.#file, `${effect}\n`);
  }
}

/** The environment variable that selects the control of a `slipway worker` process. */
export const machineControlVariable = 'SLIPWAY_MACHINE_CONTROL';

/**
 * SLIPWAY_MACHINE_CONTROL: unset or `kernel` for the real thing; `record:FILE` (for tests only)
 * appends each effect to FILE and leaves the machine alone.
 */
export function machineControlFrom(value: string | undefined): MachineControl {
  if (value === undefined || value === '' || value === 'kernel') return new KernelMachineControl();
  if (value.startsWith('record:') && value.length > 'record:'.length) {
    return new RecordingMachineControl(value.slice('record:'.length));
  }
  throw new Error(
    `${machineControlVariable}=${value} is not understood; use "kernel" (the default) or, in tests, "record:FILE"`,
  );
}

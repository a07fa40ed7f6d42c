// Runs a built-in action (image2disk, writefile, cexec, archive2disk, reboot, poweroff, kexec,
// qemuimg2disk, rootio, syslinux, oci2disk, grub2disk)
// inside the agent, with the outcome a process would have: success, an exit status, a message and
// the output tail, under the same timeout and cancel (AbortSignal) as runner.ts gives a process.
//
// Each action is one module with one function: it reads its settings from the environment,
// reports progress lines, honours the signal, and either returns what it did or throws an
// ActionError that says what is wrong and how to fix it. Anything else it throws is a bug in
// the action and is reported as such rather than swallowed.
import type { BuiltinAction } from '../../model/records.js';
import type { MachineEffect } from '../machine-control.js';
import { OutputTail, outputTailBytesDefault, type ActionOutcome } from '../runner.js';
import { archive2disk } from './archive2disk.js';
import { cexec } from './cexec.js';
import { grub2disk } from './grub2disk.js';
import { image2disk } from './image2disk.js';
import { kexec } from './kexec.js';
import { oci2disk } from './oci2disk.js';
import { poweroff } from './poweroff.js';
import { qemuimg2disk } from './qemuimg2disk.js';
import { reboot } from './reboot.js';
import { rootio } from './rootio.js';
import { syslinux } from './syslinux.js';
import { writefile } from './writefile.js';
import { ActionError, type BuiltinContext, type BuiltinDone } from './action.js';

/** As a shell reports them: a failure, timeout(1)'s status, and an interrupted command. */
const exitStatusFailed = 1;
const exitStatusTimedOut = 124;
const exitStatusCancelled = 130;

export interface BuiltinOptions {
  readonly timeoutMs: number;
  /** Aborting it stops the action and reports it cancelled. */
  readonly signal?: AbortSignal;
  /** Called with each progress line as it comes. */
  readonly onProgress?: (line: string) => void;
  /** Bytes of output kept, from the end. Default 4096. */
  readonly outputTailBytes?: number;
  /** The action's command and args (rootio's `command: ["partition"]`). Default none. */
  readonly argv?: readonly string[];
}

export interface BuiltinOutcome extends ActionOutcome {
  readonly effect?: MachineEffect;
}

const actions: Readonly<Record<BuiltinAction, (ctx: BuiltinContext) => Promise<BuiltinDone>>> = {
  image2disk,
  writefile,
  cexec,
  archive2disk,
  reboot,
  poweroff,
  kexec,
  qemuimg2disk,
  rootio,
  syslinux,
  oci2disk,
  grub2disk,
};

export async function runBuiltin(
  name: BuiltinAction,
  env: Readonly<Record<string, string>>,
  opts: BuiltinOptions,
): Promise<BuiltinOutcome> {
  const tail = new OutputTail(opts.outputTailBytes ?? outputTailBytesDefault);
  const stop = new AbortController();
  let reason: 'timeout' | 'cancel' | undefined;
  const onCancel = (): void => {
    reason ??= 'cancel';
    stop.abort(new ActionError('cancelled'));
  };
  const timer = setTimeout(() => {
    reason ??= 'timeout';
    stop.abort(new ActionError(`timed out after ${formatDuration(opts.timeoutMs)}`));
  }, opts.timeoutMs);
  if (opts.signal?.aborted === true) onCancel();
  opts.signal?.addEventListener('abort', onCancel, { once: true });
  const progress = (line: string): void => {
    tail.append(`${line}\n`);
    opts.onProgress?.(line);
  };
  const failed = (exitStatus: number, message: string): BuiltinOutcome => ({
    success: false,
    exitStatus,
    message,
    outputTail: tail.text(),
    timedOut: false,
    cancelled: false,
  });
  try {
    stop.signal.throwIfAborted();
    const done = await actions[name]({ env, argv: opts.argv ?? [], signal: stop.signal, progress });
    // An action that finished as the abort came still did its work: report it done.
    const outcome = {
      success: true,
      exitStatus: 0,
      message: done.message,
      timedOut: false,
      cancelled: false,
    };
    return {
      ...outcome,
      outputTail: tail.text(),
      ...(done.effect === undefined ? {} : { effect: done.effect }),
    };
  } catch (error) {
    if (reason !== undefined) {
      const why = reason === 'timeout' ? `timed out after ${formatDuration(opts.timeoutMs)}` : 'cancelled';
      return {
        ...failed(reason === 'timeout' ? exitStatusTimedOut : exitStatusCancelled, `${name} ${why}`),
        timedOut: reason === 'timeout',
        cancelled: reason === 'cancel',
      };
    }
    // A system error (EIO, ENOSPC, ...) is the machine's trouble and its message says which;
    // anything else is the agent's own bug.
    if (error instanceof ActionError) return failed(error.exitStatus, `${name}: ${error.message}`);
    if (isSystemError(error)) return failed(exitStatusFailed, `${name}: ${error.message}`);
    const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
    return failed(exitStatusFailed, `${name} failed unexpectedly (a bug in the agent): ${detail}`);
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onCancel);
  }
}

function formatDuration(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

function isSystemError(error: unknown): error is NodeJS.ErrnoException {
  return error instanceof Error && typeof (error as NodeJS.ErrnoException).code === 'string';
}

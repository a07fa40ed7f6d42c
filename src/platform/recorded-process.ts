// Processes started earlier and recorded by PID (a local cluster's cluster.json): looked at and
// stopped only while /proc shows they are still the process that was recorded, because a PID
// is reused once its process has exited.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

const pollMs = 50;
/** How long a SIGKILLed process may take to disappear before stopping gives up on it. */
const killWaitMs = 5000;

/** A process's arguments, or undefined when it is gone or a zombie (which has none). */
export function commandLine(pid: number): string[] | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (raw === '') return undefined;
    // Each argument ends in NUL; a process that rewrote its arguments may have left that off.
    const argv = raw.split('\0');
    if (argv.at(-1) === '') argv.pop();
    return argv;
  } catch {
    return undefined;
  }
}

/** Whether `pid` is alive and its command line is the recorded process's. */
export function isRunningAs(pid: number, recorded: (argv: readonly string[]) => boolean): boolean {
  const argv = commandLine(pid);
  return argv !== undefined && recorded(argv);
}

/**
 * SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone (or, should a
 * SIGKILLed process linger, after a further 5 s). Resolves to whether it was running.
 */
export async function stopRecordedProcess(
  pid: number,
  recorded: (argv: readonly string[]) => boolean,
  graceMs: number,
): Promise<boolean> {
  if (!isRunningAs(pid, recorded)) return false;
  signal(pid, 'SIGTERM');
  if (await goneWithin(pid, recorded, graceMs)) return true;
  signal(pid, 'SIGKILL');
  await goneWithin(pid, recorded, killWaitMs);
  return true;
}

async function goneWithin(
  pid: number,
  recorded: (argv: readonly string[]) => boolean,
  ms: number,
): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (isRunningAs(pid, recorded)) {
    if (Date.now() > deadline) return false;
    await sleep(pollMs);
  }
  return true;
}

/** process.kill, where a process that exited since it was seen is not an error. */
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

// Runs one action as a process on the machine being provisioned.
//
// The process starts in its own process group (detached), so everything it forks can be
// signalled at once: on timeout or cancel the whole group gets SIGTERM, then SIGKILL after a
// grace period. When the process exits by itself, whatever it left running in its group is
// killed too: an action ends when its process does, and nothing it started may outlive it to
// interfere with the next action. (A descendant that moves to a new session with setsid escapes
// any process-group kill; only a cgroup could catch it.)
//
// stdout and stderr are merged, in arrival order, into a tail bounded by bytes. The tail is cut
// on a character boundary so it is always valid UTF-8.
import { spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { constants } from 'node:os';
import { StringDecoder } from 'node:string_decoder';
import type { Readable } from 'node:stream';

export interface ActionProcessSpec {
  /** argv[0..]: the program (looked up on PATH) and its first arguments. */
  readonly command: readonly string[];
  /** Appended to `command`. */
  readonly args: readonly string[];
  /** Added to a minimal base environment (PATH, HOME); these win. */
  readonly env: Readonly<Record<string, string>>;
  readonly cwd?: string;
  readonly timeoutMs: number;
}

export interface RunOptions {
  /** Aborting it stops the action as a timeout does, and reports it cancelled. */
  readonly signal?: AbortSignal;
  /** Bytes of output kept, from the end. Default 4096. */
  readonly outputTailBytes?: number;
  /** Between SIGTERM and SIGKILL. Default 2000. */
  readonly killGraceMs?: number;
}

export interface ActionOutcome {
  readonly success: boolean;
  /** 0..255 like a shell's `$?`: the exit status, or 128 + the signal number. */
  readonly exitStatus: number;
  readonly message: string;
  readonly outputTail: string;
  readonly timedOut: boolean;
  readonly cancelled: boolean;
}

export const outputTailBytesDefault = 4096;
export const killGraceMsDefault = 2000;
/** After the process exits, how long a stray holding its output pipe open may delay the result. */
const pipeDrainMs = 1000;
/** What a shell reports when a program cannot be found, or found but not run. */
const exitStatusNotFound = 127;
const exitStatusNotExecutable = 126;
/** Cancelled before it started: what a shell reports for an interrupted command. */
const exitStatusCancelledEarly = 130;
const fallbackPath = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

type StopReason = 'timeout' | 'cancel';

export async function runAction(spec: ActionProcessSpec, opts: RunOptions = {}): Promise<ActionOutcome> {
  if (!Number.isFinite(spec.timeoutMs) || spec.timeoutMs <= 0) {
    throw new RangeError(`runAction: timeoutMs must be a positive number, got ${spec.timeoutMs}`);
  }
  const tail = new OutputTail(opts.outputTailBytes ?? outputTailBytesDefault);
  const [program, ...leading] = spec.command;
  if (program === undefined || program === '') {
    return failure(exitStatusNotFound, 'the action has no command to run', tail);
  }
  if (opts.signal?.aborted === true)
    return stopped('cancel', exitStatusCancelledEarly, 'before it started', spec, tail);
  if (spec.cwd !== undefined && !(await isDirectory(spec.cwd))) {
    return failure(exitStatusNotExecutable, `working directory not found: ${spec.cwd}`, tail);
  }
  return new Promise((resolve) => {
    new ActionProcess(program, [...leading, ...spec.args], spec, opts, tail, resolve).start();
  });
}

/** One running process and its group, from spawn to the outcome. */
class ActionProcess {
  readonly #program: string;
  readonly #argv: readonly string[];
  readonly #spec: ActionProcessSpec;
  readonly #opts: RunOptions;
  readonly #tail: OutputTail;
  readonly #resolve: (outcome: ActionOutcome) => void;
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #cleanups: (() => void)[] = [];
  #groupId: number | undefined;
  #stopReason: StopReason | undefined;
  #settled = false;

  constructor(
    program: string,
    argv: readonly string[],
    spec: ActionProcessSpec,
    opts: RunOptions,
    tail: OutputTail,
    resolve: (outcome: ActionOutcome) => void,
  ) {
    this.#program = program;
    this.#argv = argv;
    this.#spec = spec;
    this.#opts = opts;
    this.#tail = tail;
    this.#resolve = resolve;
  }

  start(): void {
    const child = spawn(this.#program, this.#argv, {
      detached: true,
      env: { PATH: process.env['PATH'] ?? fallbackPath, HOME: process.env['HOME'] ?? '/', ...this.#spec.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(this.#spec.cwd === undefined ? {} : { cwd: this.#spec.cwd }),
    });
    this.#groupId = child.pid;
    child.on('error', (error: NodeJS.ErrnoException) => {
      // Only a failed spawn has no pid; a later error (a failed kill) changes nothing here.
      if (child.pid === undefined) this.#finish(spawnFailure(error, this.#program, this.#tail));
    });
    this.#collect(child.stdout);
    this.#collect(child.stderr);
    child.on('exit', () => {
      // Strays in the group die now; if one escaped and holds the pipes, stop waiting for them.
      this.#signalGroup('SIGKILL');
      this.#after(pipeDrainMs, () => {
        child.stdout.destroy();
        child.stderr.destroy();
      });
    });
    child.on('close', (code: number | null, signal: NodeJS.Signals | null) => {
      this.#finish(this.#outcome(code, signal));
    });
    if (child.pid === undefined) return;
    this.#after(this.#spec.timeoutMs, () => this.#stop('timeout'));
    const abortSignal = this.#opts.signal;
    if (abortSignal !== undefined) {
      const onAbort = (): void => this.#stop('cancel');
      abortSignal.addEventListener('abort', onAbort, { once: true });
      this.#cleanups.push(() => abortSignal.removeEventListener('abort', onAbort));
    }
  }

  #collect(stream: Readable): void {
    // One decoder per stream: a character split across chunks is joined before it is merged.
    const decoder = new StringDecoder('utf8');
    stream.on('data', (chunk: Buffer) => this.#tail.append(decoder.write(chunk)));
    stream.on('end', () => this.#tail.append(decoder.end()));
    stream.on('error', () => undefined); // destroyed after exit: the tail so far stands
  }

  #stop(reason: StopReason): void {
    if (this.#stopReason !== undefined || this.#settled) return;
    this.#stopReason = reason;
    this.#signalGroup('SIGTERM');
    this.#after(this.#opts.killGraceMs ?? killGraceMsDefault, () => this.#signalGroup('SIGKILL'));
  }

  #signalGroup(signal: NodeJS.Signals): void {
    if (this.#groupId === undefined) return;
    try {
      process.kill(-this.#groupId, signal);
    } catch (error) {
      // ESRCH: the group is already empty, which is what we wanted.
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }

  #outcome(code: number | null, signal: NodeJS.Signals | null): ActionOutcome {
    const exitStatus =
      signal === null ? (code ?? exitStatusNotFound) : 128 + (constants.signals[signal] ?? 0);
    const ended = signal === null ? `exited with status ${exitStatus}` : `killed by signal ${signal}`;
    if (this.#stopReason !== undefined)
      return stopped(this.#stopReason, exitStatus, ended, this.#spec, this.#tail);
    if (exitStatus === 0) return { ...blank(this.#tail), success: true, exitStatus, message: ended };
    return failure(exitStatus, ended, this.#tail);
  }

  #finish(outcome: ActionOutcome): void {
    if (this.#settled) return;
    this.#settled = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    for (const cleanup of this.#cleanups) cleanup();
    this.#resolve(outcome);
  }

  #after(ms: number, run: () => void): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      run();
    }, ms);
    this.#timers.add(timer);
  }
}

/**
 * The last `bytesMax` bytes of output. Holds whole chunks and trims from the front, so memory
 * stays near twice the bound whatever the process prints.
 */
export class OutputTail {
  readonly #bytesMax: number;
  #chunks: Buffer[] = [];
  #bytes = 0;

  constructor(bytesMax: number) {
    if (!Number.isSafeInteger(bytesMax) || bytesMax < 0) {
      throw new RangeError(`outputTailBytes must be a non-negative integer, got ${bytesMax}`);
    }
    this.#bytesMax = bytesMax;
  }

  append(text: string): void {
    if (text === '' || this.#bytesMax === 0) return;
    const chunk = Buffer.from(text, 'utf8');
    this.#chunks.push(chunk.length > this.#bytesMax ? chunk.subarray(chunk.length - this.#bytesMax) : chunk);
    this.#bytes += Math.min(chunk.length, this.#bytesMax);
    while (this.#chunks.length > 1 && this.#bytes - (this.#chunks[0]?.length ?? 0) >= this.#bytesMax) {
      this.#bytes -= this.#chunks.shift()?.length ?? 0;
    }
  }

  /** Valid UTF-8 of at most bytesMax bytes: a character cut at the front is dropped whole. */
  text(): string {
    const joined = Buffer.concat(this.#chunks);
    let start = Math.max(0, joined.length - this.#bytesMax);
    // Continuation bytes look like 10xxxxxx; skip them to the next character's first byte.
    while (start < joined.length && ((joined[start] ?? 0) & 0xc0) === 0x80) start += 1;
    return joined.subarray(start).toString('utf8');
  }
}

async function isDirectory(dir: string): Promise<boolean> {
  try {
    return (await stat(dir)).isDirectory();
  } catch {
    return false;
  }
}

function blank(tail: OutputTail): Pick<ActionOutcome, 'outputTail' | 'timedOut' | 'cancelled'> {
  return { outputTail: tail.text(), timedOut: false, cancelled: false };
}

function failure(exitStatus: number, message: string, tail: OutputTail): ActionOutcome {
  return { ...blank(tail), success: false, exitStatus, message };
}

function stopped(
  reason: StopReason,
  exitStatus: number,
  ended: string,
  spec: ActionProcessSpec,
  tail: OutputTail,
): ActionOutcome {
  const after = ended === '' ? '' : ` (${ended})`;
  if (reason === 'cancel') {
    return { ...failure(exitStatus, `cancelled${after}`, tail), cancelled: true };
  }
  return {
    ...failure(exitStatus, `timed out after ${formatDuration(spec.timeoutMs)}${after}`, tail),
    timedOut: true,
  };
}

function spawnFailure(error: NodeJS.ErrnoException, program: string, tail: OutputTail): ActionOutcome {
  switch (error.code) {
    case 'ENOENT':
      return failure(exitStatusNotFound, `command not found: ${program}`, tail);
    case 'EACCES':
      return failure(exitStatusNotExecutable, `permission denied: ${program}`, tail);
    default:
      return failure(exitStatusNotExecutable, `cannot run ${program}: ${error.message}`, tail);
  }
}

function formatDuration(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

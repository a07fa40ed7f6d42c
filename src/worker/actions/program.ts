// Runs a helper program (mount, umount, kexec) for a built-in action: argv only, never a shell,
// abortable, with its error output in the failure so the operator sees what the program said;
// or a program whose output and exit status are the action's own (runStreamed).
import { execFile, spawn } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { ActionError } from './action.js';

const outputBytesMax = 64 * 1024;

/** `input`, when given, is written to the program's standard input (sfdisk's script). */
export function runProgram(argv: readonly string[], signal: AbortSignal, input?: string): Promise<string> {
  const [program, ...args] = argv;
  if (program === undefined) throw new Error('runProgram: empty argv');
  return new Promise((resolve, reject) => {
    const child = execFile(
      program,
      args,
      { signal, maxBuffer: outputBytesMax, encoding: 'utf8' },
      (error, stdout, stderr) => {
        if (error === null) {
          resolve(stdout);
          return;
        }
        if (signal.aborted) {
          reject(signal.reason instanceof Error ? signal.reason : error);
          return;
        }
        // A spawn failure has a string code (ENOENT); an exit, the status as a number.
        const code: unknown = (error as { code?: unknown }).code;
        if (code === 'ENOENT') {
          reject(new ActionError(`${program} is not installed on this machine (not found on PATH)`));
          return;
        }
        const said = stderr.trim() === '' ? stdout.trim() : stderr.trim();
        const status = typeof code === 'number' ? `status ${code}` : error.message;
        reject(new ActionError(`${argv.join(' ')} failed (${status})${said === '' ? '' : `: ${said}`}`));
      },
    );
    // A program that exits without reading its input must not fail the write (EPIPE).
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input);
  });
}

export interface StreamedRun {
  readonly env: Readonly<Record<string, string>>;
  readonly cwd?: string;
  readonly signal: AbortSignal;
  /** Each line the program writes, stdout and stderr interleaved as they come. */
  readonly onLine: (line: string) => void;
  /** A carriage return ends a line too: a progress meter (qemu-img -p) redraws its line with one. */
  readonly carriageReturnEndsLine?: boolean;
}

/**
 * Runs a program whose output is the action's own (cexec's command): every line goes to
 * `onLine`, however much there is, and the exit status is returned rather than thrown. A
 * program killed by a signal returns 128 + its number, as a shell reports it. It runs in a
 * process group of its own, killed whole on abort and once the program exits, as a container's
 * processes end with it: nothing it started keeps the filesystem busy or its output open.
 */
export function runStreamed(argv: readonly string[], opts: StreamedRun): Promise<number> {
  const [program, ...args] = argv;
  if (program === undefined) throw new Error('runStreamed: empty argv');
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      env: opts.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
    });
    const killGroup = (): void => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // The group is gone already.
      }
    };
    opts.signal.addEventListener('abort', killGroup, { once: true });
    let status = 0;
    child.on('exit', (code, signal) => {
      status = code ?? 128 + (signal === null ? 0 : osConstants.signals[signal]);
      killGroup();
    });
    const pending = { stdout: '', stderr: '' };
    const lineEnd = opts.carriageReturnEndsLine === true ? /\r\n|\r|\n/ : '\n';
    const take = (stream: 'stdout' | 'stderr', chunk: string): void => {
      const lines = (pending[stream] + chunk).split(lineEnd);
      pending[stream] = lines.pop() ?? '';
      for (const line of lines) opts.onLine(line);
    };
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => take('stdout', chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => take('stderr', chunk));
    child.on('error', (error: NodeJS.ErrnoException) => {
      opts.signal.removeEventListener('abort', killGroup);
      if (opts.signal.aborted) reject(opts.signal.reason instanceof Error ? opts.signal.reason : error);
      else if (error.code === 'ENOENT')
        reject(new ActionError(`${program} is not installed on this machine (not found on PATH)`));
      else reject(error);
    });
    child.on('close', () => {
      opts.signal.removeEventListener('abort', killGroup);
      for (const rest of [pending.stdout, pending.stderr]) if (rest !== '') opts.onLine(rest);
      if (opts.signal.aborted) {
        reject(opts.signal.reason instanceof Error ? opts.signal.reason : new ActionError('aborted'));
        return;
      }
      resolve(status);
    });
  });
}

// Runs a helper program (mount, umount, kexec) for a built-in action: argv only, never a shell,
// abortable, with its error output in the failure so the operator sees what the program said.
import { execFile } from 'node:child_process';
import { ActionError } from './action.js';

const outputBytesMax = 64 * 1024;

export function runProgram(argv: readonly string[], signal: AbortSignal): Promise<string> {
  const [program, ...args] = argv;
  if (program === undefined) throw new Error('runProgram: empty argv');
  return new Promise((resolve, reject) => {
    execFile(
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
  });
}

// Runs a system tool (zstd, strip, mkfs, sfdisk) to completion: argv only, never a shell;
// optionally fed `input`; resolves with its stdout, rejects naming the tool with its stderr.
import { spawn } from 'node:child_process';
import path from 'node:path';

export interface ToolOptions {
  /** Written to the tool's stdin, in order, with backpressure; then stdin is closed. */
  readonly input?: string | readonly Uint8Array[];
  readonly env?: NodeJS.ProcessEnv;
}

export function runTool(
  program: string,
  args: readonly string[],
  options: ToolOptions = {},
): Promise<string> {
  const { input, env } = options;
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      ...(env === undefined ? {} : { env }),
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(stdout);
      else
        reject(new Error(`${path.basename(program)} ${args.join(' ')} failed (${code}): ${stderr.trim()}`));
    });
    const stdin = child.stdin;
    if (input === undefined || stdin === null) return;
    stdin.on('error', reject);
    if (typeof input === 'string') {
      stdin.end(input);
      return;
    }
    void (async () => {
      for (const part of input) {
        if (!stdin.write(part)) await new Promise<void>((r) => stdin.once('drain', () => r()));
      }
      stdin.end();
    })();
  });
}

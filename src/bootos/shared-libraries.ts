// The shared libraries a dynamically linked program needs, as the build machine's dynamic
// linker resolves them (ldd). The boot OS copies them to the same paths, so the programs run
// there exactly as they run on the build machine.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * The absolute paths in ldd's output: `name => /path (addr)` and the loader's own `/path (addr)`.
 * The vDSO has no file; a library ldd cannot find is an error, since the program would not start.
 */
export function parseLdd(output: string, program: string): string[] {
  const paths: string[] = [];
  for (const raw of output.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('linux-vdso') || line.startsWith('linux-gate')) continue;
    if (line.includes('not found'))
      throw new Error(`${program} needs ${line.split(' ')[0]}, which is not installed`);
    if (line === 'statically linked' || line === 'not a dynamic executable') continue;
    const arrow = /=>\s*(\/\S+)/.exec(line);
    const loader = /^(\/\S+)\s*\(/.exec(line);
    const path = arrow?.[1] ?? loader?.[1];
    if (path !== undefined) paths.push(path);
  }
  return [...new Set(paths)].sort();
}

export async function sharedLibraries(program: string): Promise<string[]> {
  try {
    const { stdout } = await run('ldd', [program], { encoding: 'utf8' });
    return parseLdd(stdout, program);
  } catch (err) {
    // ldd exits 1 for a static binary ("not a dynamic executable"): nothing to copy.
    const out = (err as { stdout?: unknown }).stdout;
    if (typeof out === 'string' && out.includes('not a dynamic executable')) return [];
    const stderr = (err as { stderr?: unknown }).stderr;
    if (typeof stderr === 'string' && stderr.includes('not a dynamic executable')) return [];
    throw new Error(`cannot list the shared libraries of ${program} with ldd: ${(err as Error).message}`);
  }
}

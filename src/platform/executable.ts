// Finding a system tool (haproxy, ip, arping): on PATH first, then where Debian installs it, for
// callers whose PATH lacks /usr/sbin (a service manager's or a non-root shell's).
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/** The first executable `name` on `path`, else the first of `fallbacks` that is executable. */
export function findExecutable(
  name: string,
  fallbacks: readonly string[],
  path = process.env['PATH'] ?? '',
): string | undefined {
  const onPath = path
    .split(delimiter)
    .filter((dir) => dir !== '')
    .map((dir) => join(dir, name));
  return [...onPath, ...fallbacks].find(isExecutable);
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

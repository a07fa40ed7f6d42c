// The package's own files (package.json, bin/, proto/) found from the running module: src/platform
// sits two folders below them, a build's dist/src/platform three, so the nearest folder holding
// package.json is the package root in both.
import { existsSync } from 'node:fs';

/** The URL of `relative` under the package root. */
export function packageFile(relative: string): URL {
  for (let dir = new URL('./', import.meta.url); ; dir = new URL('../', dir)) {
    if (existsSync(new URL('package.json', dir))) return new URL(relative, dir);
    if (dir.pathname === '/') throw new Error(`no package.json above ${import.meta.url}`);
  }
}

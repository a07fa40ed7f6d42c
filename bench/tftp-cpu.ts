// CPU time of whole process trees, for `npm run bench -- tftp`. /proc/PID/stat cannot give it for
// tftpd-hpa: it forks one child per transfer and ignores SIGCHLD, so the kernel reaps the
// children and drops their CPU time instead of adding it to the parent's cutime. A cgroup v2
// group counts every task that ever ran in it (cpu.stat usage_usec, present whether or not the
// cpu controller is enabled), and children inherit their parent's group.
//
// cpu.pressure in the same group says how long its processes were runnable but waiting for a CPU:
// on a shared 2-core machine that is what separates "the server is slow" from "the server did not
// get a CPU".
//
// The groups live under "<cgroup2 mount>/<prefix>-<id>/", hold only processes the benchmark
// started, and are removed at the end. Where cgroup v2 is not mounted or not writable (a
// container with a read-only /sys/fs/cgroup), create() returns null and the benchmark falls back
// to /proc, which leaves tftpd-hpa's figure empty.
import { readFileSync } from 'node:fs';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { sleep } from './stats.js';

/** Removing a group waits this long for its last processes to be gone. */
const removeTimeoutMs = 3000;

export class CpuGroups {
  readonly base: string;
  readonly #leaves = new Set<string>();

  private constructor(base: string) {
    this.base = base;
  }

  /** A parent group named `name` under the cgroup v2 mount, or null when that is not possible. */
  static async create(name: string): Promise<CpuGroups | null> {
    try {
      const mounts = await readFile('/proc/mounts', 'utf8');
      const mount = mounts
        .split('\n')
        .map((line) => line.split(' '))
        .find((fields) => fields[2] === 'cgroup2')?.[1];
      if (mount === undefined) return null;
      const base = path.join(mount, name);
      await mkdir(base);
      return new CpuGroups(base);
    } catch {
      return null;
    }
  }

  /** Moves `pid` (and so every child it forks from now on) into leaf group `leaf`. */
  async add(leaf: string, pid: number): Promise<boolean> {
    try {
      const dir = path.join(this.base, leaf);
      await mkdir(dir, { recursive: true });
      this.#leaves.add(leaf);
      await writeFile(path.join(dir, 'cgroup.procs'), String(pid));
      return true;
    } catch {
      return false;
    }
  }

  /** CPU seconds (user + system) used in `leaf` so far, by every process that ran there. */
  usageSeconds(leaf: string): number | null {
    try {
      const stat = readFileSync(path.join(this.base, leaf, 'cpu.stat'), 'utf8');
      const m = /^usage_usec (\d+)$/m.exec(stat);
      return m === null ? null : Number(m[1]) / 1e6;
    } catch {
      return null;
    }
  }

  /**
   * Seconds during which some process of `leaf` was runnable but waiting for a CPU (cpu.pressure
   * "some total", the kernel's pressure stall information), or null without PSI.
   */
  pressureSeconds(leaf: string): number | null {
    try {
      const pressure = readFileSync(path.join(this.base, leaf, 'cpu.pressure'), 'utf8');
      const m = /^some .*total=(\d+)$/m.exec(pressure);
      return m === null ? null : Number(m[1]) / 1e6;
    } catch {
      return null;
    }
  }

  /** Removes the groups once their processes have exited (call after stopping them). */
  async remove(): Promise<void> {
    const deadline = Date.now() + removeTimeoutMs;
    for (const dir of [...[...this.#leaves].map((leaf) => path.join(this.base, leaf)), this.base]) {
      for (;;) {
        try {
          await rmdir(dir);
          break;
        } catch (error) {
          const code = (error as { code?: unknown }).code;
          if (code === 'ENOENT') break;
          if (Date.now() > deadline) throw new Error(`could not remove cgroup ${dir}: ${String(error)}`);
          await sleep(100);
        }
      }
    }
  }
}

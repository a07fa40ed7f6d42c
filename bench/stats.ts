// Small measurement helpers shared by the orchestrator and the load generator.
import { readFileSync } from 'node:fs';

/** Nearest-rank percentile of an ascending array (as in shared/anchors etcd-put-bench.js). */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** a / b rounded, or null when either side is missing. */
export function ratio(a: number | null | undefined, b: number | null | undefined): number | null {
  if (
    a === null ||
    a === undefined ||
    b === null ||
    b === undefined ||
    !Number.isFinite(a) ||
    !Number.isFinite(b)
  ) {
    return null;
  }
  if (b === 0) return null;
  return round(a / b, 2);
}

function statusField(pid: number, name: string): number | null {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text);
    return m === null ? null : Number(m[1]);
  } catch {
    return null;
  }
}

/** Resident set size in MB (VmRSS), or null when the process is gone. */
export function rssMb(pid: number): number | null {
  const kb = statusField(pid, 'VmRSS');
  return kb === null ? null : round(kb / 1024, 1);
}

/** Peak resident set size in MB (VmHWM). */
export function hwmMb(pid: number): number | null {
  const kb = statusField(pid, 'VmHWM');
  return kb === null ? null : round(kb / 1024, 1);
}

/** CPU seconds (user + system) a process has used so far, from /proc/PID/stat. */
export function cpuSeconds(pid: number): number | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // After "(comm) ": state is field 3, utime field 14, stime field 15 -> rest[11], rest[12].
    const ticks = Number(rest[11]) + Number(rest[12]);
    return ticks / 100; // CLK_TCK is 100 on Linux x86-64
  } catch {
    return null;
  }
}

/** Busy CPU seconds of the whole machine so far (all cores, from /proc/stat). */
export function machineCpu(): { busy: number } {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal ...: idle and iowait are not busy.
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: (total - (f[3] ?? 0) - (f[4] ?? 0)) / 100 };
  } catch {
    return { busy: 0 };
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

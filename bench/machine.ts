// The facts every benchmark's `machine` line starts with: what ran the figures, how busy the
// machine was at the start, and which commit of slipway (marked when src/ has changes).
import { execFileSync } from 'node:child_process';
import { cpus, freemem, loadavg, release, totalmem, type } from 'node:os';
import { repoRoot } from './clusters.js';
import { round } from './stats.js';

export interface MachineFacts {
  readonly bench: 'machine';
  readonly nproc: number;
  readonly cpu_model: string;
  readonly mem_total_gb: number;
  readonly mem_free_gb: number;
  readonly kernel: string;
  readonly node: string;
  readonly loadavg: number[];
  readonly slipway_commit: string;
}

export function machineFacts(): MachineFacts {
  return {
    bench: 'machine',
    nproc: cpus().length,
    cpu_model: cpus()[0]?.model ?? 'unknown',
    mem_total_gb: round(totalmem() / 2 ** 30, 1),
    mem_free_gb: round(freemem() / 2 ** 30, 1),
    kernel: `${type()} ${release()}`,
    node: process.version,
    loadavg: loadavg().map((x) => round(x, 2)),
    slipway_commit: gitDescribe(),
  };
}

/** The short commit, with "(src/ modified)" when src/ has uncommitted changes; "unknown" outside git. */
export function gitDescribe(): string {
  try {
    const git = (args: string[]): string =>
      execFileSync('git', args, { cwd: repoRoot, encoding: 'utf8' }).trim();
    const head = git(['rev-parse', '--short', 'HEAD']);
    return git(['status', '--porcelain', '--', 'src']) === '' ? head : `${head} (src/ modified)`;
  } catch {
    return 'unknown';
  }
}

// `node --import tsx bench/profile-top.ts [--top N] [--by function|file|area] FILE.cpuprofile...`
// Where a V8 CPU profile's time went (node --cpu-prof, as SLIPWAY_BENCH_PROFILE_DIR writes them):
// the functions (or files, or areas: grpc-js, Node's HTTP/2, LevelDB, slipway's raft, ...) with
// the most self time, as a share of the busy samples (idle is left out; V8's own work outside
// JavaScript is "(program)", the collector "(garbage collector)"). Prints a Markdown table per
// file.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { areaOf, shortUrl, type CpuProfile } from './cpu-profile.js';

const special = new Set(['(idle)', '(program)', '(garbage collector)', '(root)']);

export interface TopRow {
  readonly name: string;
  readonly ms: number;
  /** Share of the busy time (everything but idle), 0..1. */
  readonly share: number;
}

/** Self time per function or file, busiest first, with the idle, program and GC totals. */
export function topSelf(
  profile: CpuProfile,
  by: 'function' | 'file' | 'area',
): { rows: TopRow[]; busyMs: number; idleMs: number; gcMs: number; programMs: number } {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const byKey = new Map<string, number>();
  let idle = 0;
  let gc = 0;
  let program = 0;
  for (const [id, us] of selfUs) {
    const f = nodes.get(id)?.callFrame;
    if (f === undefined) continue;
    if (f.functionName === '(idle)') idle += us;
    else if (f.functionName === '(garbage collector)') gc += us;
    else if (f.functionName === '(program)') program += us;
    if (f.functionName === '(idle)' || f.functionName === '(root)') continue;
    if (by !== 'area' && special.has(f.functionName)) continue;
    const key =
      by === 'area'
        ? areaOf(f.url, f.functionName)
        : by === 'file'
          ? shortUrl(f.url)
          : `${f.functionName === '' ? '(anonymous)' : f.functionName} ${shortUrl(f.url)}:${String(f.lineNumber + 1)}`;
    byKey.set(key, (byKey.get(key) ?? 0) + us);
  }
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const busy = total - idle;
  const rows = [...byKey.entries()]
    .map(([name, us]) => ({ name, ms: us / 1000, share: busy > 0 ? us / busy : 0 }))
    .sort((a, b) => b.ms - a.ms);
  return { rows, busyMs: busy / 1000, idleMs: idle / 1000, gcMs: gc / 1000, programMs: program / 1000 };
}

function main(): void {
  const { values, positionals } = parseArgs({
    options: {
      top: { type: 'string', default: '20' },
      by: { type: 'string', default: 'function' },
    },
    allowPositionals: true,
    strict: true,
  });
  const by = values.by;
  if (by !== 'function' && by !== 'file' && by !== 'area')
    throw new Error('--by must be function, file or area');
  if (positionals.length === 0)
    throw new Error(
      'usage: node --import tsx bench/profile-top.ts [--top N] [--by function|file|area] FILE...',
    );
  const top = Number(values.top);
  for (const file of positionals) {
    const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    const t = topSelf(p, by);
    const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;
    process.stdout.write(
      `\n${file}: busy ${t.busyMs.toFixed(0)} ms (GC ${pct(t.gcMs / t.busyMs)}, program ${pct(t.programMs / t.busyMs)}), idle ${t.idleMs.toFixed(0)} ms\n\n`,
    );
    process.stdout.write(`| self ms | share of busy | ${by} |\n|---:|---:|---|\n`);
    for (const r of t.rows.slice(0, top))
      process.stdout.write(`| ${r.ms.toFixed(0)} | ${pct(r.share)} | \`${r.name}\` |\n`);
  }
}

main();

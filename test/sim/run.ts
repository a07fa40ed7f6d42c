// The simulation's command line:
// `npm run sim -- --seeds N [--start S] [--seed X] [--verbose] [--slow-faults]`.
// Runs seeds start .. start+N-1 (or the one seed X) of the driver simulation (driver-sim.ts) and
// prints a JSON summary. A failing seed is printed with the command that replays it exactly;
// --verbose traces every fault and operator action of a run; --slow-faults gives every seed the
// slow-fault scenario, whatever the seed would choose.
import { parseArgs } from 'node:util';
import { runDriverSim, type DriverSimResult } from './driver-sim.js';

export interface RunSummary {
  readonly seeds: number;
  readonly start: number;
  readonly passed: number;
  readonly failed: number;
  readonly failures: readonly { seed: number; kind: string; message: string; reproduce: string }[];
  readonly wallMs: number;
  readonly totals: Record<string, number>;
}

export function reproduceCommand(seed: number, slowFaults = false): string {
  return `npm run sim -- --seed ${seed} --verbose${slowFaults ? ' --slow-faults' : ''}`;
}

/**
 * Runs seeds in [start, start + count) and sums their statistics; `slowFaults` gives every seed
 * the slow-fault scenario.
 */
export async function runSeeds(start: number, count: number, slowFaults = false): Promise<RunSummary> {
  const began = performance.now();
  const failures: RunSummary['failures'][number][] = [];
  const totals: Record<string, number> = {};
  const add = (prefix: string, stats: Readonly<Record<string, number>>): void => {
    for (const [k, v] of Object.entries(stats)) totals[prefix + k] = (totals[prefix + k] ?? 0) + v;
  };
  for (let seed = start; seed < start + count; seed++) {
    const r: DriverSimResult = await runDriverSim(seed, slowFaults ? { slowFaults } : {});
    add('', { ...r.stats });
    add('control.', { ...r.control });
    add('power.', { ...r.power });
    add('agents.', { ...r.agents });
    if (!r.ok) {
      failures.push({
        seed,
        kind: r.kind ?? 'driver',
        message: r.failure ?? '',
        reproduce: reproduceCommand(seed, slowFaults),
      });
    }
  }
  return {
    seeds: count,
    start,
    passed: count - failures.length,
    failed: failures.length,
    failures,
    wallMs: Math.round(performance.now() - began),
    totals,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seeds: { type: 'string' },
      start: { type: 'string' },
      seed: { type: 'string' },
      verbose: { type: 'boolean', default: false },
      'slow-faults': { type: 'boolean', default: false },
    },
  });
  const int = (name: string, v: string | undefined, dflt: number): number => {
    if (v === undefined) return dflt;
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 0)
      throw new RangeError(`--${name} must be a non-negative integer, got ${v}`);
    return n;
  };

  const slowFaults = values['slow-faults'];
  if (values.seed !== undefined) {
    const seed = int('seed', values.seed, 0);
    const lines: string[] = [];
    const r = await runDriverSim(seed, {
      ...(values.verbose ? { trace: (l: string) => lines.push(l) } : {}),
      ...(slowFaults ? { slowFaults } : {}),
    });
    if (values.verbose) process.stdout.write(`${lines.join('\n')}\n`);
    process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
    if (!r.ok) {
      process.stderr.write(
        `\nseed ${seed} FAILED: ${r.kind ?? ''}\nreproduce: ${reproduceCommand(seed, slowFaults)}\n`,
      );
      process.exitCode = 1;
    }
    return;
  }

  const count = int('seeds', values.seeds, 100);
  const start = int('start', values.start, 1);
  const summary = await runSeeds(start, count, slowFaults);
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  if (summary.failed > 0) {
    for (const f of summary.failures)
      process.stderr.write(`seed ${f.seed} FAILED (${f.kind}); reproduce: ${f.reproduce}\n`);
    process.exitCode = 1;
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  await main().catch((err: unknown) => {
    process.stderr.write(`sim: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 2;
  });
}

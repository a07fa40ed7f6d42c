// Preloaded (`node --import`) into the slipway servers that the benchmark starts: slipway does
// not expose its event-loop delay yet, so this measures it from inside the process without
// changing src/. On SIGUSR2 it writes the histogram since the previous SIGUSR2 (or start) to
// $SLIPWAY_BENCH_ELD_DIR/PID-SEQ.json and resets it. Cost: one 10 ms timer.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

export interface EldSample {
  /** Delay beyond the 10 ms sampling interval, in ms. */
  readonly p50_ms: number;
  readonly p99_ms: number;
  readonly max_ms: number;
  readonly samples: number;
  /** Event-loop utilization (share of wall time the loop was busy). */
  readonly elu: number;
}

export const eldResolutionMs = 10;

const dir = process.env['SLIPWAY_BENCH_ELD_DIR'];
if (dir !== undefined && dir !== '') {
  const h = monitorEventLoopDelay({ resolution: eldResolutionMs });
  h.enable();
  let seq = 0;
  let elu = performance.eventLoopUtilization();
  // Node's histogram records the whole interval between timer runs; subtract the interval.
  const ms = (ns: number): number => Math.max(0, Math.round((ns / 1e6 - eldResolutionMs) * 100) / 100);
  process.on('SIGUSR2', () => {
    seq += 1;
    const now = performance.eventLoopUtilization();
    const sample: EldSample = {
      p50_ms: ms(h.percentile(50)),
      p99_ms: ms(h.percentile(99)),
      max_ms: ms(h.max),
      samples: h.count,
      elu: Math.round(performance.eventLoopUtilization(now, elu).utilization * 1000) / 1000,
    };
    elu = now;
    writeFileSync(join(dir, `${process.pid}-${seq}.json`), JSON.stringify(sample));
    h.reset();
  });
}

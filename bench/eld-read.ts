// Reads the event-loop delay of a process running bench/eld-probe.ts (preloaded into the slipway
// servers the benchmarks start): SIGUSR2 makes the probe write its histogram since the previous
// read to DIR/PID-SEQ.json and start a new one.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EldSample } from './eld-probe.js';
import { sleep } from './stats.js';

/** How long the probe has to answer. */
const eldWaitMs = 3000;
const eldSeq = new Map<number, number>();

/** The histogram since the previous read (or the start); null when the process does not answer. */
export async function eldSnapshot(eld: {
  readonly pid: number;
  readonly dir: string;
}): Promise<EldSample | null> {
  const seq = (eldSeq.get(eld.pid) ?? 0) + 1;
  eldSeq.set(eld.pid, seq);
  try {
    process.kill(eld.pid, 'SIGUSR2');
  } catch {
    return null;
  }
  const file = join(eld.dir, `${eld.pid}-${seq}.json`);
  const deadline = Date.now() + eldWaitMs;
  while (Date.now() < deadline) {
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as EldSample;
    } catch {
      await sleep(20); // not there yet, or partly written
    }
  }
  return null;
}

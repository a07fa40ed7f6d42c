// The load generator: a separate process from the servers (like shared/anchors
// etcd-put-bench.js), started by bench/raft.ts as `node --import tsx bench/loadgen.ts SPEC`.
// It opens channelsPerEndpoint gRPC channels to every endpoint, warms up, prints "ready",
// waits for "go" on stdin, then runs `concurrency` workers that share the channels round-robin
// (one channel per request, so all endpoints get an equal share) until `total` requests are
// done or the time limit passes. Prints one JSON result line.
import { createInterface } from 'node:readline';
import { z } from 'zod';
import { percentile, round } from './stats.js';
import { encodeGet, encodePut, errorCode, openChannel, paths, unary, waitReady } from './wire.js';

export const loadSpecSchema = z.object({
  system: z.enum(['slipway', 'etcd']),
  op: z.enum(['put', 'get']),
  endpoints: z.array(z.string()).min(1),
  concurrency: z.number().int().min(1).max(1024),
  total: z.number().int().min(1).max(10_000_000),
  valueBytes: z.number().int().min(0).max(1_048_576),
  channelsPerEndpoint: z.number().int().min(1).max(16),
  timeLimitMs: z.number().int().min(1000).max(7_200_000),
  keyPrefix: z.string(),
  /** 0: key i for request i (distinct keys); otherwise key i % keySpace. */
  keySpace: z.number().int().min(0),
  warmup: z.number().int().min(0).max(100_000),
  opDeadlineMs: z.number().int().min(10),
});
export type LoadSpec = z.infer<typeof loadSpecSchema>;

export interface LoadResult {
  readonly ok: number;
  readonly errors: number;
  readonly error_codes: Record<string, number>;
  readonly secs: number;
  readonly ops_s: number;
  readonly p50_ms: number;
  readonly p90_ms: number;
  readonly p99_ms: number;
  readonly max_ms: number;
  readonly truncated_by_time_limit: boolean;
  readonly loadgen_cpu_s: number;
}

async function main(): Promise<void> {
  const spec = loadSpecSchema.parse(JSON.parse(process.argv[2] ?? '{}'));
  const channels = spec.endpoints.flatMap((e) =>
    Array.from({ length: spec.channelsPerEndpoint }, () => openChannel(e)),
  );
  await Promise.all(channels.map((c) => waitReady(c, 10_000)));
  const path = paths[spec.system][spec.op];
  const value = Buffer.alloc(spec.valueBytes, 'v');
  let rr = 0;
  const request = (key: string): Promise<Buffer> => {
    const c = channels[rr++ % channels.length]!;
    return unary(c, path, spec.op === 'put' ? encodePut(key, value) : encodeGet(key), spec.opDeadlineMs);
  };

  // Warm-up (not measured): connections, JIT on both sides. Reads warm up on the read keys.
  let w = 0;
  const warmEnd = Date.now() + 30_000;
  await Promise.all(
    Array.from({ length: Math.min(spec.concurrency, 16) }, async () => {
      while (w < spec.warmup && Date.now() < warmEnd) {
        const i = w++;
        const key =
          spec.op === 'put'
            ? `${spec.keyPrefix}warm/${i}`
            : `${spec.keyPrefix}${i % Math.max(1, spec.keySpace)}`;
        await request(key).catch(() => undefined);
      }
    }),
  );

  process.stdout.write('ready\n');
  const rl = createInterface({ input: process.stdin });
  await new Promise<void>((resolve) => {
    rl.on('line', (line) => {
      if (line.trim() === 'go') resolve();
    });
    rl.on('close', () => resolve());
  });
  rl.close();

  const lat = new Float64Array(spec.total);
  const codes: Record<string, number> = {};
  let next = 0;
  let done = 0;
  let errors = 0;
  let truncated = false;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const deadline = t0 + spec.timeLimitMs;
  const worker = async (): Promise<void> => {
    for (;;) {
      if (performance.now() > deadline) {
        truncated = next < spec.total;
        return;
      }
      const i = next++;
      if (i >= spec.total) return;
      const key = `${spec.keyPrefix}${spec.keySpace > 0 ? i % spec.keySpace : i}`;
      const s = performance.now();
      try {
        await request(key);
        lat[done++] = performance.now() - s;
      } catch (err) {
        errors++;
        const code = errorCode(err);
        codes[code] = (codes[code] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, () => worker()));
  const secs = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const sorted = lat.subarray(0, done).sort();
  const result: LoadResult = {
    ok: done,
    errors,
    error_codes: codes,
    secs: round(secs, 2),
    ops_s: Math.round(done / secs),
    p50_ms: round(percentile(sorted, 0.5)),
    p90_ms: round(percentile(sorted, 0.9)),
    p99_ms: round(percentile(sorted, 0.99)),
    max_ms: round(sorted[sorted.length - 1] ?? Number.NaN),
    truncated_by_time_limit: truncated,
    loadgen_cpu_s: round((cpu.user + cpu.system) / 1e6, 2),
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  for (const c of channels) c.close();
}

main().catch((err: unknown) => {
  process.stderr.write(`loadgen: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});

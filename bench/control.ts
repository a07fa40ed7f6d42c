// `npm run bench -- control [--workers N] [--actions A] [--keep]`
// The control plane under many connected workers: a 3-node slipway cluster (real processes),
// N simulated agents on real gRPC worker streams (one stream each, as the agent opens), one
// workflow of A actions per worker. Each agent answers an action at once with a success, so the
// figures measure the cluster, not the actions. Prints one JSON object per line:
//  - dispatch latency: from a result's acknowledgment (it is committed and applied) to the next
//    action arriving at that worker (p50, p99), and from sending the result (p50, p99);
//  - workflows completed per second;
//  - server memory per 1,000 connected workers (RSS with the streams open minus before).
// There is no reference system for this one: Tinkerbell's workers poll every 3 to 5 s.
import { parseArgs } from 'node:util';
import { credentials, Metadata } from '@grpc/grpc-js';
import type { ClientDuplexStream } from '@grpc/grpc-js';
import { ControlClient } from '../src/gen/control.js';
import type { ConnectRequest, ConnectResponse } from '../src/gen/worker.js';
import { WorkerClient } from '../src/gen/worker.js';
import { SlipwayCluster } from './clusters.js';
import { percentile, round, rssMb, sleep } from './stats.js';

interface Options {
  readonly workers: number;
  readonly actions: number;
  readonly keep: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      workers: { type: 'string', default: '1000' },
      actions: { type: 'string', default: '5' },
      keep: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const int = (v: string, name: string, min: number, max: number): number => {
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max)
      throw new Error(`--${name} must be ${min}..${max}`);
    return Number(v);
  };
  return {
    workers: int(values.workers, 'workers', 1, 5000),
    actions: int(values.actions, 'actions', 1, 50),
    keep: values.keep,
  };
}

function call<Req, Res>(
  fn: (req: Req, md: Metadata, opts: { deadline: number }, cb: (e: Error | null, r: Res) => void) => unknown,
  req: Req,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    fn(req, new Metadata(), { deadline: Date.now() + 30_000 }, (e, r) =>
      e === null ? resolve(r) : reject(e),
    );
  });
}

/** Runs `f` over `items` with at most `width` in flight. */
async function pool<T>(items: readonly T[], width: number, f: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const x = items[next++];
        if (x !== undefined) await f(x);
      }
    }),
  );
}

function out(o: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(o)}\n`);
}

export async function runControlBench(argv: readonly string[]): Promise<void> {
  const opts = parseOptions(argv);
  const cluster = await SlipwayCluster.create();
  const streams: ClientDuplexStream<ConnectRequest, ConnectResponse>[] = [];
  const clients: WorkerClient[] = [];
  try {
    await cluster.start();
    await cluster.waitHealthy(30_000);
    const endpoints = cluster.endpoints;
    const control = new ControlClient(endpoints[0] ?? '', credentials.createInsecure());
    const actions = Array.from(
      { length: opts.actions },
      (_, i) => `      - name: a${String(i + 1)}\n        command: ["true"]\n        timeout: 60`,
    ).join('\n');
    const template = `version: "0.1"\nname: bench\nglobal_timeout: 3600\ntasks:\n  - name: t\n    actions:\n${actions}\n`;
    await call(control.templateCreate.bind(control), { source: template, replace: true });
    const ids = Array.from({ length: opts.workers }, (_, i) => i);
    process.stderr.write(`control: registering ${String(opts.workers)} machines\n`);
    await pool(ids, 32, async (i) => {
      const mac = `02:${[(i >> 16) & 255, (i >> 8) & 255, i & 255, 0, 1].map((b) => b.toString(16).padStart(2, '0')).join(':')}`;
      const doc = {
        id: `bench-${String(i)}`,
        interfaces: [
          { mac, ip: `10.${String(100 + (i >> 16))}.${String((i >> 8) & 255)}.${String(i & 255)}/8` },
        ],
      };
      await call(control.hardwareCreate.bind(control), { documentJson: JSON.stringify(doc), replace: true });
    });
    const rssBefore = cluster.livePids().map((p) => rssMb(p) ?? 0);

    // Connect every worker first (idle: no workflows yet) to measure memory per stream.
    const sinceAck: number[] = [];
    const sinceSend: number[] = [];
    let completed = 0;
    let lastDone = 0;
    const pending = new Map<string, { sentAt: number; ackAt: number | null }>();
    process.stderr.write(`control: connecting ${String(opts.workers)} worker streams\n`);
    for (let i = 0; i < opts.workers; i++) {
      const addr = endpoints[i % endpoints.length] ?? '';
      const client = new WorkerClient(addr, credentials.createInsecure());
      clients.push(client);
      const md = new Metadata();
      md.set('x-worker-id', `bench-${String(i)}`);
      const s = client.connect(md);
      const key = `bench-${String(i)}`;
      s.on('data', (msg: ConnectResponse) => {
        const k = msg.kind;
        if (k === undefined) return;
        if (k.$case === 'ack') {
          const p = pending.get(key);
          if (p !== undefined) p.ackAt = performance.now();
          return;
        }
        if (k.$case !== 'action') return;
        const now = performance.now();
        const p = pending.get(key);
        if (p !== undefined) {
          sinceSend.push(now - p.sentAt);
          if (p.ackAt !== null) sinceAck.push(now - p.ackAt);
        }
        const attempt = k.value.attempt;
        pending.set(key, { sentAt: performance.now(), ackAt: null });
        s.write({
          kind: {
            $case: 'result',
            value: { attempt, success: true, exitStatus: 0, message: '', outputTail: '' },
          },
        });
        if (attempt !== undefined && attempt.actionIndex === opts.actions - 1) {
          completed++;
          lastDone = performance.now();
          pending.delete(key);
        }
      });
      s.on('error', () => undefined);
      s.write({ kind: { $case: 'hello', value: { pendingResults: [], agentVersion: 'bench' } } });
      streams.push(s);
    }
    await sleep(3000);
    const rssConnected = cluster.livePids().map((p) => rssMb(p) ?? 0);
    const perThousand = rssConnected.map((r, i) => ((r - (rssBefore[i] ?? 0)) * 1000) / opts.workers);

    process.stderr.write(
      `control: starting ${String(opts.workers)} workflows of ${String(opts.actions)} actions\n`,
    );
    const t0 = performance.now();
    await pool(ids, 32, async (i) => {
      await call(control.workflowCreate.bind(control), {
        template: 'bench',
        hardwareId: `bench-${String(i)}`,
        hardwareMap: {},
      });
    });
    const created = performance.now();
    const deadline = Date.now() + 600_000;
    while (completed < opts.workers && Date.now() < deadline) await sleep(100);
    control.close();
    if (completed < opts.workers)
      throw new Error(
        `only ${String(completed)} of ${String(opts.workers)} workflows completed in 10 minutes`,
      );
    const wall = (lastDone - t0) / 1000;
    sinceAck.sort((a, b) => a - b);
    sinceSend.sort((a, b) => a - b);
    out({
      bench: 'control',
      metric: 'dispatch_latency_ms',
      workers: opts.workers,
      samples: sinceAck.length,
      from_ack_p50: round(percentile(sinceAck, 0.5)),
      from_ack_p99: round(percentile(sinceAck, 0.99)),
      from_result_sent_p50: round(percentile(sinceSend, 0.5)),
      from_result_sent_p99: round(percentile(sinceSend, 0.99)),
      target_p99_ms: 50,
    });
    out({
      bench: 'control',
      metric: 'workflows_per_second',
      workers: opts.workers,
      actions_per_workflow: opts.actions,
      workflows: opts.workers,
      seconds: round(wall),
      create_seconds: round((created - t0) / 1000),
      value: round(opts.workers / wall),
    });
    out({
      bench: 'control',
      metric: 'server_rss_mb_per_1000_workers',
      workers: opts.workers,
      per_node: perThousand.map((x) => round(x)),
      rss_before_mb: rssBefore.map((x) => round(x)),
      rss_connected_mb: rssConnected.map((x) => round(x)),
    });
  } finally {
    for (const s of streams) s.cancel();
    for (const c of clients) c.close();
    await cluster.stop(opts.keep);
    if (opts.keep) process.stderr.write(`control: kept ${cluster.dir}\n`);
  }
}

// `npm run bench -- flood [--calls N] [--warmup W] [--flood-s S] [--kinds LIST]
//  [--addresses-per-kind A] [--concurrency C] [--streams-per-connection K] [--flood-nice P] [--keep]`
// A node under a flood of bad calls keeps serving the good ones (docs/decisions/0011-security.md,
// Limits): one `slipway server` (the compiled build) with tokens required and default limits; an
// operator's normal calls from 127.0.0.1 through the generated clients (src/gen), one at a time,
// in turn Kv Put, Kv Get, Control HardwareGet and Control WorkflowList, N of them first alone and
// then while a flood of bad calls runs from other addresses of 127.0.0.0/8 (bench/flood-load.ts:
// unknown tokens, malformed request bytes, oversized messages, more streams per connection than
// the cap). Prints one JSON line: p50/p99/max of the normal calls with and without the flood and
// the ratio of the p99s, the flood's calls per second by kind and how the node answered them
// (status counts), and the node's CPU and event-loop delay in each phase.
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { credentials, Metadata, status as Status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { ControlClient } from '../src/gen/control.js';
import { KvClient } from '../src/gen/kv.js';
import { SlipwayCluster } from './clusters.js';
import { FloodProcess, floodKinds, type FloodKind, type FloodResult } from './flood-load.js';
import { cpuSeconds, machineCpu, percentile, ratio, round } from './stats.js';
import { wholeNumber } from './options.js';

interface Options {
  readonly calls: number;
  readonly warmup: number;
  readonly floodS: number;
  readonly kinds: readonly FloodKind[];
  readonly addressesPerKind: number;
  readonly concurrency: number;
  readonly streamsPerConnection: number;
  readonly floodNice: number;
  readonly keep: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      quick: { type: 'boolean', default: false },
      calls: { type: 'string' },
      warmup: { type: 'string' },
      'flood-s': { type: 'string' },
      kinds: { type: 'string', default: floodKinds.join(',') },
      'addresses-per-kind': { type: 'string', default: '2' },
      concurrency: { type: 'string', default: '32' },
      'streams-per-connection': { type: 'string', default: '1000' },
      'flood-nice': { type: 'string', default: '10' },
      keep: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const kinds = values.kinds.split(',').filter((k) => k !== '');
  for (const k of kinds) {
    if (!(floodKinds as readonly string[]).includes(k))
      throw new Error(`--kinds: unknown kind ${k} (${floodKinds.join(', ')})`);
  }
  if (kinds.length === 0) throw new Error(`--kinds needs at least one of ${floodKinds.join(', ')}`);
  const addressesPerKind = wholeNumber(values['addresses-per-kind'], 'addresses-per-kind', 1, 60);
  if (kinds.length * addressesPerKind > 250)
    throw new Error('--addresses-per-kind: the kinds need more than 127.0.0.2-127.0.0.251');
  // --quick: a few hundred calls and a short flood, enough to see every kind refused.
  const dflt = values.quick
    ? { calls: '200', warmup: '50', floodS: '4' }
    : { calls: '2000', warmup: '400', floodS: '20' };
  return {
    calls: wholeNumber(values.calls ?? dflt.calls, 'calls', 10, 100_000),
    warmup: wholeNumber(values.warmup ?? dflt.warmup, 'warmup', 0, 100_000),
    floodS: wholeNumber(values['flood-s'] ?? dflt.floodS, 'flood-s', 2, 60),
    kinds: kinds as FloodKind[],
    addressesPerKind,
    concurrency: wholeNumber(values.concurrency, 'concurrency', 1, 100),
    streamsPerConnection: wholeNumber(values['streams-per-connection'], 'streams-per-connection', 1, 100_000),
    floodNice: wholeNumber(values['flood-nice'], 'flood-nice', 0, 19),
    keep: values.keep,
  };
}

/** The node's limits the flood runs into: the defaults (src/node/config.ts). */
const messageBytesMax = 4 * 1024 * 1024;
const callKinds = ['kv_put', 'kv_get', 'hardware_get', 'workflow_list'] as const;
type CallKind = (typeof callKinds)[number];
const callTimeoutMs = 5000;

/** An operator's normal calls, through the generated clients, one at a time. */
class NormalCaller {
  readonly #kv: KvClient;
  readonly #control: ControlClient;
  readonly #token: string;
  #i = 0;

  constructor(addr: string, token: string) {
    this.#kv = new KvClient(addr, credentials.createInsecure());
    this.#control = new ControlClient(addr, credentials.createInsecure());
    this.#token = token;
  }

  #md(): Metadata {
    const md = new Metadata();
    md.set('authorization', `Bearer ${this.#token}`);
    return md;
  }

  #opts(): { deadline: number } {
    return { deadline: Date.now() + callTimeoutMs };
  }

  /** The next call in turn: its kind, its latency in ms, and its error code if it failed. */
  async next(): Promise<{ kind: CallKind; ms: number; code: number | undefined }> {
    const kind = callKinds[this.#i++ % callKinds.length] ?? 'kv_get';
    const t0 = performance.now();
    const code = await new Promise<number | undefined>((resolve) => {
      const done = (err: ServiceError | null): void => resolve(err === null ? undefined : err.code);
      switch (kind) {
        case 'kv_put':
          this.#kv.put({ key: 'flood/normal', value: randomBytes(256) }, this.#md(), this.#opts(), (err) =>
            done(err),
          );
          return;
        case 'kv_get':
          this.#kv.get({ key: 'flood/normal', local: false }, this.#md(), this.#opts(), (err) => done(err));
          return;
        case 'hardware_get':
          this.#control.hardwareGet({ id: 'flood-hw', local: false }, this.#md(), this.#opts(), (err) =>
            done(err),
          );
          return;
        case 'workflow_list':
          this.#control.workflowList({ local: false, hardwareId: '' }, this.#md(), this.#opts(), (err) =>
            done(err),
          );
          return;
      }
    });
    return { kind, ms: performance.now() - t0, code };
  }

  /** Unary setup calls that must succeed. */
  async setup(): Promise<void> {
    const unary = <Req, Res>(
      fn: (
        req: Req,
        md: Metadata,
        o: { deadline: number },
        cb: (e: ServiceError | null, r: Res) => void,
      ) => unknown,
      req: Req,
    ): Promise<Res> =>
      new Promise((resolve, reject) => {
        fn(req, this.#md(), { deadline: Date.now() + 20_000 }, (e, r) =>
          e === null ? resolve(r) : reject(e),
        );
      });
    const c = this.#control;
    await unary(c.templateCreate.bind(c), {
      source:
        'version: "0.1"\nname: flood\nglobal_timeout: 3600\ntasks:\n  - name: t\n    actions:\n' +
        '      - name: a\n        command: ["true"]\n        timeout: 60\n',
      replace: true,
    });
    const hw = { id: 'flood-hw', interfaces: [{ mac: '02:00:00:00:fd:01', ip: '10.99.0.11/24' }] };
    await unary(c.hardwareCreate.bind(c), { documentJson: JSON.stringify(hw), replace: true });
    await unary(c.workflowCreate.bind(c), {
      template: 'flood',
      hardwareId: 'flood-hw',
      hardwareMap: {},
      netboot: false,
    });
    await unary(this.#kv.put.bind(this.#kv), { key: 'flood/normal', value: Buffer.from('x') });
  }

  close(): void {
    this.#kv.close();
    this.#control.close();
  }
}

interface Phase {
  readonly samples: { kind: CallKind; ms: number }[];
  readonly failed: Record<string, number>;
  readonly seconds: number;
  readonly nodeCpuS: number;
  readonly machineBusyS: number;
}

/** N normal calls one after another, or fewer if `until` passes first. */
async function measure(caller: NormalCaller, pid: number, n: number, until = Infinity): Promise<Phase> {
  const samples: { kind: CallKind; ms: number }[] = [];
  const failed: Record<string, number> = {};
  const cpu0 = cpuSeconds(pid) ?? 0;
  const machine0 = machineCpu().busy;
  const t0 = Date.now();
  for (let i = 0; i < n && Date.now() < until; i++) {
    const r = await caller.next();
    if (r.code === undefined) samples.push({ kind: r.kind, ms: r.ms });
    else {
      const name = Status[r.code] ?? String(r.code);
      failed[name] = (failed[name] ?? 0) + 1;
    }
  }
  return {
    samples,
    failed,
    seconds: (Date.now() - t0) / 1000,
    nodeCpuS: (cpuSeconds(pid) ?? 0) - cpu0,
    machineBusyS: machineCpu().busy - machine0,
  };
}

function latency(ms: readonly number[]): { n: number; p50_ms: number; p99_ms: number; max_ms: number } {
  const xs = [...ms].sort((a, b) => a - b);
  return {
    n: xs.length,
    p50_ms: round(percentile(xs, 0.5)),
    p99_ms: round(percentile(xs, 0.99)),
    max_ms: round(xs.at(-1) ?? Number.NaN),
  };
}

function phaseFigures(
  p: Phase,
  eld: { p99_ms: number; max_ms: number } | undefined,
): Record<string, unknown> {
  const byCall: Record<string, unknown> = {};
  for (const k of callKinds) {
    const l = latency(p.samples.filter((s) => s.kind === k).map((s) => s.ms));
    byCall[k] = { p50_ms: l.p50_ms, p99_ms: l.p99_ms };
  }
  return {
    ...latency(p.samples.map((s) => s.ms)),
    failed: p.failed,
    by_call: byCall,
    seconds: round(p.seconds, 1),
    node_cpu_cores: round(p.nodeCpuS / p.seconds),
    node_event_loop_delay_p99_ms: eld?.p99_ms ?? null,
    node_event_loop_delay_max_ms: eld?.max_ms ?? null,
    machine_cores_busy: round(p.machineBusyS / p.seconds),
  };
}

function progress(msg: string): void {
  process.stderr.write(`flood: ${msg}\n`);
}

export async function runFloodBench(argv: readonly string[]): Promise<void> {
  const o = parseOptions(argv);
  // Other work on the machine shows in every figure: its load is on the line, before and after.
  const loadBefore = round(loadavg()[0] ?? 0);
  const token = randomBytes(24).toString('base64url');
  const cluster = await SlipwayCluster.create([], { size: 1, adminToken: token });
  let flood: FloodProcess | undefined;
  let caller: NormalCaller | undefined;
  const onSignal = (): void => {
    progress('interrupted: stopping every process this benchmark started');
    flood?.kill();
    caller?.close();
    void cluster.stop().then(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await cluster.start();
    const addr = cluster.endpoints[0] ?? '';
    const pid = cluster.pid(0);
    caller = new NormalCaller(addr, token);
    await caller.setup();
    progress(`warming up with ${String(o.warmup)} normal calls`);
    await measure(caller, pid, o.warmup);
    const eldOf = async (): Promise<{ p99_ms: number; max_ms: number } | undefined> =>
      (await cluster.eventLoopDelay()).get(pid);
    await eldOf();

    progress(`${String(o.calls)} normal calls alone`);
    const alone = await measure(caller, pid, o.calls);
    const aloneEld = await eldOf();

    progress(
      `flood of ${o.kinds.join(', ')} for at most ${String(o.floodS)} s, and ${String(o.calls)} normal calls`,
    );
    const [host = '127.0.0.1', port = '0'] = addr.split(':');
    flood = new FloodProcess(
      {
        host,
        port: Number(port),
        kinds: o.kinds,
        addressesPerKind: o.addressesPerKind,
        durationMs: o.floodS * 1000,
        callsMaxPerKind: 2_000_000,
        concurrency: o.concurrency,
        streamsPerConnection: o.streamsPerConnection,
        messageBytesMax,
      },
      o.floodNice,
    );
    const endsAtMs = await Promise.race([flood.running, flood.result.then(() => Date.now())]);
    // The normal calls end at the latest a second before the flood does.
    const during = await measure(caller, pid, o.calls, endsAtMs - 1000);
    const duringEld = await eldOf();
    flood.stop();
    const load: FloodResult = await flood.result;
    const nodeStillUp = cluster.unexpectedExits().length === 0;

    const figures = { alone: phaseFigures(alone, aloneEld), flood: phaseFigures(during, duringEld) };
    const totalSent = Object.values(load.kinds).reduce((a, k) => a + k.sent, 0);
    process.stdout.write(
      `${JSON.stringify({
        bench: 'flood',
        normal_calls: o.calls,
        p50_ms: { alone: figures.alone['p50_ms'], flood: figures.flood['p50_ms'] },
        p99_ms: { alone: figures.alone['p99_ms'], flood: figures.flood['p99_ms'] },
        max_ms: { alone: figures.alone['max_ms'], flood: figures.flood['max_ms'] },
        p99_ratio: ratio(
          latency(during.samples.map((s) => s.ms)).p99_ms,
          latency(alone.samples.map((s) => s.ms)).p99_ms,
        ),
        node_cpu_cores: { alone: figures.alone['node_cpu_cores'], flood: figures.flood['node_cpu_cores'] },
        alone: figures.alone,
        during_flood: figures.flood,
        flood: {
          seconds: load.seconds,
          calls_per_s: Math.round(totalSent / load.seconds),
          generator_cpu_s: load.generator_cpu_s,
          generator_nice: o.floodNice,
          kinds: load.kinds,
        },
        node_survived: nodeStillUp,
        machine_load_avg_1m: { before: loadBefore, after: round(loadavg()[0] ?? 0) },
      })}\n`,
    );
  } finally {
    flood?.kill();
    caller?.close();
    await cluster.stop(o.keep);
    if (o.keep) progress(`kept ${cluster.dir}`);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

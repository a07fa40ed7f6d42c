// The flood benchmark's bad calls, in a child process of their own so that their CPU never
// shares an event loop with the normal caller's measurements (bench/flood.ts drives it). Each
// kind runs from source addresses of its own on 127.0.0.0/8 (the node's failure limiter counts
// per address, and the normal caller dials from 127.0.0.1):
//  - tokens: complete calls (Control HardwareList and WorkflowList, Kv Get) with a fresh unknown
//    token each;
//  - malformed: request bytes that are not the method's message (a field of wire type 7, a
//    length past the end, a gRPC frame cut short, random bytes), without a token;
//  - oversized: a length prefix 1 MiB past the node's apiMessageBytesMax and the first 16 KiB
//    (within a stream's flow-control window, so the call never waits for the node to read);
//  - streams: raw HTTP/2 connections (bench/h2-raw.ts) that open many more streams than
//    the node's cap at once and hold them open, then close and start again.
// The first three go through node:http2 (grpc-js cannot dial from a chosen address), each
// connection with `concurrency` calls in flight. Every kind is bounded by count and time.
import { connect as h2connect, constants as h2 } from 'node:http2';
import type { ClientHttp2Session, ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2';
import { randomBytes } from 'node:crypto';
import { connect as netConnect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { fork, type ChildProcess } from 'node:child_process';
import { setPriority } from 'node:os';
import { status as Status } from '@grpc/grpc-js';
import { grpcMessage, grpcRequestHeaders, h2ErrorNames, RawH2Connection } from './h2-raw.js';

export const floodKinds = ['tokens', 'malformed', 'oversized', 'streams'] as const;
export type FloodKind = (typeof floodKinds)[number];

export interface FloodConfig {
  readonly host: string;
  readonly port: number;
  readonly kinds: readonly FloodKind[];
  /** Source addresses per kind: 127.0.0.2 onwards, each kind its own. */
  readonly addressesPerKind: number;
  readonly durationMs: number;
  /** Calls (streams, for `streams`) per kind at most. */
  readonly callsMaxPerKind: number;
  /** Calls in flight per connection (tokens, malformed, oversized). */
  readonly concurrency: number;
  /** Streams each `streams` connection opens at once. */
  readonly streamsPerConnection: number;
  /** The node's apiMessageBytesMax, which `oversized` claims to exceed by 1 MiB. */
  readonly messageBytesMax: number;
}

export interface KindResult {
  readonly addresses: string[];
  /** Calls sent (streams opened, for `streams`). */
  readonly sent: number;
  readonly per_s: number;
  /** How they were answered: gRPC status names, `reset_<HTTP/2 code>`, `held` (a stream the node accepted and kept open until the flood closed its connection), `goaway_<code>` per connection, `timeout`, `error`. */
  readonly answers: Record<string, number>;
  readonly connections: number;
}

export interface FloodResult {
  readonly seconds: number;
  readonly generator_cpu_s: number;
  readonly kinds: Partial<Record<FloodKind, KindResult>>;
}

type ToChild = { type: 'init'; config: FloodConfig } | { type: 'stop' };
/** `running`: the flood is on, and ends by `endsAtMs` (ms since the epoch) at the latest. */
type FromChild = { type: 'running'; endsAtMs: number } | { type: 'result'; result: FloodResult };

const callTimeoutMs = 5000;

class Tally {
  sent = 0;
  connections = 0;
  readonly answers: Record<string, number> = {};
  add(answer: string, n = 1): void {
    this.answers[answer] = (this.answers[answer] ?? 0) + n;
  }
  get answered(): number {
    return Object.values(this.answers).reduce((a, b) => a + b, 0);
  }
}

function statusName(code: string | string[] | undefined): string | undefined {
  if (typeof code !== 'string') return undefined;
  return Status[Number(code)] ?? `status_${code}`;
}

/** One call on a node:http2 session: resolves with how it was answered. */
function call(
  session: ClientHttp2Session,
  path: string,
  authority: string,
  extra: [string, string][],
  body: Buffer,
): Promise<string> {
  return new Promise((resolve) => {
    let answer: string | undefined;
    let stream: ClientHttp2Stream;
    const headers: Record<string, string> = {};
    for (const [k, v] of grpcRequestHeaders(path, authority, extra)) headers[k] = v;
    try {
      stream = session.request(headers);
    } catch {
      resolve('error');
      return;
    }
    const timer = setTimeout(() => {
      answer ??= 'timeout';
      stream.close(h2.NGHTTP2_CANCEL);
    }, callTimeoutMs);
    stream.on('response', (h) => {
      answer ??= statusName(h['grpc-status']);
    });
    stream.on('trailers', (h: IncomingHttpHeaders) => {
      answer ??= statusName(h['grpc-status']);
    });
    stream.on('data', () => undefined);
    stream.on('error', () => undefined);
    stream.on('close', () => {
      clearTimeout(timer);
      resolve(answer ?? `reset_${h2ErrorNames[stream.rstCode ?? -1] ?? String(stream.rstCode)}`);
    });
    stream.end(body);
  });
}

const paths = {
  hardwareList: '/slipway.control.v1.Control/HardwareList',
  workflowList: '/slipway.control.v1.Control/WorkflowList',
  hardwareCreate: '/slipway.control.v1.Control/HardwareCreate',
  kvGet: '/slipway.kv.v1.Kv/Get',
  kvPut: '/slipway.kv.v1.Kv/Put',
};

/** The i-th bad call of a kind: its path, extra headers and body. */
function badCall(
  kind: Exclude<FloodKind, 'streams'>,
  i: number,
  cfg: FloodConfig,
): [string, [string, string][], Buffer] {
  switch (kind) {
    case 'tokens': {
      const path = [paths.hardwareList, paths.workflowList, paths.kvGet][i % 3] ?? paths.hardwareList;
      return [
        path,
        [['authorization', `Bearer ${randomBytes(24).toString('base64url')}`]],
        grpcMessage(Buffer.alloc(0)),
      ];
    }
    case 'malformed': {
      const path = [paths.hardwareList, paths.kvPut, paths.kvGet][i % 3] ?? paths.hardwareList;
      const bodies = [
        grpcMessage(Buffer.from([0x0f])), // field 1, wire type 7: no such type
        grpcMessage(Buffer.from([0x0a, 0x7f, 0x01])), // 127 bytes announced, 1 present
        grpcMessage(Buffer.alloc(10, 0x0a), 100), // a frame that ends 90 bytes early
        grpcMessage(randomBytes(64)),
      ];
      return [path, [], bodies[i % bodies.length] ?? Buffer.alloc(0)];
    }
    case 'oversized': {
      const path = i % 2 === 0 ? paths.kvPut : paths.hardwareCreate;
      return [path, [], grpcMessage(Buffer.alloc(16 * 1024, 0x78), cfg.messageBytesMax + 1024 * 1024)];
    }
  }
}

async function runCalls(
  kind: Exclude<FloodKind, 'streams'>,
  address: string,
  cfg: FloodConfig,
  tally: Tally,
  stopped: () => boolean,
): Promise<void> {
  const authority = `${cfg.host}:${String(cfg.port)}`;
  let session: ClientHttp2Session | undefined;
  const current = (): ClientHttp2Session => {
    if (session === undefined || session.closed || session.destroyed) {
      tally.connections++;
      // node:http2 passes no local address on; its own connection does.
      session = h2connect(`http://${authority}`, {
        createConnection: () =>
          netConnect({ host: cfg.host, port: cfg.port, localAddress: address }).setNoDelay(true),
      });
      session.on('error', () => undefined);
      session.on('goaway', (code: number) => tally.add(`goaway_${h2ErrorNames[code] ?? String(code)}`));
    }
    return session;
  };
  await Promise.all(
    Array.from({ length: cfg.concurrency }, async () => {
      while (!stopped() && tally.sent < cfg.callsMaxPerKind) {
        const i = tally.sent++;
        const [path, extra, body] = badCall(kind, i, cfg);
        tally.add(await call(current(), path, authority, extra, body));
      }
    }),
  );
  session?.close();
}

async function runStreams(
  address: string,
  cfg: FloodConfig,
  tally: Tally,
  stopped: () => boolean,
): Promise<void> {
  const authority = `${cfg.host}:${String(cfg.port)}`;
  const headers = grpcRequestHeaders(paths.hardwareList, authority, [
    ['authorization', `Bearer ${randomBytes(24).toString('base64url')}`],
  ]);
  while (!stopped() && tally.sent < cfg.callsMaxPerKind) {
    let raw: RawH2Connection;
    try {
      raw = await RawH2Connection.open({
        host: cfg.host,
        port: cfg.port,
        localAddress: address,
        ackSettings: false,
      });
    } catch {
      tally.add('error');
      continue;
    }
    tally.connections++;
    const cap = raw.serverSettings.get(3) ?? cfg.streamsPerConnection;
    const ids = raw.openStreams(cfg.streamsPerConnection, headers, undefined, false);
    tally.sent += ids.length;
    // Held open, the streams within the cap never end: wait for the refusals of the rest.
    await raw
      .until(() => raw.closed || raw.resets.size >= ids.length - cap, 'the refusals', callTimeoutMs)
      .catch(() => undefined);
    for (const id of ids) {
      const code = raw.resets.get(id);
      tally.add(
        code === undefined ? (raw.closed ? 'closed' : 'held') : `reset_${h2ErrorNames[code] ?? String(code)}`,
      );
    }
    if (raw.goaway !== undefined)
      tally.add(`goaway_${h2ErrorNames[raw.goaway.code] ?? String(raw.goaway.code)}`);
    raw.close();
  }
}

/** Source addresses of kind k: 127.0.0.2 onwards, `perKind` each. */
export function kindAddresses(k: number, perKind: number): string[] {
  return Array.from({ length: perKind }, (_, i) => `127.0.0.${String(2 + k * perKind + i)}`);
}

async function child(
  cfg: FloodConfig,
  send: (m: FromChild) => void,
  stopRequested: () => boolean,
): Promise<void> {
  const started = Date.now();
  const cpu0 = process.cpuUsage();
  const stopped = (): boolean => stopRequested() || Date.now() - started > cfg.durationMs;
  const tallies = new Map<FloodKind, Tally>();
  const runs: Promise<void>[] = [];
  const addressesOf = new Map<FloodKind, string[]>();
  cfg.kinds.forEach((kind, k) => {
    const tally = new Tally();
    tallies.set(kind, tally);
    const addresses = kindAddresses(k, cfg.addressesPerKind);
    addressesOf.set(kind, addresses);
    // The per-kind bound is shared by its addresses.
    for (const address of addresses) {
      runs.push(
        kind === 'streams'
          ? runStreams(address, cfg, tally, stopped)
          : runCalls(kind, address, cfg, tally, stopped),
      );
    }
  });
  // Running once every kind has had an answer (or a quarter of the flood, at most 3 s, has passed).
  const runningBy = started + Math.min(3000, cfg.durationMs / 4);
  const running = setInterval(() => {
    if ([...tallies.values()].every((t) => t.answered > 0) || Date.now() > runningBy) {
      clearInterval(running);
      send({ type: 'running', endsAtMs: started + cfg.durationMs });
    }
  }, 20);
  await Promise.all(runs);
  clearInterval(running);
  const seconds = (Date.now() - started) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const kinds: Partial<Record<FloodKind, KindResult>> = {};
  for (const [kind, t] of tallies) {
    kinds[kind] = {
      addresses: addressesOf.get(kind) ?? [],
      sent: t.sent,
      per_s: Math.round(t.sent / seconds),
      answers: t.answers,
      connections: t.connections,
    };
  }
  send({
    type: 'result',
    result: {
      seconds: Math.round(seconds * 10) / 10,
      generator_cpu_s: Math.round((cpu.user + cpu.system) / 1e4) / 100,
      kinds,
    },
  });
}

/** The parent's handle on the flood process. */
export class FloodProcess {
  readonly #child: ChildProcess;
  /** Resolves once every kind has been answered, with when the flood will end at the latest. */
  readonly running: Promise<number>;
  readonly result: Promise<FloodResult>;

  /** Forks the flood (tsx, as bench/control-agents.ts) at `nice`, and starts it. */
  constructor(config: FloodConfig, nice: number) {
    const script = fileURLToPath(import.meta.url);
    this.#child = fork(script, ['--flood'], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
    const pid = this.#child.pid;
    if (pid !== undefined && nice !== 0) setPriority(pid, nice);
    let onRunning: (endsAtMs: number) => void = () => undefined;
    this.running = new Promise((resolve) => (onRunning = resolve));
    this.result = new Promise((resolve, reject) => {
      this.#child.on('message', (m: FromChild) => {
        if (m.type === 'running') onRunning(m.endsAtMs);
        else resolve(m.result);
      });
      this.#child.once('exit', (code, signal) =>
        reject(new Error(`the flood process ended (${signal ?? `code ${String(code)}`}) without a result`)),
      );
    });
    this.result.catch(() => undefined);
    const init: ToChild = { type: 'init', config };
    this.#child.send(init);
  }

  stop(): void {
    const stop: ToChild = { type: 'stop' };
    if (this.#child.connected) this.#child.send(stop);
  }

  /** Ends the process by its PID if it is still there. */
  kill(): void {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill('SIGKILL');
  }
}

if (process.argv[2] === '--flood' && process.send !== undefined) {
  let stop = false;
  const send = (m: FromChild): void => {
    process.send?.(m);
  };
  process.on('message', (m: ToChild) => {
    if (m.type === 'stop') stop = true;
    else
      child(m.config, send, () => stop)
        .then(() => process.disconnect())
        .catch((err: unknown) => {
          process.stderr.write(`flood: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
          process.exit(1);
        });
  });
}

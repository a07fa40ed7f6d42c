// The control benchmark's simulated agents, in child processes of their own: in the bench's
// process they shared its event loop with the driver's work (a thousand workflow creates, the
// servers' probes), which then showed in every figure. Each child runs the agents of the
// machines i with i % processes === k on real gRPC worker streams and measures, for each action
// it receives, the time since the commit of the result that started it (and the other figures
// bench/control.ts prints); the parent drives the phases and merges the samples. One child is
// the default: on 2 cores each further process costs the machine more CPU (its own gRPC
// channels, its own event loop) than it saves (paced p99 27-35 ms with one, 42-91 with four).
import { fork, type ChildProcess } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { credentials, Metadata } from '@grpc/grpc-js';
import type { ClientDuplexStream } from '@grpc/grpc-js';
import { attemptKey } from '../src/model/records.js';
import type { Action, AttemptRef, ConnectRequest, ConnectResponse, ResultAck } from '../src/gen/worker.js';
import { WorkerClient } from '../src/gen/worker.js';
import { Prng } from '../src/platform/prng.js';

/** What the agents measured since the last collect. Times are ms; `ackAt` is since the epoch. */
export interface AgentSamples {
  sinceCommit: number[];
  sinceAck: number[];
  sinceStamp: number[];
  sinceSend: number[];
  ackAt: number[];
  node: number[];
  actionBeforeAck: number;
  actions: number;
  /** The longest event-loop delay among the agent processes (ms). */
  loopDelayMaxMs: number;
}

type ToChild =
  | {
      type: 'init';
      endpoints: string[];
      actions: number;
      ids: number[];
      seed: number;
      streamsPerConnection: number;
    }
  | { type: 'connect'; ids: number[] }
  | { type: 'cancel'; ids: number[] }
  | { type: 'hold'; ms: number }
  | { type: 'collect' }
  | { type: 'stop' };

type FromChild =
  { type: 'ready' } | { type: 'done'; atMs: number } | { type: 'samples'; samples: AgentSamples };

function emptySamples(): AgentSamples {
  return {
    sinceCommit: [],
    sinceAck: [],
    sinceStamp: [],
    sinceSend: [],
    ackAt: [],
    node: [],
    actionBeforeAck: 0,
    actions: 0,
    loopDelayMaxMs: 0,
  };
}

/** The parent's handle on the agent processes. */
export class AgentProcesses {
  readonly #children: ChildProcess[] = [];
  readonly #processes: number;
  #completed = 0;
  #lastDoneMs = 0;
  #collected: ((s: AgentSamples) => void)[] = [];
  #pending: AgentSamples[] = [];

  constructor(processes: number) {
    this.#processes = processes;
  }

  /** Workflows whose last result an agent has sent. */
  get completed(): number {
    return this.#completed;
  }

  /** When the last of them was sent (ms since the epoch). */
  get lastDoneMs(): number {
    return this.#lastDoneMs;
  }

  /**
   * Starts the agent processes and connects every worker stream, at most `streamsPerConnection`
   * on one connection: a node serves at most --api-streams-per-connection-max (100) streams of
   * a connection, and queues the rest until one ends (a worker's stream never does).
   */
  async start(
    endpoints: readonly string[],
    actions: number,
    workers: number,
    streamsPerConnection: number,
  ): Promise<void> {
    const script = fileURLToPath(import.meta.url);
    const ready: Promise<void>[] = [];
    for (let k = 0; k < this.#processes; k++) {
      const child = fork(script, ['--agents'], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
      this.#children.push(child);
      ready.push(
        new Promise((resolve, reject) => {
          child.once('error', reject);
          child.once('exit', (code) =>
            reject(new Error(`agent process ${String(k)} exited (${String(code)})`)),
          );
          child.on('message', (msg: FromChild) => {
            if (msg.type === 'ready') resolve();
            else if (msg.type === 'done') {
              this.#completed++;
              this.#lastDoneMs = Math.max(this.#lastDoneMs, msg.atMs);
            } else this.#onSamples(msg.samples);
          });
        }),
      );
      const ids: number[] = [];
      for (let i = k; i < workers; i += this.#processes) ids.push(i);
      this.#send(k, {
        type: 'init',
        endpoints: [...endpoints],
        actions,
        ids,
        seed: 0x5eed + k,
        streamsPerConnection,
      });
    }
    await Promise.all(ready);
  }

  connect(ids: readonly number[]): void {
    this.#route('connect', ids);
  }

  cancel(ids: readonly number[]): void {
    this.#route('cancel', ids);
  }

  /** From now on every agent holds each action for 0.5 to 1.5 x `ms` before answering. */
  hold(ms: number): void {
    for (let k = 0; k < this.#children.length; k++) this.#send(k, { type: 'hold', ms });
  }

  /** The samples since the last collect, merged over the processes (which then start over). */
  collect(): Promise<AgentSamples> {
    return new Promise((resolve) => {
      this.#collected.push(resolve);
      for (let k = 0; k < this.#children.length; k++) this.#send(k, { type: 'collect' });
    });
  }

  /** Stops the agents and their processes (by PID, if they do not leave on their own). */
  async stop(): Promise<void> {
    await Promise.all(
      this.#children.map(
        (child, k) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) {
              resolve();
              return;
            }
            const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
            child.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            this.#send(k, { type: 'stop' });
          }),
      ),
    );
  }

  #onSamples(s: AgentSamples): void {
    this.#pending.push(s);
    if (this.#pending.length < this.#children.length) return;
    const merged = emptySamples();
    for (const p of this.#pending) {
      merged.sinceCommit.push(...p.sinceCommit);
      merged.sinceAck.push(...p.sinceAck);
      merged.sinceStamp.push(...p.sinceStamp);
      merged.sinceSend.push(...p.sinceSend);
      merged.ackAt.push(...p.ackAt);
      merged.node.push(...p.node);
      merged.actionBeforeAck += p.actionBeforeAck;
      merged.actions += p.actions;
      merged.loopDelayMaxMs = Math.max(merged.loopDelayMaxMs, p.loopDelayMaxMs);
    }
    this.#pending = [];
    this.#collected.shift()?.(merged);
  }

  #route(type: 'connect' | 'cancel', ids: readonly number[]): void {
    const byChild = new Map<number, number[]>();
    for (const i of ids) {
      const k = i % this.#processes;
      byChild.set(k, [...(byChild.get(k) ?? []), i]);
    }
    for (const [k, list] of byChild) this.#send(k, { type, ids: list });
  }

  #send(k: number, msg: ToChild): void {
    this.#children[k]?.send(msg);
  }
}

/** One simulated agent: a machine's worker stream. */
interface Sim {
  readonly index: number;
  readonly key: string;
  stream: WorkerStream | undefined;
  sentAt: number;
  /** The attempt whose result was sent last; only its acknowledgment starts a sample. */
  sentAttempt: string;
  ackAt: number | null;
  /** When the leader applied the entry that recorded `sentAttempt` and started the next. */
  committedAt: number | null;
  /** An action that arrived before the acknowledgment of the result that started it. */
  arrivedBeforeAck: { readonly result: string; readonly atMs: number } | null;
}

type WorkerStream = ClientDuplexStream<ConnectRequest, ConnectResponse>;

const keyOf = (a: AttemptRef | undefined): string => (a === undefined ? '' : attemptKey(a));

function sendToParent(msg: FromChild): void {
  process.send?.(msg);
}

/** The child's side: its share of the agents, each on a worker stream of its own. */
class ChildAgents {
  readonly #loop = monitorEventLoopDelay({ resolution: 10 });
  #samples = emptySamples();
  #endpoints: string[] = [];
  #actions = 0;
  #holdMs = 0;
  // Seeded, so a run's hold times are the same every time.
  #rng = new Prng(0);
  readonly #sims = new Map<number, Sim>();
  /** By connection: endpoint and group (see #connectionOf). */
  readonly #clients = new Map<string, WorkerClient>();
  #streamsPerConnection = 1;

  constructor() {
    this.#loop.enable();
  }

  /** One message from the parent. */
  handle(msg: ToChild): void {
    switch (msg.type) {
      case 'init':
        this.#streamsPerConnection = msg.streamsPerConnection;
        this.#init(msg.endpoints, msg.actions, msg.ids, msg.seed);
        break;
      case 'connect':
        for (const i of msg.ids) {
          const sim = this.#sims.get(i);
          if (sim !== undefined) this.#connect(sim);
        }
        break;
      case 'cancel':
        for (const i of msg.ids) this.#sims.get(i)?.stream?.cancel();
        break;
      case 'hold':
        this.#holdMs = msg.ms;
        break;
      case 'collect':
        this.#sendSamples();
        break;
      case 'stop':
        for (const sim of this.#sims.values()) sim.stream?.cancel();
        for (const c of this.#clients.values()) c.close();
        process.disconnect();
        break;
    }
  }

  /** Creates the agents of these machines and connects each; then tells the parent it is ready. */
  #init(endpoints: string[], actions: number, ids: readonly number[], seed: number): void {
    this.#endpoints = endpoints;
    this.#actions = actions;
    this.#rng = new Prng(seed);
    for (const i of ids) {
      const sim: Sim = {
        index: i,
        key: `bench-${String(i)}`,
        stream: undefined,
        sentAt: 0,
        sentAttempt: '',
        ackAt: null,
        committedAt: null,
        arrivedBeforeAck: null,
      };
      this.#sims.set(i, sim);
      this.#connect(sim);
    }
    sendToParent({ type: 'ready' });
  }

  /** Sends the samples since the last collect, with the event loop's longest delay, and starts over. */
  #sendSamples(): void {
    this.#samples.loopDelayMaxMs = Math.max(0, this.#loop.max / 1e6 - 10);
    sendToParent({ type: 'samples', samples: this.#samples });
    this.#samples = emptySamples();
    this.#loop.reset();
  }

  /**
   * The connection machine i's stream goes on: its node is i modulo the nodes, and each
   * connection to a node carries the streams of at most streamsPerConnection machines.
   */
  #connectionOf(i: number): string {
    const nodes = this.#endpoints.length;
    return `${String(i % nodes)}/${String(Math.floor(i / (nodes * this.#streamsPerConnection)))}`;
  }

  /** Opens the machine's worker stream (a new one on each call, as an agent reconnects). */
  #connect(sim: Sim): void {
    const i = sim.index;
    const connection = this.#connectionOf(i);
    let client = this.#clients.get(connection);
    if (client === undefined) {
      // A channel of its own (grpc-js would otherwise share one connection per address).
      client = new WorkerClient(
        this.#endpoints[i % this.#endpoints.length] ?? '',
        credentials.createInsecure(),
        { 'grpc.use_local_subchannel_pool': 1 },
      );
      this.#clients.set(connection, client);
    }
    const md = new Metadata();
    md.set('x-worker-id', sim.key);
    const s = client.connect(md);
    sim.stream = s;
    sim.sentAt = 0;
    sim.ackAt = null;
    sim.committedAt = null;
    sim.arrivedBeforeAck = null;
    s.on('data', (msg: ConnectResponse) => {
      const k = msg.kind;
      if (k === undefined) return;
      if (k.$case === 'ack') this.#onAck(sim, k.value);
      else if (k.$case === 'action') this.#onAction(sim, s, k.value);
    });
    s.on('error', () => undefined);
    s.write({ kind: { $case: 'hello', value: { pendingResults: [], agentVersion: 'bench' } } });
  }

  #onAck(sim: Sim, ack: ResultAck): void {
    // A node may push the next action before the acknowledgment of the result that
    // started it (it applied the entry first); the late ack is then for an older result.
    const acked = keyOf(ack.attempt);
    // The leader's clock, as this process's: the nodes run on this machine.
    const committedAt = ack.committedAtMs > 0 ? ack.committedAtMs : null;
    if (sim.sentAt > 0 && acked === sim.sentAttempt) {
      sim.ackAt = performance.now();
      sim.committedAt = committedAt;
    } else if (sim.arrivedBeforeAck?.result === acked) {
      if (committedAt !== null) this.#samples.sinceCommit.push(sim.arrivedBeforeAck.atMs - committedAt);
      sim.arrivedBeforeAck = null;
    }
  }

  /** Measures how long the action took to arrive, then answers it (at once, or after holding it). */
  #onAction(sim: Sim, s: WorkerStream, action: Action): void {
    const now = performance.now();
    this.#samples.actions++;
    if (sim.sentAt > 0) this.#recordDispatch(sim, action, now);
    const attempt = action.attempt;
    // Nothing is in flight while the agent holds the action: an ack arriving meanwhile is
    // the late one of the previous result (arrivedBeforeAck).
    sim.sentAt = 0;
    sim.sentAttempt = '';
    sim.ackAt = null;
    sim.committedAt = null;
    const answer = (): void => this.#answer(sim, s, attempt);
    if (this.#holdMs > 0) setTimeout(answer, this.#holdMs * (0.5 + this.#rng.float()));
    else answer();
  }

  /** The samples of an action that arrived after the agent sent the result that started it. */
  #recordDispatch(sim: Sim, action: Action, now: number): void {
    const samples = this.#samples;
    samples.sinceSend.push(now - sim.sentAt);
    // The leader stamped its clock into the entry that started this attempt when it
    // proposed it, and the deadline is that stamp plus the timeout: proposal to arrival.
    const stampedAt = action.deadlineMs - action.timeoutS * 1000;
    const arrivedAt = performance.timeOrigin + now;
    samples.sinceStamp.push(arrivedAt - stampedAt);
    if (sim.committedAt !== null) samples.sinceCommit.push(arrivedAt - sim.committedAt);
    else if (sim.ackAt === null) sim.arrivedBeforeAck = { result: sim.sentAttempt, atMs: arrivedAt };
    if (sim.ackAt !== null) {
      samples.sinceAck.push(now - sim.ackAt);
      samples.ackAt.push(performance.timeOrigin + sim.ackAt);
      samples.node.push(sim.index % this.#endpoints.length);
    } else {
      // Received before its result's ack, so within the ack's own delay of the commit.
      // Not a from-ack sample (that would flatter the figure): counted on its own.
      samples.actionBeforeAck++;
    }
  }

  /** Sends a success for the attempt, unless the stream it came on was replaced meanwhile. */
  #answer(sim: Sim, s: WorkerStream, attempt: AttemptRef | undefined): void {
    if (sim.stream !== s) return;
    sim.sentAt = performance.now();
    sim.sentAttempt = keyOf(attempt);
    s.write({
      kind: {
        $case: 'result',
        value: { attempt, success: true, exitStatus: 0, message: '', outputTail: '' },
      },
    });
    if (attempt !== undefined && attempt.actionIndex === this.#actions - 1) {
      sendToParent({ type: 'done', atMs: performance.timeOrigin + performance.now() });
      sim.sentAt = 0;
    }
  }
}

/** The child's side: runs its share of the agents until told to stop. */
function runAgents(): void {
  const agents = new ChildAgents();
  process.on('message', (msg: ToChild) => agents.handle(msg));
}

if (process.argv.includes('--agents') && process.send !== undefined) runAgents();

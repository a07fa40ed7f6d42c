// The simulated machines' worker side, shared by the storm (bench/storm-fleet.ts) and the fleet
// benchmark (bench/fleet-machines.ts): the samples each step records, an HTTP request retried
// until it answers, the opening of a sealed credential, and the worker agent itself, which runs
// each action once (holding it a while), reconnects when its stream breaks, re-sends what was not
// acknowledged in its hello and never runs an attempt twice.
import type { ClientDuplexStream } from '@grpc/grpc-js';
import { credentials, Metadata } from '@grpc/grpc-js';
import { attemptKey } from '../src/model/records.js';
import type {
  ActionResult,
  AttemptRef,
  ConnectRequest,
  ConnectResponse,
  ResultAck,
  ResultRefused,
} from '../src/gen/worker.js';
import { WorkerClient } from '../src/gen/worker.js';
import type { OpeningKey, SealedBox } from '../src/platform/sealed-box.js';
import { Prng } from '../src/platform/prng.js';
import { sleep } from './stats.js';
import { httpRequest } from './storm-protocols.js';

export type SampleKind =
  | 'dhcp_pxe'
  | 'dhcp_http_boot'
  | 'tftp'
  | 'http_boot'
  | 'dhcp_ipxe'
  | 'script'
  | 'artifacts'
  | 'dhcp_bootos'
  | 'claim'
  | 'inventory'
  | 'dispatch'
  | 'boot'
  | 'workflow';

/** [kind, when it ended (ms since the epoch), how long it took (ms)] */
export type Sample = readonly [SampleKind, number, number];

/** What a simulated machine's worker shares with its fleet: settings, samples and counts. */
export interface WorkerFleet {
  readonly c: {
    readonly seed: number;
    /** The run gives up at this moment (ms since the epoch). */
    readonly deadlineMs: number;
    /** Mean time an action is held before its result (0.5 to 1.5 times). */
    readonly holdMs: number;
    /** Actions in every workflow: the last one's acknowledged result ends the workflow. */
    readonly actions: number;
  };
  readonly samples: Sample[];
  /** How often each action ran, by workflow/index. */
  readonly runs: Map<string, number>;
  refusedResults: number;
}

export function sample(f: WorkerFleet, kind: SampleKind, since: number): number {
  const now = Date.now();
  f.samples.push([kind, now, now - since]);
  return now;
}

/** Retries a request until it answers 2xx; a 4xx other than 404/409/429 is final. */
export async function httpUntil(
  f: WorkerFleet,
  url: string,
  local: string,
  options: { readonly method?: 'GET' | 'POST'; readonly json?: () => unknown },
): Promise<Buffer> {
  for (let tries = 1; ; tries++) {
    if (Date.now() >= f.c.deadlineMs)
      throw new Error(`${url}: no answer before the deadline (${String(tries)} tries)`);
    try {
      const answer = await httpRequest(url, local, {
        ...(options.method === undefined ? {} : { method: options.method }),
        ...(options.json === undefined ? {} : { json: options.json() }),
        timeoutMs: 5000,
      });
      if (answer.status >= 200 && answer.status < 300) return answer.body;
      if (answer.status >= 400 && answer.status < 500 && ![404, 409, 429].includes(answer.status)) {
        throw new FinalError(
          `${url}: HTTP ${String(answer.status)} ${answer.body.toString('utf8').slice(0, 300)}`,
        );
      }
    } catch (err) {
      if (err instanceof FinalError) throw err;
    }
    await sleep(250 + Math.min(tries, 8) * 100);
  }
}

export class FinalError extends Error {}
export function openClaim(key: OpeningKey, answer: Buffer): string {
  const body = JSON.parse(answer.toString('utf8')) as { sealed?: SealedBox };
  if (body.sealed === undefined) throw new Error('the claim answer holds no sealed credential');
  return key.open(body.sealed).toString('utf8');
}

type Stream = ClientDuplexStream<ConnectRequest, ConnectResponse>;

/** The worker: one stream at a time, until the last action's result is acknowledged. */
export function runWorkflow(
  f: WorkerFleet,
  i: number,
  workerId: string,
  server: string,
  credential: string,
  outcome: { reconnects: number },
  failing = false,
): Promise<void> {
  return new StormWorker(f, i, workerId, server, credential, outcome, failing).run();
}

/**
 * One machine's worker agent: runs each action once (holding it a while) and reports success; a
 * failing machine (its installation broken on purpose) reports its first action failed instead,
 * which ends the workflow.
 */
export class StormWorker {
  readonly #f: WorkerFleet;
  readonly #workerId: string;
  readonly #credential: string;
  readonly #outcome: { reconnects: number };
  readonly #failing: boolean;
  readonly #rng: Prng;
  readonly #client: WorkerClient;
  readonly #executed = new Set<string>();
  readonly #pending = new Map<string, ActionResult>();
  #running: AttemptRef | undefined;
  #resultSentAt = 0;
  #stream: Stream | undefined;
  #finished = false;
  #heartbeat: NodeJS.Timeout | undefined;
  #settle: (error?: Error) => void = () => undefined;

  constructor(
    f: WorkerFleet,
    i: number,
    workerId: string,
    server: string,
    credential: string,
    outcome: { reconnects: number },
    failing = false,
  ) {
    this.#f = f;
    this.#failing = failing;
    this.#workerId = workerId;
    this.#credential = credential;
    this.#outcome = outcome;
    this.#rng = new Prng(f.c.seed + i);
    this.#client = new WorkerClient(server, credentials.createInsecure(), {
      // A machine has a connection of its own, as it would; grpc-js would otherwise share one.
      'grpc.use_local_subchannel_pool': 1,
      'grpc.keepalive_time_ms': 10_000,
      'grpc.keepalive_timeout_ms': 5_000,
    });
  }

  /** Resolves once the last action's result is acknowledged; rejects if refused or too late. */
  run(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#settle = (error) => {
        if (error === undefined) resolve();
        else reject(error);
      };
      this.#heartbeat = setInterval(() => {
        this.#stream?.write({ kind: { $case: 'heartbeat', value: {} } });
        if (Date.now() > this.#f.c.deadlineMs)
          this.#finish(new Error('the workflow did not finish before the deadline'));
      }, 5000);
      this.#connect();
    });
  }

  #finish(error?: Error): void {
    if (this.#finished) return;
    this.#finished = true;
    clearInterval(this.#heartbeat);
    this.#stream?.cancel();
    this.#client.close();
    this.#settle(error);
  }

  /** A new stream, announcing the results not yet acknowledged and the action still running. */
  #connect(): void {
    if (this.#finished) return;
    const md = new Metadata();
    md.set('x-worker-id', this.#workerId);
    md.set('authorization', `Bearer ${this.#credential}`);
    const s = this.#client.connect(md);
    this.#stream = s;
    let broken = false;
    const reconnect = (): void => {
      if (broken || this.#finished) return;
      broken = true;
      this.#outcome.reconnects++;
      setTimeout(() => this.#connect(), 200 + this.#rng.float() * 800);
    };
    s.on('data', (msg: ConnectResponse) => {
      const kind = msg.kind;
      if (kind === undefined || this.#stream !== s) return;
      if (kind.$case === 'ack' || kind.$case === 'refused') this.#onAnswer(kind);
      else if (kind.$case === 'action') this.#onAction(kind.value.attempt);
    });
    s.on('error', reconnect);
    s.on('end', reconnect);
    s.write({
      kind: {
        $case: 'hello',
        value: {
          pendingResults: [...this.#pending.values()],
          agentVersion: 'storm',
          ...(this.#running === undefined ? {} : { running: this.#running }),
        },
      },
    });
  }

  /** A result acknowledged or refused: no longer pending; the last one ends the workflow. */
  #onAnswer(kind: { $case: 'ack'; value: ResultAck } | { $case: 'refused'; value: ResultRefused }): void {
    const f = this.#f;
    const ref = kind.value.attempt;
    if (ref === undefined) return;
    this.#pending.delete(attemptKey(ref));
    if (kind.$case === 'refused') f.refusedResults++;
    if (ref.actionIndex === f.c.actions - 1 || this.#failing) {
      if (kind.$case === 'refused')
        this.#finish(new Error(`the last result was refused: ${kind.value.reason}`));
      else this.#finish();
    }
  }

  /** Runs a new action: holds it 0.5 to 1.5 x holdMs, then sends its success. */
  #onAction(ref: AttemptRef | undefined): void {
    const f = this.#f;
    if (ref === undefined) return;
    const key = attemptKey(ref);
    // Pushed again after a reconnect: already run; its result is in `pending` or acknowledged.
    if (this.#executed.has(key)) return;
    this.#executed.add(key);
    const action = `${ref.workflowId}/${String(ref.actionIndex)}`;
    f.runs.set(action, (f.runs.get(action) ?? 0) + 1);
    if (this.#resultSentAt > 0) sample(f, 'dispatch', this.#resultSentAt);
    this.#running = ref;
    setTimeout(
      () => {
        this.#running = undefined;
        const result: ActionResult = {
          attempt: ref,
          success: !this.#failing,
          exitStatus: this.#failing ? 1 : 0,
          message: this.#failing ? 'failed on purpose (the benchmark breaks this machine)' : '',
          outputTail: '',
        };
        this.#pending.set(key, result);
        this.#resultSentAt = Date.now();
        this.#stream?.write({ kind: { $case: 'result', value: result } });
      },
      f.c.holdMs * (0.5 + this.#rng.float()),
    );
  }
}

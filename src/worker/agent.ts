// The agent on a machine being provisioned (`slipway worker`). It keeps one stream to any node
// (moving to the next address, with jittered backoff, when a stream breaks), runs the actions
// the cluster pushes one at a time, and journals every result on disk until the cluster
// acknowledges it. The journal also remembers which attempts were executed, so a node that
// pushes an attempt again after a reconnect never gets it run twice (invariant 3).
import { credentials, Metadata, status } from '@grpc/grpc-js';
import type { ClientDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { Action, AttemptRef, ConnectRequest, ConnectResponse } from '../gen/worker.js';
import { WorkerClient } from '../gen/worker.js';
import type { ActionResult as JournalResult } from './journal.js';
import { ResultJournal } from './journal.js';
import type { CredentialSource } from './credential-claim.js';
import { runAction } from './runner.js';

export const agentVersion = '0.1.0';

/**
 * HTTP/2 PINGs on the stream's connection. A node (or the balancer, or the VIP's holder) that
 * freezes or is cut off sends no FIN: the kernel keeps ACKing or TCP keeps retransmitting, the
 * heartbeats and results written meanwhile fail nowhere, and without PINGs the stream would hang
 * for many minutes. An unanswered PING ends it within about 15 s, and the agent moves on to the
 * next server. (grpc-js servers do not count PINGs against the client.)
 */
const streamKeepalive = {
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 5_000,
  'grpc.keepalive_permit_without_calls': 1,
};

export interface AgentOptions {
  readonly workerId: string;
  readonly servers: readonly string[];
  readonly token?: string;
  /** The boot OS's per-boot credential (claimed over the boot network); instead of `token`. */
  readonly credential?: CredentialSource;
  /** The cluster CA (PEM): TLS to the nodes when set. */
  readonly ca?: Buffer | undefined;
  readonly journalDir: string;
  /** Working directory of the actions' processes. */
  readonly workDir?: string;
  readonly logger: Logger;
  readonly reconnectMinMs?: number;
  readonly reconnectMaxMs?: number;
  readonly heartbeatMs?: number;
  /** Unacknowledged results are sent again this often while connected. */
  readonly resendMs?: number;
  /**
   * A server whose connection is not up within this long is passed over for the next one: a
   * powered-off host leaves TCP retrying its SYN for two minutes, and a frozen node accepts the
   * connection but never answers the HTTP/2 handshake. Default 5000.
   */
  readonly connectTimeoutMs?: number;
}

type Stream = ClientDuplexStream<ConnectRequest, ConnectResponse>;

interface Running {
  readonly ref: AttemptRef;
  readonly abort: AbortController;
}

export function sameAttempt(a: AttemptRef, b: AttemptRef): boolean {
  return a.workflowId === b.workflowId && a.actionIndex === b.actionIndex && a.attempt === b.attempt;
}

export class Agent {
  readonly #o: AgentOptions;
  readonly #log: Logger;
  #journal: ResultJournal | undefined;
  #clients: WorkerClient[] = [];
  #stream: Stream | undefined;
  #running: Running | undefined;
  #next = 0;
  #failures = 0;
  #stopped = false;
  #timers = new Set<NodeJS.Timeout>();
  #connectedOnce = false;
  readonly #stopping = new AbortController();
  /** Resolves when the agent has stopped. */
  readonly done: Promise<void>;
  #resolveDone: () => void = () => undefined;

  constructor(opts: AgentOptions) {
    this.#o = opts;
    this.#log = opts.logger.child({ workerId: opts.workerId });
    this.done = new Promise((r) => {
      this.#resolveDone = r;
    });
  }

  /** Whether a stream to a node is open right now. */
  get connected(): boolean {
    return this.#stream !== undefined;
  }

  async start(): Promise<void> {
    const journal = await ResultJournal.open(this.#o.journalDir);
    this.#journal = journal;
    // An attempt journaled as running belongs to a previous life of this agent: its process is
    // gone with it. Report it as failed (once) rather than run it again.
    const stale = journal.running();
    if (stale !== undefined) {
      const known = journal.pending().some((r) => sameAttempt(r.attempt, stale));
      if (!known) {
        await journal.addResult({
          attempt: stale,
          success: false,
          exitStatus: 255,
          message: 'interrupted: the worker agent restarted while the action ran',
          outputTail: '',
        });
      }
      await journal.setRunning(undefined);
    }
    const creds = this.#o.ca === undefined ? credentials.createInsecure() : credentials.createSsl(this.#o.ca);
    this.#clients = this.#o.servers.map((s) => new WorkerClient(s, creds, streamKeepalive));
    this.#connect();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#stopping.abort();
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    this.#running?.abort.abort();
    this.#stream?.cancel();
    this.#stream = undefined;
    for (const c of this.#clients) c.close();
    this.#resolveDone();
    await Promise.resolve();
  }

  #connect(): void {
    if (this.#stopped) return;
    const source = this.#o.credential;
    if (source === undefined) {
      this.#open(this.#o.token);
      return;
    }
    source.current(this.#stopping.signal).then(
      (credential) => this.#open(credential),
      (err: unknown) => {
        if (!this.#stopped) this.#log.error({ err }, 'no worker credential');
      },
    );
  }

  #open(token: string | undefined): void {
    if (this.#stopped) return;
    const journal = this.#mustJournal();
    const i = this.#next % this.#clients.length;
    const client = this.#clients[i]!;
    const md = new Metadata();
    md.set('x-worker-id', this.#o.workerId);
    if (token !== undefined) md.set('authorization', `Bearer ${token}`);
    const stream = client.connect(md);
    this.#stream = stream;
    const server = this.#o.servers[i];
    let broken = false;
    const onBroken = (why: unknown): void => {
      if (broken) return;
      broken = true;
      if (this.#stream === stream) this.#stream = undefined;
      clearInterval(heartbeat);
      clearInterval(resend);
      if (this.#stopped) return;
      if (isUnauthenticated(why)) {
        // Expired, or revoked when its workflow ended: the next connect claims a fresh one.
        this.#o.credential
          ?.invalidate()
          .catch((err: unknown) => this.#log.error({ err }, 'dropping the credential failed'));
      }
      this.#failures++;
      this.#next++;
      const min = this.#o.reconnectMinMs ?? 100;
      const max = this.#o.reconnectMaxMs ?? 5000;
      const base = Math.min(max, min * 2 ** Math.min(this.#failures - 1, 10));
      const wait = Math.round(base / 2 + Math.random() * (base / 2));
      this.#log.warn(
        { server, err: why instanceof Error ? why.message : String(why), retryMs: wait },
        'stream lost',
      );
      this.#after(wait, () => this.#connect());
    };
    stream.on('data', (msg: ConnectResponse) => {
      this.#failures = 0;
      this.#onMessage(msg);
    });
    stream.on('error', onBroken);
    stream.on('end', () => onBroken(new Error('the node ended the stream')));
    const running = this.#running?.ref ?? journal.running();
    stream.write({
      kind: {
        $case: 'hello',
        value: { running, pendingResults: journal.pending().map(toProtoResult), agentVersion },
      },
    });
    const heartbeat = setInterval(() => {
      stream.write({ kind: { $case: 'heartbeat', value: {} } });
    }, this.#o.heartbeatMs ?? 5000);
    const resend = setInterval(() => {
      for (const r of journal.pending()) stream.write({ kind: { $case: 'result', value: toProtoResult(r) } });
    }, this.#o.resendMs ?? 5000);
    client.waitForReady(Date.now() + (this.#o.connectTimeoutMs ?? 5000), (err) => {
      if (err === undefined || broken) return;
      onBroken(new Error(`no connection to ${server ?? '?'} within the connect timeout`));
      stream.cancel();
    });
    this.#log.info({ server, reconnect: this.#connectedOnce }, 'connecting');
    this.#connectedOnce = true;
  }

  #onMessage(msg: ConnectResponse): void {
    const kind = msg.kind;
    if (kind === undefined) return;
    switch (kind.$case) {
      case 'action':
        this.#onAction(kind.value).catch((err: unknown) => {
          this.#log.error({ err }, 'running an action failed in the agent');
        });
        return;
      case 'ack':
      case 'refused': {
        const ref = kind.value.attempt;
        if (ref === undefined) return;
        if (kind.$case === 'refused')
          this.#log.warn({ attempt: ref, reason: kind.value.reason }, 'result refused');
        this.#mustJournal()
          .acknowledge(ref)
          .catch((err: unknown) => {
            this.#log.error({ err }, 'journal write failed');
          });
        return;
      }
      case 'cancel': {
        const ref = kind.value.attempt;
        if (ref !== undefined && this.#running !== undefined && sameAttempt(this.#running.ref, ref)) {
          this.#log.info({ attempt: ref, reason: kind.value.reason }, 'cancelling the running action');
          this.#running.abort.abort();
        }
        return;
      }
    }
  }

  async #onAction(action: Action): Promise<void> {
    const ref = action.attempt;
    if (ref === undefined) return;
    const journal = this.#mustJournal();
    const log = this.#log.child({
      workflowId: ref.workflowId,
      actionIndex: ref.actionIndex,
      attempt: ref.attempt,
    });
    if (journal.hasExecuted(ref)) {
      log.info({ action: action.name }, 'attempt already executed here; not running it again');
      return;
    }
    if (this.#running !== undefined) {
      log.warn({ busyWith: this.#running.ref }, 'an action arrived while another runs; ignoring it');
      return;
    }
    const abort = new AbortController();
    this.#running = { ref, abort };
    // Durable before the process starts: after a crash we know it may have run.
    await journal.setRunning(ref);
    const remaining = action.deadlineMs > 0 ? action.deadlineMs - Date.now() : action.timeoutS * 1000;
    const timeoutMs = Math.max(1, Math.min(action.timeoutS * 1000, remaining));
    log.info({ action: action.name, task: action.task, timeoutMs }, 'running action');
    if (action.image !== '') {
      log.warn({ image: action.image }, 'container images are not supported by this agent yet');
    }
    const outcome =
      action.image !== ''
        ? {
            success: false,
            exitStatus: 126,
            message: `container image ${action.image} cannot run: this agent runs only commands`,
            outputTail: '',
          }
        : await runAction(
            {
              command: action.command,
              args: action.args,
              env: action.env,
              timeoutMs,
              ...(this.#o.workDir === undefined ? {} : { cwd: this.#o.workDir }),
            },
            { signal: abort.signal },
          );
    const result: JournalResult = {
      attempt: ref,
      success: outcome.success,
      exitStatus: outcome.exitStatus,
      message: outcome.message,
      outputTail: outcome.outputTail,
    };
    await journal.addResult(result);
    await journal.setRunning(undefined);
    this.#running = undefined;
    log.info({ success: result.success, exitStatus: result.exitStatus }, 'action finished');
    this.#stream?.write({ kind: { $case: 'result', value: toProtoResult(result) } });
  }

  #after(ms: number, f: () => void): void {
    const t = setTimeout(() => {
      this.#timers.delete(t);
      f();
    }, ms);
    this.#timers.add(t);
  }

  #mustJournal(): ResultJournal {
    if (this.#journal === undefined) throw new Error('the agent is not started');
    return this.#journal;
  }
}

function isUnauthenticated(err: unknown): boolean {
  return (
    typeof err === 'object' && err !== null && (err as { code?: unknown }).code === status.UNAUTHENTICATED
  );
}

function toProtoResult(r: JournalResult): {
  attempt: AttemptRef;
  success: boolean;
  exitStatus: number;
  message: string;
  outputTail: string;
} {
  return { ...r, attempt: { ...r.attempt } };
}

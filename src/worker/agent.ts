// The agent on a machine being provisioned (`slipway worker`). It keeps one stream to any node
// (moving to the next address, with jittered backoff, when a stream breaks), runs the actions
// the cluster pushes one at a time, and journals every result on disk until the cluster
// acknowledges it. The journal also remembers which attempts were executed, so a node that
// pushes an attempt again after a reconnect never gets it run twice (invariant 3).
//
// Built-in actions (Action.builtin) run in the agent's own code (actions/builtin.ts). Those
// that take the machine down (reboot, poweroff, kexec) only prepare as the action; their effect
// waits until the cluster has acknowledged the result, so the result is committed before the
// machine goes down (Tinkerbell's reboot races its report, and the workflow times out). The
// effect is journaled with the result, with the machine's boot id: an agent restarted in the
// same boot after the ack performs it; one restarted in a later boot knows it happened. Until
// it is performed, the agent starts no other action.
import { credentials, Metadata, status } from '@grpc/grpc-js';
import type { ClientDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { Action, AttemptRef, ConnectRequest, ConnectResponse } from '../gen/worker.js';
import { WorkerClient } from '../gen/worker.js';
import { EndpointTlsCredentials } from '../platform/endpoint-tls.js';
import { isXdsTarget } from '../platform/xds-target.js';
import { isBuiltinAction } from '../workflow/builtin-actions.js';
import { cutReport } from '../workflow/rules.js';
import { runBuiltin } from './actions/builtin.js';
import type { ActionResult as JournalResult, PendingEffect } from './journal.js';
import { ResultJournal } from './journal.js';
import type { CredentialSource } from './credential-claim.js';
import { KernelMachineControl, type MachineControl } from './machine-control.js';
import { runAction, type ActionOutcome } from './runner.js';

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
  /**
   * Performs reboot, poweroff and kexec. Default: the kernel's (SysRq, kexec -e). `slipway
   * worker` takes SLIPWAY_MACHINE_CONTROL=record:FILE, for tests (machine-control.ts).
   */
  readonly machineControl?: MachineControl;
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
  readonly #machine: MachineControl;
  /** A machine effect is being performed: acks arriving meanwhile must not start it again. */
  #performing = false;
  /** Resolves when the agent has stopped. */
  readonly done: Promise<void>;
  #resolveDone: () => void = () => undefined;

  constructor(opts: AgentOptions) {
    this.#o = opts;
    this.#log = opts.logger.child({ workerId: opts.workerId });
    this.#machine = opts.machineControl ?? new KernelMachineControl();
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
    await this.#resumeEffect();
    const ca = this.#o.ca;
    // Through xds:/// each node is verified against the address picked (src/platform/endpoint-tls.ts).
    const creds =
      ca === undefined
        ? credentials.createInsecure()
        : this.#o.servers.some(isXdsTarget)
          ? new EndpointTlsCredentials(ca)
          : credentials.createSsl(ca);
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
        this.#acknowledged(ref, kind.$case === 'ack').catch((err: unknown) => {
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
      case 'inventoryAck':
        // The answer to an inventory report, which src/worker/inventory-report.ts reads on its own
        // stream; a workflow stream never gets one.
        return;
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
    const waiting = journal.effect();
    if (waiting !== undefined) {
      // The machine is about to go down; the cluster pushes the action again after it is back.
      log.info({ action: action.name, effect: waiting.effect }, 'a machine effect is pending; not starting');
      return;
    }
    const abort = new AbortController();
    this.#running = { ref, abort };
    // Durable before the process starts: after a crash we know it may have run.
    await journal.setRunning(ref);
    const remaining = action.deadlineMs > 0 ? action.deadlineMs - Date.now() : action.timeoutS * 1000;
    const timeoutMs = Math.max(1, Math.min(action.timeoutS * 1000, remaining));
    log.info({ action: action.name, task: action.task, timeoutMs }, 'running action');
    const outcome = await this.#run(action, timeoutMs, abort.signal);
    const result: JournalResult = {
      attempt: ref,
      success: outcome.success,
      exitStatus: outcome.exitStatus,
      message: outcome.message,
      outputTail: outcome.outputTail,
    };
    const effect = outcome.success && outcome.effect !== undefined ? outcome.effect : undefined;
    const pending =
      effect === undefined ? undefined : { attempt: ref, effect, bootId: await this.#machine.bootId() };
    await journal.addResult(result, pending);
    await journal.setRunning(undefined);
    this.#running = undefined;
    log.info({ success: result.success, exitStatus: result.exitStatus }, 'action finished');
    this.#stream?.write({ kind: { $case: 'result', value: toProtoResult(result) } });
  }

  async #run(
    action: Action,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<ActionOutcome & { readonly effect?: PendingEffect['effect'] }> {
    const ref = action.attempt;
    if (action.builtin !== '') {
      if (!isBuiltinAction(action.builtin)) {
        return unrunnable(127, `this agent has no built-in action "${action.builtin}"; upgrade it`);
      }
      return runBuiltin(action.builtin, action.env, {
        timeoutMs,
        argv: [...action.command, ...action.args],
        signal,
        onProgress: (message) => {
          this.#stream?.write({ kind: { $case: 'progress', value: { attempt: ref, message } } });
        },
      });
    }
    if (action.image !== '') {
      this.#log.warn({ image: action.image }, 'container images are not supported by this agent yet');
      return unrunnable(126, `container image ${action.image} cannot run: this agent runs only commands`);
    }
    return runAction(
      {
        command: action.command,
        args: action.args,
        env: action.env,
        timeoutMs,
        ...(this.#o.workDir === undefined ? {} : { cwd: this.#o.workDir }),
      },
      { signal },
    );
  }

  /** The cluster recorded (ack) or refused a result: forget it, then act on its effect. */
  async #acknowledged(ref: AttemptRef, recorded: boolean): Promise<void> {
    const journal = this.#mustJournal();
    await journal.acknowledge(ref);
    const effect = journal.effect();
    if (effect === undefined || !sameAttempt(effect.attempt, ref)) return;
    if (recorded) {
      await this.#performEffect(effect);
      return;
    }
    this.#log.warn(
      { attempt: ref, effect: effect.effect },
      'the result was refused; not performing its effect',
    );
    await journal.clearEffect();
  }

  /** After a restart: a journaled effect is done if the machine has booted since, else due. */
  async #resumeEffect(): Promise<void> {
    const journal = this.#mustJournal();
    const effect = journal.effect();
    if (effect === undefined) return;
    if ((await this.#machine.bootId()) !== effect.bootId) {
      this.#log.info(
        { effect: effect.effect },
        'the machine has booted since its pending effect; it is done',
      );
      await journal.clearEffect();
      return;
    }
    const acknowledged = !journal.pending().some((r) => sameAttempt(r.attempt, effect.attempt));
    // Not acknowledged yet: the result goes out with the hello, and the ack brings the effect.
    if (acknowledged) await this.#performEffect(effect);
  }

  /**
   * Performs the effect once. For a real machine this does not return; when it does (a test's
   * recording control, or a failure), the effect is forgotten either way: a failed reboot
   * retried forever would wedge the agent, and the error is in the log.
   */
  async #performEffect(effect: PendingEffect): Promise<void> {
    if (this.#performing || this.#stopped) return;
    this.#performing = true;
    try {
      this.#log.warn({ attempt: effect.attempt, effect: effect.effect }, 'performing the machine effect');
      await this.#machine.perform(effect.effect);
    } catch (err) {
      this.#log.error({ err, effect: effect.effect }, 'the machine effect failed; the machine stays up');
    } finally {
      await this.#mustJournal().clearEffect();
      this.#performing = false;
    }
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

function unrunnable(exitStatus: number, message: string): ActionOutcome {
  return { success: false, exitStatus, message, outputTail: '', timedOut: false, cancelled: false };
}

function toProtoResult(r: JournalResult): {
  attempt: AttemptRef;
  success: boolean;
  exitStatus: number;
  message: string;
  outputTail: string;
} {
  // Cut to what the cluster records: a result is never too large for the stream (gRPC's
  // message limit would end it, and the agent would resend it forever).
  return { ...r, attempt: { ...r.attempt }, ...cutReport(r) };
}

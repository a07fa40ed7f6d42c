// A simulated worker agent, following src/worker/agent.ts's protocol over a simulated stream
// (sim-worker-stream.ts) to the production WorkerService of some server: a hello naming its
// running attempt and its unacknowledged results; each pushed action run once at most (its
// journal, which survives the agent's crashes, refuses an attempt it already ran); results kept
// and sent again until acknowledged; a cancel ends the running action; a broken stream brings a
// reconnect to the next server after a seeded, jittered backoff. An agent that crashes reports
// the attempt it was running as interrupted when it comes back, as the real one does.
import type { Action, ActionResult, AttemptRef, ConnectResponse } from '../../src/gen/worker.js';
import type { Prng } from '../../src/platform/prng.js';
import type { Scheduler } from './scheduler.js';
import { SimWorkerLink, type SimServerStream, type StreamEnv } from './sim-worker-stream.js';
import type { SimProcess } from './sim-process.js';

/** A server an agent may connect to: its live process and what takes the call there. */
export interface AgentTarget {
  readonly id: string;
  readonly proc: SimProcess;
  accept(stream: SimServerStream): void;
}

export interface AgentEnv {
  readonly sched: Scheduler;
  readonly stream: StreamEnv;
  /** The servers to try, in a stable order. */
  targets(): readonly AgentTarget[];
  /** Faults last: results may fail, actions may hang, the agent may crash. */
  faulty(): boolean;
  readonly hangP: number;
  /** The defect forgetJournal: a crash loses what the agent ran. */
  readonly forgetJournal: boolean;
  /** The machine begins executing an attempt. */
  onExecute(key: string): void;
  /** The cluster acknowledged a result as recorded. */
  onAck(key: string): void;
}

export interface AgentStats {
  connects: number;
  executed: number;
  acked: number;
  crashes: number;
}

const heartbeatMs = 100;
const resendMs = 200;
const reconnectMinMs = 20;
const reconnectMaxMs = 500;

export function attemptKeyOf(ref: AttemptRef): string {
  return `${ref.workflowId}/${ref.actionIndex}/${ref.attempt}`;
}

export class SimAgent {
  readonly id: string;
  readonly stats: AgentStats = { connects: 0, executed: 0, acked: 0, crashes: 0 };
  readonly #env: AgentEnv;
  readonly #rng: Prng;
  /** The journal: what ran here, what is not acknowledged yet, what runs now (kept at a crash). */
  readonly #executed = new Set<string>();
  readonly #pending = new Map<string, ActionResult>();
  #running: AttemptRef | undefined;
  /** The process incarnation: timers of an earlier one do nothing. */
  #life = 0;
  #link: SimWorkerLink | undefined;
  #next = 0;
  #failures = 0;
  #stopped = false;

  constructor(id: string, rng: Prng, env: AgentEnv) {
    this.id = id;
    this.#rng = rng;
    this.#env = env;
  }

  start(): void {
    this.#connect();
    this.#crashes();
  }

  stop(): void {
    this.#stopped = true;
    this.#life++;
    this.#link?.cancel();
    this.#link = undefined;
  }

  /** Runs fn after ms in this incarnation only. */
  #after(ms: number, fn: () => void): void {
    const life = this.#life;
    this.#env.sched.after(ms, () => {
      if (life === this.#life && !this.#stopped) fn();
    });
  }

  /** While faults last the agent process may die; it comes back a little later. */
  #crashes(): void {
    this.#env.sched.after(this.#rng.uniform(100, 600), () => {
      if (this.#stopped || !this.#env.faulty()) return;
      this.#crash();
      this.#crashes();
    });
  }

  #crash(): void {
    this.stats.crashes++;
    this.#life++;
    this.#link?.cancel();
    this.#link = undefined;
    if (this.#env.forgetJournal) {
      this.#executed.clear();
      this.#pending.clear();
      this.#running = undefined;
    }
    this.#after(this.#rng.uniform(10, 80), () => {
      // What ran in the earlier life is gone with it: reported as failed, never run again.
      const stale = this.#running;
      if (stale !== undefined && !this.#pending.has(attemptKeyOf(stale)))
        this.#pending.set(attemptKeyOf(stale), {
          attempt: stale,
          success: false,
          exitStatus: 255,
          message: 'interrupted: the worker agent restarted while the action ran',
          outputTail: '',
        });
      this.#running = undefined;
      this.#connect();
    });
  }

  #connect(): void {
    const targets = this.#env.targets();
    if (targets.length === 0) {
      this.#broken('no server to connect to');
      return;
    }
    const target = targets[this.#next % targets.length]!;
    this.stats.connects++;
    const life = this.#life;
    const link: SimWorkerLink = new SimWorkerLink(
      this.#env.stream,
      this.id,
      target.id,
      target.proc,
      {
        onData: (msg) => {
          if (life === this.#life && this.#link === link) this.#onMessage(msg);
        },
        onClosed: (why) => {
          if (life === this.#life && this.#link === link) {
            this.#link = undefined;
            this.#broken(why);
          }
        },
      },
      (stream) => {
        target.accept(stream);
      },
    );
    this.#link = link;
    link.toServer({
      kind: {
        $case: 'hello',
        value: { running: this.#running, pendingResults: [...this.#pending.values()], agentVersion: 'sim' },
      },
    });
    const beat = (): void => {
      if (this.#link !== link) return;
      link.toServer({ kind: { $case: 'heartbeat', value: {} } });
      this.#after(heartbeatMs, beat);
    };
    const resend = (): void => {
      if (this.#link !== link) return;
      for (const r of this.#pending.values()) link.toServer({ kind: { $case: 'result', value: r } });
      this.#after(resendMs, resend);
    };
    this.#after(heartbeatMs, beat);
    this.#after(resendMs, resend);
  }

  /** The stream is gone: the next server after a jittered, growing backoff. */
  #broken(_why: string): void {
    this.#failures++;
    this.#next++;
    const base = Math.min(reconnectMaxMs, reconnectMinMs * 2 ** Math.min(this.#failures - 1, 10));
    this.#after(base / 2 + this.#rng.uniform(0, base / 2), () => {
      this.#connect();
    });
  }

  #onMessage(msg: ConnectResponse): void {
    this.#failures = 0;
    const kind = msg.kind;
    if (kind === undefined) return;
    switch (kind.$case) {
      case 'action':
        this.#onAction(kind.value);
        return;
      case 'ack':
      case 'refused': {
        const ref = kind.value.attempt;
        if (ref === undefined) return;
        const key = attemptKeyOf(ref);
        if (!this.#pending.delete(key)) return;
        if (kind.$case === 'ack') {
          this.stats.acked++;
          this.#env.onAck(key);
        }
        return;
      }
      case 'cancel': {
        const ref = kind.value.attempt;
        if (
          ref !== undefined &&
          this.#running !== undefined &&
          attemptKeyOf(ref) === attemptKeyOf(this.#running)
        )
          this.#finish(ref, false, `cancelled: ${kind.value.reason}`);
        return;
      }
      case 'inventoryAck':
        return;
    }
  }

  #onAction(action: Action): void {
    const ref = action.attempt;
    if (ref === undefined) return;
    const key = attemptKeyOf(ref);
    if (this.#executed.has(key) || this.#running !== undefined) return;
    this.#executed.add(key);
    this.#running = ref;
    this.stats.executed++;
    this.#env.onExecute(key);
    const faulty = this.#env.faulty();
    // While faults last an action may hang: its deadline, then the service's cancel, ends it.
    if (faulty && this.#rng.chance(this.#env.hangP)) return;
    this.#after(this.#rng.uniform(5, 60), () => {
      this.#finish(ref, !faulty || this.#rng.chance(0.7), '');
    });
  }

  #finish(ref: AttemptRef, success: boolean, message: string): void {
    if (this.#running === undefined || attemptKeyOf(this.#running) !== attemptKeyOf(ref)) return;
    this.#running = undefined;
    const result: ActionResult = {
      attempt: ref,
      success,
      exitStatus: success ? 0 : 1,
      message,
      outputTail: '',
    };
    this.#pending.set(attemptKeyOf(ref), result);
    this.#link?.toServer({ kind: { $case: 'result', value: result } });
  }
}

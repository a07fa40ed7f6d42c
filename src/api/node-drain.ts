// Draining this node (docs/decisions/0022-node-drain.md): while drained it answers health checks
// NOT_SERVING (node-server.ts asks `drained`), refuses new worker streams and ends the open ones
// with UNAVAILABLE so their agents reconnect elsewhere, and hands leadership to a voter that is
// not drained, again whenever it wins an election. Drained either by the replicated state
// (`slipway node drain`, which lasts until `undrain`) or locally while the process stops (SIGTERM).
import type { Logger } from 'pino';
import type { RaftNode } from '../raft/node.js';
import type { ControlState } from '../state/control/control-state.js';

/** How often the drained node looks for worker streams to end and leadership to hand off. */
const checkMs = 250;
/** How long one handoff may take before the next check tries again. */
const transferTimeoutMs = 3000;

/** What of the worker service a drain uses. */
export interface DrainableWorkers {
  /** Worker streams open on this node. */
  readonly connected: number;
  /** Ends every open worker stream with UNAVAILABLE and `reason`, once its queued results are answered. */
  endAll(reason: string): void;
}

export interface NodeDrainOptions {
  readonly node: RaftNode;
  readonly control: ControlState;
  readonly workers: DrainableWorkers;
  readonly logger: Logger;
}

export class NodeDrain {
  readonly #o: NodeDrainOptions;
  #stopping = false;
  #timer: NodeJS.Timeout | undefined;
  #handingOff = false;
  #noTargetLogged = false;

  constructor(opts: NodeDrainOptions) {
    this.#o = opts;
  }

  /** Drained by `slipway node drain` (replicated) or stopping. */
  get drained(): boolean {
    return this.#stopping || this.#o.control.isDrained(this.#o.node.id);
  }

  /** Why a worker stream is refused or ended here, or undefined while the node takes them. */
  refusal(): string | undefined {
    if (this.#stopping) return `node ${this.#o.node.id} is stopping; reconnect to another node`;
    if (this.#o.control.isDrained(this.#o.node.id)) {
      return `node ${this.#o.node.id} is drained (slipway node undrain ${this.#o.node.id} reverses it); reconnect to another node`;
    }
    return undefined;
  }

  start(): void {
    this.#timer = setInterval(() => this.check(), checkMs);
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Acts on the drained state now: ends worker streams, hands leadership off. Quick; never throws. */
  check(): void {
    if (!this.drained) {
      this.#noTargetLogged = false;
      return;
    }
    const reason = this.refusal() ?? 'this node is drained';
    if (this.#o.workers.connected > 0) this.#o.workers.endAll(reason);
    if (this.#o.node.stoppedBy === null && this.#o.node.softState().role === 'leader') this.#handOff();
  }

  /**
   * The local drain of a stopping node, not replicated: from now on it is drained, and its worker
   * streams end. Leadership is handed over by the caller's stop. `untilGone` waits until the
   * streams are gone or `graceMs` has passed, and resolves with those still open.
   */
  beginStop(): { untilGone(graceMs: number): Promise<number> } {
    this.#stopping = true;
    this.check();
    return {
      untilGone: async (graceMs) => {
        const deadline = Date.now() + graceMs;
        while (this.#o.workers.connected > 0 && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, Math.min(50, Math.max(1, deadline - Date.now()))));
          // A stream accepted just before the drain began ends too.
          this.check();
        }
        return this.#o.workers.connected;
      },
    };
  }

  /** Hands leadership to the most caught-up voter that is not drained; none: keeps it, and says so once. */
  #handOff(): void {
    if (this.#handingOff || this.#stopping) return;
    const { node, control, logger } = this.#o;
    const to = node.bestTransferTarget((id) => control.isDrained(id));
    if (to === null) {
      if (!this.#noTargetLogged) {
        logger.warn('this node is drained but leads, and no other voter can take over; it keeps leading');
        this.#noTargetLogged = true;
      }
      return;
    }
    this.#handingOff = true;
    node.transferLeadership(to, transferTimeoutMs).then(
      () => {
        this.#handingOff = false;
        logger.info({ to }, 'drained: handed leadership over');
      },
      (err: unknown) => {
        this.#handingOff = false;
        logger.warn({ err, to }, 'drained: handing leadership over failed; trying again');
      },
    );
  }
}

// Where admitted transfers run. The server hands each admitted read to a TransferRunner and
// hears back through TransferEvents; it does not know whether the transfer runs on its own
// thread (InThreadRunner, here) or on a worker thread (ThreadPoolRunner, thread-pool-runner.ts).
import { TransferTable } from './transfer-table.js';
import type { TransferCommand, TransferEvent, TransferThreadConfig } from './transfer-protocol.js';

export type StartCommand = Extract<TransferCommand, { type: 'start' }>;

/** The events a runner passes on to the server; it answers 'repeated' and 'closed' itself. */
export type RunnerEvent = Extract<TransferEvent, { type: 'started' | 'startFailed' | 'ended' }>;

export interface RunnerHooks {
  readonly onEvent: (event: RunnerEvent) => void;
  /** A transfer thread failed. Its transfers have been reported as ended ('workerFailed') by then. */
  readonly onError: (error: unknown) => void;
}

export interface TransferRunner {
  /** Threads running transfers; 0 when they run on the server's own thread. */
  readonly threads: number;
  /** Transfer threads started again after a failure. */
  readonly restarts: number;
  /** Hands an admitted transfer to a thread; false when no thread can take one right now. */
  start(command: StartCommand): boolean;
  /**
   * The client of transfer id asked again from the same port. Resolves true once the request
   * may be admitted (the transfer has ended or was superseded, and its 'ended' event has been
   * passed on), false when the request is a retransmission the transfer answers itself.
   */
  repeat(id: number, sameRequest: boolean): Promise<boolean>;
  /** Ends the transfers bound to a local address that has left the host ('addressGone'). */
  addressGone(address: string): void;
  /** Ends every transfer with ERROR 0 to its client, passes on their 'ended' events, and stops the threads. */
  close(): Promise<void>;
}

/** Runs every transfer on the calling thread: for tests, and where a second core would not help. */
export class InThreadRunner implements TransferRunner {
  readonly threads = 0;
  readonly restarts = 0;
  readonly #hooks: RunnerHooks;
  readonly #table: TransferTable;
  readonly #repeats = new Map<number, (admit: boolean) => void>();
  #closed: Promise<void> | null = null;
  #onClosed: () => void = () => undefined;

  constructor(config: TransferThreadConfig, hooks: RunnerHooks) {
    this.#hooks = hooks;
    this.#table = new TransferTable(config, (event) => this.#route(event));
  }

  start(command: StartCommand): boolean {
    this.#table.handle(command);
    return true;
  }

  repeat(id: number, sameRequest: boolean): Promise<boolean> {
    return new Promise((resolve) => {
      this.#repeats.set(id, resolve);
      this.#table.handle({ type: 'repeat', id, sameRequest });
    });
  }

  addressGone(address: string): void {
    this.#table.handle({ type: 'addressGone', address });
  }

  close(): Promise<void> {
    this.#closed ??= new Promise((resolve) => {
      this.#onClosed = resolve;
      this.#table.handle({ type: 'close' });
    });
    return this.#closed;
  }

  #route(event: TransferEvent): void {
    switch (event.type) {
      case 'repeated':
        this.#repeats.get(event.id)?.(event.admit);
        this.#repeats.delete(event.id);
        return;
      case 'closed':
        this.#onClosed();
        return;
      case 'ready':
        return;
      case 'started':
      case 'startFailed':
      case 'ended':
        this.#hooks.onEvent(event);
        return;
      default: {
        const unknown: never = event;
        throw new TypeError(`unknown transfer event ${JSON.stringify(unknown)}`);
      }
    }
  }
}

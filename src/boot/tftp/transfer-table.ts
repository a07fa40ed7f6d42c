// The transfers one thread runs, by id: turns TransferCommands into TransferSessions and the
// sessions' outcomes into TransferEvents. A worker thread runs one table behind its message
// port; a server without workers runs one on its own thread. Either way the admitting code sees
// the same commands and events.
import { TransferSession } from './session.js';
import type { TransferCommand, TransferEvent, TransferThreadConfig } from './transfer-protocol.js';

export class TransferTable {
  readonly #config: TransferThreadConfig;
  readonly #emit: (event: TransferEvent) => void;
  readonly #sessions = new Map<number, TransferSession>();
  /** Transfers whose socket is still being bound; close() waits for them. */
  readonly #opening = new Set<Promise<void>>();
  #closing: Promise<void> | null = null;

  constructor(config: TransferThreadConfig, emit: (event: TransferEvent) => void) {
    this.#config = config;
    this.#emit = emit;
  }

  handle(command: TransferCommand): void {
    switch (command.type) {
      case 'start': {
        const opening = this.#start(command);
        this.#opening.add(opening);
        void opening.finally(() => this.#opening.delete(opening));
        return;
      }
      case 'repeat':
        // The client sent whatever it sent to this transfer (EDK2: ERROR 8) before the request
        // that led here, so it is in the socket's queue by the time this command arrives, but
        // the socket may not have been polled since. Deciding only after the next poll phase
        // (the second check phase from now) lets that packet count: the transfer ends as
        // 'optionsDeclined', not 'superseded', and heardFromClient is up to date.
        setImmediate(() => setImmediate(() => this.#answerRepeat(command)));
        return;
      case 'addressGone':
        for (const session of this.#sessions.values()) {
          if (session.local === command.address) session.addressGone();
        }
        return;
      case 'close':
        this.#closing ??= this.#close();
        return;
      default: {
        const unknown: never = command;
        throw new TypeError(`unknown transfer command ${JSON.stringify(unknown)}`);
      }
    }
  }

  #answerRepeat(command: Extract<TransferCommand, { type: 'repeat' }>): void {
    const session = this.#sessions.get(command.id);
    // Gone means it has ended, and its 'ended' is already on its way.
    if (session !== undefined && !session.heardFromClient && command.sameRequest) {
      this.#emit({ type: 'repeated', id: command.id, admit: false });
      return;
    }
    session?.supersede();
    this.#emit({ type: 'repeated', id: command.id, admit: true });
  }

  async #start(command: Extract<TransferCommand, { type: 'start' }>): Promise<void> {
    const { id } = command;
    let session: TransferSession;
    try {
      session = await TransferSession.open({
        client: command.client,
        request: command.request,
        content: command.content,
        limits: this.#config.limits,
        bindHost: command.local,
        socketType: this.#config.socketType,
        now: () => performance.now(),
        onEnd: (end) => {
          this.#sessions.delete(id);
          this.#emit({ type: 'ended', id, end });
        },
        onStart: ({ blockSize, windowSize }) => this.#emit({ type: 'started', id, blockSize, windowSize }),
      });
    } catch (error) {
      this.#emit({
        type: 'startFailed',
        id,
        message: error instanceof Error ? error.message : String(error),
      });
      return;
    }
    this.#sessions.set(id, session);
    session.start();
    // Opened after close() began: close() only waits for it, so end it here.
    if (this.#closing !== null) await session.close();
  }

  async #close(): Promise<void> {
    await Promise.all(this.#opening);
    await Promise.all([...this.#sessions.values()].map((session) => session.close()));
    this.#emit({ type: 'closed' });
  }
}

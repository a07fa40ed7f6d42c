// Runs transfers on worker threads, so that a boot storm uses every core. Each DATA block costs
// a sendmsg syscall, and on one thread those syscalls, not the protocol logic, cap what the
// server can send (docs/decisions/0006-tftp-server.md, "Transfers on worker threads").
//
// Each worker runs a TransferTable (transfer-thread.ts). A new transfer goes to the worker with
// the fewest transfers in progress. File contents from the root are SharedArrayBuffer-backed,
// so handing one to a worker shares it instead of copying it.
//
// A worker that dies (an uncaught exception, or terminated) must not take the server with it:
// its transfers are reported as ended ('workerFailed'), the failure goes to onError, and a new
// worker takes its place: at once if the old one had started properly, after a growing delay
// if it died while loading, so that a broken installation does not spin.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TransferCommand, TransferEvent, TransferThreadConfig } from './transfer-protocol.js';
import type { RunnerHooks, StartCommand, TransferRunner } from './transfer-runner.js';

const RESPAWN_DELAY_MS_MIN = 1000;
const RESPAWN_DELAY_MS_MAX = 30_000;
/** How long close() waits for a worker to say goodbye to its clients before terminating it. */
const CLOSE_WAIT_MS = 5000;

/** How to start a worker: a module URL, or (under tsx) a CommonJS bootstrap evaluated as a script. */
export type ThreadEntry = { readonly url: URL } | { readonly script: string };

/**
 * The worker's entry module, beside this file and with its extension: .ts when the code runs
 * through tsx (the tests, and bin/slipway.js while the compiled build is older than src/), .js
 * in the compiled build (dist/).
 *
 * Under tsx the worker must load TypeScript itself: Node 20 applies neither the parent's hooks
 * (bin/slipway.js registers tsx with module.register) nor an inherited `--import tsx` to a
 * worker (checked on Node 20.20). Registering tsx's ESM hooks inside the worker works, but
 * module.register runs them on one more thread per worker, about 36 MB each; tsx's require
 * hooks cost about 17 MB and no thread. So a CommonJS bootstrap registers those and requires
 * the entry, which tsx compiles to CommonJS: the worker's modules must therefore do without
 * top-level await and import.meta (a worker that fails to load fails startTftpServer).
 */
function threadEntry(): ThreadEntry {
  const extension = extname(fileURLToPath(import.meta.url));
  const entry = new URL(`./transfer-thread${extension}`, import.meta.url);
  if (extension !== '.ts') return { url: entry };
  const tsxRequireApi = createRequire(import.meta.url).resolve('tsx/cjs/api');
  const script = [
    `require(${JSON.stringify(tsxRequireApi)}).register();`,
    `require(${JSON.stringify(fileURLToPath(entry))});`,
  ].join('\n');
  return { script };
}

interface Assigned {
  readonly assignedAtMs: number;
}

/** One worker position: the worker in it changes when one dies and is replaced. */
interface Slot {
  worker: Worker | null;
  ready: boolean;
  /** Why the current worker failed, from its 'error' event; used if it dies before it is ready. */
  failure: unknown;
  readonly transfers: Map<number, Assigned>;
  readonly repeats: Map<number, (admit: boolean) => void>;
  respawnDelayMs: number;
  respawnTimer: NodeJS.Timeout | null;
  /** Set while close() waits for this worker's 'closed'. */
  onClosed: (() => void) | null;
  /** Settles when the first worker in this slot is ready or has died trying; only start() waits on it. */
  firstReady: Promise<void>;
  settleFirst: (error?: unknown) => void;
}

export class ThreadPoolRunner implements TransferRunner {
  readonly #config: TransferThreadConfig;
  readonly #hooks: RunnerHooks;
  readonly #entry: ThreadEntry;
  readonly #slots: Slot[] = [];
  #restarts = 0;
  /** Until start() resolves, a failing worker fails start() instead of being reported and replaced. */
  #starting = true;
  #closing = false;
  #closed: Promise<void> | null = null;

  private constructor(config: TransferThreadConfig, hooks: RunnerHooks, entry: ThreadEntry) {
    this.#config = config;
    this.#hooks = hooks;
    this.#entry = entry;
  }

  /**
   * Starts count workers and resolves once all have loaded; rejects (stopping them) if any fails
   * to. `entry` replaces the transfer worker only in tests of these failure paths.
   */
  static async start(
    count: number,
    config: TransferThreadConfig,
    hooks: RunnerHooks,
    entry: ThreadEntry = threadEntry(),
  ): Promise<ThreadPoolRunner> {
    const runner = new ThreadPoolRunner(config, hooks, entry);
    for (let i = 0; i < count; i++) {
      let settleFirst: (error?: unknown) => void = () => undefined;
      const firstReady = new Promise<void>((resolve, reject) => {
        settleFirst = (error) => (error === undefined ? resolve() : reject(error));
      });
      const slot: Slot = {
        worker: null,
        ready: false,
        failure: undefined,
        transfers: new Map(),
        repeats: new Map(),
        respawnDelayMs: RESPAWN_DELAY_MS_MIN,
        respawnTimer: null,
        onClosed: null,
        firstReady,
        settleFirst,
      };
      runner.#slots.push(slot);
      runner.#spawn(slot);
    }
    try {
      await Promise.all(runner.#slots.map((slot) => slot.firstReady));
    } catch (error) {
      await runner.close();
      throw error;
    }
    runner.#starting = false;
    return runner;
  }

  get threads(): number {
    return this.#slots.length;
  }

  get restarts(): number {
    return this.#restarts;
  }

  /** The live workers, for transferWorkersForTesting in server.ts. */
  workersForTesting(): Worker[] {
    return this.#slots.flatMap((slot) => (slot.worker === null ? [] : [slot.worker]));
  }

  start(command: StartCommand): boolean {
    let best: Slot | null = null;
    for (const slot of this.#slots) {
      if (slot.worker !== null && (best === null || slot.transfers.size < best.transfers.size)) best = slot;
    }
    if (best === null || best.worker === null) return false;
    best.transfers.set(command.id, { assignedAtMs: performance.now() });
    const { content } = command;
    if (content.buffer instanceof SharedArrayBuffer) {
      best.worker.postMessage(command satisfies TransferCommand);
    } else {
      // Generated or translated content: small, and structured clone would copy the whole
      // underlying ArrayBuffer (for a pooled Buffer, 8 KiB of unrelated bytes). Copy exactly
      // the bytes once and move them.
      const own = content.slice();
      best.worker.postMessage({ ...command, content: own } satisfies TransferCommand, [own.buffer]);
    }
    return true;
  }

  repeat(id: number, sameRequest: boolean): Promise<boolean> {
    const slot = this.#slots.find((s) => s.transfers.has(id));
    const worker = slot?.worker ?? null;
    if (slot === undefined || worker === null) return Promise.resolve(true);
    return new Promise((resolve) => {
      slot.repeats.set(id, resolve);
      worker.postMessage({ type: 'repeat', id, sameRequest } satisfies TransferCommand);
    });
  }

  addressGone(address: string): void {
    for (const slot of this.#slots) {
      slot.worker?.postMessage({ type: 'addressGone', address } satisfies TransferCommand);
    }
  }

  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#closing = true;
      await Promise.all(this.#slots.map((slot) => this.#closeSlot(slot)));
    })();
    return this.#closed;
  }

  async #closeSlot(slot: Slot): Promise<void> {
    if (slot.respawnTimer !== null) clearTimeout(slot.respawnTimer);
    slot.respawnTimer = null;
    const worker = slot.worker;
    if (worker === null) return;
    // Let the worker send its clients ERROR 0 and close its sockets; a wedged one is terminated anyway.
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, CLOSE_WAIT_MS);
      slot.onClosed = () => {
        clearTimeout(timer);
        resolve();
      };
      worker.postMessage({ type: 'close' } satisfies TransferCommand);
    });
    slot.onClosed = null;
    await worker.terminate();
  }

  #spawn(slot: Slot): void {
    let worker: Worker;
    try {
      const entry = this.#entry;
      worker =
        'url' in entry
          ? new Worker(entry.url, { workerData: this.#config })
          : new Worker(entry.script, { eval: true, workerData: this.#config });
    } catch (error) {
      this.#onSpawnFailed(slot, error);
      return;
    }
    slot.worker = worker;
    slot.ready = false;
    slot.failure = undefined;
    // worker.threadId reads -1 once the thread has exited; keep it for the report.
    const { threadId } = worker;
    worker.on('message', (event: TransferEvent) => this.#onEvent(slot, event));
    // An uncaught exception in the worker; 'exit' follows, and reports it.
    worker.on('error', (error) => (slot.failure = error));
    worker.on('exit', (code) => this.#onExit(slot, worker, threadId, code));
  }

  #onEvent(slot: Slot, event: TransferEvent): void {
    switch (event.type) {
      case 'ready':
        slot.ready = true;
        slot.respawnDelayMs = RESPAWN_DELAY_MS_MIN;
        slot.settleFirst();
        return;
      case 'started':
        this.#hooks.onEvent(event);
        return;
      case 'startFailed':
      case 'ended':
        slot.transfers.delete(event.id);
        this.#hooks.onEvent(event);
        return;
      case 'repeated':
        slot.repeats.get(event.id)?.(event.admit);
        slot.repeats.delete(event.id);
        return;
      case 'closed':
        slot.onClosed?.();
        return;
      default: {
        const unknown: never = event;
        throw new TypeError(`unknown transfer event ${JSON.stringify(unknown)}`);
      }
    }
  }

  #onExit(slot: Slot, worker: Worker, threadId: number, code: number): void {
    if (slot.worker !== worker) return;
    slot.worker = null;
    const wasReady = slot.ready;
    slot.ready = false;
    const lost = [...slot.transfers];
    slot.transfers.clear();
    const why = slot.failure instanceof Error ? `: ${slot.failure.message}` : '';
    const message = `TFTP transfer worker ${threadId} exited with code ${code}${why}`;
    if (!this.#closing && !this.#starting) {
      this.#hooks.onError(
        new Error(`${message}; ${lost.length} transfer(s) failed`, { cause: slot.failure }),
      );
    }
    const nowMs = performance.now();
    for (const [id, assigned] of lost) {
      this.#hooks.onEvent({
        type: 'ended',
        id,
        end: {
          end: 'failed',
          error: this.#closing ? { reason: 'serverClosed' } : { reason: 'workerFailed', message },
          durationMs: nowMs - assigned.assignedAtMs,
        },
      });
    }
    // Their transfers are gone, so whatever the clients asked for again may be admitted.
    for (const resolve of slot.repeats.values()) resolve(true);
    slot.repeats.clear();
    slot.onClosed?.();
    if (!wasReady) slot.settleFirst(slot.failure ?? new Error(`${message} before it was ready`));
    if (this.#closing || this.#starting) return;
    this.#restarts += 1;
    if (wasReady) this.#spawn(slot);
    else this.#respawnLater(slot);
  }

  #onSpawnFailed(slot: Slot, error: unknown): void {
    slot.settleFirst(error);
    if (this.#closing || this.#starting) return;
    this.#hooks.onError(error);
    this.#respawnLater(slot);
  }

  #respawnLater(slot: Slot): void {
    const delayMs = slot.respawnDelayMs;
    slot.respawnDelayMs = Math.min(delayMs * 2, RESPAWN_DELAY_MS_MAX);
    slot.respawnTimer = setTimeout(() => {
      slot.respawnTimer = null;
      if (!this.#closing) this.#spawn(slot);
    }, delayMs);
  }
}

// The read-only TFTP server: listens for requests, admits, drops or refuses them, finds the file
// (resolver hook first, then the root directory) and hands each admitted read to a
// TransferRunner, which runs it as a TransferSession on its own ephemeral port, on a worker
// thread or on this one.
//
// This thread keeps everything that decides whether and what to serve: the listening socket,
// request parsing, the limits, path checks and refusals, the resolver and the content cache.
// The per-block work (DATA, ACKs, retransmission) is what worker threads take off it.
//
// Refusals (ERROR packets for bad requests) are sent from the listening socket: no transfer
// exists yet, and a refused request must not cost a socket.
//
// Every reply leaves from the address the request was sent to: with an AddressFeed there is a
// listener per local address (listeners.ts), and a transfer binds to its listener's address.
import { isIPv6 } from 'node:net';
import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import {
  Opcode,
  TftpErrorCode,
  decodePacket,
  encodePacket,
  peekOpcode,
  type RequestPacket,
} from './packet.js';
import { ContentCache } from './content-cache.js';
import { RootDirectory, type FileLookup } from './file-source.js';
import { toNetascii } from './netascii.js';
import type { SessionEnd, TftpPeer } from './session.js';
import type { AddressFeed } from './address-feed.js';
import { ListenerSet, type Listener } from './listeners.js';
import {
  SERVER_LIMITS_DEFAULT,
  TRANSFER_LIMITS_DEFAULT,
  assertValidServerLimits,
  assertValidTransferLimits,
  assertValidWorkerCount,
  type ServerLimits,
  type TransferLimits,
} from './limits.js';
import type { TransferThreadConfig } from './transfer-protocol.js';
import {
  InThreadRunner,
  type RunnerEvent,
  type RunnerHooks,
  type TransferRunner,
} from './transfer-runner.js';
import { ThreadPoolRunner } from './thread-pool-runner.js';

export type { TftpPeer } from './session.js';
export type { AddressFeed } from './address-feed.js';

/**
 * Generated content for a requested filename (for example a per-MAC iPXE script), or null to
 * fall through to the root directory. Consulted before the root for every read request. A
 * rejection is answered with ERROR 0 and reported through hooks.onError.
 */
export type TftpResolver = (filename: string, client: TftpPeer) => Promise<Uint8Array | null>;

export interface TransferStartEvent {
  readonly filename: string;
  readonly client: TftpPeer;
  readonly bytes: number;
  readonly blockSize: number;
  readonly windowSize: number;
}

export interface TransferEndEvent extends SessionEnd {
  readonly filename: string;
  readonly client: TftpPeer;
  readonly bytes: number;
}

export interface RequestRefusedEvent {
  /** Empty when the request could not be decoded. */
  readonly filename: string;
  readonly client: TftpPeer;
  readonly code: TftpErrorCode;
  readonly message: string;
}

export interface RequestDroppedEvent {
  readonly filename: string;
  readonly client: TftpPeer;
  /**
   * 'busy': transfersMax transfers are in progress. 'noWorker': every worker is being replaced.
   * 'notListening': sent to an address that has no listener of its own yet (with an AddressFeed),
   * so a reply could not leave from it; the retransmission finds the address's listener.
   */
  readonly reason: 'busy' | 'noWorker' | 'notListening';
  /** Requests dropped since the server started, this one included. */
  readonly droppedTotal: number;
}

/** Optional observers; the integrator wires logging and metrics here. They must not throw. */
export interface TftpServerHooks {
  /** A transfer has sent its first packet. Every started transfer later ends with onTransferEnd. */
  readonly onTransferStart?: (event: TransferStartEvent) => void;
  readonly onTransferEnd?: (event: TransferEndEvent) => void;
  readonly onRequestRefused?: (event: RequestRefusedEvent) => void;
  /** A read request was not answered, so that the client retransmits it later. */
  readonly onRequestDropped?: (event: RequestDroppedEvent) => void;
  /** The addresses with a listener of their own changed (only with an AddressFeed). */
  readonly onListenersChanged?: (addresses: readonly string[]) => void;
  /**
   * Unexpected failures: resolver rejections, I/O errors, listening socket errors, a transfer
   * worker that died (it is replaced, and its transfers end as 'workerFailed').
   */
  readonly onError?: (error: unknown) => void;
}

export interface TftpServerOptions {
  /**
   * Listen address; default 0.0.0.0. Transfer sockets bind to it, or, with `addresses`, to the
   * local address each request was sent to.
   */
  readonly host?: string;
  /**
   * The host's IPv4 addresses, with host 0.0.0.0 only: the server then also listens on each
   * local address, and a transfer binds to the address its request was sent to, so that every
   * reply leaves from the address the client asked (firmware ignores replies from any other).
   * Listeners follow the feed; a transfer whose address disappears ends ('addressGone').
   */
  readonly addresses?: AddressFeed;
  /** Listen port; default 69, 0 picks a free one. */
  readonly port?: number;
  /** Directory served read-only; without it only the resolver serves files. */
  readonly root?: string;
  readonly resolve?: TftpResolver;
  readonly limits?: Partial<TransferLimits & ServerLimits>;
  /**
   * Worker threads that run the transfers; default os.availableParallelism(). 0 or 1 runs them
   * on the server's own thread: one worker would only add a hop.
   */
  readonly workers?: number;
  readonly hooks?: TftpServerHooks;
}

export interface TftpServerStats {
  /** Threads running transfers; 0 when they run on the server's own thread. */
  readonly workers: number;
  /** Transfers admitted and not yet ended, including ones still looking up their file. */
  readonly transfersActive: number;
  readonly requestsDropped: number;
  /** Workers started again after one died. */
  readonly workerRestarts: number;
  /** Local addresses with a listener of their own (empty without an AddressFeed). */
  readonly listening: readonly string[];
  /** Transfers ended because their local address disappeared from this host. */
  readonly transfersAddressGone: number;
}

export interface TftpServer {
  /** The bound port (useful with port 0). */
  readonly port: number;
  readonly stats: TftpServerStats;
  /**
   * Stops listening and ends every transfer (clients receive ERROR 0); resolves once every
   * transfer's end has been reported and the workers have stopped.
   */
  close(): Promise<void>;
}

/** Replaces what a TFTP string cannot carry (NUL, characters above U+00FF) with "?". */
function toWireText(text: string): string {
  return Array.from(text, (char) => {
    const code = char.codePointAt(0) ?? 0;
    return code === 0 || code > 0xff ? '?' : char;
  }).join('');
}

function sameRequest(a: RequestPacket, b: RequestPacket): boolean {
  return (
    a.filename === b.filename &&
    a.mode === b.mode &&
    a.options.size === b.options.size &&
    [...a.options].every(([name, value]) => b.options.get(name) === value)
  );
}

/** Only what a transfer thread needs, so nothing else is cloned into the workers. */
function transferLimitsOf(limits: TransferLimits): TransferLimits {
  const { blockSizeMax, windowSizeMax, timeoutMs, timeoutMaxMs, retriesMax } = limits;
  return { blockSizeMax, windowSizeMax, timeoutMs, timeoutMaxMs, retriesMax };
}

/** The runner behind each server, for transferWorkersForTesting. */
const runners = new WeakMap<TftpServer, TransferRunner>();

export async function startTftpServer(options: TftpServerOptions): Promise<TftpServer> {
  const limits = { ...TRANSFER_LIMITS_DEFAULT, ...SERVER_LIMITS_DEFAULT, ...options.limits };
  assertValidTransferLimits(limits);
  assertValidServerLimits(limits);
  const workers = options.workers ?? availableParallelism();
  assertValidWorkerCount(workers);
  if (options.root === undefined && options.resolve === undefined) {
    throw new Error('startTftpServer needs a root directory, a resolver, or both');
  }
  const root =
    options.root === undefined
      ? null
      : await RootDirectory.open(options.root, new ContentCache(limits.cacheBytesMax), limits.fileBytesMax);
  const host = options.host ?? '0.0.0.0';
  const socketType = isIPv6(host) ? 'udp6' : 'udp4';
  const hooks = options.hooks ?? {};
  // The runner reports to the server state, which needs the runner: tie the knot through here.
  let state: ServerState | null = null;
  const runnerHooks: RunnerHooks = {
    onEvent: (event) => state?.onRunnerEvent(event),
    onError: (error) => hooks.onError?.(error),
  };
  const threadConfig: TransferThreadConfig = { limits: transferLimitsOf(limits), socketType };
  const runner =
    workers <= 1
      ? new InThreadRunner(threadConfig, runnerHooks)
      : await ThreadPoolRunner.start(workers, threadConfig, runnerHooks);
  let listeners: ListenerSet;
  try {
    listeners = await ListenerSet.open({
      socketType,
      host,
      port: options.port ?? 69,
      feed: options.addresses,
      onMessage: (message, from, listener) => state?.onRequest(message, from, listener),
      onUnanswered: (message, from) => state?.onUnanswered(message, from),
      onError: (error) => hooks.onError?.(error),
      onAddressGone: (address) => runner.addressGone(address),
      onChange: hooks.onListenersChanged,
    });
  } catch (error) {
    await runner.close();
    throw error;
  }
  const server = new ServerState({ listeners, root, limits, hooks, runner, resolve: options.resolve });
  state = server;
  const handle: TftpServer = {
    port: listeners.port,
    get stats() {
      return server.stats;
    },
    close: () => server.close(),
  };
  runners.set(handle, runner);
  return handle;
}

/**
 * Test seam: the worker threads currently running a server's transfers (none without workers),
 * so that a test can kill one mid-transfer. Not for production use.
 */
export function transferWorkersForTesting(server: TftpServer): readonly Worker[] {
  const runner = runners.get(server);
  return runner instanceof ThreadPoolRunner ? runner.workersForTesting() : [];
}

interface ServerParams {
  readonly listeners: ListenerSet;
  readonly root: RootDirectory | null;
  readonly limits: TransferLimits & ServerLimits;
  readonly hooks: TftpServerHooks;
  readonly runner: TransferRunner;
  readonly resolve: TftpResolver | undefined;
}

/** Marks a client whose request is admitted but whose file is still being looked up. */
const RESOLVING = 'resolving';

/** An admitted transfer, from the moment it is handed to the runner until its end is reported. */
interface Admitted {
  readonly id: number;
  readonly key: string;
  readonly filename: string;
  readonly client: TftpPeer;
  /** Where the request came in; the transfer answers from its address. */
  readonly listener: Listener;
  readonly request: RequestPacket;
  readonly bytes: number;
  /** Set on 'started'; only a started transfer is reported through onTransferEnd. */
  started: boolean;
  /** A repeated request from its client is being checked with the transfer's thread. */
  asking: boolean;
}

class ServerState {
  readonly #params: ServerParams;
  /** Admitted requests by client address and port; the key is also how a retransmitted RRQ is recognised. */
  readonly #clients = new Map<string, Admitted | typeof RESOLVING>();
  readonly #transfers = new Map<number, Admitted>();
  /** Requests between arrival and their hand-over to the runner; close() waits for them. */
  readonly #admitting = new Set<Promise<void>>();
  #nextId = 1;
  #dropped = 0;
  #addressGone = 0;
  #closed: Promise<void> | null = null;

  constructor(params: ServerParams) {
    this.#params = params;
  }

  get stats(): TftpServerStats {
    return {
      workers: this.#params.runner.threads,
      transfersActive: this.#clients.size,
      requestsDropped: this.#dropped,
      workerRestarts: this.#params.runner.restarts,
      listening: this.#params.listeners.addresses,
      transfersAddressGone: this.#addressGone,
    };
  }

  close(): Promise<void> {
    this.#closed ??= (async () => {
      await this.#params.listeners.close();
      // Requests still being looked up see #closed and give up; ones already handed over are
      // in the runner's queue ahead of its close.
      await Promise.all(this.#admitting);
      await this.#params.runner.close();
    })();
    return this.#closed;
  }

  onRunnerEvent(event: RunnerEvent): void {
    const transfer = this.#transfers.get(event.id);
    if (transfer === undefined) return;
    const { filename, client, bytes, listener } = transfer;
    switch (event.type) {
      case 'started':
        transfer.started = true;
        this.#params.hooks.onTransferStart?.({
          filename,
          client,
          bytes,
          blockSize: event.blockSize,
          windowSize: event.windowSize,
        });
        return;
      case 'startFailed':
        this.#release(transfer);
        this.#params.hooks.onError?.(
          new Error(`TFTP transfer for ${filename} could not start: ${event.message}`),
        );
        this.#refuse(filename, client, TftpErrorCode.notDefined, 'internal server error', listener);
        return;
      case 'ended':
        this.#release(transfer);
        if (event.end.error?.reason === 'addressGone') this.#addressGone += 1;
        if (transfer.started) this.#params.hooks.onTransferEnd?.({ ...event.end, filename, client, bytes });
        return;
      default: {
        const unknown: never = event;
        throw new TypeError(`unknown runner event ${JSON.stringify(unknown)}`);
      }
    }
  }

  #release(transfer: Admitted): void {
    this.#transfers.delete(transfer.id);
    if (this.#clients.get(transfer.key) === transfer) this.#clients.delete(transfer.key);
  }

  /** A datagram to an address without its own listener yet: a read request is counted as dropped. */
  onUnanswered(message: Buffer, client: TftpPeer): void {
    if (this.#closed !== null) return;
    const decoded = decodePacket(message);
    if (!decoded.ok || decoded.packet.type !== 'rrq') return;
    this.#drop(Buffer.from(decoded.packet.filename, 'latin1').toString('utf8'), client, 'notListening');
  }

  onRequest(message: Buffer, client: TftpPeer, listener: Listener): void {
    if (this.#closed !== null) return;
    const decoded = decodePacket(message);
    if (!decoded.ok) {
      // Never answer an ERROR, even a malformed one: two confused peers would ping-pong.
      if (peekOpcode(message) !== Opcode.error) {
        this.#refuse(
          '',
          client,
          TftpErrorCode.illegalOperation,
          `malformed request: ${decoded.error.message}`,
          listener,
        );
      }
      return;
    }
    const packet = decoded.packet;
    switch (packet.type) {
      case 'rrq': {
        const admitting = this.#serveRead(packet, client, listener);
        this.#admitting.add(admitting);
        void admitting.finally(() => this.#admitting.delete(admitting));
        return;
      }
      case 'wrq':
        this.#refuse(
          packet.filename,
          client,
          TftpErrorCode.accessViolation,
          'read-only server: writes are refused',
          listener,
        );
        return;
      case 'data':
      case 'ack':
        this.#refuse('', client, TftpErrorCode.unknownTransferId, 'unknown transfer ID', listener);
        return;
      case 'oack':
        this.#refuse(
          '',
          client,
          TftpErrorCode.illegalOperation,
          'illegal TFTP operation: expected RRQ',
          listener,
        );
        return;
      case 'error':
        return;
      default: {
        const unknown: never = packet;
        throw new TypeError(`unknown packet ${JSON.stringify(unknown)}`);
      }
    }
  }

  async #serveRead(request: RequestPacket, client: TftpPeer, listener: Listener): Promise<void> {
    const key = `${client.address}|${client.port}`;
    const active = this.#clients.get(key);
    if (active !== undefined) {
      // A retransmitted RRQ (the client has not heard our first reply yet) must not start a
      // second transfer: the first one's timer answers it. A different request from the same
      // port means the client gave up on the old transfer (EDK2 re-asks after ERROR 8). Only
      // the transfer's thread knows whether it has heard from the client, so it decides.
      if (active === RESOLVING || !active.started || active.asking) return;
      active.asking = true;
      // The same request to another of our addresses is not a retransmission: the client asked
      // the VIP, was answered by the catch-all from another address (while a listener could not
      // be bound), ignored that, and asks again; it must be answered from the VIP now.
      const repeated = sameRequest(active.request, request) && active.listener === listener;
      const admit = await this.#params.runner.repeat(active.id, repeated);
      active.asking = false;
      // By now the old transfer's end has been reported and its slot freed; another request
      // from the same port may have been admitted meanwhile, and then this one is a duplicate.
      if (!admit || this.#closed !== null || this.#clients.has(key)) return;
    }
    const filename = Buffer.from(request.filename, 'latin1').toString('utf8');
    if (this.#clients.size >= this.#params.limits.transfersMax) {
      this.#drop(filename, client, 'busy');
      return;
    }
    if (request.mode === 'mail') {
      this.#refuse(filename, client, TftpErrorCode.illegalOperation, 'mail mode is not supported', listener);
      return;
    }
    this.#clients.set(key, RESOLVING);
    try {
      const lookup = await this.#lookup(filename, client);
      if (this.#closed !== null) return;
      if (lookup.kind === 'refused') {
        this.#refuse(filename, client, lookup.code, lookup.message, listener);
        return;
      }
      const content = request.mode === 'netascii' ? toNetascii(lookup.content) : lookup.content;
      const transfer: Admitted = {
        id: this.#nextId++,
        key,
        filename,
        client,
        listener,
        request,
        bytes: content.length,
        started: false,
        asking: false,
      };
      this.#clients.set(key, transfer);
      this.#transfers.set(transfer.id, transfer);
      const { local } = listener;
      if (!this.#params.runner.start({ type: 'start', id: transfer.id, client, local, request, content })) {
        this.#release(transfer);
        this.#drop(filename, client, 'noWorker');
      }
    } catch (error) {
      this.#params.hooks.onError?.(error);
      this.#refuse(filename, client, TftpErrorCode.notDefined, 'internal server error', listener);
    } finally {
      if (this.#clients.get(key) === RESOLVING) this.#clients.delete(key);
    }
  }

  async #lookup(filename: string, client: TftpPeer): Promise<FileLookup> {
    const generated =
      this.#params.resolve === undefined ? null : await this.#params.resolve(filename, client);
    if (generated !== null) return { kind: 'found', content: generated };
    if (this.#params.root === null) {
      return { kind: 'refused', code: TftpErrorCode.fileNotFound, message: `file not found: ${filename}` };
    }
    return this.#params.root.read(filename);
  }

  /** Says nothing to the client: PXE firmware gives up on an ERROR, but retransmits an unanswered RRQ. */
  #drop(filename: string, client: TftpPeer, reason: RequestDroppedEvent['reason']): void {
    this.#dropped += 1;
    this.#params.hooks.onRequestDropped?.({ filename, client, reason, droppedTotal: this.#dropped });
  }

  #refuse(
    filename: string,
    client: TftpPeer,
    code: TftpErrorCode,
    message: string,
    listener: Listener,
  ): void {
    this.#params.hooks.onRequestRefused?.({ filename, client, code, message });
    if (this.#closed !== null) return;
    // Messages quote client-chosen names; TFTP strings carry single non-NUL bytes only.
    const packet = encodePacket({ type: 'error', code, message: toWireText(message) });
    listener.send(packet, client);
  }
}

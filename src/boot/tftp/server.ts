// The read-only TFTP server: listens for requests, admits or refuses them, finds the file
// (resolver hook first, then the root directory) and hands each admitted read to a
// TransferSession on its own ephemeral port.
//
// Refusals (ERROR packets for bad requests) are sent from the listening socket: no transfer
// exists yet, and a refused request must not cost a socket.
import dgram from 'node:dgram';
import { isIPv6 } from 'node:net';
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
import { TransferSession, bindSocket, type SessionEnd, type TftpPeer } from './session.js';
import {
  SERVER_LIMITS_DEFAULT,
  TRANSFER_LIMITS_DEFAULT,
  assertValidServerLimits,
  assertValidTransferLimits,
  type ServerLimits,
  type TransferLimits,
} from './limits.js';

export type { TftpPeer } from './session.js';

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

/** Optional observers; the integrator wires logging and metrics here. They must not throw. */
export interface TftpServerHooks {
  readonly onTransferStart?: (event: TransferStartEvent) => void;
  readonly onTransferEnd?: (event: TransferEndEvent) => void;
  readonly onRequestRefused?: (event: RequestRefusedEvent) => void;
  /** A packet from a wrong TID was answered with ERROR 5. */
  readonly onStrayPacket?: (from: TftpPeer) => void;
  /** Unexpected failures: resolver rejections, I/O errors, listening socket errors. */
  readonly onError?: (error: unknown) => void;
}

export interface TftpServerOptions {
  /** Listen address; default 0.0.0.0. Transfer sockets bind to the same address. */
  readonly host?: string;
  /** Listen port; default 69, 0 picks a free one. */
  readonly port?: number;
  /** Directory served read-only; without it only the resolver serves files. */
  readonly root?: string;
  readonly resolve?: TftpResolver;
  readonly limits?: Partial<TransferLimits & ServerLimits>;
  readonly hooks?: TftpServerHooks;
}

export interface TftpServer {
  /** The bound port (useful with port 0). */
  readonly port: number;
  /** Stops listening and ends every transfer (clients receive ERROR 0); resolves once all sockets are closed. */
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

/** Marks a client whose request is admitted but whose file is still being looked up. */
const RESOLVING = 'resolving';

export async function startTftpServer(options: TftpServerOptions): Promise<TftpServer> {
  const limits = { ...TRANSFER_LIMITS_DEFAULT, ...SERVER_LIMITS_DEFAULT, ...options.limits };
  assertValidTransferLimits(limits);
  assertValidServerLimits(limits);
  if (options.root === undefined && options.resolve === undefined) {
    throw new Error('startTftpServer needs a root directory, a resolver, or both');
  }
  const root =
    options.root === undefined
      ? null
      : await RootDirectory.open(options.root, new ContentCache(limits.cacheBytesMax), limits.fileBytesMax);
  const host = options.host ?? '0.0.0.0';
  const socketType: dgram.SocketType = isIPv6(host) ? 'udp6' : 'udp4';
  const listener = await bindSocket(socketType, options.port ?? 69, host);
  const server = new ServerState({
    listener,
    root,
    host,
    socketType,
    limits,
    hooks: options.hooks ?? {},
    resolve: options.resolve,
  });
  return { port: listener.address().port, close: () => server.close() };
}

interface ServerParams {
  readonly listener: dgram.Socket;
  readonly root: RootDirectory | null;
  readonly host: string;
  readonly socketType: dgram.SocketType;
  readonly limits: TransferLimits & ServerLimits;
  readonly hooks: TftpServerHooks;
  readonly resolve: TftpResolver | undefined;
}

class ServerState {
  readonly #params: ServerParams;
  /** Admitted requests by client address and port; the key is also how a retransmitted RRQ is recognised. */
  readonly #sessions = new Map<string, TransferSession | typeof RESOLVING>();
  /** Requests between arrival and their transfer's start; close() waits for them. */
  readonly #admitting = new Set<Promise<void>>();
  #closed = false;

  constructor(params: ServerParams) {
    this.#params = params;
    params.listener.on('message', (message, from) =>
      this.#onRequest(message, { address: from.address, port: from.port }),
    );
    params.listener.on('error', (error) => params.hooks.onError?.(error));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await new Promise<void>((resolve) => this.#params.listener.close(() => resolve()));
    // Requests still being looked up see #closed and close whatever they opened.
    await Promise.all(this.#admitting);
    const sessions = [...this.#sessions.values()].filter((s): s is TransferSession => s !== RESOLVING);
    await Promise.all(sessions.map((session) => session.close()));
  }

  #onRequest(message: Buffer, client: TftpPeer): void {
    if (this.#closed) return;
    const decoded = decodePacket(message);
    if (!decoded.ok) {
      // Never answer an ERROR, even a malformed one: two confused peers would ping-pong.
      if (peekOpcode(message) !== Opcode.error) {
        this.#refuse(
          '',
          client,
          TftpErrorCode.illegalOperation,
          `malformed request: ${decoded.error.message}`,
        );
      }
      return;
    }
    const packet = decoded.packet;
    switch (packet.type) {
      case 'rrq': {
        const admitting = this.#serveRead(packet, client);
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
        );
        return;
      case 'data':
      case 'ack':
        this.#refuse('', client, TftpErrorCode.unknownTransferId, 'unknown transfer ID');
        return;
      case 'oack':
        this.#refuse('', client, TftpErrorCode.illegalOperation, 'illegal TFTP operation: expected RRQ');
        return;
      case 'error':
        return;
      default: {
        const unknown: never = packet;
        throw new TypeError(`unknown packet ${JSON.stringify(unknown)}`);
      }
    }
  }

  async #serveRead(request: RequestPacket, client: TftpPeer): Promise<void> {
    const key = `${client.address}|${client.port}`;
    const active = this.#sessions.get(key);
    if (active !== undefined) {
      // A retransmitted RRQ (the client has not heard our first reply yet) must not start a
      // second transfer: the first one's timer answers it. A different request from the same
      // port means the client gave up on the old transfer (EDK2 re-asks after ERROR 8).
      if (active === RESOLVING || (!active.heardFromClient && sameRequest(active.request, request))) return;
      active.supersede();
    }
    const filename = Buffer.from(request.filename, 'latin1').toString('utf8');
    if (this.#sessions.size >= this.#params.limits.transfersMax) {
      this.#refuse(filename, client, TftpErrorCode.notDefined, 'server busy, try again later');
      return;
    }
    if (request.mode === 'mail') {
      this.#refuse(filename, client, TftpErrorCode.illegalOperation, 'mail mode is not supported');
      return;
    }
    this.#sessions.set(key, RESOLVING);
    try {
      const lookup = await this.#lookup(filename, client);
      if (this.#closed) return;
      if (lookup.kind === 'refused') {
        this.#refuse(filename, client, lookup.code, lookup.message);
        return;
      }
      const content = request.mode === 'netascii' ? toNetascii(lookup.content) : lookup.content;
      const session = await TransferSession.open({
        client,
        request,
        content,
        limits: this.#params.limits,
        bindHost: this.#params.host,
        socketType: this.#params.socketType,
        now: () => performance.now(),
        onEnd: (end) => {
          this.#sessions.delete(key);
          this.#params.hooks.onTransferEnd?.({ ...end, filename, client, bytes: content.length });
        },
        ...(this.#params.hooks.onStrayPacket === undefined
          ? {}
          : { onStrayPacket: this.#params.hooks.onStrayPacket }),
      });
      this.#sessions.set(key, session);
      session.start();
      const { blockSize, windowSize } = session.settings;
      this.#params.hooks.onTransferStart?.({
        filename,
        client,
        bytes: content.length,
        blockSize,
        windowSize,
      });
      if (this.#closed) await session.close();
    } catch (error) {
      this.#params.hooks.onError?.(error);
      this.#refuse(filename, client, TftpErrorCode.notDefined, 'internal server error');
    } finally {
      if (this.#sessions.get(key) === RESOLVING) this.#sessions.delete(key);
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

  #refuse(filename: string, client: TftpPeer, code: TftpErrorCode, message: string): void {
    this.#params.hooks.onRequestRefused?.({ filename, client, code, message });
    if (this.#closed) return;
    // Messages quote client-chosen names; TFTP strings carry single non-NUL bytes only.
    const packet = encodePacket({ type: 'error', code, message: toWireText(message) });
    // Delivery is best effort, like every TFTP reply; nothing to do if it fails.
    this.#params.listener.send(packet, client.port, client.address, () => undefined);
  }
}

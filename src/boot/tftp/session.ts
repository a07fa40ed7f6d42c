// One read transfer on the wire: its own ephemeral UDP socket (the server's TID for this
// transfer), a real timer, and the pure ReadTransfer deciding what to send.
//
// The socket is not connect()ed, so packets from other addresses still arrive here and can be
// answered with ERROR 5 (unknown transfer ID, RFC 1350) without touching the transfer.
import dgram from 'node:dgram';
import {
  Opcode,
  TftpErrorCode,
  decodePacket,
  encodePacket,
  peekOpcode,
  type RequestPacket,
  type TftpPacket,
} from './packet.js';
import {
  ReadTransfer,
  type NegotiatedSettings,
  type Outgoing,
  type TransferEnd,
  type TransferFailure,
  type TransferStep,
} from './transfer.js';
import type { TransferLimits } from './limits.js';

export interface TftpPeer {
  readonly address: string;
  readonly port: number;
}

export type SessionFailure =
  | TransferFailure
  | { readonly reason: 'serverClosed' }
  /** The same client port sent a new, different request, so it has given up on this one. */
  | { readonly reason: 'superseded' }
  | { readonly reason: 'socketError'; readonly message: string };

export interface SessionEnd {
  readonly end: TransferEnd;
  /** Non-null exactly when end is 'failed'. */
  readonly error: SessionFailure | null;
  readonly durationMs: number;
}

export interface SessionParams {
  readonly client: TftpPeer;
  readonly request: RequestPacket;
  /** The bytes to send, already translated for the transfer mode. */
  readonly content: Uint8Array;
  readonly limits: TransferLimits;
  /** Local address to bind the transfer socket to: the server's listen host. */
  readonly bindHost: string;
  readonly socketType: dgram.SocketType;
  /** Monotonic clock in milliseconds. */
  readonly now: () => number;
  /** Called exactly once, when the transfer ends (its socket is closing). */
  readonly onEnd: (end: SessionEnd) => void;
  /** A packet from an address other than the client's reached this transfer's port. */
  readonly onStrayPacket?: (from: TftpPeer) => void;
}

/** A bound UDP socket; on failure the socket is closed before the error is passed on. */
export async function bindSocket(type: dgram.SocketType, port: number, host: string): Promise<dgram.Socket> {
  const socket = dgram.createSocket(type);
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(port, host, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    return socket;
  } catch (error) {
    socket.close();
    throw error;
  }
}

export class TransferSession {
  readonly #params: SessionParams;
  readonly #socket: dgram.Socket;
  readonly #transfer: ReadTransfer;
  readonly #startedAtMs: number;
  #timer: NodeJS.Timeout | null = null;
  #timerAtMs: number | null = null;
  #ended = false;
  #closing = false;
  #heardFromClient = false;
  readonly #closed: Promise<void>;
  #markClosed: () => void = () => undefined;

  private constructor(params: SessionParams, socket: dgram.Socket) {
    this.#closed = new Promise((resolve) => (this.#markClosed = resolve));
    this.#params = params;
    this.#socket = socket;
    this.#transfer = new ReadTransfer(params.limits);
    this.#startedAtMs = params.now();
    socket.on('message', (message, from) => this.#onMessage(message, from));
    socket.on('error', (error) => this.#end('failed', { reason: 'socketError', message: error.message }));
  }

  /** Binds a fresh socket on an ephemeral port; the transfer starts with start(). */
  static async open(params: SessionParams): Promise<TransferSession> {
    return new TransferSession(params, await bindSocket(params.socketType, 0, params.bindHost));
  }

  get request(): RequestPacket {
    return this.#params.request;
  }

  get settings(): NegotiatedSettings {
    return this.#transfer.settings;
  }

  /** Whether any packet has come from the client's TID; until then a repeated request is a retransmission. */
  get heardFromClient(): boolean {
    return this.#heardFromClient;
  }

  /** Ends the transfer without a word to the client, which has moved on to a new request from the same port. */
  supersede(): void {
    this.#end('failed', { reason: 'superseded' });
  }

  start(): void {
    this.#apply(this.#transfer.start(this.#params.request, this.#params.content.length, this.#params.now()));
  }

  /** Ends the transfer early (server shutdown), telling the client why; resolves once the socket is closed. */
  close(): Promise<void> {
    if (!this.#ended && !this.#closing) {
      this.#closing = true;
      const bye = encodePacket({
        type: 'error',
        code: TftpErrorCode.notDefined,
        message: 'server shutting down',
      });
      const { port, address } = this.#params.client;
      // Close only after the ERROR has left, so the client fails fast instead of timing out.
      this.#socket.send(bye, port, address, () => this.#end('failed', { reason: 'serverClosed' }));
    }
    return this.#closed;
  }

  #onMessage(message: Buffer, from: dgram.RemoteInfo): void {
    if (this.#ended) return;
    const { client } = this.#params;
    if (from.address !== client.address || from.port !== client.port) {
      this.#params.onStrayPacket?.({ address: from.address, port: from.port });
      this.#replyUnlessError(message, from, {
        type: 'error',
        code: TftpErrorCode.unknownTransferId,
        message: 'unknown transfer ID',
      });
      return;
    }
    this.#heardFromClient = true;
    const decoded = decodePacket(message);
    if (!decoded.ok) {
      this.#replyUnlessError(message, from, {
        type: 'error',
        code: TftpErrorCode.illegalOperation,
        message: `malformed packet: ${decoded.error.message}`,
      });
      return;
    }
    this.#apply(this.#transfer.onPacket(decoded.packet, this.#params.now()));
  }

  /** Never answers an ERROR with an ERROR: two confused peers would otherwise ping-pong. */
  #replyUnlessError(received: Uint8Array, to: dgram.RemoteInfo, reply: TftpPacket): void {
    if (peekOpcode(received) === Opcode.error) return;
    this.#socket.send(encodePacket(reply), to.port, to.address, () => undefined);
  }

  #apply(step: TransferStep): void {
    for (const outgoing of step.send) this.#send(outgoing);
    if (step.done !== null) {
      this.#end(step.done, step.error);
      return;
    }
    if (step.nextTimerAtMs !== null && (this.#timer === null || step.nextTimerAtMs !== this.#timerAtMs)) {
      this.#arm(step.nextTimerAtMs);
    }
  }

  #arm(atMs: number): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timerAtMs = atMs;
    this.#timer = setTimeout(
      () => {
        this.#timer = null;
        this.#apply(this.#transfer.onTimer(this.#params.now()));
      },
      Math.max(1, Math.ceil(atMs - this.#params.now())),
    );
  }

  #send(outgoing: Outgoing): void {
    const packet: TftpPacket =
      outgoing.kind === 'data'
        ? {
            type: 'data',
            block: outgoing.block,
            data: this.#params.content.subarray(outgoing.offset, outgoing.offset + outgoing.length),
          }
        : outgoing.packet;
    // A failed send is not fatal: the transfer's own retransmission timer covers a lost datagram.
    this.#socket.send(
      encodePacket(packet),
      this.#params.client.port,
      this.#params.client.address,
      () => undefined,
    );
  }

  #end(end: TransferEnd, error: SessionFailure | null): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    const durationMs = this.#params.now() - this.#startedAtMs;
    // Report first, synchronously: the server frees the client's slot at once, so a client that
    // asks again from the same port right away (EDK2 after ERROR 8) is not taken for a duplicate.
    this.#params.onEnd({ end, error, durationMs });
    this.#socket.close(() => this.#markClosed());
  }
}

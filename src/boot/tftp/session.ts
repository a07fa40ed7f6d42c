// One read transfer on the wire: its own ephemeral UDP port (the server's TID for this
// transfer), a real timer, and the pure ReadTransfer deciding what to send.
//
// The port's one socket is connect()ed to the client: the kernel delivers it the client's packets
// only, and a connected send skips the route and address lookups of an unconnected one, which is
// measurable at one send per block. A packet from anyone else finds no socket and gets the
// kernel's ICMP port unreachable, as with tftpd-hpa, never ERROR 5 (unknown transfer ID): after a
// failover the new VIP holder may be using, for a transfer of its own, the very port a transfer
// of the dead leader used. That transfer's client, still sending its ACKs there, must see its
// server go silent and ask again from the start, which it does on a stall, rather than be told
// its transfer is unknown, on which firmware gives up the boot (docs/decisions/0045).
//
// Being connected, the transfer socket also hears ICMP port unreachable: a client that has gone
// away ends the transfer at once ('socketError'), instead of after every retransmission.
import dgram from 'node:dgram';
import {
  Opcode,
  TftpErrorCode,
  decodePacket,
  encodePacket,
  peekOpcode,
  type RequestPacket,
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
  | { readonly reason: 'socketError'; readonly message: string }
  /** The worker thread running the transfer died; the client hears nothing more. */
  | { readonly reason: 'workerFailed'; readonly message: string }
  /** The local address the transfer answered from left this host (the VIP moved away). */
  | { readonly reason: 'addressGone'; readonly address: string };

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
  /** Local address to bind the transfer socket to: where the client sent its request. */
  readonly bindHost: string;
  readonly socketType: dgram.SocketType;
  /** Monotonic clock in milliseconds. */
  readonly now: () => number;
  /**
   * Called once from start(), with the negotiated settings, before the first packet leaves: a
   * client answers that packet at once, and the server must know the transfer has started by
   * the time the client's next request can reach it.
   */
  readonly onStart?: (settings: NegotiatedSettings) => void;
  /** Called exactly once, when the transfer ends (its socket is closing). */
  readonly onEnd: (end: SessionEnd) => void;
}

/** A bound UDP socket; on failure the socket is closed before the error is passed on. */
export async function bindSocket(
  type: dgram.SocketType,
  port: number,
  host: string,
  reuseAddr = false,
): Promise<dgram.Socket> {
  const socket = dgram.createSocket({ type, reuseAddr });
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

/** The transfer's port: an ephemeral one, its socket connected to the client. */
async function bindTransferPort(params: SessionParams): Promise<dgram.Socket> {
  const socket = await bindSocket(params.socketType, 0, params.bindHost);
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.connect(params.client.port, params.client.address, () => {
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
  /** Connected to the client: sends everything, receives the client's packets. */
  readonly #socket: dgram.Socket;
  readonly #transfer: ReadTransfer;
  readonly #startedAtMs: number;
  /** When the core wants onTimer next; the armed timer may fire earlier (see #apply). */
  #deadlineMs: number | null = null;
  #timer: NodeJS.Timeout | null = null;
  #timerAtMs = 0;
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

  /** Binds a fresh ephemeral port; the transfer starts with start(). */
  static async open(params: SessionParams): Promise<TransferSession> {
    return new TransferSession(params, await bindTransferPort(params));
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

  /** The local address this transfer is bound to. */
  get local(): string {
    return this.#params.bindHost;
  }

  /** Ends the transfer, silently: its local address has left the host, so nothing can be sent from it. */
  addressGone(): void {
    this.#end('failed', { reason: 'addressGone', address: this.#params.bindHost });
  }

  start(): void {
    const step = this.#transfer.start(this.#params.request, this.#params.content.length, this.#params.now());
    this.#params.onStart?.(this.#transfer.settings);
    this.#apply(step);
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
      // Close only after the ERROR has left, so the client fails fast instead of timing out.
      this.#socket.send(bye, () => this.#end('failed', { reason: 'serverClosed' }));
    }
    return this.#closed;
  }

  #onMessage(message: Buffer, from: dgram.RemoteInfo): void {
    if (this.#ended) return;
    const { client } = this.#params;
    // A packet that reached the port between its bind and its connect may be anyone's: dropped.
    if (from.address !== client.address || from.port !== client.port) return;
    this.#heardFromClient = true;
    const decoded = decodePacket(message);
    if (!decoded.ok) {
      if (peekOpcode(message) === Opcode.error) return;
      const reply = encodePacket({
        type: 'error',
        code: TftpErrorCode.illegalOperation,
        message: `malformed packet: ${decoded.error.message}`,
      });
      this.#socket.send(reply, () => undefined);
      return;
    }
    this.#apply(this.#transfer.onPacket(decoded.packet, this.#params.now()));
  }

  #apply(step: TransferStep): void {
    for (const outgoing of step.send) this.#send(outgoing);
    if (step.done !== null) {
      this.#end(step.done, step.error);
      return;
    }
    this.#deadlineMs = step.nextTimerAtMs;
    // Lazy re-arming: every ACK that makes progress moves the deadline later, and replacing the
    // timer each time costs more than letting it fire early once per timeout and re-arming it
    // then. Only a deadline earlier than the armed timer (after a backoff ends) re-arms now.
    if (this.#deadlineMs !== null && (this.#timer === null || this.#deadlineMs < this.#timerAtMs)) {
      this.#arm(this.#deadlineMs);
    }
  }

  #arm(atMs: number): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timerAtMs = atMs;
    this.#timer = setTimeout(() => this.#onTimerFired(), Math.max(1, Math.ceil(atMs - this.#params.now())));
  }

  #onTimerFired(): void {
    this.#timer = null;
    if (this.#deadlineMs === null) return;
    const nowMs = this.#params.now();
    if (nowMs < this.#deadlineMs) {
      this.#arm(this.#deadlineMs);
      return;
    }
    this.#apply(this.#transfer.onTimer(nowMs));
  }

  #send(outgoing: Outgoing): void {
    // Sends are best effort and fire-and-forget: the retransmission timer covers a lost or
    // failed datagram, and without a callback dgram skips a completion callback per block.
    if (outgoing.kind === 'packet') {
      this.#socket.send(encodePacket(outgoing.packet));
      return;
    }
    // DATA goes out as a 4-byte header plus a view of the content, gathered by sendmsg: no
    // block is copied. The header cannot be reused: a send the kernel cannot take at once is
    // queued with its buffers.
    const header = new Uint8Array(4);
    header[1] = Opcode.data;
    header[2] = outgoing.block >>> 8;
    header[3] = outgoing.block & 0xff;
    const { content } = this.#params;
    this.#socket.send([header, content.subarray(outgoing.offset, outgoing.offset + outgoing.length)]);
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

// The server side of one TFTP read transfer as a pure state machine: a request, the ACKs and
// ERRORs the client sends and timer expiries go in; the packets to send, whether the transfer
// has ended and when to wake it next come out. No sockets, clocks or file I/O: DATA is
// described as a byte range of the file and time arrives as `nowMs`.
//
// Rules it keeps:
// - Options (RFC 2347): accepted ones are echoed in an OACK and the client's ACK 0 starts the
//   data; when none is accepted DATA 1 goes out at once.
// - Windows (RFC 7440): up to windowSize blocks are sent, then the sender waits. An ACK of any
//   block in the window starts a new window right after it; with windowSize 1 this is RFC 1350
//   lock-step.
// - Only the timer retransmits. An ACK that acknowledges nothing new (a duplicate or a stale
//   one) sends nothing, so a delayed ACK cannot double the traffic (the Sorcerer's Apprentice
//   bug, RFC 1123 §4.2.3.1).
// - Retransmission backs off exponentially and gives up after retriesMax attempts.
// - Block numbers wrap from 65535 to 0, so files of any size can be served.
// - ERROR 8 from the client (it declines the options, as EDK2 does once it has learned the
//   size from tsize) ends the transfer quietly, without a reply.
//
// Packets from a wrong TID never reach this machine: the driver's socket is connected to the
// client, and the kernel answers anyone else with ICMP port unreachable (src/boot/tftp/session.ts).
import {
  TftpErrorCode,
  type ErrorPacket,
  type OackPacket,
  type RequestPacket,
  type TftpOptions,
  type TftpPacket,
} from './packet.js';
import {
  BLOCK_SIZE_DEFAULT,
  BLOCK_SIZE_LIMIT,
  BLOCK_SIZE_MIN,
  TIMEOUT_S_MAX,
  TIMEOUT_S_MIN,
  TRANSFER_LIMITS_DEFAULT,
  WINDOW_SIZE_LIMIT,
  assertValidTransferLimits,
  type TransferLimits,
} from './limits.js';

/** Something to send: a DATA block to cut from the file, or a ready control packet. */
export type Outgoing =
  | {
      readonly kind: 'data';
      /** The block number as on the wire (wrapped to 0..65535). */
      readonly block: number;
      readonly offset: number;
      /** Less than the block size only for the final block; 0 when the size is a multiple of it. */
      readonly length: number;
    }
  | { readonly kind: 'packet'; readonly packet: OackPacket | ErrorPacket };

/** How a transfer ended: the file was delivered, the client declined the options (ERROR 8), or it failed. */
export type TransferEnd = 'completed' | 'optionsDeclined' | 'failed';

export type TransferFailure =
  | { readonly reason: 'timedOut'; readonly retries: number }
  | { readonly reason: 'clientError'; readonly code: number; readonly message: string };

/** What the driver must do after each event, in order: send, then stop or re-arm the timer. */
export interface TransferStep {
  readonly send: readonly Outgoing[];
  /** Set once the transfer has ended; the driver then releases its socket and timer. */
  readonly done: TransferEnd | null;
  /** Why the transfer failed; non-null exactly when done is 'failed'. */
  readonly error: TransferFailure | null;
  /** When to call onTimer next (same clock as nowMs); null once done. */
  readonly nextTimerAtMs: number | null;
}

export interface NegotiatedSettings {
  readonly blockSize: number;
  readonly windowSize: number;
  /** Base retransmission timeout: the client's timeout option, or the server default. */
  readonly timeoutMs: number;
  /** The options accepted, as echoed in the OACK; empty when no OACK is sent. */
  readonly accepted: TftpOptions;
}

/**
 * Decides which requested options to accept (RFC 2347: unknown or unacceptable ones are simply
 * left out of the OACK). blksize and windowsize are clamped to the server's maxima; timeout must
 * be echoed unchanged (RFC 2349) so it is accepted only within 1..255 s; tsize is answered with
 * the file size only when the client sent 0, as RFC 2349 prescribes for reads.
 */
export function negotiateOptions(
  requested: TftpOptions,
  fileSize: number,
  limits: TransferLimits,
): NegotiatedSettings {
  const accepted = new Map<string, string>();
  let blockSize = BLOCK_SIZE_DEFAULT;
  let windowSize = 1;
  let timeoutMs = limits.timeoutMs;
  for (const [name, value] of requested) {
    const n = Number(value);
    switch (name) {
      case 'blksize':
        if (n >= BLOCK_SIZE_MIN) {
          blockSize = Math.min(n, limits.blockSizeMax, BLOCK_SIZE_LIMIT);
          accepted.set(name, String(blockSize));
        }
        break;
      case 'windowsize':
        if (n >= 1) {
          windowSize = Math.min(n, limits.windowSizeMax, WINDOW_SIZE_LIMIT);
          accepted.set(name, String(windowSize));
        }
        break;
      case 'timeout':
        if (n >= TIMEOUT_S_MIN && n <= TIMEOUT_S_MAX) {
          timeoutMs = n * 1000;
          accepted.set(name, String(n));
        }
        break;
      case 'tsize':
        if (value.length > 0 && n === 0) accepted.set(name, String(fileSize));
        break;
      default:
        break; // unknown options are ignored, never refused
    }
  }
  return { blockSize, windowSize, timeoutMs, accepted };
}

type Phase = 'idle' | 'negotiating' | 'sending' | 'done';

function invariant(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`ReadTransfer: ${message}`);
}

/**
 * One read transfer. Blocks are tracked by their absolute index (1-based, never wrapping); the
 * wire number is that index modulo 65536.
 */
export class ReadTransfer {
  readonly #limits: TransferLimits;
  #phase: Phase = 'idle';
  #settings: NegotiatedSettings | null = null;
  #fileSize = 0;
  /** Absolute index of the final block, always sent (it is short, possibly empty). */
  #lastBlock = 0;
  /** Highest block the client has acknowledged; 0 before any DATA is acknowledged. */
  #ackedBlock = 0;
  /** Highest block sent in the current window. */
  #sentBlock = 0;
  /** Retransmissions since the last progress. */
  #retries = 0;
  #timerAtMs: number | null = null;
  #end: TransferEnd | null = null;
  #failure: TransferFailure | null = null;

  constructor(limits: TransferLimits = TRANSFER_LIMITS_DEFAULT) {
    assertValidTransferLimits(limits);
    this.#limits = limits;
  }

  /** The negotiated settings; available after start(). */
  get settings(): NegotiatedSettings {
    invariant(this.#settings !== null, 'settings read before start()');
    return this.#settings;
  }

  /** Begins the transfer of a file of fileSize bytes (as it will be sent, after any mode translation). */
  start(request: RequestPacket, fileSize: number, nowMs: number): TransferStep {
    invariant(this.#phase === 'idle', 'start() called twice');
    invariant(request.type === 'rrq', 'only read requests are served');
    invariant(Number.isSafeInteger(fileSize) && fileSize >= 0, `bad file size ${fileSize}`);
    const settings = negotiateOptions(request.options, fileSize, this.#limits);
    this.#settings = settings;
    this.#fileSize = fileSize;
    this.#lastBlock = Math.floor(fileSize / settings.blockSize) + 1;
    if (settings.accepted.size > 0) {
      this.#phase = 'negotiating';
      this.#armTimer(nowMs);
      return this.#step([this.#oack()]);
    }
    this.#phase = 'sending';
    this.#armTimer(nowMs);
    return this.#step(this.#sendWindow());
  }

  onPacket(packet: TftpPacket, nowMs: number): TransferStep {
    if (this.#phase === 'done' || this.#phase === 'idle') return this.#step([]);
    switch (packet.type) {
      case 'ack':
        return this.#onAck(packet.block, nowMs);
      case 'error':
        if (packet.code === TftpErrorCode.optionsDeclined) return this.#finish('optionsDeclined', null);
        return this.#finish('failed', { reason: 'clientError', code: packet.code, message: packet.message });
      case 'rrq':
      case 'wrq':
      case 'data':
      case 'oack':
        // Answered but otherwise ignored: a stray packet must not disturb a healthy transfer.
        return this.#step([
          {
            kind: 'packet',
            packet: {
              type: 'error',
              code: TftpErrorCode.illegalOperation,
              message: `illegal TFTP operation: expected ACK, got ${packet.type.toUpperCase()}`,
            },
          },
        ]);
      default: {
        const unknown: never = packet;
        throw new TypeError(`unknown packet ${JSON.stringify(unknown)}`);
      }
    }
  }

  /** Called when the timer set by nextTimerAtMs fires; an early call changes nothing. */
  onTimer(nowMs: number): TransferStep {
    if (this.#phase === 'done' || this.#phase === 'idle') return this.#step([]);
    if (this.#timerAtMs !== null && nowMs < this.#timerAtMs) return this.#step([]);
    if (this.#retries >= this.#limits.retriesMax) {
      return this.#finish('failed', { reason: 'timedOut', retries: this.#retries });
    }
    this.#retries += 1;
    this.#armTimer(nowMs);
    return this.#step(this.#phase === 'negotiating' ? [this.#oack()] : this.#sendWindow());
  }

  #onAck(wireBlock: number, nowMs: number): TransferStep {
    if (this.#phase === 'negotiating') {
      // Only ACK 0 acknowledges the OACK; anything else is stale and waits for the timer.
      if (wireBlock !== 0) return this.#step([]);
      this.#phase = 'sending';
      this.#retries = 0;
      this.#armTimer(nowMs);
      return this.#step(this.#sendWindow());
    }
    // Map the wire number onto the outstanding range (acked, sent]; it has at most 65535
    // blocks, so the mapping is unique across rollover.
    const advance = (wireBlock - (this.#ackedBlock & 0xffff)) & 0xffff;
    if (advance === 0 || advance > this.#sentBlock - this.#ackedBlock) return this.#step([]);
    this.#ackedBlock += advance;
    this.#retries = 0;
    if (this.#ackedBlock === this.#lastBlock) return this.#finish('completed', null);
    this.#armTimer(nowMs);
    return this.#step(this.#sendWindow());
  }

  /** (Re)sends the window that starts right after the last acknowledged block. */
  #sendWindow(): Outgoing[] {
    const { blockSize, windowSize } = this.settings;
    const first = this.#ackedBlock + 1;
    const last = Math.min(this.#ackedBlock + windowSize, this.#lastBlock);
    const send: Outgoing[] = [];
    for (let block = first; block <= last; block++) {
      const offset = (block - 1) * blockSize;
      send.push({
        kind: 'data',
        block: block & 0xffff,
        offset,
        length: Math.min(blockSize, this.#fileSize - offset),
      });
    }
    this.#sentBlock = last;
    return send;
  }

  #oack(): Outgoing {
    return { kind: 'packet', packet: { type: 'oack', options: this.settings.accepted } };
  }

  /** Sets the retransmission deadline for the current attempt: base × 2^retries, capped. */
  #armTimer(nowMs: number): void {
    const base = this.settings.timeoutMs;
    const cap = Math.max(base, this.#limits.timeoutMaxMs);
    this.#timerAtMs = nowMs + Math.min(base * 2 ** this.#retries, cap);
  }

  #finish(end: TransferEnd, failure: TransferFailure | null): TransferStep {
    this.#phase = 'done';
    this.#end = end;
    this.#failure = failure;
    this.#timerAtMs = null;
    return this.#step([]);
  }

  #step(send: readonly Outgoing[]): TransferStep {
    return { send, done: this.#end, error: this.#failure, nextTimerAtMs: this.#timerAtMs };
  }
}

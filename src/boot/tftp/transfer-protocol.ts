// The messages between the thread that admits TFTP requests and the threads that run the
// transfers (worker threads, or the same thread when the server runs without workers). Plain
// data only: everything here crosses postMessage by structured clone.
//
// Ordering, which the server relies on: a thread reports a transfer's events in the order they
// happen, 'started' before 'ended', and the 'ended' of a superseded transfer before the
// 'repeated' that answers the request which superseded it.
import type { RequestPacket } from './packet.js';
import type { TransferLimits } from './limits.js';
import type { SessionEnd, TftpPeer } from './session.js';

/** What every transfer thread is given once, at start. */
export interface TransferThreadConfig {
  readonly limits: TransferLimits;
  readonly socketType: 'udp4' | 'udp6';
}

export type TransferCommand =
  | {
      readonly type: 'start';
      /** Chosen by the admitting thread, unique for the server's lifetime. */
      readonly id: number;
      readonly client: TftpPeer;
      /**
       * The local address the request was sent to (the address of the listener that heard it,
       * or the listen host): the transfer's sockets bind to it, so every reply leaves from it.
       */
      readonly local: string;
      readonly request: RequestPacket;
      /**
       * The bytes to send, already translated for the mode. Backed by a SharedArrayBuffer for
       * files from the root, so that no transfer copies them; never written to once sent.
       */
      readonly content: Uint8Array;
    }
  /**
   * The client of transfer id sent another request from the same port. Answered with
   * 'repeated': admit false when it is a retransmission of the request that started the
   * transfer (the transfer has heard nothing from the client yet); otherwise the transfer is
   * superseded and the new request may be admitted.
   */
  | { readonly type: 'repeat'; readonly id: number; readonly sameRequest: boolean }
  /**
   * The local address has left this host: end the transfers bound to it ('addressGone'),
   * without a word to their clients, since nothing can be sent from it any more.
   */
  | { readonly type: 'addressGone'; readonly address: string }
  /** End every transfer with ERROR 0 to its client; answered with 'closed' once all sockets are closed. */
  | { readonly type: 'close' };

export type TransferEvent =
  /** A worker has loaded its code and takes commands. */
  | { readonly type: 'ready' }
  | { readonly type: 'started'; readonly id: number; readonly blockSize: number; readonly windowSize: number }
  /** The transfer could not start (its socket could not be bound); nothing was sent to the client. */
  | { readonly type: 'startFailed'; readonly id: number; readonly message: string }
  | { readonly type: 'ended'; readonly id: number; readonly end: SessionEnd }
  | { readonly type: 'repeated'; readonly id: number; readonly admit: boolean }
  | { readonly type: 'closed' };

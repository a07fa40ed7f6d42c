// The TFTP server's listening sockets on its port: the one on the configured host, and, when
// that host is the IPv4 wildcard and an AddressFeed is given, one more per local IPv4 address.
//
// Linux hands a datagram to the socket bound to its destination address before a wildcard one,
// so a request sent to the VIP reaches the VIP's listener, and the transfer bound to that
// listener's address answers from the VIP. The wildcard listener then hears only requests to an
// address the feed has not reported yet, such as the VIP in the moment after it was added: it
// stays silent to them, since its reply would leave from whatever source the kernel picks, which
// firmware ignores and a client could take for a wrong server; the client's retransmission
// reaches the address's own listener once bound. Should a listener fail to bind, the wildcard one
// answers again (from the kernel's source) until every address has its own. All of them set
// SO_REUSEADDR, without which Linux refuses a second bind of the port.
//
// Feed updates are applied one at a time, in order, always to the latest address list.
import type dgram from 'node:dgram';
import { listenerChanges, type AddressFeed } from './address-feed.js';
import { bindSocket, type TftpPeer } from './session.js';

/** A listening socket, and the address its transfers bind to. */
export interface Listener {
  /** The bound address: a local address, or the configured host (perhaps 0.0.0.0). */
  readonly local: string;
  /** Best effort, like every TFTP reply; does nothing once the listener is closed. */
  send(packet: Uint8Array, to: TftpPeer): void;
}

export interface ListenerSetParams {
  readonly socketType: dgram.SocketType;
  readonly host: string;
  readonly port: number;
  /** Only with host 0.0.0.0. */
  readonly feed?: AddressFeed | undefined;
  readonly onMessage: (message: Buffer, from: TftpPeer, listener: Listener) => void;
  /** The wildcard listener heard a datagram it does not answer (only with a feed). */
  readonly onUnanswered?: ((message: Buffer, from: TftpPeer) => void) | undefined;
  readonly onError: (error: unknown) => void;
  /** The address's listener has closed; transfers bound to it can no longer be answered. */
  readonly onAddressGone: (address: string) => void;
  /** The per-address listeners after a change, in bind order. */
  readonly onChange?: ((addresses: readonly string[]) => void) | undefined;
}

class BoundListener implements Listener {
  readonly local: string;
  readonly #socket: dgram.Socket;
  #open = true;

  constructor(socket: dgram.Socket, params: ListenerSetParams, answers: () => boolean = () => true) {
    this.#socket = socket;
    this.local = socket.address().address;
    socket.on('message', (message, from) => {
      const peer = { address: from.address, port: from.port };
      if (answers()) params.onMessage(message, peer, this);
      else params.onUnanswered?.(message, peer);
    });
    socket.on('error', (error) => params.onError(error));
  }

  get port(): number {
    return this.#socket.address().port;
  }

  send(packet: Uint8Array, to: TftpPeer): void {
    if (!this.#open) return;
    this.#socket.send(packet, to.port, to.address, () => undefined);
  }

  close(): Promise<void> {
    if (!this.#open) return Promise.resolve();
    this.#open = false;
    return new Promise((resolve) => this.#socket.close(() => resolve()));
  }
}

export class ListenerSet {
  readonly #params: ListenerSetParams;
  readonly #main: BoundListener;
  readonly #byAddress = new Map<string, BoundListener>();
  /** Addresses of the feed whose listener failed to bind; tried again at the feed's next change. */
  readonly #unbound: Set<string>;
  #unsubscribe: () => void = () => undefined;
  /** The feed's latest list, not yet applied; null when there is nothing new. */
  #wanted: readonly string[] | null = null;
  #applying: Promise<void> = Promise.resolve();
  #closed = false;

  private constructor(params: ListenerSetParams, main: BoundListener, unbound: Set<string>) {
    this.#params = params;
    this.#main = main;
    this.#unbound = unbound;
  }

  /** Binds the main listener, then (with a feed) one per current address; resolves once all are bound. */
  static async open(params: ListenerSetParams): Promise<ListenerSet> {
    const following = params.feed !== undefined;
    if (following && params.host !== '0.0.0.0') {
      throw new RangeError(
        `TFTP: following local addresses needs the listen host 0.0.0.0, not ${params.host}; ` +
          'with one given address, every reply already leaves from it',
      );
    }
    const socket = await bindSocket(params.socketType, params.port, params.host, following);
    const unbound = new Set<string>();
    const answers = (): boolean => !following || unbound.size > 0;
    const set = new ListenerSet(params, new BoundListener(socket, params, answers), unbound);
    if (params.feed !== undefined) {
      set.#unsubscribe = params.feed.subscribe((addresses) => set.#update(addresses));
      await set.#applying;
    }
    return set;
  }

  get port(): number {
    return this.#main.port;
  }

  /** The addresses with a listener of their own. */
  get addresses(): readonly string[] {
    return [...this.#byAddress.keys()];
  }

  close(): Promise<void> {
    this.#closed = true;
    this.#unsubscribe();
    this.#wanted = null;
    return this.#applying.then(async () => {
      await Promise.all([this.#main, ...this.#byAddress.values()].map((l) => l.close()));
      this.#byAddress.clear();
    });
  }

  #update(addresses: readonly string[]): void {
    if (this.#closed) return;
    const idle = this.#wanted === null;
    this.#wanted = addresses;
    // A run in progress picks the new list up when it finishes its current one.
    if (idle) this.#applying = this.#applying.then(() => this.#applyLatest());
  }

  async #applyLatest(): Promise<void> {
    while (this.#wanted !== null && !this.#closed) {
      const wanted = this.#wanted;
      this.#wanted = null;
      await this.#apply(wanted);
    }
  }

  async #apply(addresses: readonly string[]): Promise<void> {
    const { add, remove } = listenerChanges(new Set(this.#byAddress.keys()), addresses);
    for (const address of this.#unbound) if (!addresses.includes(address)) this.#unbound.delete(address);
    for (const address of remove) {
      const listener = this.#byAddress.get(address);
      this.#byAddress.delete(address);
      await listener?.close();
      this.#params.onAddressGone(address);
    }
    for (const address of add) {
      if (this.#closed) return;
      try {
        const socket = await bindSocket(this.#params.socketType, this.port, address, true);
        this.#byAddress.set(address, new BoundListener(socket, this.#params));
        this.#unbound.delete(address);
      } catch (error) {
        // Tried again at the feed's next change; meanwhile the wildcard listener answers.
        this.#unbound.add(address);
        this.#params.onError(
          new Error(`TFTP could not listen on ${address}:${this.port}: ${String(error)}`, { cause: error }),
        );
      }
    }
    if (add.length > 0 || remove.length > 0) this.#params.onChange?.(this.addresses);
  }
}

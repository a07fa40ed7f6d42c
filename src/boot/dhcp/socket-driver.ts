// The DHCP server's UDP sockets: where requests come in and replies go out. No DHCP logic.
//
// Node's dgram cannot SO_BINDTODEVICE and cannot read IP_PKTINFO, so a listener "on an
// interface" is built from two sockets, both SO_REUSEADDR on the DHCP port:
// - 0.0.0.0:PORT receives what an unconfigured client broadcasts (a socket bound to a unicast
//   address never sees 255.255.255.255) and unicast to other local addresses, such as the VIP;
// - ADDRESS:PORT, ADDRESS being the interface's first IPv4 address, receives unicast to it and
//   sends every reply. Linux routes a limited broadcast out of the device that owns the sending
//   socket's bound address (route.c, "special hack" for lbcast), so 255.255.255.255 leaves
//   through the configured interface even with no default route.
// The wildcard socket hears broadcasts from every interface; the caller tells segments apart
// with `segment` (the interface's subnets). Without an interface, one socket on ADDRESS:PORT
// does everything: the relayed/unicast-only setup (`--dhcp-addr`).
//
// A reply to a datagram sent to one of this host's addresses must leave from that address: a
// client renewing with the server identifier (the VIP) or a relay checks where the answer comes
// from. Without IP_PKTINFO the only way to know where a datagram was sent is the socket that
// received it, so further sockets are bound on the addresses the caller names
// (setUnicastAddresses: the VIP while this host holds it); the kernel hands a datagram to the
// socket bound to its destination rather than to the wildcard one, and the reply goes back out
// of the socket it came in on.
import dgram from 'node:dgram';
import { networkInterfaces } from 'node:os';
import { isIPv4 } from 'node:net';

export interface DhcpSocketOptions {
  /** Listen on this interface (see the file comment). Takes precedence over `address`. */
  readonly interfaceName?: string;
  /** Listen address without an interface; default 0.0.0.0. */
  readonly address?: string;
  /** Default 67. */
  readonly port: number;
  /**
   * The interface's IPv4 subnets, primary first, as the caller knows them (the link watcher
   * sees interfaces without carrier, which os.networkInterfaces() leaves out). Default: read
   * with os.networkInterfaces().
   */
  readonly segment?: readonly Subnet[];
}

/** An IPv4 subnet one interface is on. */
export interface Subnet {
  readonly address: string;
  readonly prefix: number;
}

export interface DhcpPeer {
  readonly address: string;
  readonly port: number;
}

export interface DhcpSockets {
  /** The address replies are sent from. */
  readonly address: string;
  readonly port: number;
  /** The interface's subnets; empty without an interface. */
  readonly segment: readonly Subnet[];
  /**
   * Registers the one handler for every received datagram; `local` is the address it was sent
   * to when a socket bound to that address received it (undefined: the wildcard socket).
   */
  onMessage(handler: (message: Buffer, from: DhcpPeer, local: string | undefined) => void): void;
  onError(handler: (error: Error) => void): void;
  /**
   * Sends one datagram, from `local` when a socket is bound there (the address the request was
   * sent to), else from `address`; `done` gets the error, if any, once the kernel has it.
   */
  send(message: Uint8Array, to: DhcpPeer, done: (error: Error | null) => void, local?: string): void;
  /**
   * Binds a socket on each of `addresses` (besides `address`) and closes those bound on others.
   * An address that cannot be bound (no longer local) is left out and reported to onError.
   */
  setUnicastAddresses(addresses: readonly string[]): Promise<void>;
  close(): Promise<void>;
}

/** The IPv4 subnets configured on interface `name`, primary address first; [] when it has none. */
export function interfaceSubnets(name: string): Subnet[] {
  const entries = networkInterfaces()[name] ?? [];
  return entries
    .filter((entry) => entry.family === 'IPv4' && !entry.internal && entry.cidr !== null)
    .map((entry) => ({ address: entry.address, prefix: Number(entry.cidr?.split('/')[1]) }));
}

/** True when `address` is assigned to any interface of this host (network namespace). */
export function holdsAddress(address: string): boolean {
  return Object.values(networkInterfaces()).some((entries) =>
    (entries ?? []).some((entry) => entry.family === 'IPv4' && entry.address === address),
  );
}

/** How stale the default VIP check may be: far below a VIP move, far above a datagram's spacing. */
export const addressCheckMaxAgeMs = 250;

/**
 * holdsAddress(address), re-read at most every addressCheckMaxAgeMs: listing interfaces costs
 * ~40 µs, too much to pay per datagram in a boot storm.
 */
export function addressHolderCheck(address: string): () => boolean {
  let checkedAtMs = -Infinity;
  let held = false;
  return () => {
    const now = performance.now();
    if (now - checkedAtMs >= addressCheckMaxAgeMs) {
      held = holdsAddress(address);
      checkedAtMs = now;
    }
    return held;
  };
}

export async function openDhcpSockets(options: DhcpSocketOptions): Promise<DhcpSockets> {
  if (options.interfaceName === undefined) {
    const address = options.address ?? '0.0.0.0';
    if (!isIPv4(address)) throw new Error(`DHCP listen address "${address}" is not an IPv4 address`);
    const only = await bind(address, options.port);
    return new Sockets([only], only, [], address === '0.0.0.0');
  }
  const segment = options.segment ?? interfaceSubnets(options.interfaceName);
  const primary = segment[0];
  if (primary === undefined) {
    const known = Object.keys(networkInterfaces()).join(', ');
    throw new Error(
      `DHCP interface "${options.interfaceName}" has no IPv4 address (interfaces here: ${known}); ` +
        'assign one or listen with an address instead',
    );
  }
  const wildcard = await bind('0.0.0.0', options.port);
  try {
    const sender = await bind(primary.address, wildcard.address().port);
    return new Sockets([wildcard, sender], sender, segment, true);
  } catch (error) {
    await closeSocket(wildcard);
    throw error;
  }
}

class Sockets implements DhcpSockets {
  readonly address: string;
  readonly port: number;
  readonly segment: readonly Subnet[];
  readonly #fixed: readonly dgram.Socket[];
  readonly #sender: dgram.Socket;
  /** Whether a wildcard socket hears what is sent to other local addresses (then more may bind). */
  readonly #wildcard: boolean;
  /** Sockets bound on further local addresses, by address. */
  readonly #unicast = new Map<string, dgram.Socket>();
  #onMessage: ((message: Buffer, from: DhcpPeer, local: string | undefined) => void) | undefined;
  #onError: ((error: Error) => void) | undefined;
  #closed = false;

  constructor(
    fixed: readonly dgram.Socket[],
    sender: dgram.Socket,
    segment: readonly Subnet[],
    wildcard: boolean,
  ) {
    this.#fixed = fixed;
    this.#sender = sender;
    this.segment = segment;
    this.#wildcard = wildcard;
    const bound = sender.address();
    this.address = bound.address;
    this.port = bound.port;
  }

  onMessage(handler: (message: Buffer, from: DhcpPeer, local: string | undefined) => void): void {
    this.#onMessage = handler;
    for (const socket of this.#fixed) this.#listen(socket);
  }

  onError(handler: (error: Error) => void): void {
    this.#onError = handler;
    for (const socket of this.#fixed) socket.on('error', handler);
  }

  send(message: Uint8Array, to: DhcpPeer, done: (error: Error | null) => void, local?: string): void {
    const from = local === undefined ? undefined : this.#unicast.get(local);
    (from ?? this.#sender).send(message, to.port, to.address, done);
  }

  async setUnicastAddresses(addresses: readonly string[]): Promise<void> {
    if (!this.#wildcard || this.#closed) return;
    const wanted = new Set(addresses.filter((a) => a !== this.address && a !== '0.0.0.0'));
    for (const [address, socket] of this.#unicast) {
      if (wanted.has(address)) continue;
      this.#unicast.delete(address);
      await closeSocket(socket);
    }
    for (const address of wanted) {
      if (this.#unicast.has(address)) continue;
      try {
        const socket = await bind(address, this.port);
        if (this.#closed) {
          await closeSocket(socket);
          return;
        }
        this.#unicast.set(address, socket);
        this.#listen(socket);
        if (this.#onError !== undefined) socket.on('error', this.#onError);
      } catch (error) {
        this.#onError?.(error as Error);
      }
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    const all = [...this.#fixed, ...this.#unicast.values()];
    this.#unicast.clear();
    await Promise.all(all.map(closeSocket));
  }

  #listen(socket: dgram.Socket): void {
    const bound = socket.address().address;
    const local = bound === '0.0.0.0' ? undefined : bound;
    socket.on('message', (message, from) =>
      this.#onMessage?.(message, { address: from.address, port: from.port }, local),
    );
  }
}

/**
 * SO_RCVBUF asked for: a boot storm arrives in bursts faster than one event-loop turn drains
 * them, and the 208 KiB default holds only ~100 requests. The kernel caps it at
 * net.core.rmem_max without an error, so raising that sysctl raises this too.
 */
export const receiveBufferBytes = 4 * 1024 * 1024;

async function bind(address: string, port: number): Promise<dgram.Socket> {
  const socket = dgram.createSocket({ type: 'udp4', reuseAddr: true, recvBufferSize: receiveBufferBytes });
  await new Promise<void>((resolve, reject) => {
    const refuse = (error: Error): void => {
      socket.close();
      reject(error);
    };
    socket.once('error', refuse);
    socket.bind({ address, port }, () => {
      socket.off('error', refuse);
      resolve();
    });
  });
  // Offers and NAKs go to 255.255.255.255; the kernel refuses that without SO_BROADCAST.
  socket.setBroadcast(true);
  return socket;
}

function closeSocket(socket: dgram.Socket): Promise<void> {
  return new Promise((resolve) => socket.close(() => resolve()));
}

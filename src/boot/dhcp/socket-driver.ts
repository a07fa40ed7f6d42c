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
  /** Registers the one handler for every received datagram. */
  onMessage(handler: (message: Buffer, from: DhcpPeer) => void): void;
  onError(handler: (error: Error) => void): void;
  /** Sends one datagram; `done` gets the error, if any, once the kernel has it. */
  send(message: Uint8Array, to: DhcpPeer, done: (error: Error | null) => void): void;
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
    return new Sockets([only], only, []);
  }
  const segment = interfaceSubnets(options.interfaceName);
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
    return new Sockets([wildcard, sender], sender, segment);
  } catch (error) {
    await closeSocket(wildcard);
    throw error;
  }
}

class Sockets implements DhcpSockets {
  readonly address: string;
  readonly port: number;
  readonly segment: readonly Subnet[];
  readonly #all: readonly dgram.Socket[];
  readonly #sender: dgram.Socket;

  constructor(all: readonly dgram.Socket[], sender: dgram.Socket, segment: readonly Subnet[]) {
    this.#all = all;
    this.#sender = sender;
    this.segment = segment;
    const bound = sender.address();
    this.address = bound.address;
    this.port = bound.port;
  }

  onMessage(handler: (message: Buffer, from: DhcpPeer) => void): void {
    for (const socket of this.#all) {
      socket.on('message', (message, from) => handler(message, { address: from.address, port: from.port }));
    }
  }

  onError(handler: (error: Error) => void): void {
    for (const socket of this.#all) socket.on('error', handler);
  }

  send(message: Uint8Array, to: DhcpPeer, done: (error: Error | null) => void): void {
    this.#sender.send(message, to.port, to.address, done);
  }

  async close(): Promise<void> {
    await Promise.all(this.#all.map(closeSocket));
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

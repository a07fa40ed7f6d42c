// The local addresses the TFTP server answers from, and how its listeners follow them.
//
// Node's dgram cannot tell which local address a request arrived on (no IP_PKTINFO), nor bind
// an address the host does not have yet (no IP_FREEBIND). So the server keeps one listener per
// local IPv4 address, besides the wildcard one, and binds each transfer to the address of the
// listener that heard its request: every reply then leaves from the address the client asked
// (docs/decisions/0006-tftp-server.md, "Replies from the address asked"). The addresses come
// from an AddressFeed, which the node's link watcher provides.
import { isIPv4 } from 'node:net';

export type { AddressFeed } from '../../platform/link-watch.js';

export interface ListenerChanges {
  /** Addresses to bind a listener on, in the order given. */
  readonly add: readonly string[];
  /** Bound addresses that are gone: their listeners close and their transfers end. */
  readonly remove: readonly string[];
}

/**
 * What turns the listeners bound on `bound` into one per address of `current`. Anything that is
 * not a unicast-usable IPv4 address (IPv6, the wildcard, a broadcast, a malformed entry) gets no
 * listener: only the wildcard listener hears requests to it, and answers none while every
 * listener is bound (listeners.ts).
 */
export function listenerChanges(bound: ReadonlySet<string>, current: readonly string[]): ListenerChanges {
  const wanted = new Set(current.filter(isListenableIpv4));
  return {
    add: [...wanted].filter((address) => !bound.has(address)),
    remove: [...bound].filter((address) => !wanted.has(address)),
  };
}

function isListenableIpv4(address: string): boolean {
  return isIPv4(address) && address !== '0.0.0.0' && address !== '255.255.255.255';
}

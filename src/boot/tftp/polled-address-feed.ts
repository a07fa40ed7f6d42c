// TEMPORARY, to be replaced by the node's link watcher (src/boot/link-watch.ts), which provides
// the same AddressFeed from netlink: until then, the host's IPv4 addresses read every interval.
// A new address (the VIP arriving) gets its TFTP listener within one interval; meanwhile the
// wildcard listener answers requests to it, as before.
import { networkInterfaces } from 'node:os';
import type { AddressFeed } from './address-feed.js';

export const addressPollIntervalMsDefault = 1000;

/** Every IPv4 address of this host (network namespace), loopback included, sorted. */
export function localIpv4Addresses(): string[] {
  const addresses = Object.values(networkInterfaces())
    .flatMap((entries) => entries ?? [])
    .filter((entry) => entry.family === 'IPv4')
    .map((entry) => entry.address);
  return [...new Set(addresses)].sort();
}

export function polledAddressFeed(
  intervalMs = addressPollIntervalMsDefault,
  read: () => readonly string[] = localIpv4Addresses,
): AddressFeed {
  return {
    subscribe(listener) {
      let last = [...read()];
      listener(last);
      const timer = setInterval(() => {
        const now = [...read()];
        if (now.length === last.length && now.every((address, i) => address === last[i])) return;
        last = now;
        listener(now);
      }, intervalMs);
      // The poll alone never keeps a process alive.
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}

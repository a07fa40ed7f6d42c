// The host's default socket receive buffer (net.core.rmem_default), raised for a benchmark run
// and put back afterwards. perfdhcp never sets SO_RCVBUF, so its socket gets this default
// (208 KiB on Debian): at 6,000-8,000 exchanges/s that holds 10-20 ms of replies, and a
// load generator descheduled for longer on a shared 2-core machine drops replies the server
// did send, which perfdhcp then reports as the server's drops. The sysctl is host-wide (a
// network namespace cannot set it), so every system measured in the run gets the same value.
import { readFileSync, writeFileSync } from 'node:fs';

const path = '/proc/sys/net/core/rmem_default';

/** What was set; `restore` puts the previous value back (safe to call more than once). */
export interface RcvbufDefault {
  readonly previousBytes: number;
  readonly bytes: number;
  restore(): void;
}

export function readRcvbufDefault(): number {
  return Number(readFileSync(path, 'utf8').trim());
}

/** Sets the default to `bytes` (never lowers it); throws with the reason when it cannot. */
export function raiseRcvbufDefault(bytes: number): RcvbufDefault {
  const previousBytes = readRcvbufDefault();
  const target = Math.max(bytes, previousBytes);
  if (target !== previousBytes) writeFileSync(path, `${target}\n`);
  let restored = false;
  return {
    previousBytes,
    bytes: readRcvbufDefault(),
    restore: () => {
      if (restored || target === previousBytes) return;
      restored = true;
      writeFileSync(path, `${previousBytes}\n`);
    },
  };
}

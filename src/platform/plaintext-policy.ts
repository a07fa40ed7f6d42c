// Where plaintext gRPC may go. Without TLS anyone on the path reads every token, credential and
// command, so plaintext stays on loopback: a node started with --insecure listens there only, and
// the CLI and the worker send no token to anything else. A lab on a private network may opt out,
// but only by naming the danger with the flag below (and, for booted machines, the kernel argument
// a node with that flag adds to its iPXE scripts, so their workers may follow it).
import { isIP } from 'node:net';
import { parseHostPort } from './host-port.js';

/** The opt-out, spelled the same on `slipway server`, the CLI and `slipway worker`. */
export const insecureNetworkFlag = '--insecure-allow-network';

/** On the kernel command line of machines booted by a node started with insecureNetworkFlag. */
export const insecureNetworkKernelArg = 'slipway.insecure_allow_network=1';

/** Whether HOST (a name or an address, IPv6 maybe in brackets) is this machine's loopback. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || h === '0:0:0:0:0:0:0:1' || /^::ffff:127\./.test(h);
  return false;
}

/** Whether HOST:PORT names a loopback host; anything that does not parse counts as not. */
export function isLoopbackAddress(hostPort: string): boolean {
  const parsed = parseHostPort(hostPort);
  return parsed !== undefined && isLoopbackHost(parsed.host);
}

/** The first of `servers` a plaintext secret must not be sent to, if any. */
function firstNonLoopback(servers: readonly string[]): string | undefined {
  return servers.find((s) => !isLoopbackAddress(s));
}

/**
 * Why `secret` (e.g. "the operator token") must not go to `servers` without TLS, naming the
 * first server that is not loopback and the fixes; undefined when all of them are loopback.
 */
export function plaintextSecretRefusal(servers: readonly string[], secret: string): string | undefined {
  const server = firstNonLoopback(servers);
  if (server === undefined) return undefined;
  return (
    `refusing to send ${secret} in plaintext to ${server}, which is not a loopback address: pass ` +
    '--ca FILE (the cluster CA, ca.crt from `slipway bootstrap`; or SLIPWAY_CA) to use TLS, or ' +
    `${insecureNetworkFlag} for a lab on a private network`
  );
}

// What a balancer in front of the nodes' gRPC API is asked to do, independent of the proxy that
// does it: where it listens, which nodes it spreads calls over, how often it checks them. The
// HAProxy and Envoy renderers take the same spec, validated here once, so a bad address or id is
// refused with the field named before any configuration text exists.
import { parseHostPort, type HostPort } from '../platform/host-port.js';
import { isMemberId, memberIdForm } from './member-id.js';

/** One node behind the balancer: its member id (the server's name) and its API address. */
export interface BalancedNode {
  readonly id: string;
  readonly apiAddr: string;
}

/** Active health checking of each node (grpc.health.v1 Check). */
export interface HealthCheckTiming {
  readonly intervalMs: number;
  /** Consecutive failed checks that take a node out. */
  readonly fall: number;
  /** Consecutive passed checks that bring it back. */
  readonly rise: number;
}

/**
 * TLS on both sides, with the files `slipway bootstrap` makes: clients get the certificate in
 * `certFile` with its key in `keyFile` (Envoy), or both in `pemFile` (HAProxy); each node's
 * certificate is verified against `caFile`.
 */
export interface BalancerTls {
  readonly certFile: string;
  readonly keyFile: string;
  readonly pemFile: string;
  readonly caFile: string;
}

export interface BalancerSpec {
  /** HOST:PORT the balancer serves gRPC (h2c) on. */
  readonly listenAddr: string;
  /** The nodes, in a fixed order: a server's position gives its id, and the ids place it on the hash ring. */
  readonly nodes: readonly BalancedNode[];
  /** Defaults to defaultHealthCheck. */
  readonly healthCheck?: HealthCheckTiming;
  /** HOST:PORT of a read-only status page (HAProxy stats, Envoy admin); none when absent. */
  readonly statsAddr?: string;
  /** Plaintext h2c on both sides when absent, as on a development cluster (`--insecure`). */
  readonly tls?: BalancerTls;
  /**
   * Absolute path of HAProxy's runtime API socket (admin level), through which
   * `slipway balancer follow` keeps the server list in step with the membership; none when absent.
   */
  readonly runtimeSocket?: string;
}

/**
 * Two misses a second apart take a node out: long enough to ride out one lost check, short
 * enough that workers stop landing on a dead node within about 2 s.
 */
export const defaultHealthCheck: HealthCheckTiming = { intervalMs: 1000, fall: 2, rise: 2 };

/** The request header whose value picks the node: worker streams stick to one node per worker. */
export const stickyHeader = 'x-worker-id';

export const balancedNodesMax = 64;

/** Bad input to a balancer renderer; the message names the field and what it must be. */
export class BalancerSpecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BalancerSpecError';
  }
}

/** Splits HOST:PORT (IPv6 in brackets), or throws naming `field`. */
export function hostPortOf(field: string, addr: string): HostPort {
  const parsed = parseHostPort(addr);
  if (parsed === undefined) {
    throw new BalancerSpecError(
      `${field} "${addr}" must be HOST:PORT with a port 1-65535, for example 127.0.0.1:7001`,
    );
  }
  return parsed;
}

/** A spec that passed validBalancerSpec, with its defaults filled in. */
export interface ValidBalancerSpec {
  readonly listenAddr: string;
  readonly nodes: readonly BalancedNode[];
  readonly healthCheck: HealthCheckTiming;
  readonly statsAddr: string | undefined;
  readonly tls: BalancerTls | undefined;
  readonly runtimeSocket: string | undefined;
}

/** Throws BalancerSpecError on the first problem found; returns the spec with defaults filled in. */
export function validBalancerSpec(spec: BalancerSpec): ValidBalancerSpec {
  hostPortOf('listenAddr', spec.listenAddr);
  if (spec.nodes.length === 0) throw new BalancerSpecError('nodes must list at least one node');
  if (spec.nodes.length > balancedNodesMax) {
    throw new BalancerSpecError(`nodes lists ${spec.nodes.length} nodes; at most ${balancedNodesMax}`);
  }
  const ids = new Set<string>();
  const addrs = new Map<string, string>([[spec.listenAddr, 'listenAddr']]);
  const claim = (field: string, addr: string): void => {
    const owner = addrs.get(addr);
    if (owner !== undefined) throw new BalancerSpecError(`${field} "${addr}" is already used by ${owner}`);
    addrs.set(addr, field);
  };
  spec.nodes.forEach((node, i) => {
    // A member id is also a valid HAProxy server name.
    if (!isMemberId(node.id)) {
      throw new BalancerSpecError(
        `nodes[${i}].id "${node.id}" must be ${memberIdForm}, starting with a letter or digit`,
      );
    }
    if (ids.has(node.id)) throw new BalancerSpecError(`nodes[${i}].id "${node.id}" appears twice`);
    ids.add(node.id);
    hostPortOf(`nodes[${i}].apiAddr`, node.apiAddr);
    claim(`nodes[${i}].apiAddr`, node.apiAddr);
  });
  if (spec.statsAddr !== undefined) {
    hostPortOf('statsAddr', spec.statsAddr);
    claim('statsAddr', spec.statsAddr);
  }
  const healthCheck = spec.healthCheck ?? defaultHealthCheck;
  validHealthCheck(healthCheck);
  if (spec.tls !== undefined) validTls(spec.tls);
  if (spec.runtimeSocket !== undefined) validRuntimeSocket(spec.runtimeSocket);
  return {
    listenAddr: spec.listenAddr,
    nodes: spec.nodes,
    healthCheck,
    statsAddr: spec.statsAddr,
    tls: spec.tls,
    runtimeSocket: spec.runtimeSocket,
  };
}

/** Throws BalancerSpecError unless each timing is in its range. */
export function validHealthCheck(healthCheck: HealthCheckTiming): void {
  checkRange('healthCheck.intervalMs', healthCheck.intervalMs, 100, 60_000);
  checkRange('healthCheck.fall', healthCheck.fall, 1, 10);
  checkRange('healthCheck.rise', healthCheck.rise, 1, 10);
}

/**
 * A UNIX socket path holds at most 107 bytes, and HAProxy binds PATH.PID.tmp first and renames
 * it, so some room is left for that suffix.
 */
export const runtimeSocketPathMax = 90;

/** Throws BalancerSpecError unless `path` can be a runtime socket's path on a configuration line. */
export function validRuntimeSocket(path: string): void {
  if (!/^\/[A-Za-z0-9_./@+-]*$/.test(path) || path.length > runtimeSocketPathMax) {
    throw new BalancerSpecError(
      `runtimeSocket "${path}" must be an absolute path of at most ${runtimeSocketPathMax} letters, digits and _ . / @ + -`,
    );
  }
}

/** Absolute paths, which a configuration line holds as they are. */
function validTls(tls: BalancerTls): void {
  for (const field of ['certFile', 'keyFile', 'pemFile', 'caFile'] as const) {
    if (!/^\/[A-Za-z0-9_./@+-]*$/.test(tls[field])) {
      throw new BalancerSpecError(
        `tls.${field} "${tls[field]}" must be an absolute path of letters, digits and _ . / @ + -`,
      );
    }
  }
}

function checkRange(field: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new BalancerSpecError(`${field} must be a whole number from ${min} to ${max}, got ${value}`);
  }
}

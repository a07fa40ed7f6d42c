// Proxyless gRPC for the CLI and the worker (docs/decisions/0024-xds.md): `--server xds:///NAME`
// resolves and balances through @grpc/grpc-js-xds against the nodes' own xDS server, so calls go
// straight to a healthy member, each worker's stream to the member its id hashes to.
// The xDS bootstrap is rendered here from `--xds-server HOST:PORT[,...]` (or SLIPWAY_XDS_SERVER)
// into GRPC_XDS_BOOTSTRAP_CONFIG, unless the operator set GRPC_XDS_BOOTSTRAP (a file) or
// GRPC_XDS_BOOTSTRAP_CONFIG. @grpc/grpc-js-xds loads only for an xds target: it is large, and
// the CLI's start time is measured (bench/cli.ts).
// On a TLS cluster (the CLI's --ca) grpc-js-xds asks a loopback tunnel that carries its xDS
// stream over TLS (./xds-tls-tunnel.ts), and the channel reaches the nodes with
// ./endpoint-tls.ts: both load only then.
import { connect } from 'node:net';
import { parseHostPort } from './host-port.js';
import type { XdsTlsTunnel, XdsTunnelError } from './xds-tls-tunnel.js';

/** `xds:///NAME`: the api_listener NAME of the nodes' xDS server (`slipway`). */
const xdsTargetPattern = /^xds:\/\/\/[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

export function isXdsTarget(target: string): boolean {
  return xdsTargetPattern.test(target);
}

/** Bad xDS flags; the caller turns it into its usage error. */
export class XdsTargetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'XdsTargetError';
  }
}

/** The xDS servers from `--xds-server` or SLIPWAY_XDS_SERVER, checked as HOST:PORT. */
export function parseXdsServers(flag: string | undefined): string[] {
  const list = (flag ?? process.env['SLIPWAY_XDS_SERVER'] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const s of list) {
    if (parseHostPort(s) === undefined) throw new XdsTargetError(`--xds-server: "${s}" must be HOST:PORT`);
  }
  return list;
}

/**
 * The bootstrap grpc-js-xds reads: plaintext to the xDS servers (the only channel credentials it
 * has besides Google's), and a node id that names the client in the servers' logs.
 */
export function xdsBootstrapJson(servers: readonly string[], nodeId: string): string {
  return JSON.stringify({
    xds_servers: servers.map((uri) => ({
      server_uri: uri,
      channel_creds: [{ type: 'insecure' }],
      server_features: ['xds_v3'],
    })),
    node: { id: nodeId, locality: {} },
  });
}

/** Whether a TCP connection to HOST:PORT opens within `timeoutMs`. */
function reachable(addr: string, timeoutMs: number): Promise<boolean> {
  const hp = parseHostPort(addr);
  if (hp === undefined) return Promise.resolve(false);
  return new Promise((resolve) => {
    const socket = connect({ host: hp.host.replace(/^\[|\]$/g, ''), port: hp.port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * `servers` with the first that accepts a connection in front: grpc-js-xds 1.14 talks to the
 * first xDS server only, and a node that is down must not keep a client from starting.
 */
export async function reachableFirst(servers: readonly string[], timeoutMs = 1000): Promise<string[]> {
  for (const s of servers) {
    if (await reachable(s, timeoutMs)) return [s, ...servers.filter((x) => x !== s)];
  }
  return [...servers];
}

let registered: Promise<void> | undefined;
let tunnel: XdsTlsTunnel | undefined;
/** The clients using the tunnel (enableXds less releaseXds): it closes when none is left. */
let users = 0;

/**
 * Whether this process enabled xDS. grpc-js-xds then keeps its xDS stream, and its retries, open
 * for the life of the process: a command that is done must end the process itself.
 */
export function xdsEnabled(): boolean {
  return registered !== undefined;
}

/** xDS on a TLS cluster: how the xDS servers are reached. */
export interface XdsTls {
  /** The cluster CA (PEM). */
  readonly ca: Buffer;
  /** How long finding an xDS server that speaks TLS may take (the CLI's --timeout). */
  readonly timeoutMs?: number;
  /**
   * Whether to fail when no xDS server answers now (the CLI, which would only wait out its
   * timeout); the worker keeps trying instead. TLS refused by a server fails either way: a wrong
   * CA or address, which waiting does not mend.
   */
  readonly needServerNow?: boolean;
  /** A connection to the xDS servers that failed (the worker logs it). */
  readonly onError?: (err: XdsTunnelError) => void;
}

/**
 * Makes `xds:` targets work in this process (once): the bootstrap in place, then grpc-js-xds
 * loaded and registered. With `tls`, grpc-js-xds reaches the xDS servers through a TLS tunnel;
 * the caller ends its use with releaseXds. Throws XdsTargetError when no bootstrap can be had, and
 * XdsTunnelError when TLS to the xDS servers fails (see XdsTls.needServerNow).
 */
export function enableXds(xdsServers: readonly string[], nodeId: string, tls?: XdsTls): Promise<void> {
  const own =
    (process.env['GRPC_XDS_BOOTSTRAP'] ?? '') !== '' ||
    (process.env['GRPC_XDS_BOOTSTRAP_CONFIG'] ?? '') !== '';
  if (!own && xdsServers.length === 0) {
    throw new XdsTargetError(
      "an xds:/// server needs the xDS servers to ask: --xds-server HOST:PORT[,...] (the nodes' API addresses; " +
        'or SLIPWAY_XDS_SERVER), or an xDS bootstrap file in GRPC_XDS_BOOTSTRAP',
    );
  }
  users += 1;
  registered ??= (async () => {
    if (!own) {
      const servers =
        tls === undefined ? await reachableFirst(xdsServers) : [await openTunnel(xdsServers, tls)];
      process.env['GRPC_XDS_BOOTSTRAP_CONFIG'] = xdsBootstrapJson(servers, nodeId);
    }
    const xds = await import('@grpc/grpc-js-xds');
    xds.register();
  })();
  return registered;
}

/** Opens the TLS tunnel and checks that it reaches an xDS server: its address. */
async function openTunnel(xdsServers: readonly string[], tls: XdsTls): Promise<string> {
  const { XdsTlsTunnel, XdsTunnelError } = await import('./xds-tls-tunnel.js');
  const opened = await XdsTlsTunnel.open({
    servers: xdsServers,
    ca: tls.ca,
    ...(tls.onError === undefined ? {} : { onError: tls.onError }),
  });
  try {
    await opened.check(tls.timeoutMs);
  } catch (err) {
    if (!(err instanceof XdsTunnelError) || err.refusedByTls || tls.needServerNow === true) {
      await opened.close();
      throw err;
    }
    tls.onError?.(err);
  }
  tunnel = opened;
  return opened.address;
}

/**
 * One user of enableXds is done. The last one closes the TLS tunnel: grpc-js-xds then has no xDS
 * server, so this process is done with xds:/// targets.
 */
export async function releaseXds(): Promise<void> {
  users = Math.max(0, users - 1);
  if (users > 0 || tunnel === undefined) return;
  const closing = tunnel;
  tunnel = undefined;
  await closing.close();
}

// The xDS hop of proxyless gRPC on a TLS cluster (docs/decisions/0024-xds.md). grpc-js-xds 1.14
// reaches its xDS server only in plaintext (or with Google's credentials), and a TLS cluster's
// xDS server is on its TLS API port. So the process listens on 127.0.0.1 (an ephemeral port),
// gives grpc-js-xds that address as its plaintext xDS server, and carries each connection
// accepted there over TLS to an xDS server: verified against the cluster CA and the server's own
// address, as a direct --server HOST:PORT is, with HTTP/2 agreed by ALPN. Plaintext exists only
// in this process's loopback hop; a connection that cannot have TLS is closed, never sent on.
// Each connection goes to the first server that completes TLS, starting from the last one that
// did, so a node that dies does not cut the client off from xDS.
// The tunnel lends no credential (the API port asks clients for no certificate): a local process
// that connects to it gets what it would get connecting to the node itself.
import { createServer, isIP } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import type { TLSSocket } from 'node:tls';
import { parseHostPort } from './host-port.js';

const noH2 = "it did not agree to HTTP/2 by ALPN, so it is no gRPC server (is it a node's API address?)";

/** Why one xDS server gave no TLS connection. */
export class XdsServerError extends Error {
  /** `connect`: nothing answered there; `tls`: something answered, and TLS with it failed. */
  readonly stage: 'connect' | 'tls';
  readonly server: string;

  constructor(server: string, stage: 'connect' | 'tls', reason: string) {
    super(`${server}: ${reason}`);
    this.name = 'XdsServerError';
    this.server = server;
    this.stage = stage;
  }
}

/** No xDS server gave a TLS connection; `failures` says why, server by server. */
export class XdsTunnelError extends Error {
  readonly failures: readonly XdsServerError[];

  constructor(failures: readonly XdsServerError[], why = '') {
    const refused = failures.some((f) => f.stage === 'tls');
    super(
      `no xDS server could be reached over TLS${why}: ${failures.map((f) => f.message).join('; ')}` +
        (refused
          ? ". Check that --ca (or SLIPWAY_CA) is the cluster's ca.crt from `slipway bootstrap` and that " +
            "--xds-server names the nodes' API addresses (TLS nodes, started with --tls-dir)"
          : ". Check --xds-server: the nodes' API addresses, HOST:PORT,..."),
    );
    this.name = 'XdsTunnelError';
    this.failures = failures;
  }

  /** Whether a server answered and TLS failed: a wrong CA or address, which no retry mends. */
  get refusedByTls(): boolean {
    return this.failures.some((f) => f.stage === 'tls');
  }
}

export interface XdsTunnelOptions {
  /** The xDS servers, HOST:PORT (checked by parseXdsServers). */
  readonly servers: readonly string[];
  /** The cluster CA (PEM). */
  readonly ca: Buffer;
  /** How long one server may take to accept the TCP connection. */
  readonly connectTimeoutMs?: number;
  /** How long the TLS handshake may take once connected. */
  readonly handshakeTimeoutMs?: number;
  /** A connection from grpc-js-xds that could not be carried (it was closed): for the log. */
  readonly onError?: (err: XdsTunnelError) => void;
}

export class XdsTlsTunnel {
  readonly #o: XdsTunnelOptions;
  readonly #listener: Server;
  readonly #open = new Set<Socket>();
  #preferred = 0;

  private constructor(o: XdsTunnelOptions, listener: Server) {
    this.#o = o;
    this.#listener = listener;
  }

  /** Listens on 127.0.0.1, on an ephemeral port (or `port`); a connection there goes over TLS. */
  static async open(o: XdsTunnelOptions, port = 0): Promise<XdsTlsTunnel> {
    if (o.servers.length === 0) throw new Error('an xDS tunnel needs at least one xDS server');
    const listener = createServer({ pauseOnConnect: true });
    const tunnel = new XdsTlsTunnel(o, listener);
    listener.on('connection', (local: Socket) => tunnel.#carry(local));
    await new Promise<void>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(port, '127.0.0.1', () => {
        listener.off('error', reject);
        resolve();
      });
    });
    return tunnel;
  }

  /** Where grpc-js-xds connects: 127.0.0.1:PORT. */
  get address(): string {
    return `127.0.0.1:${(this.#listener.address() as AddressInfo).port}`;
  }

  /**
   * Opens one TLS connection, as a connection from grpc-js-xds would, and closes it: the server
   * it reached, or an XdsTunnelError naming each failure. Within `timeoutMs` in all.
   */
  async check(timeoutMs = 10_000): Promise<string> {
    const { socket, server } = await this.#reach(Date.now() + timeoutMs);
    socket.destroy();
    return server;
  }

  /** Stops listening and closes every connection it carries. */
  close(): Promise<void> {
    for (const s of this.#open) s.destroy();
    this.#open.clear();
    return new Promise((resolve) => this.#listener.close(() => resolve()));
  }

  #carry(local: Socket): void {
    this.#open.add(local);
    local.once('close', () => this.#open.delete(local));
    // An error of the local side ends the pair below; it needs no other handling.
    local.on('error', () => undefined);
    this.#reach(Infinity).then(
      ({ socket: remote }) => {
        if (local.destroyed) {
          remote.destroy();
          return;
        }
        this.#open.add(remote);
        remote.on('error', () => undefined);
        // One side ending or failing ends the other: a half-open pair would hang the client.
        remote.once('close', () => {
          this.#open.delete(remote);
          local.destroy();
        });
        local.once('close', () => remote.destroy());
        local.pipe(remote);
        remote.pipe(local);
      },
      (err: unknown) => {
        local.destroy();
        if (err instanceof XdsTunnelError) this.#o.onError?.(err);
      },
    );
  }

  /** A TLS connection to the first server that gives one, from the last that did; by `deadline`. */
  async #reach(deadline: number): Promise<{ socket: TLSSocket; server: string }> {
    const servers = this.#o.servers;
    const failures: XdsServerError[] = [];
    for (let i = 0; i < servers.length; i++) {
      const at = (this.#preferred + i) % servers.length;
      const server = servers[at]!;
      const left = deadline - Date.now();
      if (left <= 0) throw new XdsTunnelError(failures, ' in time');
      try {
        const socket = await tlsTo(server, this.#o.ca, {
          connectTimeoutMs: Math.min(this.#o.connectTimeoutMs ?? 1000, left),
          handshakeTimeoutMs: Math.min(this.#o.handshakeTimeoutMs ?? 5000, left),
        });
        this.#preferred = at;
        return { socket, server };
      } catch (err) {
        if (!(err instanceof XdsServerError)) throw err;
        failures.push(err);
      }
    }
    throw new XdsTunnelError(failures);
  }
}

/**
 * TLS to `server` verified against `ca` and the server's host (an IP address against the
 * certificate's IP names, a name against its DNS names and as SNI), agreeing on h2.
 */
export function tlsTo(
  server: string,
  ca: Buffer,
  timing: { connectTimeoutMs: number; handshakeTimeoutMs: number },
): Promise<TLSSocket> {
  const hp = parseHostPort(server);
  if (hp === undefined) return Promise.reject(new XdsServerError(server, 'connect', 'not HOST:PORT'));
  const host = hp.host.replace(/^\[|\]$/g, '');
  return new Promise((resolve, reject) => {
    let connected = false;
    let settled = false;
    const socket = connectTls({
      host,
      port: hp.port,
      ca,
      ALPNProtocols: ['h2'],
      // SNI is for names only (RFC 6066); the certificate is checked against `host` either way.
      ...(isIP(host) === 0 ? { servername: host } : {}),
    });
    const fail = (stage: 'connect' | 'tls', reason: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      reject(new XdsServerError(server, stage, reason));
    };
    let timer = setTimeout(
      () => fail('connect', `no connection within ${timing.connectTimeoutMs} ms`),
      timing.connectTimeoutMs,
    );
    // Errors after the handshake are the carrier's to handle (it listens for them too).
    socket.on('error', (err: NodeJS.ErrnoException) =>
      fail(connected ? 'tls' : 'connect', reason(err, connected)),
    );
    socket.once('connect', () => {
      connected = true;
      clearTimeout(timer);
      timer = setTimeout(
        () =>
          fail(
            'tls',
            `no TLS handshake within ${timing.handshakeTimeoutMs} ms (is it a TLS node's API address?)`,
          ),
        timing.handshakeTimeoutMs,
      );
    });
    socket.once('secureConnect', () => {
      if (socket.alpnProtocol !== 'h2') {
        fail('tls', noH2);
        return;
      }
      settled = true;
      clearTimeout(timer);
      resolve(socket);
    });
  });
}

/** Node's words for a failed connection, with what they usually mean here. */
function reason(err: NodeJS.ErrnoException, connected: boolean): string {
  if (!connected) return err.message;
  const code = err.code ?? 'no code';
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ECONNRESET')
    return `it does not speak TLS, ${code} (is it a TLS node's API address?)`;
  if (code === 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL') return noH2;
  // OpenSSL's own text spans lines and names its source files: its code says it better.
  return /SSL routines/.test(err.message) ? `TLS failed, ${code}` : `${err.message} (${code})`;
}

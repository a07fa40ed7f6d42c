// The HTTP boot server: per-machine iPXE scripts and the files they load (see paths.ts for
// the URL layout). GET and HEAD only; scripts are rendered from the inventory on every request
// (never cached: the record may change between boots), files are streamed from disk with
// single-range support. Artifacts registered in the replicated state (src/artifacts/) are
// served from this node's verified copy of their content, by digest, ahead of the local
// directories; while that copy is still being fetched from a peer a request waits for it, a
// bounded time, then gets 503 with Retry-After: never a partial or wrong file.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { constants, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { BootInventory } from '../inventory.js';
import { FileRoot, contentTypeOf } from './file-root.js';
import {
  defaultBootArtifacts,
  IpxeScriptError,
  renderIpxeScript,
  type IpxeScriptSettings,
} from './ipxe-script.js';
import { routeOf, type BootRoute } from './paths.js';
import { pipeFile } from './pipe-file.js';
import { chooseRange } from './range.js';

export interface HttpRequestEvent {
  readonly method: string;
  /** The request target as received (path and query). */
  readonly url: string;
  readonly route: BootRoute['kind'];
  readonly status: number;
  /** Bytes of body sent (planned, for file responses). */
  readonly bytes: number;
  readonly remoteAddress: string;
}

export interface HttpBootServerOptions {
  /** Default 0.0.0.0. */
  readonly host?: string;
  /** Default 8080; 0 picks a free port. */
  readonly port?: number;
  readonly inventory: BootInventory;
  readonly script: IpxeScriptSettings;
  /** Served under /artifacts/; without it those requests are 404. */
  readonly artifactsDir?: string;
  /** Served under /binaries/ (the iPXE binaries, for UEFI HTTP boot); without it, 404. */
  readonly binariesDir?: string;
  /** Served under /boot/: the boot OS (`slipway bootos build --out DIR`); without it, 404. */
  readonly bootOsDir?: string;
  /**
   * Artifacts registered in the replicated state: served under /artifacts/NAME, and the boot
   * OS files (vmlinuz-ARCH, initramfs-ARCH) under /boot/NAME, ahead of the directories.
   */
  readonly registered?: RegisteredArtifacts;
  /** How long a request for registered content still being fetched waits. Default 30 s. */
  readonly registeredWaitMs?: number;
  /** Answers POST /credential (a booted machine's claim); without it, 404. */
  readonly credentials?: CredentialClaims;
  readonly logger: Logger;
  /** Called once per finished response; must not throw. */
  readonly onRequest?: (event: HttpRequestEvent) => void;
  /**
   * A connection on which no byte moved for this long is closed (and its response reported):
   * a machine that reset or lost its link mid-download would otherwise hold it, and its file,
   * until TCP gave up many minutes later. Default 60 s.
   */
  readonly stalledMs?: number;
}

export const httpStalledMsDefault = 60_000;

/** Hands out per-boot worker credentials (src/api/credential-issuer.ts). */
export interface CredentialClaims {
  /** `body` is the request's parsed JSON; the answer's body is sent as JSON. */
  claim(body: unknown, remoteAddress: string): Promise<{ readonly status: number; readonly body: unknown }>;
}

/** The replicated artifact catalogue as the server needs it (src/artifacts/catalogue.ts). */
export interface RegisteredArtifacts {
  /**
   * What to serve for `name`: undefined when no artifact is registered under it (the local
   * directory answers then), this node's verified copy, or why there is none now. Waits up to
   * `waitMs` for a copy being fetched.
   */
  resolve(name: string, waitMs: number): Promise<RegisteredContent | undefined>;
}

export type RegisteredContent =
  | { readonly kind: 'file'; readonly path: string; readonly sha256: string; readonly bytes: number }
  | { readonly kind: 'unavailable'; readonly reason: string; readonly retryAfterS: number };

/** The boot OS files a registered artifact may stand in for under /boot/. */
const bootOsNames: ReadonlySet<string> = new Set(
  Object.values(defaultBootArtifacts).flatMap((a) => [a.kernel, a.initrd]),
);

const registeredWaitMsDefault = 30_000;

/** A claim is a small JSON object; anything longer is refused unread. */
const claimBytesMax = 4096;

export interface HttpBootServer {
  readonly address: string;
  readonly port: number;
  /** Stops accepting, ends open connections and resolves once the server is closed. */
  close(): Promise<void>;
}

export const defaultHttpPort = 8080;

export async function startHttpBootServer(options: HttpBootServerOptions): Promise<HttpBootServer> {
  const roots = {
    artifact: options.artifactsDir === undefined ? undefined : await FileRoot.open(options.artifactsDir),
    binary: options.binariesDir === undefined ? undefined : await FileRoot.open(options.binariesDir),
    'boot-os': options.bootOsDir === undefined ? undefined : await FileRoot.open(options.bootOsDir),
  };
  const handler = new BootHandler(options, roots);
  const server = http.createServer((request, response) => handler.handle(request, response));
  // With no 'timeout' listener, Node destroys a socket idle this long; a slow reader still
  // moves bytes and is kept.
  server.timeout = options.stalledMs ?? httpStalledMsDefault;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? defaultHttpPort, options.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (error) => options.logger.error({ err: error }, 'HTTP boot server error'));
  const bound = server.address() as AddressInfo;
  options.logger.info({ address: bound.address, port: bound.port }, 'HTTP boot server listening');
  return {
    address: bound.address,
    port: bound.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

interface Roots {
  readonly artifact: FileRoot | undefined;
  readonly binary: FileRoot | undefined;
  readonly 'boot-os': FileRoot | undefined;
}

interface Reply {
  readonly status: number;
  readonly headers: http.OutgoingHttpHeaders;
  readonly body: string;
}

class BootHandler {
  readonly #options: HttpBootServerOptions;
  readonly #roots: Roots;

  constructor(options: HttpBootServerOptions, roots: Roots) {
    this.#options = options;
    this.#roots = roots;
  }

  handle(request: IncomingMessage, response: ServerResponse): void {
    const url = request.url ?? '/';
    const route = routeOf(url.split('?')[0] ?? '/');
    const method = request.method ?? 'GET';
    // Read now: once the connection is gone (a stalled download closed) the socket no longer knows.
    const remoteAddress = request.socket.remoteAddress ?? '';
    const record = (status: number, bytes: number): void =>
      this.#options.onRequest?.({
        method,
        url,
        route: route.kind,
        status,
        bytes,
        remoteAddress,
      });
    this.#serve(request, response, route).then(
      (bytes) => record(response.statusCode, bytes),
      (error: unknown) => {
        this.#options.logger.error({ err: error, url }, 'HTTP boot request failed');
        if (!response.headersSent) send(response, method, text(500, 'internal server error\n'));
        else response.destroy();
        record(500, 0);
      },
    );
  }

  /** Answers one request; resolves with the body bytes sent. */
  async #serve(request: IncomingMessage, response: ServerResponse, route: BootRoute): Promise<number> {
    const method = request.method ?? 'GET';
    if (route.kind === 'credential') return this.#claim(request, response);
    if (method !== 'GET' && method !== 'HEAD') {
      return send(response, method, {
        ...text(405, `method ${method} not allowed\n`),
        headers: { 'content-type': 'text/plain; charset=utf-8', allow: 'GET, HEAD' },
      });
    }
    switch (route.kind) {
      case 'ipxe-script':
        return send(response, method, this.#script(route.mac));
      case 'artifact':
      case 'binary':
      case 'boot-os': {
        const registered = await this.#registered(route);
        if (registered !== undefined) return serveRegistered(request, response, route.name, registered);
        const root = this.#roots[route.kind];
        if (root === undefined)
          return send(response, method, text(404, `no ${route.kind}s are served here\n`));
        return serveFile(request, response, root, route.name);
      }
      case 'not-found':
        return send(response, method, text(404, `not found: ${route.reason}\n`));
      default: {
        const unknown: never = route;
        throw new Error(`unhandled route ${JSON.stringify(unknown)}`);
      }
    }
  }

  /** The registered content standing for this route's file, if an artifact has its name. */
  async #registered(route: BootRoute): Promise<RegisteredContent | undefined> {
    const catalogue = this.#options.registered;
    if (catalogue === undefined) return undefined;
    if (route.kind !== 'artifact' && !(route.kind === 'boot-os' && bootOsNames.has(route.name)))
      return undefined;
    return catalogue.resolve(route.name, this.#options.registeredWaitMs ?? registeredWaitMsDefault);
  }

  async #claim(request: IncomingMessage, response: ServerResponse): Promise<number> {
    const method = request.method ?? 'GET';
    const claims = this.#options.credentials;
    if (claims === undefined) return send(response, method, text(404, 'credentials are not issued here\n'));
    if (method !== 'POST') {
      return send(response, method, {
        ...text(405, `method ${method} not allowed\n`),
        headers: { 'content-type': 'text/plain; charset=utf-8', allow: 'POST' },
      });
    }
    const raw = await readBody(request, claimBytesMax);
    if (raw === undefined)
      return send(response, method, json(413, { error: `a claim is at most ${claimBytesMax} bytes` }));
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      return send(response, method, json(400, { error: 'the claim is not JSON' }));
    }
    const answer = await claims.claim(body, request.socket.remoteAddress ?? '');
    return send(response, method, json(answer.status, answer.body));
  }

  #script(mac: string): Reply {
    const record = this.#options.inventory.byMac(mac);
    if (record === undefined) return text(404, `no iPXE script for ${mac}: unknown hardware\n`);
    if (!record.hardware.netboot.allowPXE) {
      return text(404, `no iPXE script for ${mac}: network boot is off for ${record.hardware.id}\n`);
    }
    try {
      const script = renderIpxeScript(record, this.#options.script);
      // Once per boot of a machine: when it reached iPXE is worth an operator's log.
      this.#options.logger.info(
        { mac, hardware: record.hardware.id, kind: script.kind },
        'iPXE script served',
      );
      return {
        status: 200,
        headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' },
        body: script.text,
      };
    } catch (error) {
      if (!(error instanceof IpxeScriptError)) throw error;
      this.#options.logger.warn({ mac, hardware: record.hardware.id, err: error }, 'iPXE script refused');
      return text(500, `no iPXE script for ${mac}: ${error.message}\n`);
    }
  }
}

function json(status: number, body: unknown): Reply {
  return {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
    body: JSON.stringify(body),
  };
}

/** The request's body, or undefined once it passes `bytesMax` (the rest is not read). */
function readBody(request: IncomingMessage, bytesMax: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    request.on('data', (chunk: Buffer) => {
      length += chunk.length;
      if (length > bytesMax) {
        request.pause();
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => resolve(Buffer.concat(chunks)));
    request.on('error', reject);
  });
}

function text(status: number, body: string): Reply {
  return { status, headers: { 'content-type': 'text/plain; charset=utf-8' }, body };
}

function send(response: ServerResponse, method: string, reply: Reply): number {
  const body = Buffer.from(reply.body, 'utf8');
  response.writeHead(reply.status, { ...reply.headers, 'content-length': body.length });
  response.end(method === 'HEAD' ? undefined : body);
  return method === 'HEAD' ? 0 : body.length;
}

async function serveFile(
  request: IncomingMessage,
  response: ServerResponse,
  root: FileRoot,
  name: string,
): Promise<number> {
  const method = request.method ?? 'GET';
  const opening = await root.openFile(name);
  if (opening.kind === 'refused') return send(response, method, text(opening.status, `${opening.reason}\n`));
  const { handle, stats } = opening;
  const etag = `"${stats.ino.toString(16)}-${stats.size.toString(16)}-${Math.floor(stats.mtimeMs).toString(16)}"`;
  return serveHandle(request, response, name, handle, stats, etag);
}

/**
 * A registered artifact: the verified copy named by its digest, whose ETag is the digest (the
 * same on every node, so a client resuming a range on another node keeps its If-Range).
 */
async function serveRegistered(
  request: IncomingMessage,
  response: ServerResponse,
  name: string,
  content: RegisteredContent,
): Promise<number> {
  const method = request.method ?? 'GET';
  if (content.kind === 'unavailable') {
    return send(response, method, {
      status: 503,
      headers: { 'content-type': 'text/plain; charset=utf-8', 'retry-after': String(content.retryAfterS) },
      body: `${content.reason}\n`,
    });
  }
  let handle: FileHandle;
  try {
    handle = await open(content.path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (error) {
    if (!(error instanceof Error && 'code' in error && error.code === 'ENOENT')) throw error;
    return send(response, method, {
      status: 503,
      headers: { 'content-type': 'text/plain; charset=utf-8', 'retry-after': '30' },
      body: `artifact "${name}": the local copy of sha256 ${content.sha256} is gone\n`,
    });
  }
  let stats: Stats;
  try {
    stats = await handle.stat();
  } catch (error) {
    await handle.close();
    throw error;
  }
  if (!stats.isFile() || stats.size !== content.bytes) {
    // The store only renames verified content into place; anything else is not served.
    await handle.close();
    return send(response, method, {
      status: 503,
      headers: { 'content-type': 'text/plain; charset=utf-8', 'retry-after': '30' },
      body: `artifact "${name}": the local copy of sha256 ${content.sha256} has ${stats.size} bytes, not ${content.bytes}\n`,
    });
  }
  return serveHandle(request, response, name, handle, stats, `"sha256:${content.sha256}"`);
}

/** Serves an open file (whole, or one range); closes the handle. */
async function serveHandle(
  request: IncomingMessage,
  response: ServerResponse,
  name: string,
  handle: FileHandle,
  stats: Stats,
  etag: string,
): Promise<number> {
  const method = request.method ?? 'GET';
  let streaming = false;
  try {
    const size = stats.size;
    const lastModified = stats.mtime.toUTCString();
    const choice = chooseRange({
      range: request.headers.range,
      ifRange: headerText(request.headers['if-range']),
      size,
      etag,
      lastModified,
    });
    const common = {
      'accept-ranges': 'bytes',
      'last-modified': lastModified,
      etag,
      'content-type': contentTypeOf(name),
    };
    if (choice.kind === 'unsatisfiable') {
      return send(response, method, {
        ...text(416, `range not satisfiable: ${name} has ${size} bytes\n`),
        headers: { 'content-type': 'text/plain; charset=utf-8', 'content-range': `bytes */${size}` },
      });
    }
    const start = choice.kind === 'part' ? choice.start : 0;
    const end = choice.kind === 'part' ? choice.end : size - 1;
    const length = size === 0 ? 0 : end - start + 1;
    response.writeHead(choice.kind === 'part' ? 206 : 200, {
      ...common,
      'content-length': length,
      ...(choice.kind === 'part' ? { 'content-range': `bytes ${start}-${end}/${size}` } : {}),
    });
    if (method === 'HEAD' || length === 0) {
      response.end();
      return 0;
    }
    streaming = true;
    await pipeFile(handle, response, start, end);
    return length;
  } finally {
    if (!streaming) await handle.close();
  }
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

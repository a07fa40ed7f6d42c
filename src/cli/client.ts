// The CLI's connection to the cluster: a list of node API addresses tried in turn, moving on
// when a node is unreachable or has no leader, so that one dead node never blocks an operator.
import { readFileSync } from 'node:fs';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import type { ChannelCredentials, ClientReadableStream, handleUnaryCall, ServiceError } from '@grpc/grpc-js';
// The generated clients load on a service's first call (kvs, controls, audits below): a
// command imports only the service it calls, and control.js alone is as large as the other two.
import type {
  ArtifactAddRequest,
  ArtifactAddResponse,
  ControlClient,
  ControlServer,
  MachineEvent,
  WorkflowEvent,
} from '../gen/control.js';
import type { AuditClient, AuditServer } from '../gen/audit.js';
import type { KvClient, KvServer } from '../gen/kv.js';
import type { MaintenanceClient, SnapshotSaveResponse } from '../gen/maintenance.js';
import { connectionFailure, isServiceError, refusedBeforeAppend } from '../wire/contract.js';
import { answerBytesMax } from './errors.js';
import { UsageError } from './output.js';
import { isHostPort } from '../platform/host-port.js';
import { plaintextSecretRefusal } from '../platform/plaintext-policy.js';
import {
  enableXds,
  isXdsTarget,
  parseXdsServers,
  releaseXds,
  XdsTargetError,
} from '../platform/xds-target.js';

export { xdsEnabled } from '../platform/xds-target.js';

export const defaultServer = '127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003';
// A read moves on to the next node on any UNAVAILABLE. A write moves on only when the failure
// proves it was not applied (refusedBeforeAppend): a write whose proposal was dropped by a
// leadership change, or whose connection broke mid-call, may still commit, and sending it again
// elsewhere would apply it twice. A write that carries a session is the exception: the cluster
// answers a repeated (client_id, seq) with the first result instead of applying it again.
const failoverCodes = new Set<number>([status.UNAVAILABLE]);
const readMethods: ReadonlySet<string> = new Set([
  'get',
  'range',
  'status',
  'memberList',
  'hardwareGet',
  'hardwareList',
  'hardwareToken',
  'templateGet',
  'templateList',
  'workflowGet',
  'workflowList',
  'leaseList',
  'powerJobGet',
  'powerJobList',
  'artifactList',
  'auditList',
]);

function mayFailOver(method: string, req: unknown, err: ServiceError): boolean {
  if (!failoverCodes.has(err.code)) return false;
  if (readMethods.has(method) || hasSession(req)) return true;
  return refusedBeforeAppend(err);
}

function hasSession(req: unknown): boolean {
  if (typeof req !== 'object' || req === null || !('session' in req)) return false;
  const session: unknown = req.session;
  return typeof session === 'object' && session !== null;
}

/** The error of a write that failed in a way that leaves its outcome unknown. */
function outcomeUnknown(err: ServiceError): ServiceError {
  const details = `${err.details} (the write may still be applied; it was not sent again: check before retrying)`;
  return Object.assign(new Error(`${String(err.code)} UNAVAILABLE: ${details}`), {
    code: err.code,
    details,
    metadata: err.metadata,
  });
}

/** True when the call failed because no connection to the node could be made. */
function neverConnected(err: ServiceError): boolean {
  return (
    err.code === status.UNAVAILABLE &&
    /No connection established|ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|ENOTFOUND|DNS resolution failed/.test(
      err.details,
    )
  );
}

/**
 * The error for a command no node answered: every address tried, why, and what to do, instead
 * of grpc-js's text about the last address alone. Still UNAVAILABLE, so callers see the same code.
 */
function noNodeAnswered(
  servers: readonly string[],
  last: ServiceError,
  /** Every failure's details: grpc-js names the cause only on the first tries of a channel. */
  failures: string,
): ServiceError {
  const why = connectionFailure(failures) ?? 'no connection';
  const hint =
    servers.join(',') === defaultServer
      ? 'start a local cluster with `npm start`, or name the nodes with --server HOST:PORT,... (env SLIPWAY_SERVER)'
      : 'check that the nodes run and the addresses are their --api-addr (or the balancer), e.g. `slipway --server HOST:PORT,... cluster status`';
  const details = `no Slipway node answered at ${servers.join(', ')} (${why}): ${hint}`;
  return Object.assign(new Error(`${String(status.UNAVAILABLE)} UNAVAILABLE: ${details}`), {
    code: status.UNAVAILABLE,
    details,
    metadata: last.metadata,
  });
}

export function parseServers(text: string | undefined): string[] {
  const list = (text ?? process.env['SLIPWAY_SERVER'] ?? defaultServer)
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (list.length === 0) throw new UsageError('--server must list at least one HOST:PORT');
  if (list.some(isXdsTarget)) {
    if (list.length > 1)
      throw new UsageError('--server xds:///NAME stands alone: the xDS server gives the nodes');
    return list;
  }
  for (const s of list) {
    if (!isHostPort(s)) {
      throw new UsageError(`--server: "${s}" must be HOST:PORT, or xds:///NAME for proxyless gRPC`);
    }
  }
  return list;
}

/** `f()`, with a bad xDS flag as the usage error it is. */
export function usage<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof XdsTargetError) throw new UsageError(err.message);
    throw err;
  }
}

/** The cluster CA from --ca or SLIPWAY_CA, for TLS to the nodes. */
export function clusterCa(file: string | undefined): Buffer | undefined {
  const path = file ?? process.env['SLIPWAY_CA'];
  if (path === undefined || path === '') return undefined;
  try {
    return readFileSync(path);
  } catch (err) {
    throw new UsageError(`cannot read the CA certificate ${path}: ${(err as Error).message}`);
  }
}

type Callback<Res> = (err: ServiceError | null, res: Res) => void;
type Unary<Req, Res> = (req: Req, md: Metadata, opts: { deadline: number }, cb: Callback<Res>) => unknown;
type ReqOf<S, M extends keyof S> = S[M] extends handleUnaryCall<infer R, infer _> ? R : never;
type ResOf<S, M extends keyof S> = S[M] extends handleUnaryCall<infer _, infer R> ? R : never;

export type KvMethod =
  | 'registerClient'
  | 'put'
  | 'get'
  | 'delete'
  | 'compareAndSet'
  | 'range'
  | 'status'
  | 'memberAdd'
  | 'memberRemove'
  | 'memberList'
  | 'leaderTransfer';
export type RequestOf<M extends KvMethod> = ReqOf<KvServer, M>;
export type ResponseOf<M extends KvMethod> = ResOf<KvServer, M>;
export type ControlMethod = Exclude<
  // The client has no index signature, so its keys are the method names themselves.
  Extract<
    keyof ControlClient,
    `${'hardware' | 'template' | 'workflow' | 'token' | 'lease' | 'power' | 'artifact' | 'node' | 'pool'}${string}`
  >,
  'workflowEvents' | 'artifactAdd' | 'hardwareHistory'
>;

export type AuditMethod = 'auditList' | 'auditRetention';

/** The first message of an artifact upload: what the content is (see proto/control.proto). */
export type ArtifactUploadHead = Pick<ArtifactAddRequest, 'name' | 'bytes' | 'sha256' | 'expectVersion'>;

/** Every channel's options: answers up to answerBytesMax (see src/cli/errors.ts). */
const channelOptions = { 'grpc.max_receive_message_length': answerBytesMax };

/** An upload is allowed this long on top of --timeout per MiB (at least 1 MiB/s to the node). */
const uploadMsPerMiB = 1000;

export interface ClientOptions {
  readonly timeoutMs?: number;
  /** The operator token sent as `authorization: Bearer`. */
  readonly token?: string | undefined;
  /** The cluster CA (PEM): TLS to the nodes when set. */
  readonly ca?: Buffer | undefined;
  /** Send the token over plaintext beyond loopback all the same (--insecure-allow-network). */
  readonly insecureAllowNetwork?: boolean | undefined;
  /** With an xds:/// server: the xDS servers to ask, HOST:PORT,... (--xds-server; else SLIPWAY_XDS_SERVER). */
  readonly xdsServer?: string | undefined;
}

export class ClusterClient {
  readonly #servers: readonly string[];
  readonly #timeoutMs: number;
  readonly #token: string | undefined;
  readonly #ca: Buffer | undefined;
  #creds: ChannelCredentials;
  #kvClients: KvClient[] | undefined;
  #controlClients: ControlClient[] | undefined;
  #auditClients: AuditClient[] | undefined;
  #maintenanceClients: MaintenanceClient[] | undefined;
  #preferred = 0;
  readonly #xdsServers: readonly string[];
  /** Set once this client has enabled xDS (an xds:/// server): it releases it on close. */
  #xdsReady: Promise<void> | undefined;

  constructor(servers: readonly string[], opts: ClientOptions | number = {}) {
    const o = typeof opts === 'number' ? { timeoutMs: opts } : opts;
    this.#servers = servers;
    this.#timeoutMs = o.timeoutMs ?? 10_000;
    this.#token = o.token;
    this.#ca = o.ca;
    this.#xdsServers = servers.some(isXdsTarget) ? usage(() => parseXdsServers(o.xdsServer)) : [];
    if (o.token !== undefined && o.ca === undefined && o.insecureAllowNetwork !== true) {
      // Through xDS the nodes are the members the xDS servers name: as near as those servers.
      const refusal = plaintextSecretRefusal(
        servers.some(isXdsTarget) ? this.#xdsServers : servers,
        'the operator token',
      );
      if (refusal !== undefined) throw new UsageError(refusal);
    }
    this.#creds = o.ca === undefined ? credentials.createInsecure() : credentials.createSsl(o.ca);
  }

  /** Calls a Kv method on the first node that answers; see mayFailOver for when it moves on. */
  async call<M extends KvMethod>(method: M, req: RequestOf<M>): Promise<ResponseOf<M>> {
    return this.#failover(await this.#kvs(), method, req);
  }

  /** Calls a Control method on the first node that answers; see mayFailOver for when it moves on. */
  async control<M extends ControlMethod>(
    method: M,
    req: ReqOf<ControlServer, M>,
  ): Promise<ResOf<ControlServer, M>> {
    return this.#failover(await this.#controls(), method, req);
  }

  /** Calls an Audit method on the first node that answers; see mayFailOver for when it moves on. */
  async audit<M extends AuditMethod>(method: M, req: ReqOf<AuditServer, M>): Promise<ResOf<AuditServer, M>> {
    return this.#failover(await this.#audits(), method, req);
  }

  /**
   * Streams a workflow's events from `fromSeq`, moving to the next node when a stream breaks and
   * resuming after the last event received, so none is missed or repeated. Resolves when the
   * stream ends normally (the workflow finished, or all events were sent without follow).
   */
  async events(
    workflowId: string,
    fromSeq: number,
    follow: boolean,
    onEvent: (e: WorkflowEvent) => void,
  ): Promise<void> {
    await this.#resumable(
      fromSeq,
      (client, next) => client.workflowEvents({ workflowId, fromSeq: next, follow }, this.#metadata()),
      onEvent,
    );
  }

  /**
   * Streams a machine's lifecycle history from `fromSeq` (docs/decisions/0028), resuming on the
   * next node after a broken stream as events() does. With `follow`, it ends only when the
   * machine is deleted (or the caller stops).
   */
  async hardwareHistory(
    hardwareId: string,
    fromSeq: number,
    follow: boolean,
    onEvent: (e: MachineEvent) => void,
  ): Promise<void> {
    await this.#resumable(
      fromSeq,
      (client, next) => client.hardwareHistory({ id: hardwareId, fromSeq: next, follow }, this.#metadata()),
      onEvent,
    );
  }

  /** A server stream of events with dense seqs, resumed after the last one on another node. */
  async #resumable<E extends { readonly seq: number }>(
    fromSeq: number,
    open: (client: ControlClient, next: number) => ClientReadableStream<{ event?: E | undefined }>,
    onEvent: (e: E) => void,
  ): Promise<void> {
    const clients = await this.#controls();
    let next = fromSeq;
    let failures = 0;
    for (;;) {
      const i = this.#preferred % clients.length;
      const client = clients[i]!;
      try {
        await new Promise<void>((resolve, reject) => {
          const stream = open(client, next);
          stream.on('data', (msg: { event?: E }) => {
            const e = msg.event;
            if (e === undefined || e.seq < next) return;
            next = e.seq + 1;
            failures = 0;
            onEvent(e);
          });
          stream.on('error', reject);
          stream.on('end', resolve);
        });
        return;
      } catch (err) {
        const e = err as ServiceError;
        if (!failoverCodes.has(e.code) || ++failures > clients.length * 10) throw e;
        this.#preferred = i + 1;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  /**
   * Streams content to one node, which stores and verifies it and answers once it is registered
   * (committed). `content` opens the data afresh for each try. On UNAVAILABLE the next node is
   * tried: registering the same digest under the same name twice changes nothing, so a retry
   * after an upload whose answer was lost does no harm.
   */
  async uploadArtifact(
    head: ArtifactUploadHead,
    content: () => AsyncIterable<Uint8Array>,
  ): Promise<ArtifactAddResponse> {
    const clients = await this.#controls();
    const deadline = Date.now() + this.#timeoutMs + Math.ceil(head.bytes / (1 << 20)) * uploadMsPerMiB;
    let lastErr: ServiceError | null = null;
    for (let attempt = 0; attempt < clients.length && Date.now() < deadline; attempt++) {
      const i = (this.#preferred + attempt) % clients.length;
      const client = clients[i]!;
      try {
        const res = await new Promise<ArtifactAddResponse>((resolve, reject) => {
          const call = client.artifactAdd(this.#metadata(), { deadline }, (err, r) => {
            if (err === null) resolve(r);
            else reject(err);
          });
          const send = async (): Promise<void> => {
            const write = (message: ArtifactAddRequest): Promise<void> =>
              new Promise((done) => {
                if (call.write(message)) done();
                else call.once('drain', () => done());
              });
            await write({ ...head, data: Buffer.alloc(0) });
            for await (const data of content()) {
              await write({ name: '', bytes: 0, sha256: '', expectVersion: 0, data: Buffer.from(data) });
            }
            call.end();
          };
          // A failed call ends through the callback; a failed read of the file ends the call.
          send().catch((err: unknown) => {
            call.cancel();
            reject(err instanceof Error ? err : new Error(String(err)));
          });
        });
        this.#preferred = i;
        return res;
      } catch (err) {
        if (!isServiceError(err) || !failoverCodes.has(err.code)) throw err;
        lastErr = err;
      }
    }
    throw lastErr ?? new Error('no server answered');
  }

  /**
   * Streams a snapshot of the state (served by the leader; a follower relays it) into `onMessage`,
   * which may await (the stream pauses meanwhile). Moves to the next node only while nothing has
   * arrived yet: once the header has, a broken stream is an error for the caller to handle.
   */
  async snapshotSave(onMessage: (msg: SnapshotSaveResponse) => Promise<void>): Promise<void> {
    const { MaintenanceClient } = await import('../gen/maintenance.js');
    await this.#targetsReady();
    this.#maintenanceClients ??= this.#servers.map(
      (s) => new MaintenanceClient(s, this.#creds, channelOptions),
    );
    const clients = this.#maintenanceClients;
    let lastErr: ServiceError | null = null;
    for (let attempt = 0; attempt < clients.length * 3; attempt++) {
      const i = (this.#preferred + attempt) % clients.length;
      let received = false;
      try {
        await new Promise<void>((resolve, reject) => {
          const stream = clients[i]!.snapshotSave({}, this.#metadata());
          let failed = false;
          let pending = Promise.resolve();
          stream.on('data', (msg: SnapshotSaveResponse) => {
            received = true;
            stream.pause();
            pending = pending
              .then(() => onMessage(msg))
              .then(
                () => {
                  stream.resume();
                },
                (err: unknown) => {
                  failed = true;
                  stream.cancel();
                  reject(err instanceof Error ? err : new Error(String(err)));
                },
              );
          });
          stream.on('error', (err: ServiceError) => {
            if (!failed) reject(err);
          });
          stream.on('end', () => {
            pending.then(() => {
              if (!failed) resolve();
            }, reject);
          });
        });
        this.#preferred = i;
        return;
      } catch (err) {
        if (received || !isServiceError(err) || !failoverCodes.has(err.code)) throw err;
        lastErr = err;
        if (attempt % clients.length === clients.length - 1) await new Promise((r) => setTimeout(r, 200));
      }
    }
    throw lastErr ?? new Error('no server answered');
  }

  close(): void {
    for (const c of this.#maintenanceClients ?? []) c.close();
    for (const c of this.#kvClients ?? []) c.close();
    for (const c of this.#controlClients ?? []) c.close();
    for (const c of this.#auditClients ?? []) c.close();
    if (this.#xdsReady !== undefined) releaseXds().catch(() => undefined);
  }

  async #kvs(): Promise<KvClient[]> {
    if (this.#kvClients === undefined) {
      await this.#targetsReady();
      const { KvClient } = await import('../gen/kv.js');
      this.#kvClients ??= this.#servers.map((s) => new KvClient(s, this.#creds, channelOptions));
    }
    return this.#kvClients;
  }

  async #controls(): Promise<ControlClient[]> {
    if (this.#controlClients === undefined) {
      await this.#targetsReady();
      const { ControlClient } = await import('../gen/control.js');
      this.#controlClients ??= this.#servers.map((s) => new ControlClient(s, this.#creds, channelOptions));
    }
    return this.#controlClients;
  }

  async #audits(): Promise<AuditClient[]> {
    if (this.#auditClients === undefined) {
      await this.#targetsReady();
      const { AuditClient } = await import('../gen/audit.js');
      this.#auditClients ??= this.#servers.map((s) => new AuditClient(s, this.#creds, channelOptions));
    }
    return this.#auditClients;
  }

  /**
   * Loads grpc-js-xds before the first channel to an xds:/// server; nothing otherwise. On a TLS
   * cluster its xDS stream goes through a TLS tunnel, and the channel verifies each node it picks
   * against the address it dialed (src/platform/endpoint-tls.ts).
   */
  async #targetsReady(): Promise<void> {
    if (!this.#servers.some(isXdsTarget)) return;
    const ca = this.#ca;
    this.#xdsReady ??= (async () => {
      if (ca !== undefined) {
        const { EndpointTlsCredentials } = await import('../platform/endpoint-tls.js');
        this.#creds = new EndpointTlsCredentials(ca);
      }
      const tls = ca === undefined ? undefined : { ca, timeoutMs: this.#timeoutMs, needServerNow: true };
      await usage(() => enableXds(this.#xdsServers, 'slipway-cli', tls));
    })();
    await this.#xdsReady;
  }

  #metadata(): Metadata {
    const md = new Metadata();
    if (this.#token !== undefined) md.set('authorization', `Bearer ${this.#token}`);
    return md;
  }

  async #failover<Res>(clients: readonly object[], method: string, req: unknown): Promise<Res> {
    let lastErr: ServiceError | null = null;
    // Whether every failure so far was a node that could not be reached at all, and why.
    let noneReached = true;
    let unreachable = '';
    const deadline = Date.now() + this.#timeoutMs;
    for (let attempt = 0; attempt < clients.length * 3 && Date.now() < deadline; attempt++) {
      const i = (this.#preferred + attempt) % clients.length;
      const client = clients[i]!;
      try {
        const res = await new Promise<Res>((resolve, reject) => {
          const fn = (client as unknown as Record<string, Unary<unknown, Res>>)[method]!.bind(client);
          fn(req, this.#metadata(), { deadline }, (err: ServiceError | null, r: Res) => {
            if (err === null) resolve(r);
            else reject(err);
          });
        });
        this.#preferred = i;
        return res;
      } catch (err) {
        const e = err as ServiceError;
        if (!mayFailOver(method, req, e)) throw failoverCodes.has(e.code) ? outcomeUnknown(e) : e;
        lastErr = e;
        noneReached &&= neverConnected(e);
        unreachable += `${e.details}\n`;
        if (attempt % clients.length === clients.length - 1) await new Promise((r) => setTimeout(r, 200));
      }
    }
    // Through xDS the tunnel's own error already names the xDS server it could not reach.
    if (lastErr !== null && noneReached && !this.#servers.some(isXdsTarget))
      throw noNodeAnswered(this.#servers, lastErr, unreachable);
    throw lastErr ?? new Error('no server answered');
  }
}

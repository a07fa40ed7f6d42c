// The CLI's connection to the cluster: a list of node API addresses tried in turn, moving on
// when a node is unreachable or has no leader, so that one dead node never blocks an operator.
import { credentials, Metadata, status } from '@grpc/grpc-js';
import type { handleUnaryCall, ServiceError } from '@grpc/grpc-js';
import type { KvServer } from '../gen/kv.js';
import { KvClient } from '../gen/kv.js';
import { UsageError } from './output.js';

export const defaultServer = '127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003';
// Only errors that prove the request never reached a leader move on to the next node: a
// timed-out write may still commit, and sending it again elsewhere would run it twice.
const failoverCodes = new Set<number>([status.UNAVAILABLE]);

export function parseServers(text: string | undefined): string[] {
  const list = (text ?? process.env['SLIPWAY_SERVER'] ?? defaultServer)
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (list.length === 0) throw new UsageError('--server must list at least one HOST:PORT');
  for (const s of list) {
    if (!/^([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):\d{1,5}$/.test(s)) {
      throw new UsageError(`--server: "${s}" must be HOST:PORT`);
    }
  }
  return list;
}

type Callback<Res> = (err: ServiceError | null, res: Res) => void;
type Unary<Req, Res> = (req: Req, md: Metadata, opts: { deadline: number }, cb: Callback<Res>) => unknown;
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
export type RequestOf<M extends KvMethod> = KvServer[M] extends handleUnaryCall<infer R, infer _> ? R : never;
export type ResponseOf<M extends KvMethod> =
  KvServer[M] extends handleUnaryCall<infer _, infer R> ? R : never;

export class ClusterClient {
  private readonly clients: KvClient[];
  private readonly timeoutMs: number;
  private preferred = 0;

  constructor(servers: readonly string[], timeoutMs = 10_000) {
    this.clients = servers.map((s) => new KvClient(s, credentials.createInsecure()));
    this.timeoutMs = timeoutMs;
  }

  /** Calls `method` on the first node that answers; fails over on UNAVAILABLE and timeouts. */
  async call<M extends KvMethod>(method: M, req: RequestOf<M>): Promise<ResponseOf<M>> {
    type Res = ResponseOf<M>;
    let lastErr: ServiceError | null = null;
    const deadline = Date.now() + this.timeoutMs;
    for (let attempt = 0; attempt < this.clients.length * 3 && Date.now() < deadline; attempt++) {
      const i = (this.preferred + attempt) % this.clients.length;
      const client = this.clients[i]!;
      try {
        const res = await new Promise<Res>((resolve, reject) => {
          const fn = (client as unknown as Record<KvMethod, Unary<RequestOf<M>, Res>>)[method].bind(client);
          fn(req, new Metadata(), { deadline }, (err: ServiceError | null, r: Res) => {
            if (err === null) resolve(r);
            else reject(err);
          });
        });
        this.preferred = i;
        return res;
      } catch (err) {
        const e = err as ServiceError;
        if (!failoverCodes.has(e.code)) throw e;
        lastErr = e;
        if (attempt % this.clients.length === this.clients.length - 1)
          await new Promise((r) => setTimeout(r, 200));
      }
    }
    throw lastErr ?? new Error('no server answered');
  }

  close(): void {
    for (const c of this.clients) c.close();
  }
}

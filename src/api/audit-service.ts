// The Audit API (proto/audit.proto): the trail as the replicated state keeps it, and its
// retention. Admin only, as Kubernetes keeps its audit log to cluster admins: the trail names
// every user and the addresses they called from.
import { status } from '@grpc/grpc-js';
import type { sendUnaryData, ServerUnaryCall, ServiceError } from '@grpc/grpc-js';
import type {
  AuditEntry as AuditEntryProto,
  AuditListRequest,
  AuditListResponse,
  AuditRetentionRequest,
  AuditRetentionResponse,
  AuditServer,
} from '../gen/audit.js';
import type { RaftNode } from '../raft/node.js';
import type { AuditEntry } from '../state/control/audit-log.js';
import type { ControlState } from '../state/control/control-state.js';
import type { AuditedCall, CallAuditor } from './audit-calls.js';
import { ApiError, toServiceError } from './errors.js';
import type { Proposer } from './proposer.js';

export interface AuditServiceContext {
  readonly node: RaftNode;
  readonly control: ControlState;
  readonly proposer: Proposer;
  readonly auditor: CallAuditor;
}

/** Entries per page unless the caller asks for fewer or more, and the most it may ask for. */
const pageDefault = 100;
const pageMax = 1_000;

export class AuditService {
  readonly #ctx: AuditServiceContext;

  constructor(ctx: AuditServiceContext) {
    this.#ctx = ctx;
  }

  handlers(): AuditServer {
    return {
      auditList: (
        call: ServerUnaryCall<AuditListRequest, AuditListResponse>,
        cb: sendUnaryData<AuditListResponse>,
      ) => {
        settle(this.#list(call), cb);
      },
      auditRetention: (
        call: ServerUnaryCall<AuditRetentionRequest, AuditRetentionResponse>,
        cb: sendUnaryData<AuditRetentionResponse>,
      ) => {
        settle(this.#retention(call), cb);
      },
    };
  }

  async #list(call: ServerUnaryCall<AuditListRequest, AuditListResponse>): Promise<AuditListResponse> {
    await this.#ctx.auditor.authorize(audited(call, 'Audit/AuditList', 'audit.list'), 'admin', () => '');
    const req = call.request;
    const beforeSeq = req.continue === '' ? undefined : readContinue(req.continue);
    if (!req.local) await this.#ctx.node.linearizableRead();
    const page = this.#ctx.control.auditTrail({
      ...(req.user === '' ? {} : { user: req.user }),
      ...(req.kind === '' ? {} : { kind: req.kind }),
      ...(req.sinceMs > 0 ? { sinceMs: req.sinceMs } : {}),
      ...(req.untilMs > 0 ? { untilMs: req.untilMs } : {}),
      ...(beforeSeq === undefined ? {} : { beforeSeq }),
      limit: Math.min(req.limit === 0 ? pageDefault : req.limit, pageMax),
    });
    return {
      entries: page.entries.map(entryRecord),
      continue: page.continueBefore === undefined ? '' : writeContinue(page.continueBefore),
    };
  }

  /** Sets (or with `show`, reads) the retention; a change is an audited admin call itself. */
  async #retention(
    call: ServerUnaryCall<AuditRetentionRequest, AuditRetentionResponse>,
  ): Promise<AuditRetentionResponse> {
    const req = call.request;
    if (req.show) {
      await this.#ctx.auditor.authorize(
        audited(call, 'Audit/AuditRetention', 'audit.retention'),
        'admin',
        () => 'show',
      );
      await this.#ctx.node.linearizableRead();
      return { ...this.#ctx.control.auditRetention };
    }
    return this.#ctx.auditor.run(
      audited(call, 'Audit/AuditRetention', 'audit.retention'),
      'admin',
      () => `entries=${req.entries} days=${req.days}`,
      async (audit, proposing) => {
        proposing();
        const r = await this.#ctx.proposer.proposeControl({
          type: 'audit.retention',
          entries: req.entries,
          days: req.days,
          audit,
        });
        if (r.type === 'error') throw new ApiError(status.INVALID_ARGUMENT, r.message);
        if (r.type !== 'auditRetention') throw new ApiError(status.INTERNAL, `unexpected result ${r.type}`);
        return { ...r.retention };
      },
    );
  }
}

/** An Audit call as the trail sees it: only an admin may read or bound the trail (0018). */
function audited(call: ServerUnaryCall<unknown, unknown>, method: string, kind: string): AuditedCall {
  return { metadata: call.metadata, peer: call.getPeer(), method, kind };
}

function settle<T>(work: Promise<T>, cb: sendUnaryData<T>): void {
  work.then(
    (res) => cb(null, res),
    (err: unknown) => cb(toServiceError(err) as ServiceError, null),
  );
}

export function entryRecord(e: AuditEntry): AuditEntryProto {
  return {
    seq: e.seq,
    stampMs: e.stampMs,
    user: e.user,
    role: e.role,
    address: e.address,
    method: e.method,
    kind: e.kind,
    target: e.target,
    outcome: e.error?.code ?? 'ok',
    message: e.error?.message ?? '',
  };
}

// The continue token is opaque to clients; today it is the seq the next page starts below.
const continuePrefix = 'before:';

function writeContinue(beforeSeq: number): string {
  return Buffer.from(`${continuePrefix}${beforeSeq}`, 'utf8').toString('base64url');
}

function readContinue(token: string): number {
  const text = Buffer.from(token, 'base64url').toString('utf8');
  const seq = text.startsWith(continuePrefix) ? Number(text.slice(continuePrefix.length)) : NaN;
  if (!Number.isSafeInteger(seq) || seq < 1) {
    throw new ApiError(status.INVALID_ARGUMENT, 'continue: not a token from a previous audit list answer');
  }
  return seq;
}

// Puts operator calls into the audit trail (docs/decisions/0018-audit-trail.md). A call that
// proposes a command attaches its caller's tag to it, so apply records it with its outcome in the
// same raft entry. A call refused before anything is proposed (too weak a role, input this node
// refused) by an authenticated caller is recorded by an audit.record of its own; an
// unauthenticated call never reaches the log and is only logged here.
import { status } from '@grpc/grpc-js';
import type { Metadata } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { auditTextBytesMax } from '../model/limits.js';
import type { AuditTag } from '../state/control/audit-log.js';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { Role } from '../model/records.js';
import { headUtf8 } from '../platform/utf8-text.js';
import { roleRefusal, type Authenticator, type Caller } from './auth.js';
import { toServiceError } from './errors.js';

/** One operator call as the trail sees it. */
export interface AuditedCall {
  readonly metadata: Metadata;
  /** gRPC's peer address of the caller (ServerUnaryCall.getPeer()). */
  readonly peer: string;
  /** Service/Method, e.g. Control/HardwareCreate. */
  readonly method: string;
  /** The command kind the call proposes. */
  readonly kind: string;
}

/** Proposes control commands; the API's Proposer in production. */
export type ProposeControl = (command: ControlCommand) => Promise<ControlResult>;

export function auditTag(caller: Caller, peer: string, method: string): AuditTag {
  return {
    user: headUtf8(caller.name, auditTextBytesMax),
    role: caller.role,
    address: headUtf8(peer, auditTextBytesMax),
    method: headUtf8(method, auditTextBytesMax),
  };
}

/** The gRPC status name of an error, e.g. PERMISSION_DENIED. */
export function statusName(err: unknown): string {
  return statusCodeName(toServiceError(err).code ?? status.UNKNOWN);
}

export function statusCodeName(code: number): string {
  return (status as Record<number, string | undefined>)[code] ?? 'UNKNOWN';
}

export class CallAuditor {
  readonly #auth: Authenticator;
  readonly #propose: ProposeControl;
  readonly #logger: Logger;

  constructor(auth: Authenticator, propose: ProposeControl, logger: Logger) {
    this.#auth = auth;
    this.#propose = propose;
    this.#logger = logger;
  }

  /**
   * Runs `work` for an authenticated caller of at least role `need`. `work` gets the caller's
   * tag, to attach to what it proposes, and must call `proposing()` before it proposes: a call
   * that fails before that point is recorded as a refusal, one that fails after is recorded by
   * apply (or, if the proposal was lost, was never committed).
   */
  async run<T>(
    call: AuditedCall,
    need: Role,
    target: () => string,
    work: (audit: AuditTag, proposing: () => void) => Promise<T>,
    why?: string,
  ): Promise<T> {
    const audit = await this.authorize(call, need, target, why);
    let proposed = false;
    try {
      return await work(audit, () => {
        proposed = true;
      });
    } catch (err) {
      if (!proposed) await this.refused(audit, call.kind, safeTarget(target), err);
      throw err;
    }
  }

  /**
   * The tag of an authenticated caller of at least role `need`. Whatever the call (a read of the
   * trail, a Kv session, a change), a caller refused for its role is recorded; an unauthenticated
   * one is only logged. Calls that propose nothing of their own authorize with this alone.
   * `why` goes into the refusal when the request, not only the method, decides the role.
   */
  async authorize(call: AuditedCall, need: Role, target: () => string, why?: string): Promise<AuditTag> {
    let caller: Caller;
    try {
      caller = await this.#auth.identify({ metadata: call.metadata, getPeer: () => call.peer });
    } catch (err) {
      this.#logger.info(
        { method: call.method, address: call.peer, code: statusName(err) },
        'unauthenticated call refused',
      );
      throw err;
    }
    const audit = auditTag(caller, call.peer, call.method);
    const refusal = roleRefusal(caller, need, why);
    if (refusal !== undefined) {
      await this.refused(audit, call.kind, safeTarget(target), refusal);
      throw refusal;
    }
    return audit;
  }

  /** Records a call refused before proposing. Best effort: the caller gets its refusal anyway. */
  async refused(audit: AuditTag, kind: string, target: string, err: unknown): Promise<void> {
    const message = toServiceError(err).details ?? (err instanceof Error ? err.message : String(err));
    await this.record(audit, kind, target, { code: statusName(err), message });
  }

  /** Records a call that proposed no control command (a read of a secret, a Kv or member change). */
  async record(
    audit: AuditTag,
    kind: string,
    target: string,
    error?: { readonly code: string; readonly message: string },
  ): Promise<void> {
    try {
      await this.#propose(auditRecord(audit, kind, target, error));
    } catch (err) {
      this.#logger.warn({ err, method: audit.method, user: audit.user, kind }, 'audit record not committed');
    }
  }
}

/** The audit.record of a call that proposed no control command, its texts bounded. */
export function auditRecord(
  audit: AuditTag,
  kind: string,
  target: string,
  error?: { readonly code: string; readonly message: string },
): ControlCommand {
  return {
    type: 'audit.record',
    kind: headUtf8(kind, auditTextBytesMax),
    target: headUtf8(target, auditTextBytesMax),
    ...(error === undefined
      ? {}
      : {
          error: {
            code: headUtf8(error.code, auditTextBytesMax),
            message: headUtf8(error.message, auditTextBytesMax),
          },
        }),
    audit,
  };
}

/** A target read from a request that may be malformed: never let it fail the call. */
export function safeTarget(target: () => string): string {
  try {
    return target();
  } catch {
    return '';
  }
}

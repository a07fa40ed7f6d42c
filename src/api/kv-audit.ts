// The audit record of a Kv call that changes the store or the membership, on its way into the
// change's own raft entry (docs/decisions/0018-audit-trail.md, state version 3). The guard that
// authorized the call attaches it; the leader puts it into the entry when the cluster runs at
// version 3, or says it did when the call was forwarded to it; otherwise the guard proposes a
// separate audit.record once the outcome is known, as builds before version 3 did.
import { Metadata } from '@grpc/grpc-js';
import type { AuditTag } from '../state/control/audit-log.js';
import type { Role } from '../model/records.js';
import { auditTextBytesMax } from '../model/limits.js';
import { utf8Length } from '../platform/utf8-text.js';

/** One call's record, before it is written. */
export interface CallAudit {
  readonly tag: AuditTag;
  /** kv.put, kv.delete, kv.compareAndSet, member.add, member.remove. */
  readonly kind: string;
  readonly target: string;
  /** Set once the record is in the change's own entry (or the leader answering says it is). */
  inEntry: boolean;
}

/** The record each call in progress carries, by its gRPC call object. */
const callAudits = new WeakMap<object, CallAudit>();

export function attachCallAudit(call: object, audit: CallAudit): void {
  callAudits.set(call, audit);
}

export function callAuditOf(call: object): CallAudit | undefined {
  return callAudits.get(call);
}

/** A forwarded call's record, from the node that authorized it (binary: texts are UTF-8). */
const forwardedAuditKey = 'x-slipway-audit-bin';
/** In the leader's answer: the forwarded record is in the change's entry. */
const auditedKey = 'x-slipway-audited';

/** Adds `audit` to a call forwarded to the leader. */
export function forwardAudit(md: Metadata, audit: CallAudit): void {
  const { user, role, address, method } = audit.tag;
  const doc = { user, role, address, method, kind: audit.kind, target: audit.target };
  md.set(forwardedAuditKey, Buffer.from(JSON.stringify(doc)));
}

const roles: readonly Role[] = ['admin', 'operator', 'viewer'];

/**
 * The record a forwarding node sent with a call, read on the raft address, where mutual TLS has
 * authenticated the node. Anything that is not one (another build's shape) reads as none: the
 * leader then sends no acknowledgment, and the forwarding node records the call itself.
 */
export function forwardedAudit(md: Metadata): CallAudit | undefined {
  const raw = md.get(forwardedAuditKey)[0];
  if (!Buffer.isBuffer(raw)) return undefined;
  let doc: unknown;
  try {
    doc = JSON.parse(raw.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof doc !== 'object' || doc === null) return undefined;
  const d = doc as Record<string, unknown>;
  const text = (k: string): string | undefined => {
    const v = d[k];
    return typeof v === 'string' && utf8Length(v) <= auditTextBytesMax ? v : undefined;
  };
  const [user, address, method, kind, target] = ['user', 'address', 'method', 'kind', 'target'].map(text);
  const role = roles.find((r) => r === d['role']);
  if (
    user === undefined ||
    address === undefined ||
    method === undefined ||
    kind === undefined ||
    target === undefined ||
    role === undefined
  )
    return undefined;
  return { tag: { user, role, address, method }, kind, target, inEntry: false };
}

/** The leader's acknowledgment that a forwarded record is in the entry. */
export function auditedMetadata(): Metadata {
  const md = new Metadata();
  md.set(auditedKey, '1');
  return md;
}

export function isAuditedAnswer(md: Metadata): boolean {
  return md.get(auditedKey).length > 0;
}

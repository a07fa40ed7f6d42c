// What goes into the audit trail (audit-log.ts, docs/decisions/0018-audit-trail.md) for an
// operator's command, with its outcome, and for a call that changed something other than the
// control state; each in the entry that applied it, stamped with that entry's stamp.
import { auditTextBytesMax } from '../../model/limits.js';
import { headUtf8 } from '../../platform/utf8-text.js';
import type { AuditEntry, AuditLog } from './audit-log.js';
import { auditTarget } from './audit-target.js';
import type { ControlCommand, ControlResult } from './commands.js';

/** An operator's command goes into the trail with its outcome, in the entry that applied it. */
export function recordCommand(
  audit: AuditLog,
  command: ControlCommand,
  result: ControlResult,
  nowMs: number,
): void {
  const tag = command.audit;
  if (tag === undefined) return;
  const refusal =
    result.type === 'error'
      ? { code: result.code, message: result.message }
      : command.type === 'audit.record'
        ? command.error
        : undefined;
  audit.append(
    {
      ...tag,
      kind: headUtf8(command.type === 'audit.record' ? command.kind : command.type, auditTextBytesMax),
      target: headUtf8(auditTarget(command), auditTextBytesMax),
      ...(refusal === undefined ? {} : { error: refusal }),
    },
    nowMs,
  );
}

/**
 * A call that changed something other than the control state (a Kv write, a membership
 * change) goes into the trail with its outcome, from the entry that made the change; `nowMs`
 * is that entry's stamp, as for a control command's record.
 */
export function recordCall(audit: AuditLog, entry: Omit<AuditEntry, 'seq' | 'stampMs'>, nowMs: number): void {
  // Field by field, in the order recordCommand gives them: snapshots write entries as they are.
  audit.append(
    {
      user: entry.user,
      role: entry.role,
      address: entry.address,
      method: entry.method,
      kind: headUtf8(entry.kind, auditTextBytesMax),
      target: headUtf8(entry.target, auditTextBytesMax),
      ...(entry.error === undefined
        ? {}
        : {
            error: {
              code: headUtf8(entry.error.code, auditTextBytesMax),
              message: headUtf8(entry.error.message, auditTextBytesMax),
            },
          }),
    },
    nowMs,
  );
}

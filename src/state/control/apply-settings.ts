// The replicated settings at apply: the cluster's state version (0019), the audit trail's and
// finished workflows' retention (0018, 0020), the quarantine policy, the auto-accept rule
// (0037), and what the members say of themselves: drained (0022), their API addresses (0038).
import { auditEntriesMax, auditRetentionDaysMax } from '../../model/limits.js';
import { quarantinePolicyProblem } from '../../model/quarantine-policy.js';
import { stateVersionBoundedState, stateVersionFleet } from '../versions.js';
import { acceptRuleOf } from './accept-rule.js';
import { failure, type Command } from './apply-outcome.js';
import type { ControlResult } from './commands.js';
import type { ControlTables } from './control-tables.js';
import { drainedAfter } from './drained-members.js';
import { memberApiAddrsAfter } from './member-api-addrs.js';
import { workflowRetentionProblem } from './workflow-retention.js';

export function raiseClusterVersion(t: ControlTables, version: number, nowMs: number): ControlResult {
  // Bounded state turns the default workflow retention on: from this entry's stamp, the
  // collector counts the grace before it removes anything by the default (0020).
  if (t.clusterVersion < stateVersionBoundedState && version >= stateVersionBoundedState) {
    t.workflowRetentionDefaultSinceMs = nowMs;
  }
  // The lifecycle starts: every machine's state is derived from its workflows, in this entry.
  const adopting = t.clusterVersion < stateVersionFleet && version >= stateVersionFleet;
  // Never lowered: members that applied a newer format cannot go back to an older one.
  t.clusterVersion = Math.max(t.clusterVersion, version);
  if (adopting) t.machines.adopt(nowMs);
  return { type: 'clusterVersion', version: t.clusterVersion };
}

export function setAuditRetention(
  t: ControlTables,
  command: Command<'audit.retention'>,
  nowMs: number,
): ControlResult {
  if (!Number.isSafeInteger(command.entries) || command.entries < 1 || command.entries > auditEntriesMax) {
    return failure('E_INVALID', `entries: must be 1-${auditEntriesMax}, got ${command.entries}`);
  }
  if (!Number.isSafeInteger(command.days) || command.days < 0 || command.days > auditRetentionDaysMax) {
    return failure(
      'E_INVALID',
      `days: must be 0 (no age limit) to ${auditRetentionDaysMax}, got ${command.days}`,
    );
  }
  t.audit.setRetention({ entries: command.entries, days: command.days }, nowMs);
  return { type: 'auditRetention', retention: t.audit.retention };
}

export function setWorkflowRetention(
  t: ControlTables,
  command: Command<'workflow.retention'>,
): ControlResult {
  const retention = { finishedMax: command.finishedMax, finishedDays: command.finishedDays };
  const problem = workflowRetentionProblem(retention);
  if (problem !== undefined) return failure('E_INVALID', problem);
  t.workflowRetention = Object.freeze(retention);
  // Chosen by an operator, even if it is the default: it applies at once.
  t.workflowRetentionDefaultSinceMs = undefined;
  return { type: 'workflowRetention', retention: t.workflowRetention };
}

export function setQuarantinePolicy(
  t: ControlTables,
  command: Command<'hardware.quarantinePolicy'>,
): ControlResult {
  const policy = { failures: command.failures, windowS: command.windowS };
  const problem = quarantinePolicyProblem(policy);
  if (problem !== undefined) return failure('E_INVALID', problem);
  t.quarantinePolicy = Object.freeze(policy);
  return { type: 'quarantinePolicy', policy: t.quarantinePolicy };
}

export function setAcceptRule(t: ControlTables, command: Command<'hardware.acceptRule'>): ControlResult {
  if (command.selector === undefined) {
    t.acceptRule = undefined;
    return { type: 'acceptRule' };
  }
  const rule = acceptRuleOf(command.selector);
  if (typeof rule === 'string') return failure('E_INVALID', rule);
  t.acceptRule = rule;
  return { type: 'acceptRule', selector: rule.selector };
}

/** The commands about members: drained (0022), their API addresses (0038). */
export function applyMember(
  t: ControlTables,
  command: Command<'member.drain'> | Command<'member.apiAddr'>,
): ControlResult {
  if (command.type === 'member.apiAddr') {
    const after = memberApiAddrsAfter(t.memberApiAddrs, command);
    if (typeof after === 'string') return failure('E_INVALID', after);
    t.memberApiAddrs = Object.freeze(after);
    return { type: 'memberApiAddrs', members: t.memberApiAddrs };
  }
  const after = drainedAfter(t.drainedMembers, command.id, command.drained);
  if (typeof after === 'string') return failure('E_INVALID', after);
  if (after !== t.drainedMembers) {
    t.drainedMembers = Object.freeze(after);
    t.changed.drainChanged = true;
  }
  return { type: 'drainedMembers', ids: t.drainedMembers };
}

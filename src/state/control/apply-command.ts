// One control command applied to the tables: the dispatch from its type to the applier of its
// domain (apply-*.ts, machines.ts for the machine lifecycle). Deterministic like all of apply:
// the leader's stamp is the only time, and identifiers come inside the command.
import type { Lease } from '../../model/records.js';
import { alternate, allocate } from './apply-allocation.js';
import { deleteArtifact, putArtifact } from './apply-artifacts.js';
import { allowPXE, deleteHardware, putHardware, setWorkerToken } from './apply-hardware.js';
import { failure, recorded, unreachable, type Command } from './apply-outcome.js';
import { applyPool, isPoolCommand } from './apply-pools.js';
import { claimPower, recordPower, requestPower } from './apply-power.js';
import {
  applyMember,
  raiseClusterVersion,
  setAcceptRule,
  setAuditRetention,
  setQuarantinePolicy,
  setWorkflowRetention,
} from './apply-settings.js';
import { deleteTemplate, putTemplate } from './apply-templates.js';
import { deleteToken, issueCredential, putToken } from './apply-tokens.js';
import {
  cancel,
  collect,
  createWorkflow,
  deleteWorkflow,
  onWorkflow,
  recordAttemptResult,
  retry,
} from './apply-workflows.js';
import type { ControlCommand, ControlResult } from './commands.js';
import type { ControlTables } from './control-tables.js';
import { expireDeadline, recordLost, startAttempt } from './transitions.js';

export function applyCommand(t: ControlTables, nowMs: number, command: ControlCommand): ControlResult {
  if (isPoolCommand(command)) return applyPool(t, command, nowMs);
  switch (command.type) {
    case 'hardware.put':
      return putHardware(t, command, nowMs);
    case 'hardware.delete':
      return deleteHardware(t, command.id);
    case 'hardware.setAllowPXE':
      return allowPXE(t, command, nowMs);
    case 'hardware.token':
      return setWorkerToken(t, command, nowMs);
    case 'hardware.lifecycle':
    case 'hardware.label':
    case 'hardware.expire':
      return t.machines.execute(command, nowMs);
    case 'template.put':
      return putTemplate(t, command, nowMs);
    case 'template.delete':
      return deleteTemplate(t, command.name);
    case 'workflow.create':
      return createWorkflow(t, command, nowMs);
    case 'workflow.allocate':
      return allocate(t, command, nowMs);
    case 'workflow.alternate':
      return alternate(t, command, nowMs);
    case 'attempt.start':
      return onWorkflow(t, command.workflowId, (wf) => startAttempt(wf, command, nowMs), nowMs);
    case 'attempt.result':
      return recordAttemptResult(t, command, nowMs);
    case 'attempt.lost':
      return onWorkflow(t, command.workflowId, (wf) => recordLost(wf, command, nowMs), nowMs);
    case 'deadline.expire':
      return onWorkflow(t, command.workflowId, (wf) => expireDeadline(wf, nowMs), nowMs);
    case 'workflow.cancel':
      return cancel(t, command, nowMs);
    case 'workflow.retry':
      return retry(t, command, nowMs);
    case 'workflow.delete':
      return deleteWorkflow(t, command.id);
    case 'token.put':
      return putToken(t, command, nowMs);
    case 'token.delete':
      return deleteToken(t, command.name);
    case 'credential.issue':
      return issueCredential(t, command, nowMs);
    case 'credential.inventory':
      return t.machines.claimInventory(command, nowMs);
    case 'hardware.inventory':
      return t.machines.reportInventory(command, nowMs);
    case 'lease.grant':
      return grantLeases(t, command, nowMs);
    case 'lease.release':
      return leaseResult(t.leases.release(command.mac, command.ip, nowMs));
    case 'lease.decline':
      return leaseResult(t.leases.decline(command.mac, command.ip, command.probationS, nowMs));
    case 'power.request':
      return requestPower(t, command, nowMs);
    case 'power.claim':
      return claimPower(t, command, nowMs);
    case 'power.step':
      return recordPower(t, command, nowMs);
    case 'artifact.put':
      return putArtifact(t, command, nowMs);
    case 'artifact.delete':
      return deleteArtifact(t, command.name);
    case 'audit.record':
      // The record itself is written with every audited command's (audit-entries.ts).
      return command.audit === undefined
        ? failure('E_INVALID', 'audit: an audit.record needs who asked')
        : recorded;
    case 'audit.retention':
      return setAuditRetention(t, command, nowMs);
    case 'cluster.version':
      return raiseClusterVersion(t, command.version, nowMs);
    case 'workflow.retention':
      return setWorkflowRetention(t, command);
    case 'hardware.quarantinePolicy':
      return setQuarantinePolicy(t, command);
    case 'hardware.acceptRule':
      return setAcceptRule(t, command);
    case 'workflow.gc':
      return collect(t, command.workflows);
    case 'member.drain':
    case 'member.apiAddr':
      return applyMember(t, command);
    default:
      return unreachable(command);
  }
}

function grantLeases(t: ControlTables, command: Command<'lease.grant'>, nowMs: number): ControlResult {
  const outcomes = t.leases.grant(command.grants, nowMs, (ip) => t.reservedIps.get(ip));
  return typeof outcomes === 'string' ? failure('E_INVALID', outcomes) : { type: 'grants', outcomes };
}

function leaseResult(outcome: Lease | string): ControlResult {
  return typeof outcome === 'string' ? failure('E_NOT_FOUND', outcome) : { type: 'lease', lease: outcome };
}

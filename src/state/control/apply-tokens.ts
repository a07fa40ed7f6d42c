// Credentials at apply: operator tokens stored by name and SHA-256 (no two alike), and a
// worker's per-boot credential issued to the machine that claims it (credentials.ts decides;
// the claim is recorded on the machine's workflow).
import { operatorTokensMax } from '../../model/limits.js';
import type { OperatorToken } from '../../model/records.js';
import { deleted, failure, unreachable, type Command } from './apply-outcome.js';
import { commit } from './apply-workflows.js';
import type { ControlResult } from './commands.js';
import type { ControlTables } from './control-tables.js';
import { decideCredential, readClaimFields } from './credentials.js';
import { idProblem, sha256Problem } from './validate.js';

export function putToken(t: ControlTables, command: Command<'token.put'>, nowMs: number): ControlResult {
  const problem = idProblem('name', command.name) ?? sha256Problem(command.sha256);
  if (problem !== undefined) return failure('E_INVALID', problem);
  const sha256 = command.sha256.toLowerCase();
  const holder = t.tokenBySha.get(sha256);
  if (holder !== undefined && holder !== command.name) {
    return failure('E_EXISTS', `token "${holder}" already has this SHA-256; tokens must differ`);
  }
  const existing = t.tokens.get(command.name);
  if (existing === undefined && t.tokens.size >= operatorTokensMax) {
    return failure(
      'E_CONFLICT',
      `the state holds the maximum of ${operatorTokensMax} tokens; delete some first`,
    );
  }
  if (existing !== undefined) t.tokenBySha.delete(existing.sha256);
  // A replaced token is a new credential, so it gets a new creation time.
  const token: OperatorToken = Object.freeze({
    name: command.name,
    role: command.role,
    sha256,
    createdMs: nowMs,
  });
  t.tokens.set(token.name, token);
  t.tokenBySha.set(sha256, token.name);
  return { type: 'token', token };
}

export function deleteToken(t: ControlTables, name: string): ControlResult {
  const existing = t.tokens.get(name);
  if (existing === undefined) return failure('E_NOT_FOUND', `token "${name}" does not exist`);
  t.tokens.delete(name);
  t.tokenBySha.delete(existing.sha256);
  return deleted;
}

export function issueCredential(
  t: ControlTables,
  command: Command<'credential.issue'>,
  nowMs: number,
): ControlResult {
  const fields = readClaimFields(command);
  if ('problem' in fields) return failure('E_INVALID', fields.problem);
  const { mac } = fields;
  const view = {
    hardware: (id: string) => t.hardware.get(id),
    leaseOfMac: (m: string) => t.leases.ofMac(m),
    activeWorkflowsOf: (workerId: string) => t.activeWorkflowsOf(workerId),
  };
  const decision = decideCredential(view, { ...command, mac }, nowMs);
  switch (decision.kind) {
    case 'refused':
      return failure(decision.code, decision.message);
    case 'second-claim':
      // Recorded for the operator, and still a refusal for the claimant.
      commit(t, { kind: 'changed', workflow: decision.workflow, events: decision.events }, nowMs);
      return failure('E_CONFLICT', decision.message);
    case 'issued':
      commit(t, { kind: 'changed', workflow: decision.workflow, events: decision.events }, nowMs);
      return { type: 'credential', workflowId: decision.workflow.id, expiresMs: decision.expiresMs };
    default:
      return unreachable(decision);
  }
}

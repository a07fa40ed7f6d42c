// Per-boot worker credentials, in the style of Ironic's agent_token. Pure: the state's view and
// a command in, a decision out.
//
// A machine that booted the boot OS proves itself the way the field does: the claim comes from
// the MAC of one of its interfaces and from the address Slipway's DHCP gave that MAC (the
// reservation, or a bound dynamic lease), and the machine has an outstanding workflow. The
// credential is then bound to that workflow and that worker: the first claim wins, a second
// claim for the same workflow and worker is refused and recorded in the workflow's events for
// the operator (someone else on the boot network knows the machine's MAC and address), unless it
// comes with the first claim's key (the same boot, whose answer was lost). The
// credential expires, and it stops being valid when its workflow ends, so every workflow gets a
// fresh one. Only its SHA-256 is replicated.
import type { ControlErrorCode } from './commands.js';
import type { Hardware, Lease, WorkerCredential, Workflow } from '../../model/records.js';
import { deepFreeze, record } from './immutable.js';
import type { EventDraft } from './transitions.js';
import { idProblem, sha256Problem } from './validate.js';
import { normalizeMac } from '../../platform/addresses.js';

/** How long a credential may live at most, whatever the workflow's timeout (seconds). */
export const credentialTtlSMax = 86_400;
export const credentialTtlSMin = 60;

export interface CredentialView {
  hardware(id: string): Hardware | undefined;
  leaseOfMac(mac: string): Lease | undefined;
  /** Active workflows with at least one task on this worker, oldest first. */
  activeWorkflowsOf(workerId: string): readonly Workflow[];
}

export interface CredentialClaim {
  readonly workerId: string;
  readonly mac: string;
  readonly ip: string;
}

export type CredentialDecision =
  | { readonly kind: 'refused'; readonly code: ControlErrorCode; readonly message: string }
  /** A second claim: nothing issued; the event is recorded on the workflow. */
  | {
      readonly kind: 'second-claim';
      readonly workflow: Workflow;
      readonly events: readonly EventDraft[];
      readonly message: string;
    }
  | {
      readonly kind: 'issued';
      readonly workflow: Workflow;
      readonly events: readonly EventDraft[];
      readonly expiresMs: number;
    };

/** The fields a credential claim carries (credential.issue, credential.inventory), as sent. */
export interface ClaimFields {
  readonly workerId: string;
  readonly sha256: string;
  readonly mac: string;
  readonly claimKey?: string | undefined;
  /** credential.inventory only: the digest of the token the machine will connect with. */
  readonly workerTokenSha256?: string | undefined;
}

/** A claim's fields checked in one place: what is wrong with them, or the claim's MAC normalized. */
export function readClaimFields(claim: ClaimFields): { readonly problem: string } | { readonly mac: string } {
  const problem =
    idProblem('workerId', claim.workerId) ??
    sha256Problem(claim.sha256) ??
    (claim.workerTokenSha256 === undefined
      ? undefined
      : sha256Problem(claim.workerTokenSha256)?.replace(/^sha256/, 'workerTokenSha256')) ??
    (claim.claimKey === undefined
      ? undefined
      : sha256Problem(claim.claimKey)?.replace(/^sha256/, 'claimKey'));
  if (problem !== undefined) return { problem };
  const mac = normalizeMac(claim.mac);
  return mac === undefined ? { problem: `mac: "${claim.mac}" is not a MAC address` } : { mac };
}

/**
 * Whether the claimant is the machine: the MAC is one of the worker's interfaces and the address
 * is the one Slipway's DHCP gave it. Returns the workflow the credential would be bound to.
 */
export function checkClaim(
  view: CredentialView,
  claim: CredentialClaim,
  nowMs: number,
): { readonly workflow: Workflow } | { readonly code: ControlErrorCode; readonly message: string } {
  const hardware = view.hardware(claim.workerId);
  // The same answer for an unknown machine and a wrong MAC: a claimant learns nothing by guessing.
  const notThisMachine = {
    code: 'E_INVALID' as const,
    message: `no machine "${claim.workerId}" has an interface ${claim.mac} with address ${claim.ip} from Slipway's DHCP`,
  };
  if (hardware === undefined) return notThisMachine;
  const iface = hardware.interfaces.find((i) => i.mac === claim.mac);
  if (iface === undefined) return notThisMachine;
  const lease = view.leaseOfMac(claim.mac);
  const reserved = iface.ip?.address === claim.ip;
  const leased =
    lease !== undefined && lease.state === 'bound' && lease.ip === claim.ip && lease.expiresMs > nowMs;
  if (!reserved && !leased) return notThisMachine;
  const workflow = view.activeWorkflowsOf(claim.workerId)[0];
  if (workflow === undefined) {
    return {
      code: 'E_NOT_FOUND',
      message: `machine "${claim.workerId}" has no outstanding workflow; a credential is issued only for one`,
    };
  }
  if (!hardware.netboot.allowWorkflow) {
    return {
      code: 'E_CONFLICT',
      message: `machine "${claim.workerId}" does not allow workflows (allowWorkflow off)`,
    };
  }
  return { workflow };
}

export function decideCredential(
  view: CredentialView,
  claim: CredentialClaim & { readonly sha256: string; readonly ttlS: number; readonly claimKey?: string },
  nowMs: number,
): CredentialDecision {
  const checked = checkClaim(view, claim, nowMs);
  if (!('workflow' in checked)) return { kind: 'refused', ...checked };
  const { workflow } = checked;
  const held = workflow.credentials?.[claim.workerId];
  // The same key again: the claimant whose answer was lost (a node died between the commit and
  // the reply). Only the holder of that key's private half can open what is sealed to it, so a
  // fresh credential replaces the lost one; anyone else is a second claimant.
  const sameClaimant = held?.claimKey !== undefined && held.claimKey === claim.claimKey?.toLowerCase();
  if (held !== undefined && !sameClaimant) {
    const message =
      `a credential for worker "${claim.workerId}" in workflow "${workflow.id}" was already claimed ` +
      `(from ${held.mac} at ${held.ip}); a second claim from ${claim.mac} at ${claim.ip} is refused. ` +
      'If the machine rebooted, `slipway workflow retry` lets it claim again.';
    return { kind: 'second-claim', workflow, events: [{ type: 'credential.refused', message }], message };
  }
  const credential = newCredential(claim, nowMs);
  const credentials = Object.freeze({ ...workflow.credentials, [claim.workerId]: credential });
  return {
    kind: 'issued',
    workflow: record<Workflow>({ ...workflow, credentials }),
    events: [
      {
        type: 'credential.issued',
        message: sameClaimant
          ? `worker "${claim.workerId}" claimed its credential again from ${claim.mac} at ${claim.ip} ` +
            'with the same key (the first answer was lost); the earlier credential is replaced'
          : `worker "${claim.workerId}" claimed its credential from ${claim.mac} at ${claim.ip}`,
      },
    ],
    expiresMs: credential.expiresMs,
  };
}

/** A credential for a claim, issued at the stamp, its lifetime kept within the bounds. */
export function newCredential(
  claim: CredentialClaim & { readonly sha256: string; readonly ttlS: number; readonly claimKey?: string },
  nowMs: number,
): WorkerCredential {
  const ttlS = Math.min(credentialTtlSMax, Math.max(credentialTtlSMin, claim.ttlS));
  return deepFreeze<WorkerCredential>({
    sha256: claim.sha256.toLowerCase(),
    mac: claim.mac,
    ip: claim.ip,
    issuedMs: nowMs,
    expiresMs: nowMs + ttlS * 1000,
    ...(claim.claimKey === undefined ? {} : { claimKey: claim.claimKey.toLowerCase() }),
  });
}

/** The active workflow whose credential for `workerId` has this SHA-256 and has not expired. */
export function workflowOfCredential(
  workflows: readonly Workflow[],
  workerId: string,
  sha256: string,
  nowMs: number,
): Workflow | undefined {
  return workflows.find((wf) => {
    const held = wf.credentials?.[workerId];
    return held !== undefined && held.sha256 === sha256 && held.expiresMs > nowMs;
  });
}

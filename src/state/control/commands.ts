// The control-plane commands the replicated state applies; their results are control-results.ts
// (named here too, beside the commands). They travel as JSON inside the store's `control` command
// (src/state/store-command.ts), stamped by the proposer. Everything random (ids, tokens) and
// everything rendered (templates) is decided by the proposer and carried in the command, so
// apply is a pure function of state and command.
import type {
  HardwareInput,
  JsonValue,
  LeaseGrant,
  PowerOp,
  PowerState,
  PowerStep,
  RenderedTemplate,
  Role,
} from '../../model/records.js';
import type { Labels, OperatorVerb } from '../../model/machine-lifecycle.js';
import type { AuditError, AuditTag } from './audit-log.js';
import type { PoolRetryPolicy, ReleaseWhy } from '../../fleet/pool.js';

/**
 * Any command may carry who asked for it: the node serving an operator's call attaches it, and
 * apply records the command with its outcome in the audit trail (audit-log.ts) in the same entry.
 */
export interface Audited {
  readonly audit?: AuditTag;
}

export type ControlCommand = ControlChange & Audited;

type ControlChange =
  /** Create (expectVersion 0 or absent with create) or replace hardware. */
  | {
      readonly type: 'hardware.put';
      readonly hardware: HardwareInput;
      /**
       * Used only when the hardware is new: the SHA-256 of a fresh random token the proposer
       * made and forgot (an agent needs `hardware token` first).
       */
      readonly workerTokenSha256?: string;
      /** What entries written before tokens were hashed carry instead: hashed when applied. */
      readonly workerToken?: string;
      /** 0: must not exist. n: must be at version n. Absent: create or replace. */
      readonly expectVersion?: number;
    }
  | { readonly type: 'hardware.delete'; readonly id: string }
  | { readonly type: 'hardware.setAllowPXE'; readonly id: string; readonly allowPXE: boolean }
  /** A new static worker token (its SHA-256; the proposer shows the token once): the old one stops working. */
  | { readonly type: 'hardware.token'; readonly id: string; readonly workerTokenSha256: string }
  /**
   * An operator's lifecycle verb (`slipway hardware VERB ID --reason TEXT`, state version 3;
   * docs/decisions/0028-machine-lifecycle.md). Refused unless the transition table allows it.
   */
  | {
      readonly type: 'hardware.lifecycle';
      readonly id: string;
      readonly verb: OperatorVerb;
      readonly reason: string;
      /** drain: cancel the workflow that owns the machine, in the same entry, instead of letting it finish. */
      readonly now?: boolean;
      /** inspect and release: the transitional state's deadline, in seconds after the stamp. */
      readonly timeoutS?: number;
    }
  /** Sets and removes labels (`slipway hardware label ID k=v k2-`, state version 3). */
  | {
      readonly type: 'hardware.label';
      readonly id: string;
      readonly set: Labels;
      readonly remove: readonly string[];
    }
  /**
   * Proposed by the leader once a machine's transitional deadline has passed; apply re-checks
   * that the machine still has this deadline and that it passed by the stamp (state version 3).
   */
  | { readonly type: 'hardware.expire'; readonly id: string; readonly deadlineMs: number }
  | {
      readonly type: 'template.put';
      readonly name: string;
      readonly source: string;
      readonly expectVersion?: number;
    }
  | { readonly type: 'template.delete'; readonly name: string }
  | {
      readonly type: 'workflow.create';
      readonly id: string;
      readonly template: string;
      /** The template version that was rendered; refused if the template changed since. */
      readonly templateVersion: number;
      readonly hardwareId: string;
      readonly hardwareMap: { readonly [k: string]: string };
      readonly spec: RenderedTemplate;
      /** Netboot the machine first (a power job made in the same entry); see Workflow.netboot. */
      readonly netboot?: boolean;
    }
  /**
   * A workflow on one ready machine the selector matches, allocated when this is applied
   * (docs/decisions/0030-allocation-at-apply.md): the first candidate, in the order given, that is
   * ready, unowned and matches then. Each candidate carries the template rendered for it.
   * Refused (E_CONFLICT) when none is, naming how many machines match but are not ready; E_VERSION
   * when the offered ones were taken meanwhile but others are ready (the API offers again).
   */
  | {
      readonly type: 'workflow.allocate';
      readonly id: string;
      readonly template: string;
      readonly templateVersion: number;
      /** Canonical text (formatSelector). */
      readonly selector: string;
      readonly hardwareMap: { readonly [k: string]: string };
      readonly candidates: readonly AllocationCandidate[];
      readonly netboot?: boolean;
      /** The alternate failure policy: at most this many machines (Workflow.alternate). */
      readonly alternateAttempts?: number;
      /**
       * The race policy (docs/decisions/0037): two lanes, this id and raceRivalId(id), on the
       * first two qualifying candidates; refused when fewer than two are. Needs alternateAttempts.
       */
      readonly race?: boolean;
    }
  /**
   * The leader's re-allocation of a workflow whose alternate policy holds, after it failed or
   * timed out at `finishedMs` (a later end, or a retry, makes this stale: E_NOT_DUE): the first
   * candidate not tried before that is ready, unowned and matching; none: the policy gives up,
   * with why, unless others are ready (E_VERSION: offered again).
   */
  | {
      readonly type: 'workflow.alternate';
      readonly id: string;
      readonly finishedMs: number;
      readonly candidates: readonly AllocationCandidate[];
    }
  /**
   * Pools (state version 3, docs/decisions/0035-pools.md): a pool keeps `size` machines matching
   * its selector provisioning or deployed with its template. Refused: a name that is no DNS label,
   * a selector that does not parse, a template that does not exist, a size out of range.
   */
  | {
      readonly type: 'pool.create';
      readonly name: string;
      /** Canonical text (formatSelector). */
      readonly selector: string;
      readonly template: string;
      readonly size: number;
      readonly spares: number;
      /** docs/decisions/0036: a label to spread across, a release template, an artifact, a budget. */
      readonly spreadBy?: string;
      readonly releaseTemplate?: string;
      readonly image?: string;
      readonly maxUnavailable?: number;
      /** docs/decisions/0040: the failure policy (absent: alternate), and its attempts in a row. */
      readonly onFailure?: PoolRetryPolicy;
      readonly attempts?: number;
    }
  | { readonly type: 'pool.scale'; readonly name: string; readonly size: number }
  /** An operator resumes a pool held after failed installations in a row (docs/decisions/0040). */
  | { readonly type: 'pool.resume'; readonly name: string }
  /** Marks every member to be replaced, within the pool's maxUnavailable (docs/decisions/0036). */
  | { readonly type: 'pool.taint'; readonly name: string }
  /** The leader keeps a ready matching machine as the pool's spare (refused past its spares). */
  | { readonly type: 'pool.reserve'; readonly pool: string; readonly hardwareId: string }
  /**
   * The leader releases a member: surplus after a scale down, tainted within the budget, the
   * pool being deleted, or a member whose installation failed (`failed`: only with a release
   * template; it runs, then the machine is failed or quarantined as its failure left it). With
   * `release` (the pool has a release template), its workflow owns the machine from releasing to
   * ready; without, the member leaves the pool as it is (a tainted one is released at once, ready
   * to be taken again).
   */
  | {
      readonly type: 'pool.release';
      readonly pool: string;
      readonly hardwareId: string;
      readonly why: ReleaseWhy;
      readonly release?: {
        readonly id: string;
        readonly templateVersion: number;
        readonly spec: RenderedTemplate;
      };
    }
  /** Refused while a member is provisioning; deployed members stay deployed. */
  | { readonly type: 'pool.delete'; readonly name: string }
  /**
   * The leader's pool keeper fills one slot: a workflow.allocate for the pool's template and
   * selector, refused (E_CONFLICT) when the pool's slots are all filled as this entry finds them.
   */
  | {
      readonly type: 'pool.allocate';
      readonly pool: string;
      readonly id: string;
      readonly templateVersion: number;
      readonly hardwareMap: { readonly [k: string]: string };
      readonly candidates: readonly AllocationCandidate[];
      /**
       * The pool's race policy: two lanes, the rival's workflow id derived from `id`; or (retry)
       * the pool's failed member installed again, the one candidate (docs/decisions/0040).
       */
      readonly race?: true;
      readonly retry?: true;
    }
  /** Hand the attempt to a worker. Refused unless it is the workflow's next action and due. */
  | {
      readonly type: 'attempt.start';
      readonly workflowId: string;
      readonly actionIndex: number;
      readonly attempt: number;
      readonly workerId: string;
    }
  /** A worker's result for an attempt. */
  | {
      readonly type: 'attempt.result';
      readonly workflowId: string;
      readonly actionIndex: number;
      readonly attempt: number;
      readonly workerId: string;
      readonly success: boolean;
      readonly exitStatus: number;
      readonly message: string;
      readonly outputTail: string;
      /**
       * Also start the workflow's next action when it runs on the same worker and is due, in
       * this same entry: the worker is connected (it just reported), so one commit per action
       * instead of two.
       */
      readonly startNext?: boolean;
    }
  /** The worker no longer runs this attempt (it restarted): counts as a failed attempt. */
  | {
      readonly type: 'attempt.lost';
      readonly workflowId: string;
      readonly actionIndex: number;
      readonly attempt: number;
      readonly workerId: string;
      readonly message: string;
    }
  /** Proposed by the leader once a stored deadline has passed; apply re-checks it by the stamp. */
  | { readonly type: 'deadline.expire'; readonly workflowId: string }
  | { readonly type: 'workflow.cancel'; readonly id: string; readonly message?: string }
  | { readonly type: 'workflow.retry'; readonly id: string; readonly fromStart: boolean }
  | { readonly type: 'workflow.delete'; readonly id: string }
  /**
   * A booted machine's claim of its worker credential (src/state/control/credentials.ts): bound
   * to the machine's outstanding workflow, once per workflow and worker.
   */
  | {
      readonly type: 'credential.issue';
      readonly workerId: string;
      readonly mac: string;
      readonly ip: string;
      /** SHA-256 (hex) of the credential the proposer generated; the credential itself is never replicated. */
      readonly sha256: string;
      readonly ttlS: number;
      /**
       * SHA-256 (hex) of the public key the claim's answer was sealed to. The same key claiming
       * again is the same boot whose answer was lost (only it can open what is sealed to the key).
       */
      readonly claimKey?: string;
    }
  /**
   * A machine booted in inventory mode claims its per-boot credential (state version 3,
   * docs/decisions/0029-discovery.md): for the machine `workerId` when it is inspecting (or
   * enrolled with no inventory yet); for a MAC no machine has, a new machine `workerId` is
   * enrolled (discovery), with `workerTokenSha256` (the proposer's, forgotten) as its token.
   * Checked like credential.issue: the MAC, and the address Slipway's DHCP gave it.
   */
  | {
      readonly type: 'credential.inventory';
      readonly workerId: string;
      readonly mac: string;
      readonly ip: string;
      readonly sha256: string;
      readonly ttlS: number;
      readonly claimKey?: string;
      readonly workerTokenSha256: string;
    }
  /**
   * The inventory a machine in inventory mode reports over the worker protocol, with the SHA-256
   * of the credential its stream presented: refused (and recorded) unless that is the machine's
   * inventory credential. Checked against the fleet's fingerprints (state version 3).
   */
  | {
      readonly type: 'hardware.inventory';
      readonly id: string;
      readonly credentialSha256: string;
      /** As reported; apply reads it through parseInventory (src/model/inventory.ts). */
      readonly inventory: JsonValue;
    }
  | { readonly type: 'token.put'; readonly name: string; readonly role: Role; readonly sha256: string }
  | { readonly type: 'token.delete'; readonly name: string }
  /** Addresses the DHCP server on the leader wants to ACK; each is decided on its own. */
  | { readonly type: 'lease.grant'; readonly grants: readonly LeaseGrant[] }
  | { readonly type: 'lease.release'; readonly mac: string; readonly ip: string }
  | {
      readonly type: 'lease.decline';
      readonly mac: string;
      readonly ip: string;
      readonly probationS: number;
    }
  /**
   * A power job for a machine with a BMC, proposed by the API. The proposer picks the id; the
   * steps and attempts come from powerRequest (power-jobs.ts).
   */
  | {
      readonly type: 'power.request';
      readonly jobId: string;
      readonly hardwareId: string;
      readonly op: PowerOp;
      readonly steps: readonly PowerStep[];
      readonly maxAttempts: number;
    }
  /** The leader's power executor takes the job's next attempt until stamp + leaseMs. */
  | {
      readonly type: 'power.claim';
      readonly jobId: string;
      readonly stepIndex: number;
      readonly attempt: number;
      /** The claiming node's raft id. */
      readonly claimer: string;
      readonly leaseMs: number;
    }
  /** The result of a claimed attempt, from the node that claimed it. */
  | {
      readonly type: 'power.step';
      readonly jobId: string;
      readonly stepIndex: number;
      readonly attempt: number;
      readonly claimer: string;
      readonly ok: boolean;
      readonly message: string;
      readonly powerState?: PowerState;
    }
  /**
   * Registers content the proposing node holds (stored and verified) under a name. The same
   * name with the same digest changes nothing; with another digest it replaces the record as
   * its next version.
   */
  | {
      readonly type: 'artifact.put';
      readonly name: string;
      readonly sha256: string;
      readonly bytes: number;
      /** 0: must not exist. n: must be at version n. Absent: create or replace. */
      readonly expectVersion?: number;
    }
  | { readonly type: 'artifact.delete'; readonly name: string }
  /**
   * An operator call refused before anything was proposed (too weak a role, input the node
   * refused): recorded in the trail and nothing else. Needs `audit`.
   */
  | {
      readonly type: 'audit.record';
      /** The command kind the call would have proposed. */
      readonly kind: string;
      readonly target: string;
      readonly error?: AuditError;
    }
  /** How much of the audit trail every node keeps (admin). */
  | { readonly type: 'audit.retention'; readonly entries: number; readonly days: number }
  /**
   * The cluster's effective state version (src/state/versions.ts): proposed by the leader once
   * every voter supports `version`; never lowers it.
   */
  | { readonly type: 'cluster.version'; readonly version: number }
  /** How long finished workflows stay in the state (admin; workflow-retention.ts). */
  | { readonly type: 'workflow.retention'; readonly finishedMax: number; readonly finishedDays: number }
  /** When repeated failures quarantine a machine (admin; model/quarantine-policy.ts). */
  | { readonly type: 'hardware.quarantinePolicy'; readonly failures: number; readonly windowS: number }
  /**
   * The auto-accept rule (admin; accept-rule.ts, docs/decisions/0037): an enrolled machine whose
   * inventory report matches the selector is made ready when the report is applied. Absent: cleared.
   */
  | { readonly type: 'hardware.acceptRule'; readonly selector?: string }
  /**
   * Proposed by the leader's collector (src/node/workflow-collector.ts), after archiving them when
   * it archives: deletes each listed workflow, with its events, that is finished at the listed
   * finish time. Any other (gone, running again, finished again since) is skipped.
   */
  | { readonly type: 'workflow.gc'; readonly workflows: readonly CollectedWorkflow[] }
  /**
   * Drains a member (docs/decisions/0022-node-drain.md): it stops taking new worker streams and
   * leadership, every node knows it, and it lasts until undrained (drained: false). The
   * proposer checks that the id names a member; apply only keeps the set of drained ids.
   */
  | { readonly type: 'member.drain'; readonly id: string; readonly drained: boolean }
  /**
   * A member's API address, proposed by the member itself when the state lacks it or names
   * another (member-api-addrs.ts), with the ids of the membership it sees, sorted: the
   * addresses of members outside it are dropped.
   */
  | {
      readonly type: 'member.apiAddr';
      readonly id: string;
      readonly apiAddr: string;
      readonly members: readonly string[];
    };

/** A machine offered to workflow.allocate, with the template rendered for it. */
export interface AllocationCandidate {
  readonly hardwareId: string;
  readonly spec: RenderedTemplate;
}

/** A workflow the collector chose, as it was when chosen. */
export interface CollectedWorkflow {
  readonly id: string;
  /** Its finishedMs when chosen (0 for a finished record without one). */
  readonly finishedMs: number;
}

export type ControlCommandType = ControlCommand['type'];

export { controlErrorCodes } from './control-results.js';
export type { AttemptOutcome, ControlErrorCode, ControlResult, StartedAttempt } from './control-results.js';

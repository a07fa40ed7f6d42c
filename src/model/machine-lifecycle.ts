// A machine's life as the replicated state keeps it (docs/decisions/0028-machine-lifecycle.md):
// its state, why and since when, the deadline of a transitional state, the workflow that owns it,
// and a bounded history of its transitions. The transition table and the rules that read these
// records are src/fleet/lifecycle.ts; apply is src/state/control/hardware-lifecycle.ts.

/** Every state a machine can be in, in the order a machine usually meets them. */
export const machineStates = [
  'enrolled',
  'inspecting',
  'ready',
  'provisioning',
  'deployed',
  'releasing',
  'failed',
  'quarantined',
  'maintenance',
  'retired',
] as const;
export type MachineState = (typeof machineStates)[number];

/**
 * What moves a machine: the operators' verbs (`slipway hardware VERB`), its workflows (provision,
 * succeed, fail, cancel), the leader's deadline (expire), discovery (inspected, drift) and the
 * release step (released); register and adopt start a machine's history.
 */
export const lifecycleTriggers = [
  'register',
  'adopt',
  'inspect',
  'inspected',
  'drift',
  'accept',
  'provision',
  'succeed',
  'fail',
  'cancel',
  'drain',
  'undrain',
  'release',
  'released',
  'quarantine',
  'retire',
  'expire',
] as const;
export type LifecycleTrigger = (typeof lifecycleTriggers)[number];

/** The verbs an operator gives (`slipway hardware VERB ID --reason TEXT`). */
export const operatorVerbs = [
  'inspect',
  'drain',
  'undrain',
  'retire',
  'quarantine',
  'release',
  'accept',
] as const satisfies readonly LifecycleTrigger[];
export type OperatorVerb = (typeof operatorVerbs)[number];

/** One transition, as the machine's history and its changefeed give it. */
export interface MachineEvent {
  /** Per machine, from 1, dense: a follower resumes after the last one it saw. */
  readonly seq: number;
  /** The leader's stamp of the entry that made it. */
  readonly stampMs: number;
  /** Absent for the first event (register, adopt): the machine had no state before. */
  readonly from?: MachineState;
  readonly to: MachineState;
  readonly trigger: LifecycleTrigger;
  /** Who or what caused it: a token's name and role, a workflow, the leader's deadline. */
  readonly by: string;
  readonly reason?: string;
  /** For a failure: the action that failed, task/action. */
  readonly step?: string;
  /** The workflow that caused it, or that it concerns. */
  readonly workflowId?: string;
}

export interface MachineLifecycle {
  readonly state: MachineState;
  /** The stamp of the transition into `state`. */
  readonly sinceMs: number;
  readonly reason?: string;
  /** failed: the action that failed (task/action). */
  readonly step?: string;
  /** Transitional states only (inspecting, provisioning, releasing): the absolute deadline. */
  readonly deadlineMs?: number;
  /** The workflow that owns the machine (invariant 9): set from its creation until it ends. */
  readonly owner?: string;
  /**
   * ready: the pool that keeps the machine as a spare (docs/decisions/0036); no allocation but
   * that pool's takes it. Any transition clears it.
   */
  readonly spareOf?: string;
  /** maintenance: the state `undrain` returns the machine to. */
  readonly drainedFrom?: MachineState;
  /**
   * A pool member whose installation failed, released through its pool's release template first
   * (docs/decisions/0036): set when it fails (failed, or quarantined), kept while its release
   * workflow runs (releasing); the release ends in this state with this reason, whatever it did.
   */
  readonly afterRelease?: AfterRelease;
  /** The newest events, oldest first (at most machineHistoryMax); never empty. */
  readonly history: readonly MachineEvent[];
  /**
   * The leader stamps of its workflows' recent failures, oldest first (at most
   * quarantineFailuresMax; absent when none): enough of them within the quarantine policy's
   * window quarantine it (src/model/quarantine-policy.ts). Accepting it clears them.
   */
  readonly failures?: readonly number[];
}

/** Where a failed pool member's release ends: its failure as it was before the release. */
export interface AfterRelease {
  /** The pool whose release template the member runs. */
  readonly pool: string;
  readonly state: 'failed' | 'quarantined';
  readonly reason?: string;
  readonly step?: string;
}

/** Labels: Kubernetes-style keys and values, set by `slipway hardware label`. */
export type Labels = { readonly [key: string]: string };

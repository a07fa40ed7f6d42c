// The control state's tables: every record by its key, the indexes kept beside them
// (control-indexes.ts), the replicated settings, and what the command being applied changed.
// ControlState owns one and answers its queries from it; the appliers (apply-*.ts) change it;
// a restore replaces its contents (snapshot-tables.ts). The reads that both apply and the
// queries need are here too.
import type { Artifact, Hardware, OperatorToken, PowerJob, Template, Workflow } from '../../model/records.js';
import { quarantinePolicyDefault, type QuarantinePolicy } from '../../model/quarantine-policy.js';
import { stateVersionBaseline } from '../versions.js';
import type { AcceptRule } from './accept-rule.js';
import { AppliedChanges } from './applied-changes.js';
import { AuditLog } from './audit-log.js';
import type { EventLog } from './event-log.js';
import { LeaseTable } from './leases.js';
import type { Machines } from './machines.js';
import type { MemberApiAddr } from './member-api-addrs.js';
import { Pools } from './pools.js';
import { isFinishedPowerJob } from './power-jobs.js';
import { workflowRetentionDefault, type WorkflowRetention } from './workflow-retention.js';

export class ControlTables {
  /** The raft index of the last control command applied (0 when none). */
  appliedIndex = 0;
  /** The seq of the newest event; seqs are dense from 1 across all workflows. */
  lastEventSeq = 0;
  hardware = new Map<string, Hardware>();
  hardwareByMac = new Map<string, string>();
  /** Reserved address → the MAC of the interface that reserves it (for lease grants). */
  reservedIps = new Map<string, string>();
  templates = new Map<string, Template>();
  workflows = new Map<string, Workflow>();
  events = new Map<string, EventLog>();
  /** Workflows that are not finished. */
  active = new Set<string>();
  /** Failed workflows whose alternate policy holds: the leader re-allocates them (0030). */
  awaitingAlternate = new Set<string>();
  /** Worker id → active workflows whose current action (running or next) is on that worker. */
  byWorker = new Map<string, Set<string>>();
  workerOf = new Map<string, string>();
  /** Worker id → active workflows with any task on that worker (control-indexes.ts). */
  activeByTaskWorker = new Map<string, Set<string>>();
  taskWorkersOf = new Map<string, readonly string[]>();
  /** Machine id → its active workflows (control-indexes.ts). */
  activeByHardware = new Map<string, Set<string>>();
  hardwareOf = new Map<string, string>();
  tokens = new Map<string, OperatorToken>();
  tokenBySha = new Map<string, string>();
  leases = new LeaseTable();
  powerJobs = new Map<string, PowerJob>();
  /** Hardware id → the ids of its power jobs, finished or not. */
  powerJobsByHardware = new Map<string, Set<string>>();
  /** Power jobs not finished (for the leader's power executor). */
  activePowerJobs = new Set<string>();
  artifacts = new Map<string, Artifact>();
  audit = new AuditLog();
  /** The effective state version (src/state/versions.ts): 1 until the leader raises it. */
  clusterVersion = stateVersionBaseline;
  workflowRetention: WorkflowRetention = workflowRetentionDefault;
  /**
   * While no operator has set the workflow retention: the leader stamp of the entry that raised
   * the cluster to state version 2, when the default came into force (workflow-retention.ts
   * retentionStartsMs). Cleared by workflow.retention.
   */
  workflowRetentionDefaultSinceMs: number | undefined;
  /** Members drained by `slipway node drain`, sorted (drained-members.ts). */
  drainedMembers: readonly string[] = [];
  /** Every member's API address as it said it, by id (member-api-addrs.ts). */
  memberApiAddrs: readonly MemberApiAddr[] = [];
  /** Pools (docs/decisions/0035-pools.md), by name. */
  pools = new Pools();
  /** When repeated failures quarantine a machine (model/quarantine-policy.ts). */
  quarantinePolicy: QuarantinePolicy = quarantinePolicyDefault;
  /** The auto-accept rule (accept-rule.ts, docs/decisions/0037); undefined: none. */
  acceptRule: AcceptRule | undefined;
  /** What the command being applied changed, for the change stream. */
  readonly changed = new AppliedChanges();
  /** The machine lifecycle (docs/decisions/0028-machine-lifecycle.md), from state version 3. */
  readonly machines: Machines;

  /** `machinesOf` makes the lifecycle's part, which works on these tables. */
  constructor(machinesOf: (tables: ControlTables) => Machines) {
    this.machines = machinesOf(this);
  }

  /** Every machine, by id. */
  hardwareList(): Hardware[] {
    return sortedValues(this.hardware);
  }

  /** Active workflows with at least one task on this worker, oldest first. */
  activeWorkflowsOf(workerId: string): Workflow[] {
    const out: Workflow[] = [];
    for (const id of this.activeByTaskWorker.get(workerId) ?? []) {
      const wf = this.workflows.get(id);
      if (wf !== undefined) out.push(wf);
    }
    return out.sort(byCreation);
  }

  /** The machine's power jobs (all machines' when absent), oldest first. */
  powerJobsOf(hardwareId?: string): PowerJob[] {
    const ids =
      hardwareId === undefined ? this.powerJobs.keys() : (this.powerJobsByHardware.get(hardwareId) ?? []);
    const out: PowerJob[] = [];
    for (const id of ids) {
      const job = this.powerJobs.get(id);
      if (job !== undefined) out.push(job);
    }
    return out.sort(byPowerJobAge);
  }

  /** The machine's oldest unfinished power job: the only one of its jobs that may run now. */
  firstActivePowerJob(hardwareId: string): PowerJob | undefined {
    let first: PowerJob | undefined;
    for (const id of this.powerJobsByHardware.get(hardwareId) ?? []) {
      const job = this.powerJobs.get(id);
      if (job === undefined || isFinishedPowerJob(job)) continue;
      if (first === undefined || byPowerJobAge(job, first) < 0) first = job;
    }
    return first;
  }
}

/** Workflows in the order they were created (ties by id: the same on every node). */
export function byCreation(a: Workflow, b: Workflow): number {
  return a.createdMs - b.createdMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** Power jobs run and are kept in this order: by creation stamp, then id (the same on every node). */
function byPowerJobAge(a: PowerJob, b: PowerJob): number {
  return a.createdMs - b.createdMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** The map's values in the order of their keys. */
export function sortedValues<T>(map: ReadonlyMap<string, T>): T[] {
  return [...map.keys()].sort().map((k) => map.get(k) as T);
}

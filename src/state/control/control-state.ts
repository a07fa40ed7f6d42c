// The replicated state of the control plane: hardware, templates, workflows with their events,
// and operator tokens. `apply` is a pure function of the state, the command and the leader's
// stamp (invariant 2): no clock, no randomness, and identifiers and tokens come inside commands.
//
// Records are immutable (immutable.ts): a change replaces a record with a new frozen object, so
// queries return stored objects without copying and callers may keep them. The indexes that the
// boot and dispatch paths query on every packet or stream event (hardware by MAC, workflows by
// worker) are maintained on each change, so those queries cost O(1) plus their result.
//
// ControlState is the facade: it owns the tables (control-tables.ts, indexes in
// control-indexes.ts), applies a command through the dispatch (apply-command.ts) to the
// appliers of each domain (apply-*.ts, machines.ts), records the trail (audit-entries.ts),
// publishes what changed (applied-changes.ts), answers the queries, and takes and restores
// snapshots (snapshot-tables.ts).
import type { ControlCommand, ControlResult } from './commands.js';
import type { AuditEntry, AuditPage, AuditQuery, AuditRetention } from './audit-log.js';
import type {
  Artifact,
  Hardware,
  Lease,
  NetworkInterface,
  OperatorToken,
  PowerJob,
  Template,
  Workflow,
  WorkflowEvent,
} from '../../model/records.js';
import type { MemberApiAddr } from './member-api-addrs.js';
import { policyOf, type Pool } from '../../fleet/pool.js';
import { readSnapshot, writeSnapshot } from './snapshot.js';
import type { SnapshotImage } from './snapshot-format.js';
import { runAtOnce, type Sliced } from '../slices.js';
import { clusterVersionRefusal } from '../versions.js';
import type { MachineEvent } from '../../model/machine-lifecycle.js';
import { Machines } from './machines.js';
import { ChangeStream } from './change-stream.js';
import { normalizeMac } from '../../platform/addresses.js';
import type { WorkflowRetention } from './workflow-retention.js';
import type { QuarantinePolicy } from '../../model/quarantine-policy.js';
import { byCreation, ControlTables, sortedValues } from './control-tables.js';
import { applyCommand } from './apply-command.js';
import { failure } from './apply-outcome.js';
import { deleteHardware, storeHardware } from './apply-hardware.js';
import { commit } from './apply-workflows.js';
import { recordCall, recordCommand } from './audit-entries.js';
import { captureImage, installTables, prepareTables } from './snapshot-tables.js';

/** A machine found by one of its MACs, with the interface that has it. */
export interface HardwareInterface {
  readonly hardware: Hardware;
  readonly iface: NetworkInterface;
}

const noIds: ReadonlySet<string> = new Set();

export class ControlState {
  /** What apply (and restore) changed, for the node's services (change-stream.ts). */
  readonly changes = new ChangeStream();

  readonly #t = new ControlTables((t) => new Machines(machinesHost(t)));

  /** The raft index of the last control command applied (0 when none). */
  get appliedIndex(): number {
    return this.#t.appliedIndex;
  }

  /** The seq of the newest event; seqs are dense from 1 across all workflows. */
  get lastEventSeq(): number {
    return this.#t.lastEventSeq;
  }

  /**
   * Applies one command at raft `index` with the leader's stamp `nowMs`. The command must have
   * the shape its type declares, as decodeCommand guarantees (records.ts checks it); within that,
   * bad input changes nothing and comes back as an error result. Only a programmer error (a
   * non-increasing index, a hook that throws) throws.
   */
  apply(index: number, nowMs: number, command: ControlCommand): ControlResult {
    const t = this.#t;
    if (!Number.isSafeInteger(index) || index <= t.appliedIndex) {
      throw new Error(`control apply index ${index} must be an integer above ${t.appliedIndex}`);
    }
    if (!Number.isSafeInteger(nowMs) || nowMs < 0)
      throw new Error(`control apply stamp ${nowMs} is not a time`);
    t.appliedIndex = index;
    // Proposers check this first (clusterVersionRefusal); a command that slipped past them is refused
    // here alike on every node that can read it, never applied ahead of the cluster's version.
    const refusal = clusterVersionRefusal(command, t.clusterVersion);
    t.machines.applying(command);
    const result = refusal === undefined ? applyCommand(t, nowMs, command) : failure('E_INVALID', refusal);
    t.machines.applying(undefined);
    recordCommand(t.audit, command, result, nowMs);
    // Then each machine's transition it made, with who caused it (machines.ts).
    for (const draft of t.machines.auditDrafts(command)) t.audit.append(draft, nowMs);
    t.changed.publish(this.changes, t.machines.takeEvents());
    return result;
  }

  /** The audit trail, newest first, filtered and paged (audit-log.ts). */
  auditTrail(query: AuditQuery): AuditPage {
    return this.#t.audit.query(query);
  }

  /** The cluster's effective state version: what may be proposed (src/state/versions.ts). */
  get clusterVersion(): number {
    return this.#t.clusterVersion;
  }

  get auditRetention(): AuditRetention {
    return this.#t.audit.retention;
  }

  /** How long finished workflows stay (workflow-retention.ts; the leader's collector enforces it). */
  get workflowRetention(): WorkflowRetention {
    return this.#t.workflowRetention;
  }

  /**
   * When the cluster reached state version 2 (a leader stamp) while no operator has set the
   * workflow retention since; undefined once one has, or for a cluster that reached version 2
   * before this was recorded.
   */
  get workflowRetentionDefaultSinceMs(): number | undefined {
    return this.#t.workflowRetentionDefaultSinceMs;
  }

  /** When repeated failures quarantine a machine (model/quarantine-policy.ts). */
  get quarantinePolicy(): QuarantinePolicy {
    return this.#t.quarantinePolicy;
  }

  /** The auto-accept rule's selector, canonical (accept-rule.ts); undefined when none is set. */
  get acceptRule(): string | undefined {
    return this.#t.acceptRule?.selector;
  }

  /** The members drained by `slipway node drain`, sorted by id. */
  get drainedMembers(): readonly string[] {
    return this.#t.drainedMembers;
  }

  /** The pools, sorted by name. */
  pools(): Pool[] {
    return this.#t.pools.all();
  }

  pool(name: string): Pool | undefined {
    return this.#t.pools.get(name);
  }

  /** Every member's API address as the member said it (member.apiAddr), sorted by id. */
  get memberApiAddrs(): readonly MemberApiAddr[] {
    return this.#t.memberApiAddrs;
  }

  isDrained(memberId: string): boolean {
    return this.#t.drainedMembers.includes(memberId);
  }

  /**
   * A call that changed something other than the control state (a Kv write, a membership
   * change) goes into the trail with its outcome, from the entry that made the change; `nowMs`
   * is that entry's stamp, as for a control command's record.
   */
  recordCall(entry: Omit<AuditEntry, 'seq' | 'stampMs'>, nowMs: number): void {
    recordCall(this.#t.audit, entry, nowMs);
  }

  hardware(id: string): Hardware | undefined {
    return this.#t.hardware.get(id);
  }

  /** Machines in a transitional state (for the leader's deadline scanner), in no order. */
  machinesInTransition(): ReadonlySet<string> {
    return this.#t.machines.inTransition;
  }

  /**
   * Up to `limit` of the machine's kept history events with seq >= fromSeq, oldest first; the
   * newest machineHistoryMax are kept (docs/decisions/0028).
   */
  machineHistory(hardwareId: string, fromSeq: number, limit: number): MachineEvent[] {
    const history = this.#t.hardware.get(hardwareId)?.lifecycle?.history ?? [];
    return history.filter((e) => e.seq >= fromSeq).slice(0, Math.max(0, limit));
  }

  /** Every machine, by id. */
  hardwareList(): Hardware[] {
    return this.#t.hardwareList();
  }

  /** The machine with this MAC (any case, colons or dashes). */
  hardwareByMac(mac: string): HardwareInterface | undefined {
    const normal = normalizeMac(mac);
    const id = normal === undefined ? undefined : this.#t.hardwareByMac.get(normal);
    const hardware = id === undefined ? undefined : this.#t.hardware.get(id);
    const iface = hardware?.interfaces.find((i) => i.mac === normal);
    return hardware === undefined || iface === undefined ? undefined : { hardware, iface };
  }

  template(name: string): Template | undefined {
    return this.#t.templates.get(name);
  }

  templates(): Template[] {
    return sortedValues(this.#t.templates);
  }

  workflow(id: string): Workflow | undefined {
    return this.#t.workflows.get(id);
  }

  /** Every workflow, oldest first. */
  workflows(): Workflow[] {
    return [...this.#t.workflows.values()].sort(byCreation);
  }

  /**
   * The machine's workflows, finished or not, oldest first: picked out before the sort, since a
   * client that lists one machine's workflows for each of thousands of machines (a look before a
   * create) would otherwise sort every workflow each time.
   */
  workflowsOfMachine(hardwareId: string): Workflow[] {
    const out: Workflow[] = [];
    for (const wf of this.#t.workflows.values()) if (wf.hardwareId === hardwareId) out.push(wf);
    return out.sort(byCreation);
  }

  /** Active workflows whose running or next action runs on this worker, oldest first. */
  workflowsForWorker(workerId: string): Workflow[] {
    return this.#workflowsOf(this.#t.byWorker.get(workerId) ?? []).sort(byCreation);
  }

  /** Active workflows with at least one task on this worker, oldest first. */
  activeWorkflowsOf(workerId: string): Workflow[] {
    return this.#t.activeWorkflowsOf(workerId);
  }

  /** Failed workflows whose alternate policy holds, for the leader to re-allocate, in no order. */
  workflowsAwaitingAlternate(): Workflow[] {
    return this.#workflowsOf(this.#t.awaitingAlternate);
  }

  /** The ids of the workflows not yet finished (for the leader's deadline scanner), in no order. */
  activeWorkflowIds(): ReadonlySet<string> {
    return this.#t.active;
  }

  /** The ids of the machine's workflows that are not finished. */
  activeWorkflowIdsOfMachine(hardwareId: string): ReadonlySet<string> {
    return this.#t.activeByHardware.get(hardwareId) ?? noIds;
  }

  /** How many workflows are finished. */
  get finishedWorkflowCount(): number {
    return this.#t.workflows.size - this.#t.active.size;
  }

  /** The finished workflows (for the leader's collector), in no order. */
  finishedWorkflows(): Workflow[] {
    const out: Workflow[] = [];
    for (const [id, wf] of this.#t.workflows) if (!this.#t.active.has(id)) out.push(wf);
    return out;
  }

  /**
   * Up to `limit` of the workflow's events with seq >= fromSeq, oldest first. Only the newest
   * workflowEventsMax (10,000) events of each workflow are kept; a workflow's events go with it.
   */
  events(workflowId: string, fromSeq: number, limit: number): WorkflowEvent[] {
    return this.#t.events.get(workflowId)?.from(fromSeq, limit) ?? [];
  }

  /** The operator token with this SHA-256 (hex, any case). */
  token(sha256: string): OperatorToken | undefined {
    const name = this.#t.tokenBySha.get(sha256.toLowerCase());
    return name === undefined ? undefined : this.#t.tokens.get(name);
  }

  tokens(): OperatorToken[] {
    return sortedValues(this.#t.tokens);
  }

  /** The lease (bound or declined, expired or not) of this address. */
  leaseAt(ip: string): Lease | undefined {
    return this.#t.leases.at(ip);
  }

  /** The MAC's bound lease, expired or not. */
  leaseOfMac(mac: string): Lease | undefined {
    return this.#t.leases.ofMac(mac);
  }

  /** Every lease, by address. */
  leases(): Lease[] {
    return this.#t.leases.all();
  }

  /** The MAC of the hardware interface that reserves this address, if one does. */
  reservedFor(ip: string): string | undefined {
    return this.#t.reservedIps.get(ip);
  }

  powerJob(id: string): PowerJob | undefined {
    return this.#t.powerJobs.get(id);
  }

  /** The machine's power jobs (all machines' when absent), oldest first. */
  powerJobs(hardwareId?: string): PowerJob[] {
    return this.#t.powerJobsOf(hardwareId);
  }

  /** The ids of unfinished power jobs (for the leader's power executor), in no order. */
  activePowerJobIds(): ReadonlySet<string> {
    return this.#t.activePowerJobs;
  }

  /** The machine's oldest unfinished power job: the only one of its jobs that may run now. */
  firstActivePowerJob(hardwareId: string): PowerJob | undefined {
    return this.#t.firstActivePowerJob(hardwareId);
  }

  /** The artifact registered under this name. */
  artifact(name: string): Artifact | undefined {
    return this.#t.artifacts.get(name);
  }

  /** Every registered artifact, by name. */
  artifacts(): Artifact[] {
    return sortedValues(this.#t.artifacts);
  }

  /** The whole state as canonical JSON bytes: equal states give equal bytes. */
  snapshot(): Uint8Array {
    return writeSnapshot(this.captureImage());
  }

  /**
   * The state as of now, for encoding later (snapshotSlices): records are immutable, so the
   * image holds references to them in fresh sorted arrays that later applies do not touch.
   * Costs a sort of each collection's keys, not an encoding.
   */
  captureImage(): SnapshotImage {
    return captureImage(this.#t);
  }

  /**
   * Replaces the whole state with a snapshot's. Throws DecodeError, changing nothing, when the
   * data is malformed or inconsistent. Subscribers stay subscribed; only a restore change is published.
   */
  restore(data: Uint8Array): void {
    this.prepareRestore(data)();
  }

  /**
   * The checking half of restore: throws DecodeError now, or returns the function that installs
   * the state (and publishes a restore change). For a caller restoring more than this state atomically.
   */
  prepareRestore(data: Uint8Array): () => void {
    return this.prepareImageRestore(readSnapshot(data));
  }

  /**
   * prepareRestore for an image already decoded and checked by readSnapshot or
   * readSnapshotRecords (the record layout, read in slices by the store).
   */
  prepareImageRestore(image: SnapshotImage): () => void {
    return runAtOnce(this.prepareImageRestoreSlices(image));
  }

  /** prepareImageRestore in slices (see slices.ts): a large state's indexes take a while. */
  *prepareImageRestoreSlices(image: SnapshotImage): Sliced<() => void> {
    const prepared = yield* prepareTables(image);
    return () => {
      installTables(this.#t, image, prepared);
      this.changes.publish({ kind: 'restore' });
    };
  }

  /** The stored workflows of these ids, in no order. */
  #workflowsOf(ids: Iterable<string>): Workflow[] {
    const out: Workflow[] = [];
    for (const id of ids) {
      const wf = this.#t.workflows.get(id);
      if (wf !== undefined) out.push(wf);
    }
    return out;
  }
}

/** What the machine lifecycle (machines.ts) reads and changes of the tables. */
function machinesHost(t: ControlTables): ConstructorParameters<typeof Machines>[0] {
  return {
    clusterVersion: () => t.clusterVersion,
    quarantinePolicy: () => t.quarantinePolicy,
    acceptRule: () => t.acceptRule,
    hardware: (id) => t.hardware.get(id),
    hardwareList: () => t.hardwareList(),
    releasingPoolOf: (id) => {
      const pool = t.pools.ownerOf(id);
      // Under the retry policy a failed member is installed again, not released (0040).
      if (pool === undefined || policyOf(pool) === 'retry') return undefined;
      return pool.releaseTemplate === undefined ? undefined : pool.name;
    },
    workflow: (id) => t.workflows.get(id),
    allWorkflows: () => t.workflows.values(),
    activeWorkflowIdsOf: (hardwareId) => t.activeByHardware.get(hardwareId) ?? noIds,
    storeHardware: (hw) => storeHardware(t, hw, t.hardware.get(hw.id)),
    removeHardware: (id) => {
      const removed = deleteHardware(t, id);
      return removed.type === 'error' ? removed.message : undefined;
    },
    hardwareIdOfMac: (mac) => t.hardwareByMac.get(mac),
    hardwareCount: () => t.hardware.size,
    leaseOfMac: (mac) => t.leases.ofMac(mac),
    commitWorkflow: (transition, nowMs) => void commit(t, transition, nowMs),
  };
}

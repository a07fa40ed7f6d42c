// The replicated state of the control plane: hardware, templates, workflows with their events,
// and operator tokens. `apply` is a pure function of the state, the command and the leader's
// stamp (invariant 2): no clock, no randomness, and identifiers and tokens come inside commands.
//
// Records are immutable (immutable.ts): a change replaces a record with a new frozen object, so
// queries return stored objects without copying and callers may keep them. The indexes that the
// boot and dispatch paths query on every packet or stream event (hardware by MAC, workflows by
// worker) are maintained on each change, so those queries cost O(1) plus their result.
import { DecodeError } from '../binary.js';
import {
  artifactsMax,
  auditEntriesMax,
  auditRetentionDaysMax,
  auditTextBytesMax,
  errorMessageBytesMax,
  hardwareMax,
  operatorTokensMax,
  powerJobsActivePerHardwareMax,
  powerJobsKeptPerHardware,
  powerJobsMax,
  raceAttemptsDefault,
  templatesMax,
  workflowEventsMax,
  workflowOutputTailBytesMax,
  workflowsMax,
} from '../../model/limits.js';
import { actionPositions, currentActionIndex, nextAction } from '../../workflow/rules.js';
import { isTerminal } from '../../model/records.js';
import type { CollectedWorkflow, ControlCommand, ControlErrorCode, ControlResult } from './commands.js';
import { putArtifact } from './artifacts.js';
import {
  AuditLog,
  type AuditEntry,
  type AuditPage,
  type AuditQuery,
  type AuditRetention,
} from './audit-log.js';
import { auditTarget } from './audit-target.js';
import { decideCredential } from './credentials.js';
import { sha256HexOf } from '../digest.js';
import { EventLog } from './event-log.js';
import { LeaseTable } from './leases.js';
import { deepFreeze, record } from './immutable.js';
import type {
  AlternatePolicy,
  Artifact,
  Hardware,
  Lease,
  NetworkInterface,
  OperatorToken,
  PowerJob,
  RaceLane,
  Template,
  Workflow,
  WorkflowEvent,
} from '../../model/records.js';
import {
  claimPowerJob,
  createPowerJob,
  isFinishedPowerJob,
  powerRequestProblem,
  recordPowerStep,
  type PowerTransition,
  powerRequest,
} from './power-jobs.js';
import { drainedAfter } from './drained-members.js';
import { memberApiAddrsAfter, type MemberApiAddr } from './member-api-addrs.js';
import { isRefusal, Pools, withinSpread, type PoolLookups } from './pools.js';
import { awaitsRetry, policyOf, type Pool } from '../../fleet/pool.js';
import { readSnapshot, writeSnapshot, type SnapshotImage } from './snapshot.js';
import { headUtf8 } from '../../platform/utf8-text.js';
import { runAtOnce, SliceBudget, type Sliced } from '../slices.js';
import {
  clusterVersionRefusal,
  stateVersionBaseline,
  stateVersionBoundedState,
  stateVersionFleet,
} from '../versions.js';
import {
  alternateWorkflow,
  cancelWorkflow,
  createWorkflow,
  expireDeadline,
  recordLost,
  recordResult,
  retryWorkflow,
  startAttempt,
  type Allocated,
  type Transition,
} from './transitions.js';
import type { MachineEvent } from '../../model/machine-lifecycle.js';
import { checkMachines, Machines } from './machines.js';
import { ChangeStream } from './change-stream.js';
import { allocate, alternateOf, awaitsAlternate, type Allocation } from './allocation.js';
import { raceTook, raceTriedOf } from './race.js';
import { acceptRuleOf, type AcceptRule } from './accept-rule.js';
import { normalizeMac } from '../../platform/addresses.js';
import {
  idProblem,
  normalizeHardware,
  sha256Problem,
  specProblem,
  templateNameProblem,
  templateSourceProblem,
  workerTokenProblem,
} from './validate.js';
import {
  workflowRetentionDefault,
  workflowRetentionProblem,
  type WorkflowRetention,
} from './workflow-retention.js';
import {
  quarantinePolicyDefault,
  quarantinePolicyProblem,
  type QuarantinePolicy,
} from '../../model/quarantine-policy.js';

type Command<T extends ControlCommand['type']> = Extract<ControlCommand, { readonly type: T }>;

/** The indexes a snapshot needs, built while checking it. */
/** Everything a restore installs, built beforehand so that installing is only assignments. */
interface Prepared {
  readonly hardware: Map<string, Hardware>;
  readonly hardwareByMac: Map<string, string>;
  readonly templates: Map<string, Template>;
  readonly workflows: Map<string, Workflow>;
  readonly workflowIndex: WorkflowIndex;
  readonly tokens: Map<string, OperatorToken>;
  readonly tokenBySha: Map<string, string>;
  readonly events: Map<string, EventLog>;
  readonly reservedIps: Map<string, string>;
  readonly leases: () => LeaseTable;
  readonly powerJobs: Map<string, PowerJob>;
  readonly powerJobsByHardware: Map<string, Set<string>>;
  readonly activePowerJobs: Set<string>;
  readonly artifacts: Map<string, Artifact>;
  /** Machines in a transitional state (machines.ts). */
  readonly transitional: Set<string>;
  readonly acceptRule: AcceptRule | undefined;
}

/** The active workflows and who runs their current action (see indexWorkflow). */
interface WorkflowIndex {
  readonly active: Set<string>;
  readonly byWorker: Map<string, Set<string>>;
  readonly workerOf: Map<string, string>;
}

/** Records of a restore prepared per slice: a few milliseconds of indexing. */
const restoreRecordsPerSlice = 512;

/** A machine found by one of its MACs, with the interface that has it. */
export interface HardwareInterface {
  readonly hardware: Hardware;
  readonly iface: NetworkInterface;
}

type Refusal = Extract<ControlResult, { readonly type: 'error' }>;

function failure(code: ControlErrorCode, message: string): Refusal {
  return { type: 'error', code, message: headUtf8(message, errorMessageBytesMax) };
}

const deleted: ControlResult = Object.freeze({ type: 'deleted' });
const recorded: ControlResult = Object.freeze({ type: 'recorded' });

function byCreation(a: Workflow, b: Workflow): number {
  return a.createdMs - b.createdMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** Power jobs run and are kept in this order: by creation stamp, then id (the same on every node). */
function byPowerJobAge(a: PowerJob, b: PowerJob): number {
  return a.createdMs - b.createdMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

function sortedValues<T>(map: ReadonlyMap<string, T>): T[] {
  return [...map.keys()].sort().map((k) => map.get(k) as T);
}

export class ControlState {
  /** What apply (and restore) changed, for the node's services (change-stream.ts). */
  readonly changes = new ChangeStream();

  #appliedIndex = 0;
  #lastEventSeq = 0;
  #hardware = new Map<string, Hardware>();
  #hardwareByMac = new Map<string, string>();
  #templates = new Map<string, Template>();
  #workflows = new Map<string, Workflow>();
  #events = new Map<string, EventLog>();
  /** Workflows that are not finished. */
  #active = new Set<string>();
  /** Failed workflows whose alternate policy holds: the leader re-allocates them (0030). */
  #awaitingAlternate = new Set<string>();
  /** Worker id → active workflows whose current action (running or next) is on that worker. */
  #byWorker = new Map<string, Set<string>>();
  #workerOf = new Map<string, string>();
  #tokens = new Map<string, OperatorToken>();
  #tokenBySha = new Map<string, string>();
  #leases = new LeaseTable();
  /** Reserved address → the MAC of the interface that reserves it (for lease grants). */
  #reservedIps = new Map<string, string>();
  #powerJobs = new Map<string, PowerJob>();
  /** Hardware id → the ids of its power jobs, finished or not. */
  #powerJobsByHardware = new Map<string, Set<string>>();
  /** Power jobs not finished (for the leader's power executor). */
  #activePowerJobs = new Set<string>();
  #artifacts = new Map<string, Artifact>();
  #audit = new AuditLog();
  /** The effective state version (src/state/versions.ts): 1 until the leader raises it. */
  #clusterVersion = stateVersionBaseline;
  #workflowRetention: WorkflowRetention = workflowRetentionDefault;
  /**
   * While no operator has set the workflow retention: the leader stamp of the entry that raised
   * the cluster to state version 2, when the default came into force (workflow-retention.ts
   * retentionStartsMs). Cleared by workflow.retention.
   */
  #workflowRetentionDefaultSinceMs: number | undefined;
  /** Members drained by `slipway node drain`, sorted (drained-members.ts). */
  #drainedMembers: readonly string[] = [];
  /** Every member's API address as it said it, by id (member-api-addrs.ts). */
  #memberApiAddrs: readonly MemberApiAddr[] = [];
  /** Pools (docs/decisions/0035-pools.md), by name. */
  #pools = new Pools();
  /** When repeated failures quarantine a machine (model/quarantine-policy.ts). */
  #quarantinePolicy: QuarantinePolicy = quarantinePolicyDefault;
  /** The auto-accept rule (accept-rule.ts, docs/decisions/0037); undefined: none. */
  #acceptRule: AcceptRule | undefined;
  #drainChanged = false;
  /** The machine lifecycle (docs/decisions/0028-machine-lifecycle.md), from state version 3. */
  readonly #machines = new Machines({
    clusterVersion: () => this.#clusterVersion,
    quarantinePolicy: () => this.#quarantinePolicy,
    acceptRule: () => this.#acceptRule,
    hardware: (id) => this.#hardware.get(id),
    hardwareList: () => this.hardwareList(),
    releasingPoolOf: (id) => {
      const pool = this.#pools.ownerOf(id);
      // Under the retry policy a failed member is installed again, not released (0040).
      if (pool === undefined || policyOf(pool) === 'retry') return undefined;
      return pool.releaseTemplate === undefined ? undefined : pool.name;
    },
    workflow: (id) => this.#workflows.get(id),
    allWorkflows: () => this.#workflows.values(),
    activeWorkflowIds: () => this.#active,
    storeHardware: (hw) => this.#storeHardware(hw, this.#hardware.get(hw.id)),
    removeHardware: (id) => {
      const removed = this.#deleteHardware(id);
      return removed.type === 'error' ? removed.message : undefined;
    },
    hardwareIdOfMac: (mac) => this.#hardwareByMac.get(mac),
    hardwareCount: () => this.#hardware.size,
    leaseOfMac: (mac) => this.#leases.ofMac(mac),
    commitWorkflow: (transition, nowMs) => void this.#commit(transition, nowMs),
  });

  // What the command being applied changed, for the hooks.
  #changedHardware = new Set<string>();
  #changedWorkflows = new Map<string, Workflow | undefined>();
  #newEvents: WorkflowEvent[] = [];
  #changedPowerJobs: PowerJob[] = [];
  #changedArtifacts: string[] = [];
  #collected: string[] = [];

  /** The raft index of the last control command applied (0 when none). */
  get appliedIndex(): number {
    return this.#appliedIndex;
  }

  /** The seq of the newest event; seqs are dense from 1 across all workflows. */
  get lastEventSeq(): number {
    return this.#lastEventSeq;
  }

  /**
   * Applies one command at raft `index` with the leader's stamp `nowMs`. The command must have
   * the shape its type declares, as decodeCommand guarantees (records.ts checks it); within that,
   * bad input changes nothing and comes back as an error result. Only a programmer error (a
   * non-increasing index, a hook that throws) throws.
   */
  apply(index: number, nowMs: number, command: ControlCommand): ControlResult {
    if (!Number.isSafeInteger(index) || index <= this.#appliedIndex) {
      throw new Error(`control apply index ${index} must be an integer above ${this.#appliedIndex}`);
    }
    if (!Number.isSafeInteger(nowMs) || nowMs < 0)
      throw new Error(`control apply stamp ${nowMs} is not a time`);
    this.#appliedIndex = index;
    // Proposers check this first (clusterVersionRefusal); a command that slipped past them is refused
    // here alike on every node that can read it, never applied ahead of the cluster's version.
    const refusal = clusterVersionRefusal(command, this.#clusterVersion);
    this.#machines.applying(command);
    const result = refusal === undefined ? this.#execute(nowMs, command) : failure('E_INVALID', refusal);
    this.#machines.applying(undefined);
    this.#recordAudit(command, result, nowMs);
    // Then each machine's transition it made, with who caused it (machines.ts).
    for (const draft of this.#machines.auditDrafts(command)) this.#audit.append(draft, nowMs);
    this.#notify();
    return result;
  }

  /** The audit trail, newest first, filtered and paged (audit-log.ts). */
  auditTrail(query: AuditQuery): AuditPage {
    return this.#audit.query(query);
  }

  /** The cluster's effective state version: what may be proposed (src/state/versions.ts). */
  get clusterVersion(): number {
    return this.#clusterVersion;
  }

  get auditRetention(): AuditRetention {
    return this.#audit.retention;
  }

  /** How long finished workflows stay (workflow-retention.ts; the leader's collector enforces it). */
  get workflowRetention(): WorkflowRetention {
    return this.#workflowRetention;
  }

  /**
   * When the cluster reached state version 2 (a leader stamp) while no operator has set the
   * workflow retention since; undefined once one has, or for a cluster that reached version 2
   * before this was recorded.
   */
  get workflowRetentionDefaultSinceMs(): number | undefined {
    return this.#workflowRetentionDefaultSinceMs;
  }

  /** When repeated failures quarantine a machine (model/quarantine-policy.ts). */
  get quarantinePolicy(): QuarantinePolicy {
    return this.#quarantinePolicy;
  }

  /** The auto-accept rule's selector, canonical (accept-rule.ts); undefined when none is set. */
  get acceptRule(): string | undefined {
    return this.#acceptRule?.selector;
  }

  /** The members drained by `slipway node drain`, sorted by id. */
  get drainedMembers(): readonly string[] {
    return this.#drainedMembers;
  }

  /** The pools, sorted by name. */
  pools(): Pool[] {
    return this.#pools.all();
  }

  pool(name: string): Pool | undefined {
    return this.#pools.get(name);
  }

  /** Every member's API address as the member said it (member.apiAddr), sorted by id. */
  get memberApiAddrs(): readonly MemberApiAddr[] {
    return this.#memberApiAddrs;
  }

  isDrained(memberId: string): boolean {
    return this.#drainedMembers.includes(memberId);
  }

  /**
   * A call that changed something other than the control state (a Kv write, a membership
   * change) goes into the trail with its outcome, from the entry that made the change; `nowMs`
   * is that entry's stamp, as for a control command's record.
   */
  recordCall(entry: Omit<AuditEntry, 'seq' | 'stampMs'>, nowMs: number): void {
    // Field by field, in the order #recordAudit gives them: snapshots write entries as they are.
    this.#audit.append(
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

  /** An operator's command goes into the trail with its outcome, in the entry that applied it. */
  #recordAudit(command: ControlCommand, result: ControlResult, nowMs: number): void {
    const tag = command.audit;
    if (tag === undefined) return;
    const refusal =
      result.type === 'error'
        ? { code: result.code, message: result.message }
        : command.type === 'audit.record'
          ? command.error
          : undefined;
    this.#audit.append(
      {
        ...tag,
        kind: headUtf8(command.type === 'audit.record' ? command.kind : command.type, auditTextBytesMax),
        target: headUtf8(auditTarget(command), auditTextBytesMax),
        ...(refusal === undefined ? {} : { error: refusal }),
      },
      nowMs,
    );
  }

  hardware(id: string): Hardware | undefined {
    return this.#hardware.get(id);
  }

  /** Machines in a transitional state (for the leader's deadline scanner), in no order. */
  machinesInTransition(): ReadonlySet<string> {
    return this.#machines.inTransition;
  }

  /**
   * Up to `limit` of the machine's kept history events with seq >= fromSeq, oldest first; the
   * newest machineHistoryMax are kept (docs/decisions/0028).
   */
  machineHistory(hardwareId: string, fromSeq: number, limit: number): MachineEvent[] {
    const history = this.#hardware.get(hardwareId)?.lifecycle?.history ?? [];
    return history.filter((e) => e.seq >= fromSeq).slice(0, Math.max(0, limit));
  }

  /** Every machine, by id. */
  hardwareList(): Hardware[] {
    return sortedValues(this.#hardware);
  }

  /** The machine with this MAC (any case, colons or dashes). */
  hardwareByMac(mac: string): HardwareInterface | undefined {
    const normal = normalizeMac(mac);
    const id = normal === undefined ? undefined : this.#hardwareByMac.get(normal);
    const hardware = id === undefined ? undefined : this.#hardware.get(id);
    const iface = hardware?.interfaces.find((i) => i.mac === normal);
    return hardware === undefined || iface === undefined ? undefined : { hardware, iface };
  }

  template(name: string): Template | undefined {
    return this.#templates.get(name);
  }

  templates(): Template[] {
    return sortedValues(this.#templates);
  }

  workflow(id: string): Workflow | undefined {
    return this.#workflows.get(id);
  }

  /** Every workflow, oldest first. */
  workflows(): Workflow[] {
    return [...this.#workflows.values()].sort(byCreation);
  }

  /** Active workflows whose running or next action runs on this worker, oldest first. */
  workflowsForWorker(workerId: string): Workflow[] {
    const ids = this.#byWorker.get(workerId);
    if (ids === undefined) return [];
    const out: Workflow[] = [];
    for (const id of ids) {
      const wf = this.#workflows.get(id);
      if (wf !== undefined) out.push(wf);
    }
    return out.sort(byCreation);
  }

  /** Active workflows with at least one task on this worker, oldest first. */
  activeWorkflowsOf(workerId: string): Workflow[] {
    const out: Workflow[] = [];
    for (const id of this.#active) {
      const wf = this.#workflows.get(id);
      if (wf !== undefined && wf.spec.tasks.some((task) => task.worker === workerId)) out.push(wf);
    }
    return out.sort(byCreation);
  }

  /** The ids of the workflows not yet finished (for the leader's deadline scanner), in no order. */
  /** Failed workflows whose alternate policy holds, for the leader to re-allocate, in no order. */
  workflowsAwaitingAlternate(): Workflow[] {
    const out: Workflow[] = [];
    for (const id of this.#awaitingAlternate) {
      const wf = this.#workflows.get(id);
      if (wf !== undefined) out.push(wf);
    }
    return out;
  }

  activeWorkflowIds(): ReadonlySet<string> {
    return this.#active;
  }

  /** How many workflows are finished. */
  get finishedWorkflowCount(): number {
    return this.#workflows.size - this.#active.size;
  }

  /** The finished workflows (for the leader's collector), in no order. */
  finishedWorkflows(): Workflow[] {
    const out: Workflow[] = [];
    for (const [id, wf] of this.#workflows) if (!this.#active.has(id)) out.push(wf);
    return out;
  }

  /**
   * Up to `limit` of the workflow's events with seq >= fromSeq, oldest first. Only the newest
   * workflowEventsMax (10,000) events of each workflow are kept; a workflow's events go with it.
   */
  events(workflowId: string, fromSeq: number, limit: number): WorkflowEvent[] {
    return this.#events.get(workflowId)?.from(fromSeq, limit) ?? [];
  }

  /** The operator token with this SHA-256 (hex, any case). */
  token(sha256: string): OperatorToken | undefined {
    const name = this.#tokenBySha.get(sha256.toLowerCase());
    return name === undefined ? undefined : this.#tokens.get(name);
  }

  tokens(): OperatorToken[] {
    return sortedValues(this.#tokens);
  }

  /** The lease (bound or declined, expired or not) of this address. */
  leaseAt(ip: string): Lease | undefined {
    return this.#leases.at(ip);
  }

  /** The MAC's bound lease, expired or not. */
  leaseOfMac(mac: string): Lease | undefined {
    return this.#leases.ofMac(mac);
  }

  /** Every lease, by address. */
  leases(): Lease[] {
    return this.#leases.all();
  }

  /** The MAC of the hardware interface that reserves this address, if one does. */
  reservedFor(ip: string): string | undefined {
    return this.#reservedIps.get(ip);
  }

  powerJob(id: string): PowerJob | undefined {
    return this.#powerJobs.get(id);
  }

  /** The machine's power jobs (all machines' when absent), oldest first. */
  powerJobs(hardwareId?: string): PowerJob[] {
    const ids =
      hardwareId === undefined ? this.#powerJobs.keys() : (this.#powerJobsByHardware.get(hardwareId) ?? []);
    const out: PowerJob[] = [];
    for (const id of ids) {
      const job = this.#powerJobs.get(id);
      if (job !== undefined) out.push(job);
    }
    return out.sort(byPowerJobAge);
  }

  /** The ids of unfinished power jobs (for the leader's power executor), in no order. */
  activePowerJobIds(): ReadonlySet<string> {
    return this.#activePowerJobs;
  }

  /** The machine's oldest unfinished power job: the only one of its jobs that may run now. */
  firstActivePowerJob(hardwareId: string): PowerJob | undefined {
    let first: PowerJob | undefined;
    for (const id of this.#powerJobsByHardware.get(hardwareId) ?? []) {
      const job = this.#powerJobs.get(id);
      if (job === undefined || isFinishedPowerJob(job)) continue;
      if (first === undefined || byPowerJobAge(job, first) < 0) first = job;
    }
    return first;
  }

  /** The artifact registered under this name. */
  artifact(name: string): Artifact | undefined {
    return this.#artifacts.get(name);
  }

  /** Every registered artifact, by name. */
  artifacts(): Artifact[] {
    return sortedValues(this.#artifacts);
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
    return {
      appliedIndex: this.#appliedIndex,
      lastEventSeq: this.#lastEventSeq,
      hardware: this.hardwareList(),
      templates: this.templates(),
      workflows: sortedValues(this.#workflows).map((workflow) => ({
        workflow,
        events: this.#events.get(workflow.id)?.all() ?? [],
      })),
      tokens: this.tokens(),
      leases: this.#leases.all(),
      powerJobs: sortedValues(this.#powerJobs),
      artifacts: this.artifacts(),
      audit: {
        retention: this.#audit.retention,
        lastSeq: this.#audit.lastSeq,
        entries: this.#audit.all(),
      },
      clusterVersion: this.#clusterVersion,
      workflowRetention: this.#workflowRetention,
      ...(this.#workflowRetentionDefaultSinceMs === undefined
        ? {}
        : { workflowRetentionDefaultSinceMs: this.#workflowRetentionDefaultSinceMs }),
      drainedMembers: this.#drainedMembers,
      pools: this.#pools.all(),
      memberApiAddrs: this.#memberApiAddrs,
      quarantinePolicy: this.#quarantinePolicy,
      ...(this.#acceptRule === undefined ? {} : { acceptRule: this.#acceptRule.selector }),
    };
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
    const prepared = yield* this.#prepare(image);
    return () => {
      this.#install(image, prepared);
      this.changes.publish({ kind: 'restore' });
    };
  }

  /** Checks what the readers cannot (relations between records) and builds the indexes. */
  *#prepare(image: SnapshotImage): Sliced<Prepared> {
    const budget = new SliceBudget(restoreRecordsPerSlice);
    const hardwareByMac = new Map<string, string>();
    const reservedIps = new Map<string, string>();
    const hardware = new Map<string, Hardware>();
    for (const hw of image.hardware) {
      hardware.set(hw.id, hw);
      if (budget.spend()) yield;
      for (const iface of hw.interfaces) {
        const owner = hardwareByMac.get(iface.mac);
        if (owner !== undefined)
          throw new DecodeError(`MAC ${iface.mac} belongs to both "${owner}" and "${hw.id}"`);
        hardwareByMac.set(iface.mac, hw.id);
        if (iface.ip !== undefined) reservedIps.set(iface.ip.address, iface.mac);
      }
    }
    const leases = LeaseTable.prepare(image.leases ?? []);
    if (typeof leases === 'string') throw new DecodeError(`control snapshot: ${leases}`);
    const tokenBySha = new Map<string, string>();
    for (const t of image.tokens) {
      if (tokenBySha.has(t.sha256)) throw new DecodeError(`two tokens have the SHA-256 ${t.sha256}`);
      tokenBySha.set(t.sha256, t.name);
    }
    const events = new Map<string, EventLog>();
    const workflows = new Map<string, Workflow>();
    const workflowIndex: WorkflowIndex = { active: new Set(), byWorker: new Map(), workerOf: new Map() };
    for (const { workflow, events: list } of image.workflows) {
      for (const e of list) {
        if (e.workflowId !== workflow.id || e.seq > image.lastEventSeq) {
          throw new DecodeError(`event ${e.seq} of workflow "${workflow.id}" is inconsistent`);
        }
      }
      events.set(workflow.id, new EventLog(workflowEventsMax, list));
      workflows.set(workflow.id, workflow);
      indexWorkflow(workflowIndex, workflow);
      if (budget.spend()) yield;
    }
    const transitional = checkMachines(image, workflows);
    const powerJobs = new Map<string, PowerJob>();
    const activePowerJobs = new Set<string>();
    const powerJobsByHardware = new Map<string, Set<string>>();
    for (const job of image.powerJobs ?? []) {
      powerJobs.set(job.id, job);
      if (!isFinishedPowerJob(job)) activePowerJobs.add(job.id);
      if (!hardware.has(job.hardwareId)) {
        throw new DecodeError(
          `power job "${job.id}" is for hardware "${job.hardwareId}", which does not exist`,
        );
      }
      let ids = powerJobsByHardware.get(job.hardwareId);
      if (ids === undefined) {
        ids = new Set();
        powerJobsByHardware.set(job.hardwareId, ids);
      }
      ids.add(job.id);
      if (budget.spend()) yield;
    }
    return {
      hardware,
      hardwareByMac,
      templates: new Map(image.templates.map((t) => [t.name, t])),
      workflows,
      workflowIndex,
      tokens: new Map(image.tokens.map((t) => [t.name, t])),
      tokenBySha,
      events,
      reservedIps,
      leases,
      powerJobs,
      powerJobsByHardware,
      activePowerJobs,
      artifacts: new Map((image.artifacts ?? []).map((a) => [a.name, a])),
      transitional,
      acceptRule: acceptRuleOfImage(image.acceptRule),
    };
  }

  #install(image: SnapshotImage, prepared: Prepared): void {
    this.#appliedIndex = image.appliedIndex;
    this.#lastEventSeq = image.lastEventSeq;
    this.#hardware = prepared.hardware;
    this.#hardwareByMac = prepared.hardwareByMac;
    this.#templates = prepared.templates;
    this.#workflows = prepared.workflows;
    this.#events = prepared.events;
    this.#tokens = prepared.tokens;
    this.#tokenBySha = prepared.tokenBySha;
    this.#reservedIps = prepared.reservedIps;
    this.#leases = prepared.leases();
    this.#active = prepared.workflowIndex.active;
    this.#awaitingAlternate = new Set(
      [...prepared.workflows.values()].filter((wf) => awaitsAlternate(wf)).map((wf) => wf.id),
    );
    this.#byWorker = prepared.workflowIndex.byWorker;
    this.#workerOf = prepared.workflowIndex.workerOf;
    this.#powerJobs = prepared.powerJobs;
    this.#powerJobsByHardware = prepared.powerJobsByHardware;
    this.#activePowerJobs = prepared.activePowerJobs;
    this.#artifacts = prepared.artifacts;
    // A snapshot from before the trail existed restores with an empty one.
    this.#audit =
      image.audit === undefined
        ? new AuditLog()
        : new AuditLog(image.audit.retention, image.audit.lastSeq, image.audit.entries);
    this.#clusterVersion = image.clusterVersion ?? stateVersionBaseline;
    this.#workflowRetention = image.workflowRetention ?? workflowRetentionDefault;
    this.#workflowRetentionDefaultSinceMs = image.workflowRetentionDefaultSinceMs;
    this.#drainedMembers = image.drainedMembers ?? [];
    this.#memberApiAddrs = image.memberApiAddrs ?? [];
    this.#pools = new Pools();
    this.#pools.restore(image.pools ?? []);
    this.#quarantinePolicy = image.quarantinePolicy ?? quarantinePolicyDefault;
    this.#acceptRule = prepared.acceptRule;
    this.#machines.restored(prepared.transitional);
  }

  #execute(nowMs: number, command: ControlCommand): ControlResult {
    if (isPoolCommand(command)) return this.#executePool(command, nowMs);
    switch (command.type) {
      case 'hardware.put':
        return this.#putHardware(command, nowMs);
      case 'hardware.delete':
        return this.#deleteHardware(command.id);
      case 'hardware.setAllowPXE':
        if (!this.#hardware.has(command.id))
          return failure('E_NOT_FOUND', `hardware "${command.id}" does not exist`);
        return { type: 'hardware', hardware: this.#setAllowPXE(command.id, command.allowPXE, nowMs) };
      case 'hardware.token':
        return this.#setWorkerToken(command, nowMs);
      case 'hardware.lifecycle':
      case 'hardware.label':
      case 'hardware.expire':
        return this.#machines.execute(command, nowMs);
      case 'template.put':
        return this.#putTemplate(command, nowMs);
      case 'template.delete':
        return this.#deleteTemplate(command.name);
      case 'workflow.create':
        return this.#createWorkflow(command, nowMs);
      case 'workflow.allocate':
        return this.#allocate(command, nowMs);
      case 'workflow.alternate':
        return this.#alternate(command, nowMs);
      case 'attempt.start':
        return this.#onWorkflow(command.workflowId, (wf) => startAttempt(wf, command, nowMs), nowMs);
      case 'attempt.result':
        return this.#recordAttemptResult(command, nowMs);
      case 'attempt.lost':
        return this.#onWorkflow(command.workflowId, (wf) => recordLost(wf, command, nowMs), nowMs);
      case 'deadline.expire':
        return this.#onWorkflow(command.workflowId, (wf) => expireDeadline(wf, nowMs), nowMs);
      case 'workflow.cancel':
        return this.#cancel(command, nowMs);
      case 'workflow.retry':
        return this.#onWorkflow(command.id, (wf) => this.#retry(wf, command.fromStart), nowMs);
      case 'workflow.delete':
        return this.#deleteWorkflow(command.id);
      case 'token.put':
        return this.#putToken(command, nowMs);
      case 'token.delete':
        return this.#deleteToken(command.name);
      case 'credential.issue':
        return this.#issueCredential(command, nowMs);
      case 'credential.inventory':
        return this.#machines.claimInventory(command, nowMs);
      case 'hardware.inventory':
        return this.#machines.reportInventory(command, nowMs);
      case 'lease.grant':
        return this.#grantLeases(command, nowMs);
      case 'lease.release':
        return leaseResult(this.#leases.release(command.mac, command.ip, nowMs));
      case 'lease.decline':
        return leaseResult(this.#leases.decline(command.mac, command.ip, command.probationS, nowMs));
      case 'power.request':
        return this.#requestPower(command, nowMs);
      case 'power.claim':
        return this.#onPowerJob(command.jobId, (job) =>
          claimPowerJob(job, command, this.firstActivePowerJob(job.hardwareId)?.id === job.id, nowMs),
        );
      case 'power.step':
        return this.#onPowerJob(command.jobId, (job) => recordPowerStep(job, command, nowMs));
      case 'artifact.put':
        return this.#putArtifact(command, nowMs);
      case 'artifact.delete':
        return this.#deleteArtifact(command.name);
      case 'audit.record':
        // The record itself is written by #recordAudit, like every audited command's.
        return command.audit === undefined
          ? failure('E_INVALID', 'audit: an audit.record needs who asked')
          : recorded;
      case 'audit.retention':
        return this.#setAuditRetention(command, nowMs);
      case 'cluster.version':
        return this.#raiseClusterVersion(command.version, nowMs);
      case 'workflow.retention':
        return this.#setWorkflowRetention(command);
      case 'hardware.quarantinePolicy':
        return this.#setQuarantinePolicy(command);
      case 'hardware.acceptRule':
        return this.#setAcceptRule(command);
      case 'workflow.gc':
        return this.#collect(command.workflows);
      case 'member.drain':
      case 'member.apiAddr':
        return this.#executeMember(command);
      default:
        return unreachable(command);
    }
  }

  #raiseClusterVersion(version: number, nowMs: number): ControlResult {
    // Bounded state turns the default workflow retention on: from this entry's stamp, the
    // collector counts the grace before it removes anything by the default (0020).
    if (this.#clusterVersion < stateVersionBoundedState && version >= stateVersionBoundedState) {
      this.#workflowRetentionDefaultSinceMs = nowMs;
    }
    // The lifecycle starts: every machine's state is derived from its workflows, in this entry.
    const adopting = this.#clusterVersion < stateVersionFleet && version >= stateVersionFleet;
    // Never lowered: members that applied a newer format cannot go back to an older one.
    this.#clusterVersion = Math.max(this.#clusterVersion, version);
    if (adopting) this.#machines.adopt(nowMs);
    return { type: 'clusterVersion', version: this.#clusterVersion };
  }

  #setWorkerToken(command: Command<'hardware.token'>, nowMs: number): ControlResult {
    const existing = this.#hardware.get(command.id);
    if (existing === undefined) return failure('E_NOT_FOUND', `hardware "${command.id}" does not exist`);
    const problem = sha256Problem(command.workerTokenSha256);
    if (problem !== undefined) return failure('E_INVALID', problem.replace(/^sha256/, 'workerTokenSha256'));
    const stored = deepFreeze<Hardware>({
      ...existing,
      workerTokenSha256: command.workerTokenSha256.toLowerCase(),
      updatedMs: nowMs,
      version: existing.version + 1,
    });
    this.#storeHardware(stored, existing);
    return { type: 'hardware', hardware: stored };
  }

  #deleteTemplate(name: string): ControlResult {
    if (!this.#templates.delete(name)) {
      return failure('E_NOT_FOUND', `template "${name}" does not exist`);
    }
    return deleted;
  }

  /** Records the attempt's result; with startNext, also starts the workflow's next action. */
  #recordAttemptResult(command: Command<'attempt.result'>, nowMs: number): ControlResult {
    const result = this.#onWorkflow(command.workflowId, (wf) => recordResult(wf, command, nowMs), nowMs);
    if (command.startNext !== true || result.type !== 'attempt') return result;
    const started = this.#startNext(command, nowMs);
    if (started?.type !== 'attempt') return result;
    const { actionIndex, attempt, deadlineMs } = started;
    return {
      ...result,
      started: deadlineMs === undefined ? { actionIndex, attempt } : { actionIndex, attempt, deadlineMs },
    };
  }

  #grantLeases(command: Command<'lease.grant'>, nowMs: number): ControlResult {
    const outcomes = this.#leases.grant(command.grants, nowMs, (ip) => this.#reservedIps.get(ip));
    return typeof outcomes === 'string' ? failure('E_INVALID', outcomes) : { type: 'grants', outcomes };
  }

  #deleteArtifact(name: string): ControlResult {
    if (!this.#artifacts.delete(name)) {
      return failure('E_NOT_FOUND', `artifact "${name}" does not exist`);
    }
    this.#changedArtifacts.push(name);
    return deleted;
  }

  #setWorkflowRetention(command: Command<'workflow.retention'>): ControlResult {
    const retention = { finishedMax: command.finishedMax, finishedDays: command.finishedDays };
    const problem = workflowRetentionProblem(retention);
    if (problem !== undefined) return failure('E_INVALID', problem);
    this.#workflowRetention = Object.freeze(retention);
    // Chosen by an operator, even if it is the default: it applies at once.
    this.#workflowRetentionDefaultSinceMs = undefined;
    return { type: 'workflowRetention', retention: this.#workflowRetention };
  }

  #executePool(command: PoolCommand, nowMs: number): ControlResult {
    switch (command.type) {
      case 'pool.create':
        return poolResult(
          this.#pools.create(
            command,
            (name) => this.#templates.get(name),
            (name) => this.#artifacts.get(name),
          ),
        );
      case 'pool.scale':
        return poolResult(this.#pools.scale(command));
      case 'pool.taint':
        return poolResult(this.#pools.taint(command.name, (id) => this.#hardware.get(id)));
      case 'pool.resume':
        return poolResult(this.#pools.resume(command.name));
      case 'pool.delete': {
        const outcome = this.#pools.delete(command.name, (id) => this.#hardware.get(id));
        if (isRefusal(outcome)) return failure(outcome.code, outcome.message);
        this.#freeSpares(outcome.pool.name, nowMs);
        return outcome.kind === 'removed' ? deleted : { type: 'pool', pool: outcome.pool };
      }
      case 'pool.reserve': {
        const pool = this.#pools.reserve(command, this.#poolLookups());
        if (isRefusal(pool)) return failure(pool.code, pool.message);
        this.#machines.setSpare(command.hardwareId, pool.name, nowMs);
        return { type: 'pool', pool };
      }
      case 'pool.release':
        return this.#releaseFromPool(command, nowMs);
      default:
        return this.#allocateForPool(command, nowMs);
    }
  }

  #poolLookups(): PoolLookups {
    return {
      hardware: (id) => this.#hardware.get(id),
      fleet: () => this.#hardware.values(),
      raceOf: (id) => this.#workflows.get(id)?.race?.request,
    };
  }

  /** The pool's spares are free again (the pool was deleted). */
  #freeSpares(pool: string, nowMs: number): void {
    for (const hw of [...this.#hardware.values()]) {
      if (hw.lifecycle?.spareOf === pool) this.#machines.setSpare(hw.id, undefined, nowMs);
    }
  }

  /** pool.allocate: a workflow.allocate for the pool, when a slot is free as this entry finds it. */
  #allocateForPool(command: Command<'pool.allocate'>, nowMs: number): ControlResult {
    const lookups = this.#poolLookups();
    const allowed = this.#pools.allocation(command, lookups);
    if (isRefusal(allowed)) return failure(allowed.code, allowed.message);
    const { pool, spread } = allowed;
    if (command.retry === true) return this.#retryForPool(pool, command, nowMs);
    const race = command.race === true;
    if (race && policyOf(pool) !== 'race')
      return failure(
        'E_INVALID',
        `pool "${pool.name}" is under the ${policyOf(pool)} policy: it starts no race`,
      );
    const candidates = withinSpread(pool, spread, command.candidates, lookups.hardware);
    if (candidates.length === 0 && command.candidates.length > 0) {
      return failure(
        'E_VERSION',
        `pool "${pool.name}": the machines offered would put two in one ${pool.spreadBy ?? ''} value while ${[...(spread ?? [])].join(', ') || 'another'} has fewer: offer again`,
      );
    }
    const { pool: _pool, type: _type, audit: _audit, race: _race, retry: _retry, ...rest } = command;
    const asWorkflow: Command<'workflow.allocate'> = {
      ...rest,
      candidates,
      type: 'workflow.allocate',
      template: pool.template,
      selector: pool.selector,
      // A pool's race has its two lanes and no further machine: the pool counts its failures (0040).
      ...(race ? { race: true, alternateAttempts: raceAttemptsDefault } : {}),
    };
    const allocation = allocate(asWorkflow, lookups.hardware, lookups.fleet, pool.name);
    if (allocation.kind === 'refused') return failure(allocation.code, allocation.message);
    const { create, rival } = allocation;
    const created =
      rival === undefined
        ? this.#createWorkflow(create, nowMs, { selector: allocation.selector })
        : this.#startRace(asWorkflow, allocation, nowMs);
    if (created.type === 'error') return created;
    const took = rival === undefined ? [create.hardwareId] : [create.hardwareId, rival.hardwareId];
    return { type: 'pool', pool: this.#pools.joined(pool, took, lookups.hardware) };
  }

  /** pool.allocate under the retry policy: the failed member installed again, on its own machine. */
  #retryForPool(pool: Pool, command: Command<'pool.allocate'>, nowMs: number): ControlResult {
    const [only, ...more] = command.candidates;
    const hw = only === undefined ? undefined : this.#hardware.get(only.hardwareId);
    if (only === undefined || more.length > 0 || hw === undefined || !awaitsRetry(pool, hw)) {
      const named = command.candidates.map((c) => c.hardwareId).join(', ') || 'no machine';
      return failure(
        'E_CONFLICT',
        `pool "${pool.name}": ${named} is no failed member to install again under the retry policy`,
      );
    }
    const {
      pool: _pool,
      type: _type,
      audit: _audit,
      race: _race,
      retry: _retry,
      candidates: _candidates,
      ...rest
    } = command;
    const created = this.#createWorkflow(
      { ...rest, type: 'workflow.create', template: pool.template, hardwareId: hw.id, spec: only.spec },
      nowMs,
      { selector: pool.selector },
    );
    if (created.type === 'error') return created;
    return { type: 'pool', pool: this.#pools.joined(pool, [hw.id], (id) => this.#hardware.get(id)) };
  }

  /**
   * pool.release: the member leaves the pool, through the pool's release template (a workflow
   * that owns it from releasing to ready), released at once (a tainted member, no template), or
   * as it is (surplus or a deleted pool's member, no template).
   */
  #releaseFromPool(command: Command<'pool.release'>, nowMs: number): ControlResult {
    const pool = this.#pools.get(command.pool);
    const wf = command.release;
    if (pool !== undefined && wf !== undefined && pool.releaseTemplate !== undefined) {
      // Checked first, so that a refused workflow leaves the pool as it was.
      const refusal = this.#releaseWorkflowRefusal(pool.releaseTemplate, command.hardwareId, wf);
      if (refusal !== undefined) return refusal;
    }
    const outcome = this.#pools.release(command, this.#poolLookups());
    if (isRefusal(outcome)) return failure(outcome.code, outcome.message);
    if (outcome.how === 'workflow' && wf !== undefined && pool?.releaseTemplate !== undefined) {
      // A deployed machine runs its installed system, not the boot OS: one with a BMC is booted
      // from the network for its release (PXE allowed again), as `workflow create --netboot` does.
      const netboot =
        this.#hardware.get(command.hardwareId)?.bmc !== undefined &&
        this.#powerRequestRefusal(this.#workflowPowerJob(wf.id, command.hardwareId, 'netboot')) === undefined;
      if (netboot) this.#setAllowPXE(command.hardwareId, true, nowMs);
      const created = this.#createWorkflow(
        {
          type: 'workflow.create',
          id: wf.id,
          template: pool.releaseTemplate,
          templateVersion: wf.templateVersion,
          hardwareId: command.hardwareId,
          hardwareMap: {},
          spec: wf.spec,
          ...(netboot ? { netboot: true } : {}),
        },
        nowMs,
        { release: true },
      );
      if (created.type === 'error')
        throw new Error(`a checked release workflow was refused: ${created.message}`);
    } else if (outcome.how === 'at-once') {
      this.#machines.releaseAtOnce(command.hardwareId, `tainted in pool ${command.pool}: replaced`, nowMs);
    }
    return outcome.removed ? deleted : { type: 'pool', pool: outcome.pool };
  }

  /** Why the release workflow would be refused (its template or spec), as #createWorkflow checks. */
  #releaseWorkflowRefusal(
    template: string,
    hardwareId: string,
    wf: NonNullable<Command<'pool.release'>['release']>,
  ): ControlResult | undefined {
    const problem = idProblem('id', wf.id) ?? specProblem(wf.spec);
    if (problem !== undefined) return failure('E_INVALID', problem);
    if (this.#workflows.has(wf.id)) return failure('E_EXISTS', `workflow "${wf.id}" already exists`);
    const t = this.#templates.get(template);
    if (t === undefined) return failure('E_NOT_FOUND', `template "${template}" does not exist`);
    if (t.version !== wf.templateVersion) {
      return failure(
        'E_VERSION',
        `template changed since rendering; retry (template "${t.name}" is at version ${t.version}, the workflow was rendered from version ${wf.templateVersion})`,
      );
    }
    const unknownWorker = this.#unknownWorker(wf.spec.tasks);
    if (unknownWorker !== undefined) return failure('E_INVALID', unknownWorker);
    if (this.#workflows.size >= workflowsMax) {
      return failure(
        'E_CONFLICT',
        `the state holds the maximum of ${workflowsMax} workflows; delete finished ones`,
      );
    }
    const taken = this.#machines.releaseRefusal(hardwareId);
    return taken === undefined ? undefined : failure('E_CONFLICT', taken);
  }

  #setQuarantinePolicy(command: Command<'hardware.quarantinePolicy'>): ControlResult {
    const policy = { failures: command.failures, windowS: command.windowS };
    const problem = quarantinePolicyProblem(policy);
    if (problem !== undefined) return failure('E_INVALID', problem);
    this.#quarantinePolicy = Object.freeze(policy);
    return { type: 'quarantinePolicy', policy: this.#quarantinePolicy };
  }

  #setAcceptRule(command: Command<'hardware.acceptRule'>): ControlResult {
    if (command.selector === undefined) {
      this.#acceptRule = undefined;
      return { type: 'acceptRule' };
    }
    const rule = acceptRuleOf(command.selector);
    if (typeof rule === 'string') return failure('E_INVALID', rule);
    this.#acceptRule = rule;
    return { type: 'acceptRule', selector: rule.selector };
  }

  /** The commands about members: drained (0022), their API addresses (0038). */
  #executeMember(command: Command<'member.drain'> | Command<'member.apiAddr'>): ControlResult {
    return command.type === 'member.drain' ? this.#setDrained(command) : this.#setMemberApiAddr(command);
  }

  #setMemberApiAddr(command: Command<'member.apiAddr'>): ControlResult {
    const after = memberApiAddrsAfter(this.#memberApiAddrs, command);
    if (typeof after === 'string') return failure('E_INVALID', after);
    this.#memberApiAddrs = Object.freeze(after);
    return { type: 'memberApiAddrs', members: this.#memberApiAddrs };
  }

  #setDrained(command: Command<'member.drain'>): ControlResult {
    const after = drainedAfter(this.#drainedMembers, command.id, command.drained);
    if (typeof after === 'string') return failure('E_INVALID', after);
    if (after !== this.#drainedMembers) {
      this.#drainedMembers = Object.freeze(after);
      this.#drainChanged = true;
    }
    return { type: 'drainedMembers', ids: this.#drainedMembers };
  }

  #setAuditRetention(command: Command<'audit.retention'>, nowMs: number): ControlResult {
    if (!Number.isSafeInteger(command.entries) || command.entries < 1 || command.entries > auditEntriesMax) {
      return failure('E_INVALID', `entries: must be 1-${auditEntriesMax}, got ${command.entries}`);
    }
    if (!Number.isSafeInteger(command.days) || command.days < 0 || command.days > auditRetentionDaysMax) {
      return failure(
        'E_INVALID',
        `days: must be 0 (no age limit) to ${auditRetentionDaysMax}, got ${command.days}`,
      );
    }
    this.#audit.setRetention({ entries: command.entries, days: command.days }, nowMs);
    return { type: 'auditRetention', retention: this.#audit.retention };
  }

  #requestPower(command: Command<'power.request'>, nowMs: number): ControlResult {
    const refusal = this.#powerRequestRefusal(command);
    if (refusal !== undefined) return refusal;
    const jobs = this.powerJobs(command.hardwareId);
    // Keep room for this job among the machine's kept ones: the oldest finished go first.
    const finished = jobs.filter(isFinishedPowerJob);
    const drop = finished.slice(0, Math.max(finished.length - (powerJobsKeptPerHardware - 1), 0));
    for (const job of drop) this.#dropPowerJob(job);
    return this.#storePowerJob(createPowerJob(command, nowMs));
  }

  /** Why a power request would be refused, checked without changing anything. */
  #powerRequestRefusal(command: Command<'power.request'>): Refusal | undefined {
    const problem = idProblem('jobId', command.jobId) ?? powerRequestProblem(command);
    if (problem !== undefined) return failure('E_INVALID', problem);
    if (this.#powerJobs.has(command.jobId)) {
      return failure('E_EXISTS', `power job "${command.jobId}" already exists`);
    }
    const hardware = this.#hardware.get(command.hardwareId);
    if (hardware === undefined)
      return failure('E_NOT_FOUND', `hardware "${command.hardwareId}" does not exist`);
    if (hardware.bmc === undefined) {
      return failure(
        'E_CONFLICT',
        `hardware "${hardware.id}" has no BMC; add one (hardware create --replace ... --bmc ipmi://HOST:PORT)`,
      );
    }
    const jobs = this.powerJobs(hardware.id);
    const active = jobs.filter((job) => !isFinishedPowerJob(job));
    if (active.length >= powerJobsActivePerHardwareMax) {
      return failure(
        'E_CONFLICT',
        `hardware "${hardware.id}" already has ${active.length} unfinished power jobs; wait for them`,
      );
    }
    const finished = jobs.filter(isFinishedPowerJob);
    const drop = Math.max(finished.length - (powerJobsKeptPerHardware - 1), 0);
    if (this.#powerJobs.size - drop >= powerJobsMax) {
      return failure('E_CONFLICT', `the state holds the maximum of ${powerJobsMax} power jobs`);
    }
    return undefined;
  }

  #putArtifact(command: Command<'artifact.put'>, nowMs: number): ControlResult {
    const existing = this.#artifacts.get(command.name);
    const transition = putArtifact(existing, command, nowMs);
    switch (transition.kind) {
      case 'refused':
        return failure(transition.code, transition.message);
      case 'unchanged':
        return { type: 'artifact', artifact: transition.artifact };
      case 'changed':
        break;
      default:
        return unreachable(transition);
    }
    if (existing === undefined && this.#artifacts.size >= artifactsMax) {
      return failure(
        'E_CONFLICT',
        `the state holds the maximum of ${artifactsMax} artifacts; delete some first (slipway artifact delete NAME)`,
      );
    }
    this.#artifacts.set(transition.artifact.name, transition.artifact);
    this.#changedArtifacts.push(transition.artifact.name);
    return { type: 'artifact', artifact: transition.artifact };
  }

  #onPowerJob(id: string, change: (job: PowerJob) => PowerTransition): ControlResult {
    const job = this.#powerJobs.get(id);
    if (job === undefined) return failure('E_NOT_FOUND', `power job "${id}" does not exist`);
    const transition = change(job);
    switch (transition.kind) {
      case 'refused':
        return failure(transition.code, transition.message);
      case 'duplicate':
        return { type: 'powerJobDuplicate', job: transition.job };
      case 'changed':
        return this.#storePowerJob(transition.job);
      default:
        return unreachable(transition);
    }
  }

  #storePowerJob(job: PowerJob): ControlResult {
    this.#powerJobs.set(job.id, job);
    let ids = this.#powerJobsByHardware.get(job.hardwareId);
    if (ids === undefined) {
      ids = new Set();
      this.#powerJobsByHardware.set(job.hardwareId, ids);
    }
    ids.add(job.id);
    if (isFinishedPowerJob(job)) this.#activePowerJobs.delete(job.id);
    else this.#activePowerJobs.add(job.id);
    this.#changedPowerJobs.push(job);
    return { type: 'powerJob', job };
  }

  #dropPowerJob(job: PowerJob): void {
    this.#powerJobs.delete(job.id);
    this.#activePowerJobs.delete(job.id);
    const ids = this.#powerJobsByHardware.get(job.hardwareId);
    ids?.delete(job.id);
    if (ids?.size === 0) this.#powerJobsByHardware.delete(job.hardwareId);
  }

  #putHardware(command: Command<'hardware.put'>, nowMs: number): ControlResult {
    const checked = normalizeHardware(command.hardware);
    if ('problem' in checked) return failure('E_INVALID', checked.problem);
    const input = checked.hardware;
    const existing = this.#hardware.get(input.id);
    const refusal = versionRefusal('hardware', input.id, existing?.version, command.expectVersion);
    if (refusal !== undefined) return refusal;
    for (const [i, iface] of input.interfaces.entries()) {
      const owner = this.#hardwareByMac.get(iface.mac);
      if (owner !== undefined && owner !== input.id) {
        return failure(
          'E_INVALID',
          `interfaces[${i}].mac: ${iface.mac} already belongs to hardware "${owner}"`,
        );
      }
    }
    const tokenSha256 =
      command.workerTokenSha256 ??
      (command.workerToken === undefined ? undefined : sha256HexOf(command.workerToken));
    if (existing === undefined) {
      const problem =
        command.workerToken !== undefined
          ? workerTokenProblem(command.workerToken)
          : tokenSha256 === undefined
            ? 'workerTokenSha256: is required to create hardware'
            : sha256Problem(tokenSha256)?.replace(/^sha256/, 'workerTokenSha256');
      if (problem !== undefined) return failure('E_INVALID', problem);
      if (this.#hardware.size >= hardwareMax) {
        return failure(
          'E_CONFLICT',
          `the state holds the maximum of ${hardwareMax} machines; delete some first`,
        );
      }
    }
    // A replaced document keeps the machine's lifecycle and labels (docs/decisions/0028).
    const lifecycle = this.#machines.lifecycleOnPut(existing, nowMs);
    const stored = deepFreeze<Hardware>({
      ...input,
      workerTokenSha256: existing?.workerTokenSha256 ?? tokenSha256 ?? '',
      createdMs: existing?.createdMs ?? nowMs,
      updatedMs: nowMs,
      version: (existing?.version ?? 0) + 1,
      ...(lifecycle === undefined ? {} : { lifecycle }),
      ...(existing?.labels === undefined ? {} : { labels: existing.labels }),
      ...(existing?.inventory === undefined ? {} : { inventory: existing.inventory }),
      ...(existing?.inspection === undefined ? {} : { inspection: existing.inspection }),
      ...(existing?.reportedWith === undefined ? {} : { reportedWith: existing.reportedWith }),
    });
    this.#storeHardware(stored, existing);
    if (existing === undefined) this.#machines.registered(stored);
    return { type: 'hardware', hardware: stored };
  }

  #storeHardware(stored: Hardware, existing: Hardware | undefined): void {
    this.#unindexInterfaces(existing);
    for (const iface of stored.interfaces) {
      this.#hardwareByMac.set(iface.mac, stored.id);
      if (iface.ip !== undefined) this.#reservedIps.set(iface.ip.address, iface.mac);
    }
    this.#hardware.set(stored.id, stored);
    this.#changedHardware.add(stored.id);
    this.#machines.indexed(stored.id, stored);
    this.#followPoolMember(existing, stored);
  }

  /**
   * A pool member's installation ended, counted for the pool's attempts (docs/decisions/0040): a
   * failure (its workflow failed or timed out, or its deadline passed) adds one, a deployment
   * clears the count; an operator's cancel counts neither. A member ready again leaves the pool.
   */
  #followPoolMember(before: Hardware | undefined, after: Hardware): void {
    const from = before?.lifecycle?.state;
    const lc = after.lifecycle;
    if (lc === undefined || from === lc.state) return;
    const pool = this.#pools.ownerOf(after.id);
    if (pool === undefined) return;
    if (lc.state === 'ready') {
      this.#pools.left(after.id);
      return;
    }
    if (from !== 'provisioning') return;
    const trigger = lc.history[lc.history.length - 1]?.trigger;
    if (lc.state === 'deployed') this.#pools.installationEnded(pool.name, { failed: false });
    else if (trigger === 'fail' || trigger === 'expire') {
      const reason = lc.afterRelease?.reason ?? lc.reason ?? lc.state;
      this.#pools.installationEnded(pool.name, { failed: true, hardwareId: after.id, reason });
    }
  }

  #deleteHardware(id: string): ControlResult {
    const existing = this.#hardware.get(id);
    if (existing === undefined) return failure('E_NOT_FOUND', `hardware "${id}" does not exist`);
    const pool = this.#pools.ownerOf(id);
    if (pool !== undefined) {
      return failure(
        'E_CONFLICT',
        `hardware "${id}" belongs to pool "${pool.name}": delete the pool first (\`slipway pool delete ${pool.name}\`)`,
      );
    }
    const owned = this.#machines.deleteRefusal(existing);
    if (owned !== undefined) return failure('E_CONFLICT', owned);
    // The oldest such workflow is named: the set's order differs after a restore, and the refusal
    // (kept in the audit trail) must read the same on every member.
    let user: Workflow | undefined;
    for (const wfId of this.#active) {
      const wf = this.#workflows.get(wfId);
      if (wf !== undefined && (wf.hardwareId === id || wf.spec.tasks.some((t) => t.worker === id)))
        if (user === undefined || byCreation(wf, user) < 0) user = wf;
    }
    if (user !== undefined) {
      return failure(
        'E_CONFLICT',
        `hardware "${id}" is used by ${user.state} workflow "${user.id}"; cancel it first`,
      );
    }
    const unfinished = this.firstActivePowerJob(id);
    if (unfinished !== undefined) {
      return failure(
        'E_CONFLICT',
        `hardware "${id}" has ${unfinished.state} power job "${unfinished.id}"; wait for it to finish`,
      );
    }
    for (const job of this.powerJobs(id)) this.#dropPowerJob(job);
    this.#unindexInterfaces(existing);
    this.#hardware.delete(id);
    this.#machines.indexed(id, undefined);
    this.#changedHardware.add(id);
    return deleted;
  }

  #unindexInterfaces(hardware: Hardware | undefined): void {
    for (const iface of hardware?.interfaces ?? []) {
      this.#hardwareByMac.delete(iface.mac);
      const ip = iface.ip?.address;
      if (ip !== undefined && this.#reservedIps.get(ip) === iface.mac) this.#reservedIps.delete(ip);
    }
  }

  /** Sets allowPXE; a change bumps the version, setting the value it already has does not. */
  #setAllowPXE(id: string, allowPXE: boolean, nowMs: number): Hardware {
    const existing = this.#hardware.get(id);
    if (existing === undefined) throw new Error(`setAllowPXE on missing hardware ${id}`);
    if (existing.netboot.allowPXE === allowPXE) return existing;
    const stored = deepFreeze<Hardware>({
      ...existing,
      netboot: { ...existing.netboot, allowPXE },
      updatedMs: nowMs,
      version: existing.version + 1,
    });
    this.#storeHardware(stored, existing);
    return stored;
  }

  #putTemplate(command: Command<'template.put'>, nowMs: number): ControlResult {
    const problem = templateNameProblem('name', command.name) ?? templateSourceProblem(command.source);
    if (problem !== undefined) return failure('E_INVALID', problem);
    const existing = this.#templates.get(command.name);
    const refusal = versionRefusal('template', command.name, existing?.version, command.expectVersion);
    if (refusal !== undefined) return refusal;
    if (existing === undefined && this.#templates.size >= templatesMax) {
      return failure(
        'E_CONFLICT',
        `the state holds the maximum of ${templatesMax} templates; delete some first`,
      );
    }
    const template: Template = Object.freeze({
      name: command.name,
      source: command.source,
      createdMs: existing?.createdMs ?? nowMs,
      updatedMs: nowMs,
      version: (existing?.version ?? 0) + 1,
    });
    this.#templates.set(template.name, template);
    return { type: 'template', template };
  }

  #createWorkflow(command: Command<'workflow.create'>, nowMs: number, allocated?: Allocated): ControlResult {
    const refusal = this.#createRefusal(command, allocated);
    if (refusal !== undefined) return refusal;
    // The netboot job is made in the same entry; if it cannot be, neither is the workflow.
    const netboot =
      command.netboot === true
        ? this.#workflowPowerJob(command.id, command.hardwareId, 'netboot')
        : undefined;
    if (netboot !== undefined) {
      const refusal = this.#powerRequestRefusal(netboot);
      if (refusal !== undefined)
        return failure(refusal.code, `cannot netboot the machine: ${refusal.message}`);
    }
    deepFreeze(command.spec);
    deepFreeze(command.hardwareMap);
    const created = this.#commit(createWorkflow(command, nowMs, allocated), nowMs);
    if (netboot !== undefined) this.#requestPower(netboot, nowMs);
    return created;
  }

  /** Why a workflow.create would be refused (but for its netboot job), or undefined. */
  #createRefusal(command: Command<'workflow.create'>, allocated?: Allocated): Refusal | undefined {
    const problem = idProblem('id', command.id) ?? specProblem(command.spec);
    if (problem !== undefined) return failure('E_INVALID', problem);
    if (this.#workflows.has(command.id))
      return failure('E_EXISTS', `workflow "${command.id}" already exists`);
    if (!this.#hardware.has(command.hardwareId)) {
      return failure('E_NOT_FOUND', `hardware "${command.hardwareId}" does not exist`);
    }
    const template = this.#templates.get(command.template);
    if (template === undefined)
      return failure('E_NOT_FOUND', `template "${command.template}" does not exist`);
    if (template.version !== command.templateVersion) {
      return failure(
        'E_VERSION',
        `template changed since rendering; retry (template "${template.name}" is at version ${template.version}, the workflow was rendered from version ${command.templateVersion})`,
      );
    }
    const unknownWorker = this.#unknownWorker(command.spec.tasks);
    if (unknownWorker !== undefined) return failure('E_INVALID', unknownWorker);
    // One machine, one owner (invariant 9), and only from a state the lifecycle allows.
    const taken =
      allocated?.release === true
        ? this.#machines.releaseRefusal(command.hardwareId)
        : this.#machines.provisionRefusal(command.hardwareId);
    if (taken !== undefined) return failure('E_CONFLICT', taken);
    if (this.#workflows.size >= workflowsMax) {
      return failure(
        'E_CONFLICT',
        `the state holds the maximum of ${workflowsMax} workflows; delete finished ones`,
      );
    }
    return undefined;
  }

  /** workflow.allocate (docs/decisions/0030): the machine chosen at apply, or two for a race. */
  #allocate(command: Command<'workflow.allocate'>, nowMs: number): ControlResult {
    const allocation = allocate(
      command,
      (id) => this.#hardware.get(id),
      () => this.#hardware.values(),
    );
    if (allocation.kind === 'refused') return failure(allocation.code, allocation.message);
    if (allocation.rival !== undefined) return this.#startRace(command, allocation, nowMs);
    const attempts = command.alternateAttempts;
    const alternate =
      attempts === undefined ? undefined : { attempts, tried: [allocation.create.hardwareId] };
    return this.#createWorkflow(allocation.create, nowMs, { selector: allocation.selector, alternate });
  }

  /** workflow.cancel: an operator's cancel ends the request, so a race's rival lane ends too. */
  #cancel(command: Command<'workflow.cancel'>, nowMs: number): ControlResult {
    const cancelled = this.#onWorkflow(command.id, (wf) => cancelWorkflow(wf, command.message, nowMs), nowMs);
    if (cancelled.type === 'workflow') this.#cancelRival(cancelled.workflow, nowMs);
    return cancelled;
  }

  /**
   * workflow.allocate under the race policy (docs/decisions/0037): both lanes created in this one
   * entry, each taking its machine, or neither (the rival's problems are checked first).
   */
  #startRace(
    command: Command<'workflow.allocate'>,
    allocation: Extract<Allocation, { readonly kind: 'allocated' }>,
    nowMs: number,
  ): ControlResult {
    const { create, rival } = allocation;
    const attempts = command.alternateAttempts;
    if (rival === undefined || attempts === undefined || attempts < 2 || command.netboot === true) {
      return failure('E_INVALID', 'race: alternateAttempts of at least 2 (both lanes included), no netboot');
    }
    const refusal = this.#createRefusal(create) ?? this.#createRefusal(rival);
    if (refusal !== undefined) return refusal;
    if (this.#workflows.size + 2 > workflowsMax) {
      return failure(
        'E_CONFLICT',
        `the state holds the maximum of ${workflowsMax} workflows; delete finished ones`,
      );
    }
    const tried = Object.freeze([create.hardwareId, rival.hardwareId]);
    const lane = (
      own: Command<'workflow.create'>,
      other: string,
      request?: readonly string[],
    ): Allocated => ({
      selector: allocation.selector,
      alternate: { attempts, tried: [own.hardwareId] },
      race: { request: create.id, rival: other, ...(request === undefined ? {} : { tried: request }) },
    });
    const first = this.#createWorkflow(create, nowMs, lane(create, rival.id, tried));
    if (first.type === 'error') return first;
    const second = this.#createWorkflow(rival, nowMs, lane(rival, create.id));
    // Checked as the first was (id, template, machine): a refusal here is a bug, not input.
    if (second.type === 'error') throw new Error(`race: the rival lane was refused: ${second.message}`);
    const request = this.#workflows.get(create.id);
    if (request === undefined) return first;
    const message =
      `race started: workflow ${create.id} on ${create.hardwareId}, workflow ${rival.id} on ` +
      `${rival.hardwareId}, both ready and matching ${allocation.selector}; at most ${attempts} machines`;
    return this.#commit(
      { kind: 'changed', workflow: request, events: [{ type: 'workflow.race', message }] },
      nowMs,
    );
  }

  /** workflow.alternate: the leader's re-allocation of a failed workflow, or its policy given up. */
  #alternate(command: Command<'workflow.alternate'>, nowMs: number): ControlResult {
    const wf = this.#workflows.get(command.id);
    if (wf === undefined) return failure('E_NOT_FOUND', `workflow "${command.id}" does not exist`);
    const request = wf.race === undefined ? undefined : this.#workflows.get(wf.race.request);
    const decided = alternateOf(
      command,
      wf,
      (id) => this.#hardware.get(id),
      () => this.#hardware.values(),
      wf.race === undefined ? undefined : raceTriedOf(wf, request),
    );
    if (decided.kind === 'refused') return failure(decided.code, decided.message);
    if (decided.kind === 'moved') deepFreeze(decided.spec);
    const next = decided.kind === 'moved' ? decided : undefined;
    if (next !== undefined) {
      const unknownWorker = this.#unknownWorker(next.spec.tasks);
      if (unknownWorker !== undefined) return failure('E_INVALID', unknownWorker);
    }
    const moved = alternateWorkflow(wf, next, decided.why);
    if (next === undefined || request === undefined || moved.kind !== 'changed')
      return this.#commit(moved, nowMs);
    // A race's lane moved: the request keeps every machine either lane took, in order.
    const took = (r: Workflow): Workflow => raceTook(r, next.hardwareId);
    if (request.id === wf.id) return this.#commit({ ...moved, workflow: took(moved.workflow) }, nowMs);
    const result = this.#commit(moved, nowMs);
    this.#commit({ kind: 'changed', workflow: took(request), events: [] }, nowMs);
    return result;
  }

  /** An operator cancelled a race's lane: the request ends, so its rival lane ends too. */
  #cancelRival(lane: Workflow, nowMs: number): void {
    const rival = lane.race === undefined ? undefined : this.#workflows.get(lane.race.rival);
    if (rival === undefined) return;
    const why = `cancelled with its rival lane ${lane.id}: ${lane.message ?? ''}`;
    if (!isTerminal(rival.state)) this.#commit(cancelWorkflow(rival, why, nowMs), nowMs);
    else if (awaitsAlternate(rival) && rival.alternate !== undefined) {
      const gaveUp = record<AlternatePolicy>({ ...rival.alternate, gaveUp: why });
      const done = record<Workflow>({ ...rival, alternate: gaveUp });
      this.#commit(
        { kind: 'changed', workflow: done, events: [{ type: 'workflow.race', message: why }] },
        nowMs,
      );
    }
  }

  /**
   * A race's lane succeeded (docs/decisions/0037): the request records the winner, and the rival
   * is cancelled (its running action stopped; its machine released) or, failed and awaiting
   * another machine, given up. Called once the lane's success is committed.
   */
  #raceWon(lane: Workflow, nowMs: number): void {
    const race = lane.race;
    const request = race === undefined ? undefined : this.#workflows.get(race.request);
    if (race === undefined || request?.race === undefined || request.race.winner !== undefined) return;
    const where = `workflow ${lane.id} succeeded first, on ${lane.hardwareId}`;
    const decided = `race won: ${where}`;
    // The lane is stored already: when it is the request, this is it.
    const won = record<Workflow>({
      ...request,
      race: record<RaceLane>({ ...request.race, winner: lane.id }),
    });
    this.#commit(
      { kind: 'changed', workflow: won, events: [{ type: 'workflow.race', message: decided }] },
      nowMs,
    );
    // Read after: when the winner is the rival lane, its rival is the request just stored.
    const rival = this.#workflows.get(race.rival);
    if (rival === undefined) return;
    const lost = `lost the race: ${where}`;
    if (!isTerminal(rival.state)) {
      const cancelled = cancelWorkflow(rival, lost, nowMs);
      if (cancelled.kind !== 'changed') return;
      const loser = record<Workflow>({
        ...cancelled.workflow,
        race: record<RaceLane>({ ...(cancelled.workflow.race ?? race), lostTo: lane.id }),
      });
      this.#commit({ ...cancelled, workflow: loser }, nowMs);
    } else if (awaitsAlternate(rival) && rival.alternate !== undefined) {
      const gaveUp = record<AlternatePolicy>({ ...rival.alternate, gaveUp: lost });
      const done = record<Workflow>({ ...rival, alternate: gaveUp });
      this.#commit(
        { kind: 'changed', workflow: done, events: [{ type: 'workflow.race', message: lost }] },
        nowMs,
      );
    }
  }

  /** The power job a netbooting workflow makes at its start ('netboot') or success ('diskboot'). */
  #workflowPowerJob(
    workflowId: string,
    hardwareId: string,
    op: 'netboot' | 'diskboot',
  ): Command<'power.request'> {
    return powerRequest(`${workflowId}-${op}`, hardwareId, op);
  }

  #unknownWorker(tasks: Workflow['spec']['tasks']): string | undefined {
    const t = tasks.findIndex((task) => !this.#hardware.has(task.worker));
    const task = tasks[t];
    return task === undefined
      ? undefined
      : `spec.tasks[${t}].worker: hardware "${task.worker}" does not exist`;
  }

  #retry(wf: Workflow, fromStart: boolean): Transition {
    // Hardware may have been deleted while the workflow was finished.
    const missing = this.#hardware.has(wf.hardwareId)
      ? this.#unknownWorker(wf.spec.tasks)
      : `hardware "${wf.hardwareId}" no longer exists`;
    if (missing !== undefined)
      return { kind: 'refused', code: 'E_CONFLICT', message: `cannot retry: ${missing}` };
    const taken = isTerminal(wf.state) ? this.#machines.provisionRefusal(wf.hardwareId) : undefined;
    if (taken !== undefined)
      return { kind: 'refused', code: 'E_CONFLICT', message: `cannot retry: ${taken}` };
    return retryWorkflow(wf, fromStart);
  }

  /**
   * After a recorded result: starts the workflow's next action if it runs on the reporting
   * worker, is due by this stamp and the worker may run workflows, exactly as an attempt.start
   * from that worker's session would, and returns that start's result. Otherwise nothing: the
   * session proposes the start later.
   */
  #startNext(report: Command<'attempt.result'>, nowMs: number): ControlResult | undefined {
    const wf = this.#workflows.get(report.workflowId);
    if (wf === undefined || isTerminal(wf.state)) return undefined;
    if (this.#hardware.get(report.workerId)?.netboot.allowWorkflow === false) return undefined;
    const next = nextAction(wf);
    if (next === null || next.workerId !== report.workerId) return undefined;
    if ((next.notBeforeMs ?? 0) > nowMs) return undefined;
    const start = {
      type: 'attempt.start',
      workflowId: wf.id,
      actionIndex: next.index,
      attempt: next.attempt,
      workerId: report.workerId,
    } as const;
    return this.#commit(startAttempt(wf, start, nowMs), nowMs);
  }

  #onWorkflow(id: string, change: (wf: Workflow) => Transition, nowMs: number): ControlResult {
    const wf = this.#workflows.get(id);
    if (wf === undefined) return failure('E_NOT_FOUND', `workflow "${id}" does not exist`);
    return this.#commit(change(wf), nowMs);
  }

  #commit(transition: Transition, nowMs: number): ControlResult {
    switch (transition.kind) {
      case 'refused':
        return failure(transition.code, transition.message);
      case 'duplicate':
        return { type: 'duplicate', ...transition.outcome };
      case 'changed':
        break;
      default:
        return unreachable(transition);
    }
    const wf = transition.workflow;
    const before = this.#workflows.get(wf.id);
    this.#workflows.set(wf.id, wf);
    this.#index(wf);
    if (awaitsAlternate(wf)) this.#awaitingAlternate.add(wf.id);
    else this.#awaitingAlternate.delete(wf.id);
    this.#changedWorkflows.set(wf.id, wf);
    this.#machines.follow(before, wf, nowMs);
    let log = this.#events.get(wf.id);
    if (log === undefined) {
      log = new EventLog(workflowEventsMax);
      this.#events.set(wf.id, log);
    }
    for (const draft of transition.events) {
      const event = record<WorkflowEvent>({
        seq: ++this.#lastEventSeq,
        workflowId: wf.id,
        stampMs: nowMs,
        ...draft,
      });
      log.push(event);
      this.#newEvents.push(event);
    }
    // Builds of version 1 keep every tail, so the budget holds only once none can be applying.
    if (this.#clusterVersion >= stateVersionBoundedState) log.cutOutputTails(workflowOutputTailBytesMax);
    // A provisioned machine must not boot into the installer again (Tinkerbell's allowPXE). A
    // released one stays in the boot OS, ready for its next workflow: PXE stays on.
    const installed = wf.state === 'SUCCESS' && before?.state !== 'SUCCESS' && wf.release !== true;
    if (installed && this.#hardware.has(wf.hardwareId)) {
      this.#setAllowPXE(wf.hardwareId, false, nowMs);
      // A netbooted machine boots its disk next; best effort: a machine whose BMC was removed
      // meanwhile still has PXE off, so it falls through to its disk anyway.
      if (wf.netboot === true) {
        const diskboot = this.#workflowPowerJob(wf.id, wf.hardwareId, 'diskboot');
        if (this.#powerRequestRefusal(diskboot) === undefined) this.#requestPower(diskboot, nowMs);
      }
    }
    if (wf.race !== undefined && wf.state === 'SUCCESS' && before?.state !== 'SUCCESS')
      this.#raceWon(wf, nowMs);
    if (transition.outcome !== undefined) return { type: 'attempt', ...transition.outcome };
    return { type: 'workflow', workflow: this.#workflows.get(wf.id) ?? wf };
  }

  /** Keeps the active set and the per-worker index in step with a stored workflow. */
  #index(wf: Workflow): void {
    indexWorkflow({ active: this.#active, byWorker: this.#byWorker, workerOf: this.#workerOf }, wf);
  }

  #deleteWorkflow(id: string): ControlResult {
    const wf = this.#workflows.get(id);
    if (wf === undefined) return failure('E_NOT_FOUND', `workflow "${id}" does not exist`);
    if (!isTerminal(wf.state)) {
      return failure('E_CONFLICT', `workflow "${id}" is ${wf.state}; cancel it before deleting it`);
    }
    this.#dropFinishedWorkflow(id);
    return deleted;
  }

  /**
   * workflow.gc: deletes each listed workflow that is finished at the listed finish time, in the
   * command's order; skips the others (gone, running again after a retry, or finished again
   * since the collector chose it), so what goes is exactly what the collector archived.
   */
  #collect(workflows: readonly CollectedWorkflow[]): ControlResult {
    const ids: string[] = [];
    for (const { id, finishedMs } of workflows) {
      const wf = this.#workflows.get(id);
      if (wf === undefined || !isTerminal(wf.state) || (wf.finishedMs ?? 0) !== finishedMs) continue;
      this.#dropFinishedWorkflow(id);
      ids.push(id);
    }
    this.#collected.push(...ids);
    return { type: 'collected', ids };
  }

  #dropFinishedWorkflow(id: string): void {
    this.#workflows.delete(id);
    this.#awaitingAlternate.delete(id);
    // A finished workflow is in neither the active set nor the per-worker index.
    this.#events.delete(id);
    this.#changedWorkflows.set(id, undefined);
  }

  #putToken(command: Command<'token.put'>, nowMs: number): ControlResult {
    const problem = idProblem('name', command.name) ?? sha256Problem(command.sha256);
    if (problem !== undefined) return failure('E_INVALID', problem);
    const sha256 = command.sha256.toLowerCase();
    const holder = this.#tokenBySha.get(sha256);
    if (holder !== undefined && holder !== command.name) {
      return failure('E_EXISTS', `token "${holder}" already has this SHA-256; tokens must differ`);
    }
    const existing = this.#tokens.get(command.name);
    if (existing === undefined && this.#tokens.size >= operatorTokensMax) {
      return failure(
        'E_CONFLICT',
        `the state holds the maximum of ${operatorTokensMax} tokens; delete some first`,
      );
    }
    if (existing !== undefined) this.#tokenBySha.delete(existing.sha256);
    // A replaced token is a new credential, so it gets a new creation time.
    const token: OperatorToken = Object.freeze({
      name: command.name,
      role: command.role,
      sha256,
      createdMs: nowMs,
    });
    this.#tokens.set(token.name, token);
    this.#tokenBySha.set(sha256, token.name);
    return { type: 'token', token };
  }

  #issueCredential(command: Command<'credential.issue'>, nowMs: number): ControlResult {
    const problem =
      idProblem('workerId', command.workerId) ??
      sha256Problem(command.sha256) ??
      (command.claimKey === undefined
        ? undefined
        : sha256Problem(command.claimKey)?.replace(/^sha256/, 'claimKey'));
    if (problem !== undefined) return failure('E_INVALID', problem);
    const mac = normalizeMac(command.mac);
    if (mac === undefined) return failure('E_INVALID', `mac: "${command.mac}" is not a MAC address`);
    const decision = decideCredential(this, { ...command, mac }, nowMs);
    switch (decision.kind) {
      case 'refused':
        return failure(decision.code, decision.message);
      case 'second-claim':
        // Recorded for the operator, and still a refusal for the claimant.
        this.#commit({ kind: 'changed', workflow: decision.workflow, events: decision.events }, nowMs);
        return failure('E_CONFLICT', decision.message);
      case 'issued':
        this.#commit({ kind: 'changed', workflow: decision.workflow, events: decision.events }, nowMs);
        return { type: 'credential', workflowId: decision.workflow.id, expiresMs: decision.expiresMs };
      default:
        return unreachable(decision);
    }
  }

  #deleteToken(name: string): ControlResult {
    const existing = this.#tokens.get(name);
    if (existing === undefined) return failure('E_NOT_FOUND', `token "${name}" does not exist`);
    this.#tokens.delete(name);
    this.#tokenBySha.delete(existing.sha256);
    return deleted;
  }

  #notify(): void {
    const hardware = [...this.#changedHardware];
    const workflows = [...this.#changedWorkflows];
    const events = this.#newEvents;
    const powerJobs = this.#changedPowerJobs;
    const artifacts = this.#changedArtifacts;
    const collected = this.#collected;
    const machineEvents = this.#machines.takeEvents();
    this.#changedArtifacts = [];
    this.#collected = [];
    this.#changedHardware.clear();
    this.#changedWorkflows.clear();
    this.#newEvents = [];
    this.#changedPowerJobs = [];
    const changes = this.changes;
    for (const id of hardware) changes.publish({ kind: 'hardware', id });
    for (const [id, workflow] of workflows) {
      changes.publish(
        workflow === undefined ? { kind: 'workflowDeleted', id } : { kind: 'workflow', workflow },
      );
    }
    for (const event of events) changes.publish({ kind: 'workflowEvent', event });
    for (const { hardwareId, event } of machineEvents)
      changes.publish({ kind: 'machineEvent', hardwareId, event });
    for (const job of powerJobs) changes.publish({ kind: 'powerJob', job });
    for (const name of artifacts) changes.publish({ kind: 'artifact', name });
    if (collected.length > 0) changes.publish({ kind: 'workflowsCollected', ids: collected });
    if (this.#drainChanged) {
      this.#drainChanged = false;
      changes.publish({ kind: 'drain' });
    }
  }
}

function leaseResult(outcome: Lease | string): ControlResult {
  return typeof outcome === 'string' ? failure('E_NOT_FOUND', outcome) : { type: 'lease', lease: outcome };
}

/** The expectVersion rule shared by hardware and templates. */
function versionRefusal(
  kind: 'hardware' | 'template',
  name: string,
  version: number | undefined,
  expectVersion: number | undefined,
): ControlResult | undefined {
  if (expectVersion === undefined) return undefined;
  if (expectVersion === 0) {
    return version === undefined
      ? undefined
      : failure('E_EXISTS', `${kind} "${name}" already exists (version ${version})`);
  }
  if (version === undefined) return failure('E_NOT_FOUND', `${kind} "${name}" does not exist`);
  if (version !== expectVersion) {
    return failure(
      'E_VERSION',
      `${kind} "${name}" is at version ${version}, not ${expectVersion}; read it again`,
    );
  }
  return undefined;
}

function unreachable(x: never): never {
  throw new Error(`unreachable: ${JSON.stringify(x)}`);
}

/** Keeps the active set and the per-worker index in step with a stored workflow. */
function indexWorkflow(ix: WorkflowIndex, wf: Workflow): void {
  const index = currentActionIndex(wf);
  const worker = index === undefined ? undefined : actionPositions(wf.spec)[index]?.task.worker;
  const previous = ix.workerOf.get(wf.id);
  if (previous !== worker) {
    if (previous !== undefined) {
      const ids = ix.byWorker.get(previous);
      ids?.delete(wf.id);
      if (ids?.size === 0) ix.byWorker.delete(previous);
      ix.workerOf.delete(wf.id);
    }
    if (worker !== undefined) {
      let ids = ix.byWorker.get(worker);
      if (ids === undefined) {
        ids = new Set();
        ix.byWorker.set(worker, ids);
      }
      ids.add(wf.id);
      ix.workerOf.set(wf.id, worker);
    }
  }
  if (isTerminal(wf.state)) ix.active.delete(wf.id);
  else ix.active.add(wf.id);
}

type PoolCommand = Command<
  | 'pool.create'
  | 'pool.scale'
  | 'pool.delete'
  | 'pool.allocate'
  | 'pool.taint'
  | 'pool.resume'
  | 'pool.reserve'
  | 'pool.release'
>;

function isPoolCommand(command: ControlCommand): command is PoolCommand {
  return command.type.startsWith('pool.');
}

function poolResult(
  outcome: Pool | { readonly code: ControlErrorCode; readonly message: string },
): ControlResult {
  return isRefusal(outcome) ? failure(outcome.code, outcome.message) : { type: 'pool', pool: outcome };
}

/** The rule a snapshot holds (its reader checked the text parses and is canonical). */
function acceptRuleOfImage(text: string | undefined): AcceptRule | undefined {
  if (text === undefined) return undefined;
  const rule = acceptRuleOf(text);
  if (typeof rule === 'string' || rule.selector !== text) {
    throw new DecodeError(
      `control snapshot: acceptRule: ${typeof rule === 'string' ? rule : 'not canonical'}`,
    );
  }
  return rule;
}

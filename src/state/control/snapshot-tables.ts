// The tables (control-tables.ts) as a snapshot image and back: captured by reference (records
// are immutable), and restored in two steps, a check that builds every index and may throw
// DecodeError, then an install that is only assignments, so a failed restore changes nothing.
// The image's encoding is snapshot.ts and snapshot-records.ts.
import { DecodeError } from '../binary.js';
import { workflowEventsMax } from '../../model/limits.js';
import type { Artifact, Hardware, OperatorToken, PowerJob, Template, Workflow } from '../../model/records.js';
import { quarantinePolicyDefault } from '../../model/quarantine-policy.js';
import { SliceBudget, type Sliced } from '../slices.js';
import { stateVersionBaseline } from '../versions.js';
import { acceptRuleOf, type AcceptRule } from './accept-rule.js';
import { awaitsAlternate } from './allocation.js';
import { AuditLog } from './audit-log.js';
import { emptyWorkflowIndex, indexPowerJob, indexWorkflow, type WorkflowIndex } from './control-indexes.js';
import { sortedValues, type ControlTables } from './control-tables.js';
import { EventLog } from './event-log.js';
import { LeaseTable } from './leases.js';
import { checkMachines } from './machines.js';
import { Pools } from './pools.js';
import type { SnapshotImage } from './snapshot-format.js';
import { workflowRetentionDefault } from './workflow-retention.js';

/** Everything a restore installs, built beforehand so that installing is only assignments. */
export interface Prepared {
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

/** Records of a restore prepared per slice: a few milliseconds of indexing. */
const restoreRecordsPerSlice = 512;

/**
 * The state as of now, for encoding later: records are immutable, so the image holds
 * references to them in fresh sorted arrays that later applies do not touch. Costs a sort of
 * each collection's keys, not an encoding.
 */
export function captureImage(t: ControlTables): SnapshotImage {
  return {
    appliedIndex: t.appliedIndex,
    lastEventSeq: t.lastEventSeq,
    hardware: t.hardwareList(),
    templates: sortedValues(t.templates),
    workflows: sortedValues(t.workflows).map((workflow) => ({
      workflow,
      events: t.events.get(workflow.id)?.all() ?? [],
    })),
    tokens: sortedValues(t.tokens),
    leases: t.leases.all(),
    powerJobs: sortedValues(t.powerJobs),
    artifacts: sortedValues(t.artifacts),
    audit: {
      retention: t.audit.retention,
      lastSeq: t.audit.lastSeq,
      entries: t.audit.all(),
    },
    clusterVersion: t.clusterVersion,
    workflowRetention: t.workflowRetention,
    ...(t.workflowRetentionDefaultSinceMs === undefined
      ? {}
      : { workflowRetentionDefaultSinceMs: t.workflowRetentionDefaultSinceMs }),
    drainedMembers: t.drainedMembers,
    pools: t.pools.all(),
    memberApiAddrs: t.memberApiAddrs,
    quarantinePolicy: t.quarantinePolicy,
    ...(t.acceptRule === undefined ? {} : { acceptRule: t.acceptRule.selector }),
  };
}

/** Checks what the readers cannot (relations between records) and builds the indexes. */
export function* prepareTables(image: SnapshotImage): Sliced<Prepared> {
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
  const workflowIndex = emptyWorkflowIndex();
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
  const powerJobIndex = {
    activePowerJobs: new Set<string>(),
    powerJobsByHardware: new Map<string, Set<string>>(),
  };
  for (const job of image.powerJobs ?? []) {
    powerJobs.set(job.id, job);
    if (!hardware.has(job.hardwareId)) {
      throw new DecodeError(
        `power job "${job.id}" is for hardware "${job.hardwareId}", which does not exist`,
      );
    }
    indexPowerJob(powerJobIndex, job);
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
    ...powerJobIndex,
    artifacts: new Map((image.artifacts ?? []).map((a) => [a.name, a])),
    transitional,
    acceptRule: acceptRuleOfImage(image.acceptRule),
  };
}

/** Replaces the tables' contents with the prepared image's. */
export function installTables(t: ControlTables, image: SnapshotImage, prepared: Prepared): void {
  t.appliedIndex = image.appliedIndex;
  t.lastEventSeq = image.lastEventSeq;
  t.hardware = prepared.hardware;
  t.hardwareByMac = prepared.hardwareByMac;
  t.templates = prepared.templates;
  t.workflows = prepared.workflows;
  t.events = prepared.events;
  t.tokens = prepared.tokens;
  t.tokenBySha = prepared.tokenBySha;
  t.reservedIps = prepared.reservedIps;
  t.leases = prepared.leases();
  t.active = prepared.workflowIndex.active;
  t.awaitingAlternate = new Set(
    [...prepared.workflows.values()].filter((wf) => awaitsAlternate(wf)).map((wf) => wf.id),
  );
  t.byWorker = prepared.workflowIndex.byWorker;
  t.workerOf = prepared.workflowIndex.workerOf;
  t.activeByTaskWorker = prepared.workflowIndex.activeByTaskWorker;
  t.taskWorkersOf = prepared.workflowIndex.taskWorkersOf;
  t.activeByHardware = prepared.workflowIndex.activeByHardware;
  t.hardwareOf = prepared.workflowIndex.hardwareOf;
  t.powerJobs = prepared.powerJobs;
  t.powerJobsByHardware = prepared.powerJobsByHardware;
  t.activePowerJobs = prepared.activePowerJobs;
  t.artifacts = prepared.artifacts;
  // A snapshot from before the trail existed restores with an empty one.
  t.audit =
    image.audit === undefined
      ? new AuditLog()
      : new AuditLog(image.audit.retention, image.audit.lastSeq, image.audit.entries);
  t.clusterVersion = image.clusterVersion ?? stateVersionBaseline;
  t.workflowRetention = image.workflowRetention ?? workflowRetentionDefault;
  t.workflowRetentionDefaultSinceMs = image.workflowRetentionDefaultSinceMs;
  t.drainedMembers = image.drainedMembers ?? [];
  t.memberApiAddrs = image.memberApiAddrs ?? [];
  t.pools = new Pools();
  t.pools.restore(image.pools ?? []);
  t.quarantinePolicy = image.quarantinePolicy ?? quarantinePolicyDefault;
  t.acceptRule = prepared.acceptRule;
  t.machines.restored(prepared.transitional);
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

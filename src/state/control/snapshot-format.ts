// The control snapshot's formats (snapshot.ts writes and reads them; the history of what each
// added is there): the image a snapshot holds, and what each format may hold, checked on
// restore beyond what the readers check: order, repeats, relations inside a collection, and
// the fields each format and state version allow, each in one encoding per state.
import type {
  Artifact,
  Hardware,
  Lease,
  OperatorToken,
  PowerJob,
  Template,
  Workflow,
  WorkflowEvent,
} from '../../model/records.js';
import { isDefaultQuarantinePolicy, type QuarantinePolicy } from '../../model/quarantine-policy.js';
import type { Pool } from '../../fleet/pool.js';
import { actionPositions } from '../../workflow/rules.js';
import { stateVersionBaseline, stateVersionFleet } from '../versions.js';
import { artifactRecordProblem } from './artifacts.js';
import { isDefaultRetention, type AuditEntry, type AuditRetention } from './audit-log.js';
import { drainedSetProblem } from './drained-members.js';
import { ipOrder } from './leases.js';
import { memberApiAddrsProblem, type MemberApiAddr } from './member-api-addrs.js';
import { poolNameProblem } from './pools.js';
import { isDefaultWorkflowRetention, type WorkflowRetention } from './workflow-retention.js';

export interface SnapshotImage {
  readonly appliedIndex: number;
  readonly lastEventSeq: number;
  readonly hardware: readonly Hardware[];
  readonly templates: readonly Template[];
  readonly workflows: readonly { readonly workflow: Workflow; readonly events: readonly WorkflowEvent[] }[];
  readonly tokens: readonly OperatorToken[];
  readonly leases?: readonly Lease[];
  readonly powerJobs?: readonly PowerJob[];
  readonly artifacts?: readonly Artifact[];
  readonly audit?: AuditImage;
  /** The effective state version; absent means 1. */
  readonly clusterVersion?: number;
  /** How long finished workflows stay; absent means the default. */
  readonly workflowRetention?: WorkflowRetention;
  /** When the default retention came into force, while no operator has set one; absent: never, or set. */
  readonly workflowRetentionDefaultSinceMs?: number;
  /** Members drained by `slipway node drain`, sorted; absent means none. */
  readonly drainedMembers?: readonly string[];
  /** Pools (docs/decisions/0035-pools.md), by name; absent means none. */
  readonly pools?: readonly Pool[];
  /** When repeated failures quarantine a machine; absent means the default. */
  readonly quarantinePolicy?: QuarantinePolicy;
  /** The auto-accept rule's selector, canonical; absent means none. */
  readonly acceptRule?: string;
  /** Every member's API address as it said it, by id; absent means none. */
  readonly memberApiAddrs?: readonly MemberApiAddr[];
}

export interface AuditImage {
  readonly retention: AuditRetention;
  readonly lastSeq: number;
  /** Oldest first. */
  readonly entries: readonly AuditEntry[];
}

/** The newest format; the record layout (snapshot-records.ts) holds its collections apart. */
export const snapshotFormat = 6;
export const formatWithAudit = 5;
export const formatWithArtifacts = 4;
export const formatWithPowerJobs = 3;
export const formatWithoutPowerJobs = 2;

/** What is wrong with a decoded image beyond its readers' shapes, or undefined (readSnapshot). */
export function imageProblem(image: SnapshotImage & { readonly format: number }): string | undefined {
  return (
    collectionsProblem(image.format, image) ??
    clusterVersionProblem(image.format, image.clusterVersion) ??
    workflowRetentionSnapshotProblem(image.format, image.workflowRetention) ??
    defaultSinceSnapshotProblem(image) ??
    drainedMembersSnapshotProblem(image.format, image.drainedMembers) ??
    (image.pools === undefined
      ? undefined
      : image.pools.length === 0
        ? 'pools: an empty list is left out'
        : poolsProblem(image.clusterVersion ?? stateVersionBaseline, image.pools)) ??
    quarantinePolicySnapshotProblem(image.clusterVersion, image.quarantinePolicy) ??
    (image.acceptRule !== undefined && (image.clusterVersion ?? stateVersionBaseline) < stateVersionFleet
      ? `acceptRule: is set at state version ${stateVersionFleet}; the cluster runs at ${image.clusterVersion ?? stateVersionBaseline}`
      : undefined) ??
    (image.memberApiAddrs === undefined
      ? undefined
      : image.memberApiAddrs.length === 0
        ? 'memberApiAddrs: an empty list is left out'
        : memberApiAddrsSnapshotProblem(image.clusterVersion ?? stateVersionBaseline, image.memberApiAddrs))
  );
}

/**
 * What is wrong with the image's collections as format `format` holds them (order, repeats,
 * relations inside one collection), or undefined. Shared with the record layout
 * (snapshot-records.ts), which reads the collections record by record.
 */
export function collectionsProblem(format: number, image: SnapshotImage): string | undefined {
  return (
    orderProblem(
      'hardware',
      image.hardware.map((h) => h.id),
    ) ??
    orderProblem(
      'templates',
      image.templates.map((t) => t.name),
    ) ??
    orderProblem(
      'workflows',
      image.workflows.map((w) => w.workflow.id),
    ) ??
    orderProblem(
      'tokens',
      image.tokens.map((t) => t.name),
    ) ??
    workflowsProblem(image.workflows) ??
    leaseOrderProblem(format, image.leases) ??
    powerJobsProblem(format, image.powerJobs) ??
    artifactsProblem(format, image.artifacts) ??
    auditProblem(format, image.audit)
  );
}

function orderProblem(what: string, keys: readonly string[]): string | undefined {
  for (let i = 1; i < keys.length; i++) {
    const [previous, key] = [keys[i - 1] ?? '', keys[i] ?? ''];
    if (!(previous < key)) return `${what}: ${JSON.stringify(key)} is out of order or repeated`;
  }
  return undefined;
}

function leaseOrderProblem(format: number, leases: readonly Lease[] | undefined): string | undefined {
  if (format === 1) return leases === undefined ? undefined : 'format 1 has no leases';
  if (leases === undefined) return 'leases: is required';
  for (let i = 1; i < leases.length; i++) {
    const [previous, lease] = [leases[i - 1], leases[i]];
    if (previous !== undefined && lease !== undefined && !(ipOrder(previous.ip, lease.ip) < 0)) {
      return `leases: ${lease.ip} is out of order or repeated`;
    }
  }
  return undefined;
}

function powerJobsProblem(format: number, jobs: readonly PowerJob[] | undefined): string | undefined {
  if (format < formatWithPowerJobs)
    return jobs === undefined ? undefined : `format ${format} has no power jobs`;
  // One encoding per state: no jobs is written without the field (format 2, or 4 without it).
  if (format === formatWithPowerJobs && (jobs === undefined || jobs.length === 0))
    return 'powerJobs: format 3 needs at least one';
  if (jobs === undefined) return undefined;
  if (jobs.length === 0) return `powerJobs: format ${format} leaves out an empty list`;
  return (
    orderProblem(
      'powerJobs',
      jobs.map((j) => j.id),
    ) ??
    jobs
      .map((j) =>
        j.stepIndex > j.steps.length || (j.state !== 'SUCCEEDED' && j.stepIndex >= j.steps.length)
          ? `power job "${j.id}" has step ${j.stepIndex} of ${j.steps.length}`
          : undefined,
      )
      .find((p) => p !== undefined)
  );
}

function workflowsProblem(workflows: SnapshotImage['workflows']): string | undefined {
  for (const { workflow, events } of workflows) {
    const positions = actionPositions(workflow.spec).length;
    if (workflow.actions.length !== positions) {
      return `workflow "${workflow.id}" has ${workflow.actions.length} action statuses for ${positions} actions`;
    }
    for (let i = 1; i < events.length; i++) {
      if ((events[i - 1]?.seq ?? 0) >= (events[i]?.seq ?? 0))
        return `events of workflow "${workflow.id}" are out of order`;
    }
  }
  return undefined;
}

function artifactsProblem(format: number, artifacts: readonly Artifact[] | undefined): string | undefined {
  if (format < formatWithArtifacts)
    return artifacts === undefined ? undefined : `format ${format} has no artifacts`;
  // One encoding per state: a state without artifacts is written as format 2 or 3 (or 5 without it).
  if (format === formatWithArtifacts && (artifacts === undefined || artifacts.length === 0))
    return 'artifacts: format 4 needs at least one';
  if (artifacts === undefined) return undefined;
  if (artifacts.length === 0) return `artifacts: format ${format} leaves out an empty list`;
  return (
    orderProblem(
      'artifacts',
      artifacts.map((a) => a.name),
    ) ?? artifacts.map(artifactRecordProblem).find((p) => p !== undefined)
  );
}

/** The trail goes into a snapshot only when it is not the empty default (keeps older bytes). */
export function auditWritten(audit: AuditImage): boolean {
  return audit.lastSeq > 0 || !isDefaultRetention(audit.retention);
}

function auditProblem(format: number, audit: AuditImage | undefined): string | undefined {
  if (format < formatWithAudit)
    return audit === undefined ? undefined : `format ${format} has no audit trail`;
  // One encoding per state: an empty default trail is written as an older format (or 6 without it).
  if (format === formatWithAudit && (audit === undefined || !auditWritten(audit)))
    return 'audit: format 5 needs a trail that was used or a retention that is not the default';
  if (audit === undefined) return undefined;
  if (!auditWritten(audit)) return `audit: format ${format} leaves out an unused trail`;
  if (audit.entries.length > audit.retention.entries)
    return `audit: ${audit.entries.length} entries, over the retention of ${audit.retention.entries}`;
  for (let i = 0; i < audit.entries.length; i++) {
    const seq = audit.entries[i]?.seq ?? 0;
    if (seq > audit.lastSeq || (i > 0 && (audit.entries[i - 1]?.seq ?? 0) >= seq))
      return `audit: entry ${seq} is out of order or after lastSeq ${audit.lastSeq}`;
  }
  return undefined;
}

function clusterVersionProblem(format: number, version: number | undefined): string | undefined {
  if (format < snapshotFormat)
    return version === undefined ? undefined : `format ${format} has no cluster version`;
  // Format 6 is written exactly when the cluster runs above version 1.
  return version === undefined ? `clusterVersion: format ${format} needs one` : undefined;
}

function workflowRetentionSnapshotProblem(
  format: number,
  retention: WorkflowRetention | undefined,
): string | undefined {
  if (retention === undefined) return undefined;
  // Only a cluster at version 2 or above can have set it, and it writes format 6.
  if (format < snapshotFormat) return `format ${format} has no workflow retention`;
  // One encoding per state: the default is left out.
  if (isDefaultWorkflowRetention(retention))
    return `workflowRetention: format ${format} leaves out the default`;
  return undefined;
}

/** Why the default retention's start cannot be beside these, or undefined when it can. */
export function retentionSinceProblem(
  clusterVersion: number,
  retention: WorkflowRetention | undefined,
): string | undefined {
  if (clusterVersion <= stateVersionBaseline)
    return 'is recorded when the cluster reaches state version 2; it runs at 1';
  // Setting the retention clears it, whatever the value set.
  if (retention !== undefined) return 'is cleared when an operator sets the workflow retention';
  return undefined;
}

function defaultSinceSnapshotProblem(image: {
  readonly format: number;
  readonly clusterVersion?: number | undefined;
  readonly workflowRetention?: WorkflowRetention | undefined;
  readonly workflowRetentionDefaultSinceMs?: number | undefined;
}): string | undefined {
  if (image.workflowRetentionDefaultSinceMs === undefined) return undefined;
  if (image.format < snapshotFormat) return `format ${image.format} has no workflowRetentionDefaultSinceMs`;
  const problem = retentionSinceProblem(
    image.clusterVersion ?? stateVersionBaseline,
    image.workflowRetention,
  );
  return problem === undefined ? undefined : `workflowRetentionDefaultSinceMs: ${problem}`;
}

function drainedMembersSnapshotProblem(
  format: number,
  ids: readonly string[] | undefined,
): string | undefined {
  if (ids === undefined) return undefined;
  if (format < snapshotFormat) return `format ${format} has no drained members`;
  // One encoding per state: no drained member is written without the field.
  if (ids.length === 0) return `drainedMembers: format ${format} leaves out an empty list`;
  return drainedSetProblem(ids);
}

/** What is wrong with a snapshot's pools, or undefined: at state version 3, by name, members sorted. */
export function poolsProblem(clusterVersion: number, pools: readonly Pool[]): string | undefined {
  if (clusterVersion < stateVersionFleet)
    return `pools: are made by commands of state version ${stateVersionFleet}; the cluster runs at ${clusterVersion}`;
  for (let i = 0; i < pools.length; i++) {
    const pool = pools[i] as Pool;
    const name = poolNameProblem(pool.name);
    if (name !== undefined) return `pools: ${name}`;
    if (i > 0 && !((pools[i - 1] as Pool).name < pool.name))
      return `pools: ${JSON.stringify(pool.name)} is out of order or repeated`;
    for (let j = 1; j < pool.members.length; j++) {
      if (!((pool.members[j - 1] as string) < (pool.members[j] as string)))
        return `pools: ${pool.name}'s members are out of order or repeated`;
    }
    const tainted = pool.tainted ?? [];
    if (pool.tainted !== undefined && tainted.length === 0)
      return `pools: ${pool.name}'s empty tainted is left out`;
    if (tainted.some((id, j) => !pool.members.includes(id) || (j > 0 && !((tainted[j - 1] as string) < id))))
      return `pools: ${pool.name}'s tainted are no sorted members`;
    if ((pool.failedInARow === undefined) !== (pool.lastFailure === undefined))
      return `pools: ${pool.name}'s failures in a row and its last failure go together`;
  }
  return undefined;
}

function quarantinePolicySnapshotProblem(
  clusterVersion: number | undefined,
  policy: QuarantinePolicy | undefined,
): string | undefined {
  if (policy === undefined) return undefined;
  const version = clusterVersion ?? stateVersionBaseline;
  if (version < stateVersionFleet)
    return `quarantinePolicy: is set at state version ${stateVersionFleet}; the cluster runs at ${version}`;
  // One encoding per state: the default is left out.
  if (isDefaultQuarantinePolicy(policy)) return 'quarantinePolicy: the default is left out';
  return undefined;
}

/** What is wrong with a snapshot's member API addresses, or undefined: at state version 3, valid, by id. */
export function memberApiAddrsSnapshotProblem(
  clusterVersion: number,
  list: readonly MemberApiAddr[],
): string | undefined {
  if (clusterVersion < stateVersionFleet)
    return `memberApiAddrs: are set by a command of state version ${stateVersionFleet}; the cluster runs at ${clusterVersion}`;
  return memberApiAddrsProblem(list);
}

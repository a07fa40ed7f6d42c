// The control state's snapshot: one JSON document in canonical form (records through their
// readers, collections sorted by key), so equal states give equal bytes on every node and after
// a restore. The store embeds these bytes in its own checksummed snapshot (replicated-state.ts).
//
//   { "format": 1, "appliedIndex", "lastEventSeq",
//     "hardware": [Hardware by id], "templates": [Template by name],
//     "workflows": [{ "workflow": Workflow, "events": [its kept events by seq] } by id],
//     "tokens": [OperatorToken by name], "leases": [Lease by address] }
//
//     ..., "powerJobs": [PowerJob by id] }   (format 3 only, and only when there are jobs)
//     ..., "artifacts": [Artifact by name] } (format 4 and later, only when there are artifacts)
//     ..., "audit": { "retention", "lastSeq", "entries": [AuditEntry by seq] } (format 5 only,
//          and only when anything was ever audited or the retention is not the default)
//     ..., "clusterVersion": N }   (format 6 only, and only when N is above 1)
//     ..., "workflowRetention": { "finishedMax", "finishedDays" } }   (format 6 only, and only
//          when it is not the default)
//     ..., "workflowRetentionDefaultSinceMs": N }   (format 6 only, and only while no operator
//          has set the retention since the cluster reached version 2, at stamp N)
//     ..., "drainedMembers": [member id, sorted] }   (format 6 only, and only when not empty)
//     ..., "pools": [Pool by name] }   (format 6 only, at state version 3, only when not empty)
//     ..., "quarantinePolicy": { "failures", "windowS" } }   (format 6 only, at state version
//          3 or above, and only when it is not the default)
//     ..., "acceptRule": "selector" }   (format 6 only, at state version 3 or above, only when
//          one is set; docs/decisions/0037)
//     ..., "memberApiAddrs": [{ "id", "apiAddr" } by id] }   (format 6 only, at state version 3
//          or above, and only when not empty)
//
// Format 2 added leases; a format 1 snapshot (none) still restores. Format 3 adds power jobs and
// is written only when there are some, so a state without jobs keeps the bytes (and the
// readers) of format 2. Format 4 adds artifacts the same way: written only when some are
// registered, so a state without artifacts keeps the bytes of format 2 or 3. In format 4,
// powerJobs is present exactly when there are jobs. Format 5 adds the audit trail the same way
// (docs/decisions/0018-audit-trail.md); older snapshots restore with an empty trail. Format 6
// adds the cluster's effective state version the same way (docs/decisions/0019-version-gates.md):
// until the cluster runs at version 2, snapshots keep the bytes builds 0.1.x read, so a leader
// on a new build can still send one to a follower on an old build mid-upgrade. The workflow
// retention (docs/decisions/0020-bounded-state.md) is set by a command of state version 2, so a
// retention other than the default exists only in a cluster at version 2 or above: it goes
// beside clusterVersion in format 6, and only when it is not the default. When the default came
// into force (the stamp of the entry that raised the cluster to version 2) follows it the same
// way, present exactly while no operator has set the retention: a set one is never beside it,
// since setting clears it (0020, the grace before the default removes anything). Drained members
// (docs/decisions/0022-node-drain.md) come from a command of state version 2 too, and go the same
// way: last, and only when some member is drained, so a snapshot without them reads as before.
// The quarantine policy (0028's addendum) is set by a command of state version 3: after them,
// only when it is not the default. Members' API addresses
// (docs/decisions/0038-member-api-addresses.md) come from a command of state version 3 too: last,
// and only when some member has said its own.
import { DecodeError } from '../binary.js';
import {
  artifactsMax,
  auditEntriesMax,
  drainedMembersMax,
  auditRetentionDaysMax,
  hardwareMax,
  leasesMax,
  operatorTokensMax,
  powerJobsMax,
  templatesMax,
  workflowEventsMax,
  quarantineFailuresMax,
  quarantineWindowSMax,
  workflowRetentionDaysMax,
  workflowsMax,
  poolsMax,
  selectorBytesMax,
  memberApiAddrsMax,
} from '../../model/limits.js';
import { memberApiAddrBytesMax, memberApiAddrsProblem, type MemberApiAddr } from './member-api-addrs.js';
import { actionPositions } from '../../workflow/rules.js';
import { artifactRecordProblem } from './artifacts.js';
import { isDefaultRetention, type AuditEntry, type AuditRetention } from './audit-log.js';
import { deepFreeze } from './immutable.js';
import { isDefaultWorkflowRetention, type WorkflowRetention } from './workflow-retention.js';
import { memberIdBytesMax } from '../../model/member-id.js';
import { drainedSetProblem } from './drained-members.js';
import { ipOrder } from './leases.js';
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
import {
  readArtifact,
  readAuditEntry,
  readHardware,
  readLease,
  readOperatorToken,
  readPool,
  readPowerJob,
  readTemplate,
  readWorkflow,
  readWorkflowEvent,
} from './schema.js';
import { runAtOnce, SliceBudget, type Sliced } from '../slices.js';
import { stateVersionBaseline, stateVersionFleet, stateVersionOfThisBuild } from '../versions.js';
import type { Pool } from '../../fleet/pool.js';
import { poolNameProblem } from './pools.js';
import { isDefaultQuarantinePolicy, type QuarantinePolicy } from '../../model/quarantine-policy.js';
import { array, at, count, integer, object, optional, ShapeError, string, type Reader } from './shape.js';

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
const formatWithAudit = 5;
const formatWithArtifacts = 4;
const formatWithPowerJobs = 3;
const formatWithoutPowerJobs = 2;

export const readWorkflowEntry = object({
  workflow: readWorkflow,
  events: array(readWorkflowEvent, workflowEventsMax),
});

const readImage = object({
  format: integer(1, snapshotFormat),
  appliedIndex: count,
  lastEventSeq: count,
  hardware: array(readHardware, hardwareMax),
  templates: array(readTemplate, templatesMax),
  workflows: array(readWorkflowEntry, workflowsMax),
  tokens: array(readOperatorToken, operatorTokensMax),
  leases: optional(array(readLease, leasesMax)),
  powerJobs: optional(array(readPowerJob, powerJobsMax)),
  artifacts: optional(array(readArtifact, artifactsMax)),
  audit: optional(readAuditImage()),
  clusterVersion: optional(integer(2, stateVersionOfThisBuild)),
  workflowRetention: optional(
    object({
      finishedMax: integer(1, workflowsMax),
      finishedDays: integer(0, workflowRetentionDaysMax),
    }),
  ),
  workflowRetentionDefaultSinceMs: optional(count),
  drainedMembers: optional(array(string(memberIdBytesMax), drainedMembersMax)),
  pools: optional(array(readPool, poolsMax)),
  quarantinePolicy: optional(
    object({
      failures: integer(1, quarantineFailuresMax),
      windowS: integer(1, quarantineWindowSMax),
    }),
  ),
  acceptRule: optional(string(selectorBytesMax)),
  memberApiAddrs: optional(
    array(
      object({ id: string(memberIdBytesMax), apiAddr: string(memberApiAddrBytesMax) }),
      memberApiAddrsMax,
    ),
  ),
});

function readAuditImage(): Reader<AuditImage> {
  return object({
    retention: object({ entries: integer(1, auditEntriesMax), days: integer(0, auditRetentionDaysMax) }),
    lastSeq: count,
    entries: array(readAuditEntry, auditEntriesMax),
  });
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The canonical bytes of an image whose collections are already sorted by key. */
export function writeSnapshot(image: SnapshotImage): Uint8Array {
  return concatBytes(runAtOnce(snapshotSlices(image)));
}

/** Records per slice: the largest, a workflow with its kept events, is a few KB of JSON. */
const recordsPerSlice = 64;

/**
 * writeSnapshot in slices: the same bytes as JSON.stringify(readImage(image)) (the restore
 * check for canonical form holds it to that), built a record at a time with a pause every
 * `recordsPerSlice` records. Every record goes through its reader, as readImage would. The
 * bytes come in pieces, in order: the caller copies them where they go, a slice at a time,
 * rather than joining megabytes in one go.
 */
export function* snapshotSlices(image: SnapshotImage): Sliced<Uint8Array[]> {
  const budget = new SliceBudget(recordsPerSlice);
  const chunks: Uint8Array[] = [];
  const appliedIndex = count(image.appliedIndex, 'appliedIndex');
  const lastEventSeq = count(image.lastEventSeq, 'lastEventSeq');
  const powerJobs = image.powerJobs ?? [];
  const artifacts = image.artifacts ?? [];
  const audit = image.audit !== undefined && auditWritten(image.audit) ? image.audit : undefined;
  const clusterVersion = image.clusterVersion ?? stateVersionBaseline;
  const workflowRetention =
    image.workflowRetention === undefined || isDefaultWorkflowRetention(image.workflowRetention)
      ? undefined
      : image.workflowRetention;
  const drainedMembers = image.drainedMembers ?? [];
  const quarantinePolicyText = quarantinePolicyField(image.quarantinePolicy, clusterVersion);
  if (drainedMembers.length > 0 && clusterVersion <= stateVersionBaseline) {
    throw new ShapeError('drainedMembers', 'are set by a command of state version 2; the cluster runs at 1');
  }
  if (workflowRetention !== undefined && clusterVersion <= stateVersionBaseline) {
    throw new ShapeError(
      'workflowRetention',
      'is set by a command of state version 2; the cluster runs at 1',
    );
  }
  const defaultSinceMs = image.workflowRetentionDefaultSinceMs;
  if (defaultSinceMs !== undefined) {
    const problem = retentionSinceProblem(clusterVersion, workflowRetention);
    if (problem !== undefined) throw new ShapeError('workflowRetentionDefaultSinceMs', problem);
  }
  const format =
    clusterVersion > stateVersionBaseline
      ? snapshotFormat
      : audit !== undefined
        ? formatWithAudit
        : artifacts.length > 0
          ? formatWithArtifacts
          : powerJobs.length > 0
            ? formatWithPowerJobs
            : formatWithoutPowerJobs;
  let text = `{"format":${String(format)},"appliedIndex":${String(appliedIndex)},"lastEventSeq":${String(lastEventSeq)}`;
  function* list<T>(key: string, items: readonly T[], read: Reader<T>, lengthMax: number): Sliced<void> {
    if (items.length > lengthMax)
      throw new ShapeError(key, `has ${items.length} items, over the limit of ${lengthMax}`);
    text += `,${JSON.stringify(key)}:[`;
    for (let i = 0; i < items.length; i++) {
      text += (i === 0 ? '' : ',') + JSON.stringify(read(items[i], at(key, i)));
      if (budget.spend()) {
        chunks.push(encoder.encode(text));
        text = '';
        yield;
      }
    }
    text += ']';
  }
  yield* list('hardware', image.hardware, readHardware, hardwareMax);
  yield* list('templates', image.templates, readTemplate, templatesMax);
  yield* list('workflows', image.workflows, readWorkflowEntry, workflowsMax);
  yield* list('tokens', image.tokens, readOperatorToken, operatorTokensMax);
  if (image.leases !== undefined) yield* list('leases', image.leases, readLease, leasesMax);
  if (powerJobs.length > 0) yield* list('powerJobs', powerJobs, readPowerJob, powerJobsMax);
  if (artifacts.length > 0) yield* list('artifacts', artifacts, readArtifact, artifactsMax);
  if (audit !== undefined) {
    const { retention, lastSeq } = audit;
    text += `,"audit":{"retention":${JSON.stringify({ entries: retention.entries, days: retention.days })},"lastSeq":${String(count(lastSeq, 'audit.lastSeq'))}`;
    yield* list('entries', audit.entries, readAuditEntry, auditEntriesMax);
    text += '}';
  }
  if (clusterVersion > stateVersionBaseline) {
    text += `,"clusterVersion":${String(integer(2, stateVersionOfThisBuild)(clusterVersion, 'clusterVersion'))}`;
  }
  if (workflowRetention !== undefined) {
    const { finishedMax, finishedDays } = workflowRetention;
    const finishedMaxText = String(integer(1, workflowsMax)(finishedMax, 'workflowRetention.finishedMax'));
    const finishedDaysText = String(
      integer(0, workflowRetentionDaysMax)(finishedDays, 'workflowRetention.finishedDays'),
    );
    text += `,"workflowRetention":{"finishedMax":${finishedMaxText},"finishedDays":${finishedDaysText}}`;
  }
  if (defaultSinceMs !== undefined) {
    text += `,"workflowRetentionDefaultSinceMs":${String(count(defaultSinceMs, 'workflowRetentionDefaultSinceMs'))}`;
  }
  if (drainedMembers.length > 0) {
    const problem = drainedSetProblem(drainedMembers);
    if (problem !== undefined) throw new ShapeError('drainedMembers', problem);
    text += `,"drainedMembers":${JSON.stringify(drainedMembers)}`;
  }
  const pools = image.pools ?? [];
  if (pools.length > 0) {
    const problem = poolsProblem(clusterVersion, pools);
    if (problem !== undefined) throw new ShapeError('pools', problem);
    text += `,"pools":[${pools.map((p, i) => JSON.stringify(readPool(p, at('pools', i)))).join(',')}]`;
  }
  text += quarantinePolicyText;
  text += acceptRuleField(image.acceptRule, clusterVersion);
  text += memberApiAddrsField(image.memberApiAddrs ?? [], clusterVersion);
  chunks.push(encoder.encode(`${text}}`));
  return chunks;
}

function concatBytes(chunks: readonly Uint8Array[]): Uint8Array {
  let total = 0;
  for (const c of chunks) total += c.length;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const c of chunks) {
    out.set(c, offset);
    offset += c.length;
  }
  return out;
}

/** Decodes and checks a snapshot. Throws DecodeError naming the problem. */
export function readSnapshot(data: Uint8Array): SnapshotImage {
  let text: string;
  let parsed: unknown;
  try {
    text = decoder.decode(data);
    parsed = JSON.parse(text);
  } catch (e) {
    throw new DecodeError(
      `control snapshot is not UTF-8 JSON (${e instanceof Error ? e.message : String(e)})`,
    );
  }
  let image: ReturnType<typeof readImage>;
  try {
    image = readImage(parsed, '');
  } catch (e) {
    if (e instanceof ShapeError) throw new DecodeError(`control snapshot: ${e.message}`);
    throw e;
  }
  const problem =
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
        : memberApiAddrsSnapshotProblem(image.clusterVersion ?? stateVersionBaseline, image.memberApiAddrs));
  if (problem !== undefined) throw new DecodeError(`control snapshot: ${problem}`);
  if (JSON.stringify(image) !== text) throw new DecodeError('control snapshot is not in canonical form');
  const { format: _format, ...rest } = deepFreeze(image);
  return rest;
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

/** The trail goes into a snapshot only when it is not the empty default (keeps older bytes). */
function auditWritten(audit: AuditImage): boolean {
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

/** The policy as the snapshot writes it, after drainedMembers: nothing for the default. */
function quarantinePolicyField(policy: QuarantinePolicy | undefined, clusterVersion: number): string {
  if (policy === undefined || isDefaultQuarantinePolicy(policy)) return '';
  if (clusterVersion < stateVersionFleet) {
    throw new ShapeError(
      'quarantinePolicy',
      `is set by a command of state version ${stateVersionFleet}; the cluster runs at ${clusterVersion}`,
    );
  }
  const failures = integer(1, quarantineFailuresMax)(policy.failures, 'quarantinePolicy.failures');
  const windowS = integer(1, quarantineWindowSMax)(policy.windowS, 'quarantinePolicy.windowS');
  return `,"quarantinePolicy":{"failures":${String(failures)},"windowS":${String(windowS)}}`;
}

/** The auto-accept rule as the snapshot writes it, last: nothing when none is set. */
function acceptRuleField(rule: string | undefined, clusterVersion: number): string {
  if (rule === undefined) return '';
  if (clusterVersion < stateVersionFleet) {
    throw new ShapeError(
      'acceptRule',
      `is set by a command of state version ${stateVersionFleet}; the cluster runs at ${clusterVersion}`,
    );
  }
  return `,"acceptRule":${JSON.stringify(string(selectorBytesMax)(rule, 'acceptRule'))}`;
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

/** Why the default retention's start cannot be beside these, or undefined when it can. */
function retentionSinceProblem(
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

/** The members' API addresses as the snapshot writes them, last: nothing for none. */
function memberApiAddrsField(list: readonly MemberApiAddr[], clusterVersion: number): string {
  if (list.length === 0) return '';
  const problem = memberApiAddrsSnapshotProblem(clusterVersion, list);
  if (problem !== undefined) throw new ShapeError('memberApiAddrs', problem);
  return `,"memberApiAddrs":${JSON.stringify(list.map((m) => ({ id: m.id, apiAddr: m.apiAddr })))}`;
}

/** What is wrong with a snapshot's member API addresses, or undefined: at state version 3, valid, by id. */
function memberApiAddrsSnapshotProblem(
  clusterVersion: number,
  list: readonly MemberApiAddr[],
): string | undefined {
  if (clusterVersion < stateVersionFleet)
    return `memberApiAddrs: are set by a command of state version ${stateVersionFleet}; the cluster runs at ${clusterVersion}`;
  return memberApiAddrsProblem(list);
}

/** What is wrong with a snapshot's pools, or undefined: at state version 3, by name, members sorted. */
function poolsProblem(clusterVersion: number, pools: readonly Pool[]): string | undefined {
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

// The control state's snapshot: one JSON document in canonical form (records through their
// readers, collections sorted by key), so equal states give equal bytes on every node and after
// a restore. The store embeds these bytes in its own checksummed snapshot (replicated-state.ts).
// The image it holds, and the checks of what each format may hold, are snapshot-format.ts.
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
import { memberApiAddrBytesMax, type MemberApiAddr } from './member-api-addrs.js';
import { deepFreeze } from './immutable.js';
import { isDefaultWorkflowRetention } from './workflow-retention.js';
import { memberIdBytesMax } from '../../model/member-id.js';
import { drainedSetProblem } from './drained-members.js';
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
import {
  auditWritten,
  formatWithArtifacts,
  formatWithAudit,
  formatWithoutPowerJobs,
  formatWithPowerJobs,
  imageProblem,
  memberApiAddrsSnapshotProblem,
  poolsProblem,
  retentionSinceProblem,
  snapshotFormat,
  type AuditImage,
  type SnapshotImage,
} from './snapshot-format.js';
import { stateVersionBaseline, stateVersionFleet, stateVersionOfThisBuild } from '../versions.js';
import { isDefaultQuarantinePolicy, type QuarantinePolicy } from '../../model/quarantine-policy.js';
import { array, at, count, integer, object, optional, ShapeError, string, type Reader } from './shape.js';

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
  const problem = imageProblem(image);
  if (problem !== undefined) throw new DecodeError(`control snapshot: ${problem}`);
  if (JSON.stringify(image) !== text) throw new DecodeError('control snapshot is not in canonical form');
  const { format: _format, ...rest } = deepFreeze(image);
  return rest;
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

/** The members' API addresses as the snapshot writes them, last: nothing for none. */
function memberApiAddrsField(list: readonly MemberApiAddr[], clusterVersion: number): string {
  if (list.length === 0) return '';
  const problem = memberApiAddrsSnapshotProblem(clusterVersion, list);
  if (problem !== undefined) throw new ShapeError('memberApiAddrs', problem);
  return `,"memberApiAddrs":${JSON.stringify(list.map((m) => ({ id: m.id, apiAddr: m.apiAddr })))}`;
}

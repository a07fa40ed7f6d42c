// The JSON schema of the control plane: one reader per record and command (see shape.ts).
// Field order here is the canonical order of the encoding, so reordering fields is a format
// change, as is any change to what a reader accepts.
import { sha256HexOf } from '../digest.js';
import {
  allocationCandidatesMax,
  alternateAttemptsMax,
  auditTextBytesMax,
  controlCommandBytesMax,
  drainedMembersMax,
  memberApiAddrsMax,
  leaseGrantsPerCommandMax,
  poolSizeMax,
  quarantineFailuresMax,
  workflowGcBatchMax,
} from '../../model/limits.js';
import type { AuditEntry, AuditTag } from './audit-log.js';
import type { ControlCommand, ControlResult } from './commands.js';
import type {
  HardwareInput,
  ActionSpec,
  ActionStatus,
  Artifact,
  GrantOutcome,
  Hardware,
  Lease,
  OperatorToken,
  PowerJob,
  RenderedTemplate,
  TaskSpec,
  Template,
  Workflow,
  WorkflowEvent,
} from '../../model/records.js';
import { controlErrorCodes } from './commands.js';
import { powerJobStates, powerOps, powerSteps, workflowStates, builtinActions } from '../../model/records.js';
import type { MachineEvent, MachineLifecycle } from '../../model/machine-lifecycle.js';
import type { Inventory } from '../../model/inventory.js';
import { InventoryError, parseInventory } from '../../model/inventory.js';
import { lifecycleTriggers, machineStates, operatorVerbs } from '../../model/machine-lifecycle.js';
import type { Pool } from '../../fleet/pool.js';
import {
  array,
  boolean,
  count,
  integer,
  json,
  literal,
  map,
  object,
  optional,
  safeInteger,
  ShapeError,
  string,
  variant,
  type Reader,
} from './shape.js';

// Sizes here only keep a reader from walking absurd input; the real bounds are the payload's
// (controlCommandBytesMax) and the domain limits apply checks with E_INVALID.
const text = string(controlCommandBytesMax);

/** A flag kept only when set: true, or absent. */
const onlyTrue: Reader<true> = (value, path) => {
  if (value !== true) throw new ShapeError(path, 'must be true (or left out)');
  return true;
};
const texts = array(text, controlCommandBytesMax);
const textMap = map(text, controlCommandBytesMax);
const jsonDepthMax = 32;

const workflowState = literal(workflowStates);
const actionState = literal(workflowStates);

const hardwareInputFields = {
  id: text,
  interfaces: array(
    object({
      mac: text,
      ip: optional(object({ address: text, prefix: safeInteger })),
      gateway: optional(text),
      dns: texts,
      hostname: optional(text),
      leaseTimeS: safeInteger,
      vlan: optional(safeInteger),
    }),
    controlCommandBytesMax,
  ),
  arch: literal(['x86_64', 'arm64']),
  uefi: boolean,
  netboot: object({
    allowPXE: boolean,
    allowWorkflow: boolean,
    ipxeScript: optional(text),
    ipxeUrl: optional(text),
  }),
  metadata: map(json(jsonDepthMax, controlCommandBytesMax), controlCommandBytesMax),
  bmc: optional(
    object({
      address: text,
      username: optional(text),
      secretRef: optional(text),
      password: optional(text),
    }),
  ),
} as const;

export const readHardwareInput: Reader<HardwareInput> = object(hardwareInputFields);

const machineState = literal(machineStates);

export const readMachineEvent: Reader<MachineEvent> = object({
  seq: count,
  stampMs: count,
  from: optional(machineState),
  to: machineState,
  trigger: literal(lifecycleTriggers),
  by: text,
  reason: optional(text),
  step: optional(text),
  workflowId: optional(text),
});

const readMachineLifecycle: Reader<MachineLifecycle> = object({
  state: machineState,
  sinceMs: count,
  reason: optional(text),
  step: optional(text),
  deadlineMs: optional(count),
  owner: optional(text),
  spareOf: optional(text),
  drainedFrom: optional(machineState),
  afterRelease: optional(
    object({
      pool: text,
      state: literal(['failed', 'quarantined']),
      reason: optional(text),
      step: optional(text),
    }),
  ),
  history: array(readMachineEvent, controlCommandBytesMax),
  failures: optional(array(count, quarantineFailuresMax)),
});

/** A worker's per-boot credential as the state keeps it (workflows' and inventory boots'). */
const readWorkerCredential = object({
  sha256: text,
  mac: text,
  ip: text,
  issuedMs: count,
  expiresMs: count,
  claimKey: optional(text),
});

/** An inventory, through the one gate reports pass (src/model/inventory.ts). */
export const readInventory: Reader<Inventory> = (value, path) => {
  try {
    return parseInventory(value);
  } catch (err) {
    if (err instanceof InventoryError) throw new ShapeError(path === '' ? 'inventory' : path, err.message);
    throw err;
  }
};

const readStoredHardware = object({
  ...hardwareInputFields,
  workerTokenSha256: optional(text),
  // Snapshots from before worker tokens were hashed hold the token itself.
  workerToken: optional(text),
  createdMs: count,
  updatedMs: count,
  version: count,
  // Last, and only from state version 3: records without them keep their encoding.
  lifecycle: optional(readMachineLifecycle),
  labels: optional(textMap),
  // From discovery (docs/decisions/0029-discovery.md), also state version 3 and after the above.
  inventory: optional(readInventory),
  inspection: optional(readWorkerCredential),
  reportedWith: optional(text),
});

/** A stored record: the operator's input plus what the state adds. */
export const readHardware: Reader<Hardware> = (value, path) => {
  const {
    workerToken,
    workerTokenSha256,
    createdMs,
    updatedMs,
    version,
    lifecycle,
    labels,
    inventory,
    inspection,
    reportedWith,
    ...input
  } = readStoredHardware(value, path);
  const sha256 = workerTokenSha256 ?? (workerToken === undefined ? undefined : sha256HexOf(workerToken));
  if (sha256 === undefined) {
    throw new ShapeError(path === '' ? 'workerTokenSha256' : `${path}.workerTokenSha256`, 'is missing');
  }
  return {
    ...input,
    workerTokenSha256: sha256,
    createdMs,
    updatedMs,
    version,
    ...(lifecycle === undefined ? {} : { lifecycle }),
    ...(labels === undefined ? {} : { labels }),
    ...(inventory === undefined ? {} : { inventory }),
    ...(inspection === undefined ? {} : { inspection }),
    ...(reportedWith === undefined ? {} : { reportedWith }),
  };
};

export const readTemplate: Reader<Template> = object({
  name: text,
  source: text,
  createdMs: count,
  updatedMs: count,
  version: count,
});

const readActionSpec: Reader<ActionSpec> = object({
  name: text,
  image: optional(text),
  command: texts,
  args: texts,
  env: textMap,
  volumes: texts,
  timeoutS: safeInteger,
  retries: safeInteger,
  // Last: specs without it keep their encoding byte for byte.
  builtin: optional(literal(builtinActions)),
});

const readTaskSpec: Reader<TaskSpec> = object({
  name: text,
  worker: text,
  env: textMap,
  volumes: texts,
  actions: array(readActionSpec, controlCommandBytesMax),
});

/** A pool (docs/decisions/0035-pools.md); members sorted by id. */
export const readPool: Reader<Pool> = object({
  name: text,
  selector: text,
  template: text,
  size: integer(0, poolSizeMax),
  spares: integer(0, poolSizeMax),
  members: array(text, poolSizeMax),
  version: integer(1, Number.MAX_SAFE_INTEGER),
  spreadBy: optional(text),
  releaseTemplate: optional(text),
  image: optional(text),
  maxUnavailable: optional(integer(0, poolSizeMax)),
  tainted: optional(array(text, poolSizeMax)),
  deleting: optional(onlyTrue),
  onFailure: optional(literal(['retry', 'race'])),
  attempts: optional(integer(1, alternateAttemptsMax)),
  failedInARow: optional(integer(1, Number.MAX_SAFE_INTEGER)),
  lastFailure: optional(object({ hardwareId: text, reason: text })),
});

export const readRenderedTemplate: Reader<RenderedTemplate> = object({
  version: text,
  name: text,
  globalTimeoutS: safeInteger,
  tasks: array(readTaskSpec, controlCommandBytesMax),
});

export const readActionStatus: Reader<ActionStatus> = object({
  state: actionState,
  attempt: count,
  attemptsBefore: optional(count),
  startedMs: optional(count),
  stoppedMs: optional(count),
  deadlineMs: optional(count),
  notBeforeMs: optional(count),
  exitStatus: optional(safeInteger),
  message: optional(text),
  outputTail: optional(text),
  workerId: optional(text),
});

export const readWorkflow: Reader<Workflow> = object({
  id: text,
  template: text,
  hardwareId: text,
  hardwareMap: textMap,
  spec: readRenderedTemplate,
  state: workflowState,
  createdMs: count,
  startedMs: optional(count),
  finishedMs: optional(count),
  deadlineMs: optional(count),
  actions: array(readActionStatus, controlCommandBytesMax),
  message: optional(text),
  credentials: optional(map(readWorkerCredential, controlCommandBytesMax)),
  netboot: optional(boolean),
  selector: optional(text),
  alternate: optional(
    object({
      attempts: integer(1, alternateAttemptsMax),
      tried: array(text, alternateAttemptsMax),
      gaveUp: optional(text),
    }),
  ),
  race: optional(
    object({
      request: text,
      rival: text,
      tried: optional(array(text, alternateAttemptsMax)),
      winner: optional(text),
      lostTo: optional(text),
    }),
  ),
  release: optional(onlyTrue),
});

export const readWorkflowEvent: Reader<WorkflowEvent> = object({
  seq: count,
  workflowId: text,
  type: literal([
    'workflow.created',
    'workflow.running',
    'workflow.succeeded',
    'workflow.failed',
    'workflow.timeout',
    'workflow.cancelled',
    'workflow.retried',
    'workflow.alternate',
    'workflow.race',
    'action.started',
    'action.succeeded',
    'action.failed',
    'action.timeout',
    'action.cancelled',
    'action.retry-scheduled',
    'credential.issued',
    'credential.refused',
  ]),
  stampMs: count,
  task: optional(text),
  action: optional(text),
  actionIndex: optional(count),
  attempt: optional(count),
  exitStatus: optional(safeInteger),
  message: optional(text),
  outputTail: optional(text),
});

export const readLease: Reader<Lease> = object({
  ip: text,
  mac: text,
  state: literal(['bound', 'declined']),
  expiresMs: count,
  grantedMs: count,
  updatedMs: count,
});

const grantOutcomeFields = object({ granted: boolean, lease: optional(readLease), reason: optional(text) });

const readGrantOutcome: Reader<GrantOutcome> = (value, path) => {
  const o = grantOutcomeFields(value, path);
  if (o.granted && o.lease !== undefined && o.reason === undefined) return { granted: true, lease: o.lease };
  if (!o.granted && o.reason !== undefined && o.lease === undefined)
    return { granted: false, reason: o.reason };
  throw new ShapeError(
    path,
    'a granted outcome has a lease and no reason, a refused one a reason and no lease',
  );
};

export const readOperatorToken: Reader<OperatorToken> = object({
  name: text,
  role: literal(['admin', 'operator', 'viewer']),
  sha256: text,
  createdMs: count,
});

const powerStep = literal(powerSteps);
const powerState = literal(['on', 'off'] as const);

export const readPowerJob: Reader<PowerJob> = object({
  id: text,
  hardwareId: text,
  op: literal(powerOps),
  steps: array(powerStep, controlCommandBytesMax),
  state: literal(powerJobStates),
  stepIndex: count,
  attempt: count,
  maxAttempts: count,
  createdMs: count,
  updatedMs: count,
  finishedMs: optional(count),
  claimedBy: optional(text),
  claimExpiresMs: optional(count),
  notBeforeMs: optional(count),
  powerState: optional(powerState),
  message: optional(text),
});

export const readArtifact: Reader<Artifact> = object({
  name: text,
  sha256: text,
  bytes: count,
  createdMs: count,
  updatedMs: count,
  version: count,
});

const role = literal(['admin', 'operator', 'viewer']);
// Audit texts are bounded tighter than the payload: the trail keeps many of them.
const auditText = string(auditTextBytesMax);

export const readAuditTag: Reader<AuditTag> = object({
  user: auditText,
  role,
  address: auditText,
  method: auditText,
});

const readAuditError = object({ code: auditText, message: auditText });

/** The trailing field every command may carry (commands.ts Audited). */
const audited = { audit: optional(readAuditTag) } as const;

export const readAuditEntry: Reader<AuditEntry> = object({
  seq: count,
  stampMs: count,
  user: auditText,
  role,
  address: auditText,
  method: auditText,
  kind: auditText,
  target: auditText,
  error: optional(readAuditError),
});

const attempt = { workflowId: text, actionIndex: count, attempt: count, workerId: text } as const;

export const readControlCommand: Reader<ControlCommand> = variant<ControlCommand>({
  'hardware.put': object({
    type: literal(['hardware.put']),
    hardware: readHardwareInput,
    workerTokenSha256: optional(text),
    workerToken: optional(text),
    expectVersion: optional(count),
    ...audited,
  }),
  'hardware.delete': object({ type: literal(['hardware.delete']), id: text, ...audited }),
  'hardware.setAllowPXE': object({
    type: literal(['hardware.setAllowPXE']),
    id: text,
    allowPXE: boolean,
    ...audited,
  }),
  'hardware.token': object({
    type: literal(['hardware.token']),
    id: text,
    workerTokenSha256: text,
    ...audited,
  }),
  'hardware.lifecycle': object({
    type: literal(['hardware.lifecycle']),
    id: text,
    verb: literal(operatorVerbs),
    reason: text,
    now: optional(boolean),
    timeoutS: optional(safeInteger),
    ...audited,
  }),
  'hardware.label': object({
    type: literal(['hardware.label']),
    id: text,
    set: textMap,
    remove: texts,
    ...audited,
  }),
  'hardware.expire': object({ type: literal(['hardware.expire']), id: text, deadlineMs: count, ...audited }),
  'template.put': object({
    type: literal(['template.put']),
    name: text,
    source: text,
    expectVersion: optional(count),
    ...audited,
  }),
  'template.delete': object({ type: literal(['template.delete']), name: text, ...audited }),
  'workflow.create': object({
    type: literal(['workflow.create']),
    id: text,
    template: text,
    templateVersion: count,
    hardwareId: text,
    hardwareMap: textMap,
    spec: readRenderedTemplate,
    netboot: optional(boolean),
    ...audited,
  }),
  'workflow.allocate': object({
    type: literal(['workflow.allocate']),
    id: text,
    template: text,
    templateVersion: count,
    selector: text,
    hardwareMap: textMap,
    candidates: array(object({ hardwareId: text, spec: readRenderedTemplate }), allocationCandidatesMax),
    netboot: optional(boolean),
    alternateAttempts: optional(integer(1, alternateAttemptsMax)),
    race: optional(boolean),
    ...audited,
  }),
  'workflow.alternate': object({
    type: literal(['workflow.alternate']),
    id: text,
    finishedMs: count,
    candidates: array(object({ hardwareId: text, spec: readRenderedTemplate }), allocationCandidatesMax),
    ...audited,
  }),
  'attempt.start': object({ type: literal(['attempt.start']), ...attempt, ...audited }),
  'attempt.result': object({
    type: literal(['attempt.result']),
    ...attempt,
    success: boolean,
    exitStatus: safeInteger,
    message: text,
    outputTail: text,
    startNext: optional(boolean),
    ...audited,
  }),
  'attempt.lost': object({ type: literal(['attempt.lost']), ...attempt, message: text, ...audited }),
  'deadline.expire': object({ type: literal(['deadline.expire']), workflowId: text, ...audited }),
  'workflow.cancel': object({
    type: literal(['workflow.cancel']),
    id: text,
    message: optional(text),
    ...audited,
  }),
  'workflow.retry': object({ type: literal(['workflow.retry']), id: text, fromStart: boolean, ...audited }),
  'workflow.delete': object({ type: literal(['workflow.delete']), id: text, ...audited }),
  'token.put': object({
    type: literal(['token.put']),
    name: text,
    role: literal(['admin', 'operator', 'viewer']),
    sha256: text,
    ...audited,
  }),
  'credential.issue': object({
    type: literal(['credential.issue']),
    workerId: text,
    mac: text,
    ip: text,
    sha256: text,
    ttlS: safeInteger,
    claimKey: optional(text),
    ...audited,
  }),
  'credential.inventory': object({
    type: literal(['credential.inventory']),
    workerId: text,
    mac: text,
    ip: text,
    sha256: text,
    ttlS: safeInteger,
    claimKey: optional(text),
    workerTokenSha256: text,
    ...audited,
  }),
  'hardware.inventory': object({
    type: literal(['hardware.inventory']),
    id: text,
    credentialSha256: text,
    inventory: json(jsonDepthMax, controlCommandBytesMax),
    ...audited,
  }),
  'token.delete': object({ type: literal(['token.delete']), name: text, ...audited }),
  'lease.grant': object({
    type: literal(['lease.grant']),
    grants: array(object({ mac: text, ip: text, leaseTimeS: safeInteger }), leaseGrantsPerCommandMax),
    ...audited,
  }),
  'lease.release': object({ type: literal(['lease.release']), mac: text, ip: text, ...audited }),
  'lease.decline': object({
    type: literal(['lease.decline']),
    mac: text,
    ip: text,
    probationS: safeInteger,
    ...audited,
  }),
  'power.request': object({
    type: literal(['power.request']),
    jobId: text,
    hardwareId: text,
    op: literal(powerOps),
    steps: array(powerStep, controlCommandBytesMax),
    maxAttempts: safeInteger,
    ...audited,
  }),
  'power.claim': object({
    type: literal(['power.claim']),
    jobId: text,
    stepIndex: count,
    attempt: count,
    claimer: text,
    leaseMs: safeInteger,
    ...audited,
  }),
  'power.step': object({
    type: literal(['power.step']),
    jobId: text,
    stepIndex: count,
    attempt: count,
    claimer: text,
    ok: boolean,
    message: text,
    powerState: optional(powerState),
    ...audited,
  }),
  'artifact.put': object({
    type: literal(['artifact.put']),
    name: text,
    sha256: text,
    bytes: safeInteger,
    expectVersion: optional(count),
    ...audited,
  }),
  'artifact.delete': object({ type: literal(['artifact.delete']), name: text, ...audited }),
  'audit.record': object({
    type: literal(['audit.record']),
    kind: auditText,
    target: auditText,
    error: optional(readAuditError),
    ...audited,
  }),
  'audit.retention': object({
    type: literal(['audit.retention']),
    entries: safeInteger,
    days: safeInteger,
    ...audited,
  }),
  'cluster.version': object({ type: literal(['cluster.version']), version: count }),
  'workflow.retention': object({
    type: literal(['workflow.retention']),
    finishedMax: safeInteger,
    finishedDays: safeInteger,
    ...audited,
  }),
  'hardware.quarantinePolicy': object({
    type: literal(['hardware.quarantinePolicy']),
    failures: safeInteger,
    windowS: safeInteger,
    ...audited,
  }),
  'hardware.acceptRule': object({
    type: literal(['hardware.acceptRule']),
    selector: optional(text),
    ...audited,
  }),
  'workflow.gc': object({
    type: literal(['workflow.gc']),
    workflows: array(object({ id: text, finishedMs: count }), workflowGcBatchMax),
    ...audited,
  }),
  'member.drain': object({ type: literal(['member.drain']), id: text, drained: boolean, ...audited }),
  'member.apiAddr': object({
    type: literal(['member.apiAddr']),
    id: text,
    apiAddr: text,
    members: array(text, memberApiAddrsMax),
  }),
  'pool.create': object({
    type: literal(['pool.create']),
    name: text,
    selector: text,
    template: text,
    size: safeInteger,
    spares: safeInteger,
    spreadBy: optional(text),
    releaseTemplate: optional(text),
    image: optional(text),
    maxUnavailable: optional(safeInteger),
    onFailure: optional(literal(['retry', 'race'])),
    attempts: optional(safeInteger),
    ...audited,
  }),
  'pool.resume': object({ type: literal(['pool.resume']), name: text, ...audited }),
  'pool.taint': object({ type: literal(['pool.taint']), name: text, ...audited }),
  'pool.reserve': object({ type: literal(['pool.reserve']), pool: text, hardwareId: text, ...audited }),
  'pool.release': object({
    type: literal(['pool.release']),
    pool: text,
    hardwareId: text,
    why: literal(['surplus', 'taint', 'delete', 'failed']),
    release: optional(object({ id: text, templateVersion: count, spec: readRenderedTemplate })),
    ...audited,
  }),
  'pool.scale': object({ type: literal(['pool.scale']), name: text, size: safeInteger, ...audited }),
  'pool.delete': object({ type: literal(['pool.delete']), name: text, ...audited }),
  'pool.allocate': object({
    type: literal(['pool.allocate']),
    pool: text,
    id: text,
    templateVersion: count,
    hardwareMap: textMap,
    candidates: array(object({ hardwareId: text, spec: readRenderedTemplate }), allocationCandidatesMax),
    race: optional(onlyTrue),
    retry: optional(onlyTrue),
    ...audited,
  }),
});

const outcome = {
  workflowId: text,
  actionIndex: count,
  attempt: count,
  actionState,
  workflowState,
  deadlineMs: optional(count),
  notBeforeMs: optional(count),
  started: optional(object({ actionIndex: count, attempt: count, deadlineMs: optional(count) })),
} as const;

export const readControlResult: Reader<ControlResult> = variant<ControlResult>({
  error: object({ type: literal(['error']), code: literal(controlErrorCodes), message: text }),
  hardware: object({ type: literal(['hardware']), hardware: readHardware }),
  template: object({ type: literal(['template']), template: readTemplate }),
  workflow: object({ type: literal(['workflow']), workflow: readWorkflow }),
  attempt: object({ type: literal(['attempt']), ...outcome }),
  duplicate: object({ type: literal(['duplicate']), ...outcome }),
  token: object({ type: literal(['token']), token: readOperatorToken }),
  credential: object({ type: literal(['credential']), workflowId: text, expiresMs: count }),
  grants: object({
    type: literal(['grants']),
    outcomes: array(readGrantOutcome, leaseGrantsPerCommandMax),
  }),
  lease: object({ type: literal(['lease']), lease: readLease }),
  deleted: object({ type: literal(['deleted']) }),
  powerJob: object({ type: literal(['powerJob']), job: readPowerJob }),
  powerJobDuplicate: object({ type: literal(['powerJobDuplicate']), job: readPowerJob }),
  artifact: object({ type: literal(['artifact']), artifact: readArtifact }),
  recorded: object({ type: literal(['recorded']) }),
  auditRetention: object({
    type: literal(['auditRetention']),
    retention: object({ entries: count, days: count }),
  }),
  clusterVersion: object({ type: literal(['clusterVersion']), version: count }),
  workflowRetention: object({
    type: literal(['workflowRetention']),
    retention: object({ finishedMax: count, finishedDays: count }),
  }),
  quarantinePolicy: object({
    type: literal(['quarantinePolicy']),
    policy: object({ failures: count, windowS: count }),
  }),
  acceptRule: object({ type: literal(['acceptRule']), selector: optional(text) }),
  collected: object({ type: literal(['collected']), ids: array(text, workflowGcBatchMax) }),
  drainedMembers: object({ type: literal(['drainedMembers']), ids: array(text, drainedMembersMax) }),
  memberApiAddrs: object({
    type: literal(['memberApiAddrs']),
    members: array(object({ id: text, apiAddr: text }), memberApiAddrsMax),
  }),
  pool: object({ type: literal(['pool']), pool: readPool }),
});

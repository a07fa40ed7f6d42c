// The JSON schema of the control plane's records: one reader per record (see shape.ts); the
// commands' and results' readers are command-schema.ts. Field order here is the canonical order
// of the encoding, so reordering fields is a format change, as is any change to what a reader
// accepts.
import { sha256HexOf } from '../digest.js';
import {
  alternateAttemptsMax,
  controlCommandBytesMax,
  poolSizeMax,
  quarantineFailuresMax,
} from '../../model/limits.js';
import type { AuditEntry, AuditTag } from './audit-log.js';
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
import { powerJobStates, powerOps, builtinActions } from '../../model/records.js';
import type { MachineEvent, MachineLifecycle } from '../../model/machine-lifecycle.js';
import type { Inventory } from '../../model/inventory.js';
import { InventoryError, parseInventory } from '../../model/inventory.js';
import { lifecycleTriggers, machineStates } from '../../model/machine-lifecycle.js';
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
  type Reader,
} from './shape.js';
import {
  actionState,
  auditText,
  jsonDepthMax,
  onlyTrue,
  powerState,
  powerStep,
  text,
  textMap,
  texts,
  workflowState,
} from './schema-fields.js';

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

export const readGrantOutcome: Reader<GrantOutcome> = (value, path) => {
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

export const readAuditTag: Reader<AuditTag> = object({
  user: auditText,
  role,
  address: auditText,
  method: auditText,
});

export const readAuditError = object({ code: auditText, message: auditText });

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

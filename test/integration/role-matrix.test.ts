// Goal: every RPC a node answers on its API port, against every kind of caller, is allowed or
// refused as the code intends, and a refused call changes nothing. The table below gives each
// method the least role it needs (viewer < operator < admin), or says it is public (health and
// server reflection, docs/decisions/0025-server-reflection.md), a
// worker's (Worker/Connect, with its machine's worker token) or for peers only (Internal and
// Raft: served on the raft address, not on the API port at all). It must name every method of
// every generated service definition, so a new RPC without a row fails here; a request shape that
// needs another role than its method's plain call (Status with the state digest) is a variant
// row. Callers: no token, an invalid token, a machine's worker credential, and named viewer,
// operator and admin tokens.
// Without a valid operator token a call is UNAUTHENTICATED and the commit index does not move;
// below its role it is PERMISSION_DENIED, naming the role the table gives, and the only write is
// the audit record of each refusal (docs/decisions/0018-audit-trail.md); with its role it is
// served. The domain state read back through the API is the same before and after the refusals.
// Method: one real `slipway server` with tokens required and a failure limit high enough for the
// matrix; raw grpc-js calls by path through the generated definitions, each with a deadline.
// Every request is one an admin's call carries out, on fixtures made in `before` (one per caller
// where the call consumes its target; a refused caller aims at the admin's), so a refusal is due
// to the role alone. The tests run in order: the refusals first, then the allowed calls, which
// consume the fixtures.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Client, credentials, Metadata, status } from '@grpc/grpc-js';
import type { CallOptions, ServiceError, StatusObject } from '@grpc/grpc-js';
import { AuditListRequest, AuditService } from '../../src/gen/audit.js';
import {
  ArtifactListRequest,
  ControlService,
  HardwareListRequest,
  LeaseListRequest,
  PowerJobListRequest,
  TemplateListRequest,
  TokenListRequest,
  WorkflowListRequest,
} from '../../src/gen/control.js';
import type { ArtifactAddRequest } from '../../src/gen/control.js';
import { HealthService } from '../../src/gen/health.js';
import { InternalService } from '../../src/gen/internal.js';
import { KvService } from '../../src/gen/kv.js';
import { MaintenanceService } from '../../src/gen/maintenance.js';
import { RaftService } from '../../src/gen/raft.js';
import { ServerReflectionService } from '../../src/gen/reflection.js';
import type { ServerReflectionRequest, ServerReflectionResponse } from '../../src/gen/reflection.js';
import { ServerReflectionService as ServerReflectionV1AlphaService } from '../../src/gen/reflection_v1alpha.js';
import { ActionResult, Hello, WorkerService } from '../../src/gen/worker.js';
import { AggregatedDiscoveryServiceService as XdsService } from '../../src/gen/xds.js';
import type { DiscoveryRequest, DiscoveryResponse } from '../../src/gen/xds.js';
import type { ConnectRequest, ConnectResponse } from '../../src/gen/worker.js';
import { nextPort, ProcessCluster, type ProcNode } from '../support/process-cluster.js';
import { waitForStill } from '../support/wait.js';
import { stateVersionOfThisBuild } from '../../src/state/versions.js';

const C = ControlService;
const K = KvService;
const A = AuditService;

const bootstrapToken = 'admin-token-for-the-role-matrix-test';
const callDeadlineMs = 15_000;

const roles = ['viewer', 'operator', 'admin'] as const;
type Role = (typeof roles)[number];
const identities = ['none', 'invalid', 'worker', ...roles] as const;
type Who = (typeof identities)[number];
/** At least this role; anyone (health); a machine's worker; or only peers, on the raft address. */
type Need = Role | 'public' | 'worker' | 'peer';

const roleRank: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

/** How the node answered one call. */
interface Outcome {
  readonly code: status;
  readonly details: string;
}

/** Sends one call with `md`; `owner` is the caller whose fixtures it acts on. */
type Send = (md: Metadata, owner: Who) => Promise<Outcome>;

interface Row {
  /** The method's path, as its generated definition names it. */
  readonly path: string;
  readonly need: Need;
  /** Tells two rows of one method apart (another request shape). */
  readonly variant?: string;
  readonly send: Send;
}

/** A generated method definition, as grpc-js needs it to make the call. */
interface Method<Req, Res> {
  readonly path: string;
  readonly requestSerialize: (value: Req) => Buffer;
  readonly responseDeserialize: (value: Buffer) => Res;
}

let cluster: ProcessCluster;
let node: ProcNode;
/** One channel to the node's API port, for every service. */
let rpc: Client;

/** What `before` made: tokens, and the ids the state chose. */
const fx = {
  tokens: new Map<Role, string>(),
  /** h1's worker token, minted once (minting again retires it). */
  workerToken: '',
  /** The token TokenDelete deletes as admin; no call lists tokens, so the snapshot tries it. */
  doomedToken: '',
  workflows: new Map<string, string>(),
  powerJob: '',
};
/** Raft addresses of learners that never run (unused loopback ports). */
const learnerAddrs = new Map<string, string>();

function workflowId(name: string): string {
  const id = fx.workflows.get(name);
  assert.ok(id !== undefined, `no workflow fixture ${name}`);
  return id;
}

function learnerAddr(id: string): string {
  let addr = learnerAddrs.get(id);
  if (addr === undefined) {
    addr = `127.0.0.1:${nextPort()}`;
    learnerAddrs.set(id, addr);
  }
  return addr;
}

function expected(need: Need, who: Who): status {
  switch (need) {
    case 'public':
      return status.OK;
    case 'peer':
      return status.UNIMPLEMENTED;
    case 'worker':
      return who === 'worker' ? status.OK : status.UNAUTHENTICATED;
    default:
      if (who === 'none' || who === 'invalid' || who === 'worker') return status.UNAUTHENTICATED;
      return roleRank[who] >= roleRank[need] ? status.OK : status.PERMISSION_DENIED;
  }
}

/** A caller with the role acts on its own fixtures; a refused one aims at the admin's. */
function ownerOf(need: Need, who: Who): Who {
  return expected(need, who) === status.OK ? who : 'admin';
}

function metadataOf(who: Who): Metadata {
  const md = new Metadata();
  switch (who) {
    case 'none':
      break;
    case 'invalid':
      md.set('authorization', 'Bearer not-a-token-of-this-cluster-at-all');
      break;
    case 'worker':
      md.set('x-worker-id', 'h1');
      md.set('authorization', `Bearer ${fx.workerToken}`);
      break;
    default:
      md.set('authorization', `Bearer ${fx.tokens.get(who) ?? ''}`);
  }
  return md;
}

function bearer(token: string): Metadata {
  const md = new Metadata();
  md.set('authorization', `Bearer ${token}`);
  return md;
}

const callOptions = (): CallOptions => ({ deadline: Date.now() + callDeadlineMs });

const served: Outcome = { code: status.OK, details: '' };

function outcomeOf(err: ServiceError | null): Outcome {
  return err === null ? served : { code: err.code, details: err.details };
}

function fromStatus(s: StatusObject): Outcome {
  return { code: s.code, details: s.details };
}

/** `Control/HardwareCreate`: how the audit trail and the messages below name a method. */
function methodName(path: string): string {
  return path.slice(path.lastIndexOf('.') + 1);
}

function label(row: Row): string {
  return row.variant === undefined ? methodName(row.path) : `${methodName(row.path)} (${row.variant})`;
}

/** A unary call as the bootstrap admin (or `md`) for fixtures and snapshots; rejects on error. */
function call<Req, Res>(
  def: Method<Req, Res>,
  req: Req,
  md: Metadata = bearer(bootstrapToken),
): Promise<Res> {
  return new Promise((resolve, reject) => {
    rpc.makeUnaryRequest(
      def.path,
      def.requestSerialize,
      def.responseDeserialize,
      req,
      md,
      callOptions(),
      (err, res) => {
        if (err !== null) reject(err);
        else if (res === undefined) reject(new Error(`${def.path}: no answer`));
        else resolve(res);
      },
    );
  });
}

function unary<Req, Res>(def: Method<Req, Res>, request: (owner: Who) => Req): Pick<Row, 'path' | 'send'> {
  return {
    path: def.path,
    send: (md, owner) =>
      new Promise((resolve) => {
        rpc.makeUnaryRequest(
          def.path,
          def.requestSerialize,
          def.responseDeserialize,
          request(owner),
          md,
          callOptions(),
          (err) => resolve(outcomeOf(err)),
        );
      }),
  };
}

/** A server stream: its status once it ends, or served at its first message with `untilFirst`. */
function serverStream<Req, Res>(
  def: Method<Req, Res>,
  request: (owner: Who) => Req,
  untilFirst = false,
): Pick<Row, 'path' | 'send'> {
  return {
    path: def.path,
    send: (md, owner) =>
      new Promise((resolve) => {
        const stream = rpc.makeServerStreamRequest(
          def.path,
          def.requestSerialize,
          def.responseDeserialize,
          request(owner),
          md,
          callOptions(),
        );
        stream.on('data', () => {
          if (!untilFirst) return;
          resolve(served);
          stream.cancel();
        });
        // The status event carries the same code.
        stream.on('error', () => undefined);
        stream.on('status', (s: StatusObject) => resolve(fromStatus(s)));
      }),
  };
}

function clientStream<Req, Res>(
  def: Method<Req, Res>,
  messages: (owner: Who) => readonly Req[],
): Pick<Row, 'path' | 'send'> {
  return {
    path: def.path,
    send: (md, owner) => upload(def, messages(owner), md),
  };
}

function upload<Req, Res>(def: Method<Req, Res>, messages: readonly Req[], md: Metadata): Promise<Outcome> {
  return new Promise((resolve) => {
    const stream = rpc.makeClientStreamRequest(
      def.path,
      def.requestSerialize,
      def.responseDeserialize,
      md,
      callOptions(),
      (err) => resolve(outcomeOf(err)),
    );
    for (const m of messages) stream.write(m);
    stream.end();
  });
}

/** An xDS stream: served once it answers a Cluster request (docs/decisions/0024-xds.md). */
function xdsStream(def: Method<DiscoveryRequest, DiscoveryResponse>): Pick<Row, 'path' | 'send'> {
  return {
    path: def.path,
    send: (md) =>
      new Promise((resolve) => {
        const stream = rpc.makeBidiStreamRequest(
          def.path,
          def.requestSerialize,
          def.responseDeserialize,
          md,
          callOptions(),
        );
        stream.on('data', () => {
          resolve(served);
          stream.cancel();
        });
        stream.on('error', () => undefined);
        stream.on('status', (s: StatusObject) => resolve(fromStatus(s)));
        stream.write({
          versionInfo: '',
          resourceNames: ['slipway'],
          typeUrl: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
          responseNonce: '',
        });
      }),
  };
}

/**
 * A worker stream as machine h1. A served stream answers a result for a workflow that does not
 * exist with `refused`, screened without a Raft write: served, seen without changing anything.
 */
function workerStream(def: Method<ConnectRequest, ConnectResponse>): Pick<Row, 'path' | 'send'> {
  return {
    path: def.path,
    send: (md) =>
      new Promise((resolve) => {
        const asWorker = md.clone();
        if (asWorker.get('x-worker-id').length === 0) asWorker.set('x-worker-id', 'h1');
        const stream = rpc.makeBidiStreamRequest(
          def.path,
          def.requestSerialize,
          def.responseDeserialize,
          asWorker,
          callOptions(),
        );
        stream.on('data', (m: ConnectResponse) => {
          if (m.kind?.$case !== 'refused') return;
          resolve(served);
          stream.cancel();
        });
        stream.on('error', () => undefined);
        stream.on('status', (s: StatusObject) => resolve(fromStatus(s)));
        stream.write({ kind: { $case: 'hello', value: Hello.fromPartial({ agentVersion: 'role-matrix' }) } });
        const attempt = { workflowId: 'no-such-workflow', actionIndex: 0, attempt: 1 };
        stream.write({ kind: { $case: 'result', value: ActionResult.fromPartial({ attempt }) } });
      }),
  };
}

/** A reflection stream: one question, answered by the services the node lists. */
function reflectionStream(
  def: Method<ServerReflectionRequest, ServerReflectionResponse>,
): Pick<Row, 'path' | 'send'> {
  return {
    path: def.path,
    send: (md) =>
      new Promise((resolve) => {
        const stream = rpc.makeBidiStreamRequest(
          def.path,
          def.requestSerialize,
          def.responseDeserialize,
          md,
          callOptions(),
        );
        stream.on('data', (m: ServerReflectionResponse) => {
          if (m.messageResponse?.$case !== 'listServicesResponse') return;
          resolve(served);
          stream.cancel();
        });
        stream.on('error', () => undefined);
        stream.on('status', (s: StatusObject) => resolve(fromStatus(s)));
        stream.write({ host: '', messageRequest: { $case: 'listServices', value: '*' } });
        stream.end();
      }),
  };
}

const raw = (b: Buffer): Buffer => b;

/** A node-to-node method, called on the API port with an empty message of its own kind. */
function peerOnly(def: {
  readonly path: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
}): Pick<Row, 'path' | 'send'> {
  return {
    path: def.path,
    send: (md) =>
      new Promise((resolve) => {
        const empty = Buffer.alloc(0);
        if (!def.responseStream) {
          if (!def.requestStream) {
            rpc.makeUnaryRequest(def.path, raw, raw, empty, md, callOptions(), (err) =>
              resolve(outcomeOf(err)),
            );
            return;
          }
          const s = rpc.makeClientStreamRequest(def.path, raw, raw, md, callOptions(), (err) =>
            resolve(outcomeOf(err)),
          );
          s.end();
          return;
        }
        const settle = (s: NodeJS.EventEmitter): void => {
          s.on('data', () => undefined);
          s.on('error', () => undefined);
          s.on('status', (st: StatusObject) => resolve(fromStatus(st)));
        };
        if (def.requestStream) {
          const s = rpc.makeBidiStreamRequest(def.path, raw, raw, md, callOptions());
          settle(s);
          s.end();
        } else settle(rpc.makeServerStreamRequest(def.path, raw, raw, empty, md, callOptions()));
      }),
  };
}

/** A machine with a MAC of its own (derived from the id). */
function hardwareDoc(id: string, extra: Record<string, unknown> = {}): string {
  const b = createHash('sha256').update(id).digest();
  const mac = ['02', ...[0, 1, 2, 3, 4].map((i) => (b[i] ?? 0).toString(16).padStart(2, '0'))].join(':');
  return JSON.stringify({ id, interfaces: [{ mac }], ...extra });
}

function templateYaml(name: string): string {
  return `version: "0.1"
name: ${name}
global_timeout: 600
tasks:
  - name: provision
    worker: "{{ hardware.id }}"
    actions:
      - name: one
        command: ["true"]
        timeout: 600
`;
}

function artifactUpload(name: string): ArtifactAddRequest[] {
  const data = Buffer.from(`the content of ${name}\n`);
  const sha256 = createHash('sha256').update(data).digest('hex');
  return [{ name, bytes: data.length, sha256, data, expectVersion: 0 }];
}

// The matrix. Where a caller's call consumes its target (a delete, a cancel), each caller with the
// role has its own fixture, named after it; the others aim at the admin's.
const matrix: readonly Row[] = [
  // Control
  {
    need: 'operator',
    ...unary(C.hardwareCreate, (o) => ({ documentJson: hardwareDoc(`new-${o}`), replace: false })),
  },
  { need: 'viewer', ...unary(C.hardwareGet, () => ({ id: 'h1', local: false })) },
  { need: 'viewer', ...unary(C.hardwareList, () => HardwareListRequest.fromPartial({})) },
  { need: 'operator', ...unary(C.hardwareDelete, (o) => ({ id: `del-${o}` })) },
  // The machine lifecycle (docs/decisions/0028): a drain moves each caller's own machine once.
  {
    need: 'operator',
    ...unary(C.hardwareTransition, (o) => ({
      id: `lc-${o}`,
      verb: 'drain',
      reason: 'matrix',
      now: false,
      timeoutS: 0,
    })),
  },
  {
    need: 'operator',
    ...unary(C.hardwareLabel, (o) => ({ id: `lc-${o}`, set: { matrix: 'yes' }, remove: [] })),
  },
  {
    need: 'viewer',
    ...serverStream(C.hardwareHistory, () => ({ id: 'h1', fromSeq: 0, follow: false })),
  },
  // Selection (docs/decisions/0030): explain reads the fleet.
  { need: 'viewer', ...unary(C.hardwareExplain, () => ({ selector: 'rack=a', local: false })) },
  // A read of a secret: who gets a machine's worker token can act as the machine.
  { need: 'admin', ...unary(C.hardwareToken, (o) => ({ id: `tok-${o}` })) },
  {
    need: 'operator',
    ...unary(C.templateCreate, (o) => ({ source: templateYaml(`new-${o}`), replace: false })),
  },
  { need: 'viewer', ...unary(C.templateGet, () => ({ name: 't1', local: false })) },
  { need: 'viewer', ...unary(C.templateList, () => TemplateListRequest.fromPartial({})) },
  { need: 'operator', ...unary(C.templateDelete, (o) => ({ name: `del-${o}` })) },
  // Pools (docs/decisions/0035, 0036): operators change them, as templates; anyone reads them.
  {
    need: 'operator',
    ...unary(C.poolCreate, (o) => ({
      name: `new-${o}`,
      selector: 'rack=a',
      template: 't1',
      size: 0,
      spares: 0,
      spreadBy: '',
      releaseTemplate: '',
      image: '',
      onFailure: '',
    })),
  },
  { need: 'viewer', ...unary(C.poolGet, () => ({ name: 'p1', local: false })) },
  { need: 'viewer', ...unary(C.poolList, () => ({ local: false })) },
  { need: 'operator', ...unary(C.poolScale, () => ({ name: 'p1', size: 0 })) },
  { need: 'operator', ...unary(C.poolTaint, () => ({ name: 'p1' })) },
  { need: 'operator', ...unary(C.poolResume, () => ({ name: 'p1' })) },
  { need: 'operator', ...unary(C.poolDelete, (o) => ({ name: `del-${o}` })) },
  {
    need: 'operator',
    // One workflow per machine (invariant 9): each caller's create has a free machine of its own.
    ...unary(C.workflowCreate, (o) => ({
      template: 't1',
      hardwareId: `new-wf-${o}`,
      hardwareMap: {},
      netboot: false,
    })),
  },
  { need: 'viewer', ...unary(C.workflowGet, () => ({ id: workflowId('w1'), local: false })) },
  { need: 'viewer', ...unary(C.workflowList, () => WorkflowListRequest.fromPartial({})) },
  { need: 'operator', ...unary(C.workflowCancel, (o) => ({ id: workflowId(`cancel-${o}`) })) },
  {
    need: 'operator',
    ...unary(C.workflowRetry, (o) => ({ id: workflowId(`retry-${o}`), fromStart: false })),
  },
  { need: 'operator', ...unary(C.workflowDelete, (o) => ({ id: workflowId(`delete-${o}`) })) },
  // How long finished workflows stay: set and shown by admins only, as the audit retention.
  // The values set are the defaults, so the state the other rows see keeps its workflows (the
  // default's grace ends, but no fixture is near its limits).
  {
    need: 'admin',
    ...unary(C.workflowRetention, () => ({ finishedMax: 10_000, finishedDays: 30, show: false })),
  },
  { need: 'admin', variant: 'show', ...unary(C.workflowRetention, () => ({ show: true })) },
  // When repeated failures quarantine a machine: the same, set to the default (2 in 24 h).
  {
    need: 'admin',
    ...unary(C.hardwareQuarantinePolicy, () => ({ failures: 2, windowS: 86_400, show: false })),
  },
  { need: 'admin', variant: 'show', ...unary(C.hardwareQuarantinePolicy, () => ({ show: true })) },
  // The auto-accept rule (0037): set (to a rule no fixture's machine meets), shown and cleared.
  {
    need: 'admin',
    ...unary(C.hardwareAcceptRule, () => ({ selector: 'memory>=64Ti', clear: false })),
  },
  { need: 'admin', variant: 'show', ...unary(C.hardwareAcceptRule, () => ({ clear: false })) },
  { need: 'admin', variant: 'clear', ...unary(C.hardwareAcceptRule, () => ({ clear: true })) },
  {
    need: 'viewer',
    ...serverStream(C.workflowEvents, () => ({ workflowId: workflowId('w1'), fromSeq: 0, follow: false })),
  },
  { need: 'admin', ...unary(C.tokenCreate, (o) => ({ name: `new-${o}`, role: 'viewer' })) },
  { need: 'admin', ...unary(C.tokenDelete, (o) => ({ name: `del-${o}` })) },
  { need: 'admin', ...unary(C.tokenList, () => TokenListRequest.fromPartial({})) },
  { need: 'viewer', ...unary(C.leaseList, () => LeaseListRequest.fromPartial({})) },
  { need: 'operator', ...unary(C.powerChange, () => ({ hardwareId: 'pw', op: 'on', waitMs: 1 })) },
  // Makes a power job (0015: a viewer may ask for a machine's power state); audited.
  { need: 'viewer', ...unary(C.powerStatus, () => ({ hardwareId: 'pw', waitMs: 1 })) },
  { need: 'viewer', ...unary(C.powerJobGet, () => ({ id: fx.powerJob, local: false })) },
  { need: 'viewer', ...unary(C.powerJobList, () => PowerJobListRequest.fromPartial({})) },
  { need: 'operator', ...clientStream(C.artifactAdd, (o) => artifactUpload(`new-${o}`)) },
  { need: 'viewer', ...unary(C.artifactList, () => ArtifactListRequest.fromPartial({})) },
  { need: 'operator', ...unary(C.artifactDelete, (o) => ({ name: `del-${o}` })) },
  // Kv
  { need: 'operator', ...unary(K.registerClient, () => ({})) },
  { need: 'operator', ...unary(K.put, (o) => ({ key: `new-${o}`, value: Buffer.from('v') })) },
  { need: 'viewer', ...unary(K.get, () => ({ key: 'k1', local: false })) },
  { need: 'operator', ...unary(K.delete, (o) => ({ key: `del-${o}` })) },
  {
    need: 'operator',
    ...unary(K.compareAndSet, (o) => ({ key: `cas-${o}`, expectedRevision: 0, value: Buffer.from('v') })),
  },
  { need: 'viewer', ...unary(K.range, () => ({ prefix: '', limit: 0, local: false })) },
  { need: 'viewer', ...unary(K.status, () => ({})) },
  // The state digest encodes the whole state on the node: an operator's question, not a viewer's.
  { need: 'operator', variant: 'digest', ...unary(K.status, () => ({ digest: true })) },
  // Learners at ports nobody listens on: they never vote, so the one-node quorum stands.
  {
    need: 'admin',
    ...unary(K.memberAdd, (o) => ({
      id: `new-${o}`,
      raftAddr: learnerAddr(`new-${o}`),
      apiAddr: '',
      learner: true,
    })),
  },
  { need: 'admin', ...unary(K.memberRemove, (o) => ({ id: `del-${o}` })) },
  { need: 'viewer', ...unary(K.memberList, () => ({ local: false })) },
  // To itself: the single node stays the leader (a no-op the call still audits).
  { need: 'admin', ...unary(K.leaderTransfer, () => ({ to: 'n1' })) },
  // Undrain the single node, which is not drained: a no-op the call still audits (a drain would
  // turn away the worker rows after it).
  { need: 'admin', ...unary(C.nodeDrain, () => ({ id: 'n1', drained: false })) },
  // Audit: the trail names every user and address.
  { need: 'admin', ...unary(A.auditList, () => AuditListRequest.fromPartial({ limit: 10 })) },
  { need: 'admin', ...unary(A.auditRetention, () => ({ entries: 10_000, days: 0, show: false })) },
  {
    need: 'admin',
    variant: 'show',
    ...unary(A.auditRetention, () => ({ entries: 0, days: 0, show: true })),
  },
  // Maintenance: a backup holds every record and token digest.
  { need: 'admin', ...serverStream(MaintenanceService.snapshotSave, () => ({})) },
  // Worker
  { need: 'worker', ...workerStream(WorkerService.connect) },
  // Health: for balancers, without a token.
  { need: 'public', ...unary(HealthService.check, () => ({ service: '' })) },
  { need: 'public', ...serverStream(HealthService.watch, () => ({ service: '' }), true) },
  // Server reflection: the API's public contract, for operators' gRPC tools, without a token.
  { need: 'public', ...reflectionStream(ServerReflectionService.serverReflectionInfo) },
  {
    need: 'public',
    variant: 'v1alpha',
    ...reflectionStream(ServerReflectionV1AlphaService.serverReflectionInfo),
  },
  // xDS: for Envoy and proxyless gRPC clients, which cannot send a token (0024).
  { need: 'public', ...xdsStream(XdsService.streamAggregatedResources) },
  // Node to node: on the raft address (mutual TLS), never on the API port.
  { need: 'peer', ...peerOnly(InternalService.propose) },
  { need: 'peer', ...peerOnly(InternalService.proposeBatch) },
  { need: 'peer', ...peerOnly(InternalService.proposeStream) },
  { need: 'peer', ...peerOnly(InternalService.artifactRead) },
  { need: 'peer', ...peerOnly(RaftService.stream) },
  { need: 'peer', ...peerOnly(RaftService.installSnapshot) },
];

const services: readonly Readonly<Record<string, { readonly path: string }>>[] = [
  ControlService,
  KvService,
  AuditService,
  MaintenanceService,
  WorkerService,
  HealthService,
  ServerReflectionService,
  ServerReflectionV1AlphaService,
  XdsService,
  InternalService,
  RaftService,
];

async function commitIndex(): Promise<number> {
  return (await call(K.status, {})).commit;
}

/** The commit index once nothing has been written for 300 ms (bounded). */
async function quietCommitIndex(): Promise<number> {
  return waitForStill('the commit index', commitIndex, 300, 15_000, 50);
}

async function lastAuditSeq(): Promise<number> {
  return (await call(A.auditList, AuditListRequest.fromPartial({ limit: 1 }))).entries[0]?.seq ?? 0;
}

async function authenticates(token: string): Promise<boolean> {
  return call(K.status, {}, bearer(token)).then(
    () => true,
    () => false,
  );
}

/** Everything a call could change, read back through the API (versions and stamps included). */
async function domainState(): Promise<Record<string, unknown>> {
  const page = { limit: 1000 };
  return {
    hardware: (await call(C.hardwareList, HardwareListRequest.fromPartial(page))).hardwareJson,
    templates: (await call(C.templateList, TemplateListRequest.fromPartial(page))).templates,
    workflows: (await call(C.workflowList, WorkflowListRequest.fromPartial(page))).workflows,
    powerJobs: (await call(C.powerJobList, PowerJobListRequest.fromPartial(page))).jobs,
    artifacts: (await call(C.artifactList, ArtifactListRequest.fromPartial(page))).artifacts,
    leases: (await call(C.leaseList, LeaseListRequest.fromPartial(page))).leaseJson,
    kv: (await call(K.range, { prefix: '', limit: 0, local: false })).kvs,
    members: (await call(K.memberList, { local: false })).members,
    retention: await call(A.auditRetention, { entries: 0, days: 0, show: true }),
    workflowRetention: await call(C.workflowRetention, { show: true }),
    // No call lists operator tokens: the one TokenDelete aims at must still work.
    doomedTokenWorks: await authenticates(fx.doomedToken),
  };
}

/** Sends every (row, caller) pair whose expected answer is one of `codes`; returns the misses. */
async function sendAll(
  codes: readonly status[],
  check: (row: Row, who: Who, got: Outcome) => string | undefined = () => undefined,
): Promise<{ sent: number; wrong: string[] }> {
  const wrong: string[] = [];
  let sent = 0;
  for (const row of matrix) {
    for (const who of identities) {
      const want = expected(row.need, who);
      if (!codes.includes(want)) continue;
      sent++;
      const got = await row.send(metadataOf(who), ownerOf(row.need, who));
      if (got.code !== want) {
        wrong.push(`${label(row)} as ${who}: ${status[got.code]} (${got.details}), want ${status[want]}`);
        continue;
      }
      const miss = check(row, who, got);
      if (miss !== undefined) wrong.push(`${label(row)} as ${who}: ${miss}`);
    }
  }
  return { sent, wrong };
}

before(async () => {
  cluster = new ProcessCluster(1, ['--auth-failures-max', '100000']);
  cluster.requireToken(bootstrapToken);
  cluster.startAll();
  node = await cluster.waitForLeader();
  rpc = new Client(node.apiAddr, credentials.createInsecure());
  // WorkflowRetention needs state version 2 and the lifecycle 3; the leader raises it within seconds.
  await cluster.waitForClusterVersion(node, stateVersionOfThisBuild);
  for (const role of roles) {
    fx.tokens.set(role, (await call(C.tokenCreate, { name: `matrix-${role}`, role })).token);
  }
  fx.doomedToken = (await call(C.tokenCreate, { name: 'del-admin', role: 'viewer' })).token;
  for (const name of ['t1', 'del-operator', 'del-admin']) {
    await call(C.templateCreate, { source: templateYaml(name), replace: false });
  }
  for (const name of ['p1', 'del-operator', 'del-admin']) {
    const pool = { selector: 'rack=a', template: 't1', size: 0, spares: 0 };
    await call(C.poolCreate, { name, ...pool, spreadBy: '', releaseTemplate: '', image: '', onFailure: '' });
  }
  // h1 is the worker's machine; each workflow has a machine of its own (wf-NAME; no worker ever
  // serves them, so they stay as made); pw has a BMC no packet reaches, so its power jobs fail
  // within seconds.
  const pending = ['w1', 'cancel-operator', 'cancel-admin'];
  const cancelled = ['retry-operator', 'retry-admin', 'delete-operator', 'delete-admin'];
  const workflowMachines = [...pending, ...cancelled].map((name) => `wf-${name}`);
  const fresh = ['new-wf-operator', 'new-wf-admin', 'lc-operator', 'lc-admin'];
  for (const id of ['h1', 'del-operator', 'del-admin', 'tok-admin', ...workflowMachines, ...fresh]) {
    await call(C.hardwareCreate, { documentJson: hardwareDoc(id), replace: false });
  }
  const bmc = { address: 'ipmi://255.255.255.255:623', username: 'matrix', password: 'matrix-bmc' };
  await call(C.hardwareCreate, { documentJson: hardwareDoc('pw', { bmc }), replace: false });
  fx.workerToken = (await call(C.hardwareToken, { id: 'h1' })).token;
  for (const name of [...pending, ...cancelled]) {
    const req = { template: 't1', hardwareId: `wf-${name}`, hardwareMap: {}, netboot: false };
    const wf = (await call(C.workflowCreate, req)).workflow;
    assert.ok(wf !== undefined);
    fx.workflows.set(name, wf.id);
  }
  for (const name of cancelled) await call(C.workflowCancel, { id: workflowId(name) });
  for (const key of ['k1', 'del-operator', 'del-admin']) await call(K.put, { key, value: Buffer.from(key) });
  for (const name of ['a1', 'del-operator', 'del-admin']) {
    const added = await upload(C.artifactAdd, artifactUpload(name), bearer(bootstrapToken));
    assert.equal(added.code, status.OK, added.details);
  }
  const job = await call(C.powerStatus, { hardwareId: 'pw', waitMs: 30_000 });
  assert.ok(job.finished && job.job !== undefined, `the fixture power job finished: ${JSON.stringify(job)}`);
  fx.powerJob = job.job.id;
  await call(K.memberAdd, {
    id: 'del-admin',
    raftAddr: learnerAddr('del-admin'),
    apiAddr: '',
    learner: true,
  });
});

after(async () => {
  rpc?.close();
  await cluster?.destroy();
});

describe('role matrix', () => {
  test('the table names every method of every service, each with one need', (t) => {
    const defined = services.flatMap((s) => Object.values(s).map((m) => m.path)).sort();
    const tabled = [...new Set(matrix.map((r) => r.path))].sort();
    assert.deepEqual(tabled, defined, 'a method without a row, or a row without a method');
    // One need per request shape: rows of one method that need different roles are variants.
    for (const path of tabled) {
      const rows = matrix.filter((r) => r.path === path);
      for (const variant of new Set(rows.map((r) => r.variant))) {
        const needs = new Set(rows.filter((r) => r.variant === variant).map((r) => r.need));
        assert.equal(needs.size, 1, `${label(rows.find((r) => r.variant === variant)!)} has different needs`);
      }
    }
    const needs: readonly Need[] = ['public', ...roles, 'worker', 'peer'];
    for (const need of needs) {
      const names = matrix.filter((r) => r.need === need).map(label);
      t.diagnostic(`${need} (${names.length}): ${names.join(', ')}`);
    }
  });

  test('without a valid operator credential a call is refused, and nothing is written', async (t) => {
    const state = await domainState();
    const commit = await quietCommitIndex();
    const { sent, wrong } = await sendAll([status.UNAUTHENTICATED, status.UNIMPLEMENTED]);
    assert.deepEqual(wrong, []);
    t.diagnostic(`${sent} calls refused (UNAUTHENTICATED, or UNIMPLEMENTED for peer methods)`);
    assert.equal(await commitIndex(), commit, 'an unauthenticated call reached the log');
    assert.deepEqual(await domainState(), state);
  });

  test('below its role a caller is refused; the only write is the audit record of the refusal', async (t) => {
    const state = await domainState();
    const commit = await quietCommitIndex();
    const seq = await lastAuditSeq();
    const records: string[] = [];
    const { sent, wrong } = await sendAll([status.PERMISSION_DENIED], (row, who, got) => {
      records.push(`${methodName(row.path)} matrix-${who} ${who} PERMISSION_DENIED`);
      // The refusal names the role the table gives, so the table's least role is the code's.
      const says = `has role ${who}; this needs ${row.need} or higher`;
      return got.details.includes(says) ? undefined : `"${got.details}" does not say "${says}"`;
    });
    assert.deepEqual(wrong, []);
    assert.ok(sent > 0);
    t.diagnostic(`${sent} calls refused (PERMISSION_DENIED)`);
    const trail = await call(A.auditList, AuditListRequest.fromPartial({ limit: 1000 }));
    const added = trail.entries.filter((e) => e.seq > seq);
    assert.deepEqual(added.map((e) => `${e.method} ${e.user} ${e.role} ${e.outcome}`).sort(), records.sort());
    assert.equal(await commitIndex(), commit + records.length, 'a refused call wrote more than its record');
    assert.deepEqual(await domainState(), state);
  });

  test('with its role a caller is served', async (t) => {
    const { sent, wrong } = await sendAll([status.OK]);
    assert.deepEqual(wrong, []);
    t.diagnostic(`${sent} calls served`);
    // What the admin's calls consumed is gone; what they made is there.
    const hardware = (await call(C.hardwareList, HardwareListRequest.fromPartial({ limit: 1000 })))
      .hardwareJson;
    const ids = hardware.map((j) => (JSON.parse(j) as { id: string }).id);
    assert.ok(ids.includes('new-admin') && !ids.includes('del-admin'), ids.join(', '));
    assert.equal(await authenticates(fx.doomedToken), false, 'TokenDelete as admin took effect');
  });
});

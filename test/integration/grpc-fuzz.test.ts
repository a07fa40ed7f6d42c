// Goal: bad input changes nothing (invariant 7) at every gRPC method a node serves. Every method
// of Kv, Control, Audit, Maintenance, Worker, Health, server reflection (v1 and v1alpha) and xDS on the
// API port, and of Raft, Kv, Internal and Maintenance on the peer port, gets random bytes, valid requests with one thing broken (wrong wire types, cut
// varints and lengths, huge lengths, unknown and impossible field numbers, strings with NUL,
// invalid UTF-8 or lengths either side of the limits, out-of-range integers, malformed nested
// messages, thousands of repeated entries, deep groups), a message over the size limit, no
// message or two where the method takes one and, for client streams, a malformed first message
// and a malformed later one. The node must not crash or hang, must answer each call with a clear
// status, always with a message (never UNKNOWN or INTERNAL: a request that does not decode is
// INVALID_ARGUMENT naming the method, src/platform/grpc-call-guard.ts; an oversized one is
// RESOURCE_EXHAUSTED naming the limit), and must change no state for any call it refuses.
// Method: one real `slipway server` with tokens required, --api-message-bytes-max at its floor
// (2 MiB, so oversized messages are cheap) and --auth-failures-max high (so the fuzz is never
// rate-limited). Methods are enumerated from the generated service definitions (src/gen), and
// each request's fields from proto/*.proto (test/support/proto-fuzz.ts), so a new RPC is fuzzed
// without touching this file. Raw grpc-js calls with identity serializers send the bytes as they
// are, one call at a time, with the bootstrap admin's token (a worker token for Worker.Connect);
// a few per method go without a token, and must neither be served nor reach the log. Unary and
// client-stream calls must end within their deadline; a server stream may stay open by design
// (Health.Watch, WorkflowEvents with follow) and is cancelled once quiet.
// State check, per call: the commit index (Kv.Status) and the newest audit seq (Audit.AuditList)
// are read after every call. A refused call may move the commit index only by the audit records
// decision 0018 asks for (an authenticated call refused before proposing gets an audit.record;
// one refused by apply is recorded in its own entry): if the index moved by exactly as many new
// audit entries, each with a refusal as its outcome, nothing else was written. Any other
// movement (a Kv write refused at apply moves it by its entry and its record) is judged by the
// domain state itself: hardware, templates, workflows, the kv range, power jobs, artifacts,
// leases, members and audit retention, listed and compared with the listing before the call.
// An accepted call (a Put of a fuzzed key, say) may change state, but only of the kinds its
// method acts on; the listing is taken again after it, and the final listing must equal the last
// one. Refusals without a token, and on the peer port, must not move the commit index at all.
// The peer port is plaintext here, and a plaintext node serves Internal, Raft and Kv there to
// anyone by design (only mutual TLS identifies peers, src/raft/transport/peer-identity.ts); so it
// gets only inputs that the node's own decoders refuse (the generated codecs, the command codec,
// the raft envelope codec) or that name another node, plus the oversized ones. Inputs derive
// from the run seed, the method's path and the case number; the seed is printed and can be set
// with GRPC_FUZZ_SEED (GRPC_FUZZ_CASES for a longer run, GRPC_FUZZ_TRACE=1 to print each call).
// The regressions at the end are what earlier runs found.
import assert from 'node:assert/strict';
import { createHash, randomInt } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import {
  Client,
  credentials,
  Metadata,
  status,
  type ClientReadableStream,
  type ServiceError,
} from '@grpc/grpc-js';
import { ClusterClient } from '../../src/cli/client.js';
import type { AuditListRequest } from '../../src/gen/audit.js';
import { ArtifactAddRequest, HardwareGetRequest, NodeDrainRequest } from '../../src/gen/control.js';
import { HealthCheckRequest, HealthCheckResponse_ServingStatus, HealthClient } from '../../src/gen/health.js';
import {
  InternalClient,
  ProposeBatchRequest,
  ProposeStreamRequest,
  ProposeRequest,
  type ProposeBatchResponse,
} from '../../src/gen/internal.js';
import { MemberAddRequest, PutRequest } from '../../src/gen/kv.js';
import { SnapshotChunk } from '../../src/gen/raft.js';
import { ConnectRequest } from '../../src/gen/worker.js';
import { statusDetailsBytesMax } from '../../src/platform/grpc-call-guard.js';
import { isHostPort } from '../../src/platform/host-port.js';
import { decodeEnvelopeMessages } from '../../src/raft/transport/codec.js';
import { messageBytesMaxDefault } from '../../src/raft/transport/limits.js';
import { decodeCommand } from '../../src/state/store-command.js';
import { stateVersionOfThisBuild } from '../../src/state/versions.js';
import { Prng } from '../../src/platform/prng.js';
import { ProcessCluster, type ProcNode } from '../support/process-cluster.js';
import {
  mutateMessage,
  oversizedMessage,
  randomMessage,
  readProtoSchema,
  validMessage,
  type FuzzContext,
  type MethodSchema,
  type Mutant,
} from '../support/proto-fuzz.js';

const seed = parseSeed(process.env['GRPC_FUZZ_SEED']);
const reproduce = `GRPC_FUZZ_SEED=${seed} node --import tsx --test test/integration/grpc-fuzz.test.ts`;

const adminToken = 'admin-token-for-the-grpc-fuzz-test';
/** The smallest --api-message-bytes-max a node takes: oversized messages stay cheap to send. */
const apiMessageBytesMax = 2 * 1024 * 1024;
/**
 * Inputs per method on the API port, and on the peer port (where most inputs are filtered out).
 * GRPC_FUZZ_CASES sets the first for a longer run by hand (the second follows, and the budget).
 */
const apiCasesPerMethod = parseCount(process.env['GRPC_FUZZ_CASES'], 40);
const peerCasesPerMethod = Math.ceil(apiCasesPerMethod * 0.3);
/** Every call ends by then; a later answer is a hang. */
const callDeadlineMs = 5_000;
/**
 * A server stream may stay open by design (Health.Watch, WorkflowEvents with follow): one that
 * is still open this long after its last message, or after it began when it sent none, counts
 * as open, and the test cancels it. Every other call must end by itself within its deadline.
 */
const streamQuietMs = 150;
const streamSilentMs = 1_000;
const runBudgetMs = 120_000 * (apiCasesPerMethod / 40);
/** GRPC_FUZZ_TRACE=1 prints every input and its answer to stderr. */
const trace = process.env['GRPC_FUZZ_TRACE'] === '1';

const protoDir = fileURLToPath(new URL('../../proto', import.meta.url));
const genDir = fileURLToPath(new URL('../../src/gen', import.meta.url));

/** Which port serves which service (src/node/start-node.ts; the raft transport serves Raft). */
const apiServices = new Set([
  'slipway.kv.v1.Kv',
  'slipway.control.v1.Control',
  'slipway.audit.v1.Audit',
  'slipway.maintenance.v1.Maintenance',
  'slipway.worker.v1.Worker',
  'grpc.health.v1.Health',
  'grpc.reflection.v1.ServerReflection',
  'grpc.reflection.v1alpha.ServerReflection',
  'envoy.service.discovery.v3.AggregatedDiscoveryService',
]);
const peerServices = new Set([
  'slipway.raft.v1.Raft',
  'slipway.kv.v1.Kv',
  'slipway.internal.v1.Internal',
  'slipway.maintenance.v1.Maintenance',
]);

/** What a refused call may answer. INTERNAL and UNKNOWN say "the server broke", never allowed. */
const refusals = new Set<number>([
  status.INVALID_ARGUMENT,
  status.NOT_FOUND,
  status.FAILED_PRECONDITION,
  status.ALREADY_EXISTS,
  status.OUT_OF_RANGE,
  status.RESOURCE_EXHAUSTED,
  status.PERMISSION_DENIED,
  status.UNAUTHENTICATED,
]);

function parseCount(text: string | undefined, otherwise: number): number {
  if (text === undefined) return otherwise;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 10)
    throw new Error(`GRPC_FUZZ_CASES "${text}" is not 10 or more`);
  return value;
}

function parseSeed(text: string | undefined): number {
  if (text === undefined) return randomInt(2 ** 31);
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0)
    throw new Error(`GRPC_FUZZ_SEED "${text}" is not an integer`);
  return value;
}

const statusName = (code: number): string =>
  (status as unknown as Record<number, string | undefined>)[code] ?? String(code);
const hexHead = (bytes: Uint8Array): string =>
  `${Buffer.from(bytes.subarray(0, 48)).toString('hex')}${bytes.length > 48 ? `… (${bytes.length} bytes)` : ''}`;

// ---- The methods: from the generated definitions, with their request schema from the protos ----

interface GeneratedMethod {
  readonly path: string;
  readonly service: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
  readonly requestDeserialize: (bytes: Buffer) => unknown;
}

function isMethodDefinition(value: unknown): value is GeneratedMethod {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v['path'] === 'string' &&
    typeof v['requestStream'] === 'boolean' &&
    typeof v['responseStream'] === 'boolean' &&
    typeof v['requestDeserialize'] === 'function'
  );
}

/** Every method of every service definition the generated modules export. */
async function generatedMethods(): Promise<GeneratedMethod[]> {
  const methods: GeneratedMethod[] = [];
  for (const file of readdirSync(genDir).filter((name) => name.endsWith('.ts'))) {
    const mod = (await import(pathToFileURL(join(genDir, file)).href)) as Record<string, unknown>;
    for (const value of Object.values(mod)) {
      if (typeof value !== 'object' || value === null) continue;
      const defs = Object.values(value as Record<string, unknown>);
      if (defs.length === 0 || !defs.every(isMethodDefinition)) continue;
      for (const def of defs) {
        const service = /^\/([^/]+)\//.exec(def.path)?.[1] ?? '';
        methods.push({
          path: def.path,
          service,
          requestStream: def.requestStream,
          responseStream: def.responseStream,
          requestDeserialize: def.requestDeserialize,
        });
      }
    }
  }
  return methods;
}

interface FuzzMethod {
  readonly generated: GeneratedMethod;
  readonly schema: MethodSchema;
  /** Service/Method, e.g. Kv/Put. */
  readonly name: string;
}

// ---- The node and its state -------------------------------------------------------------------

let cluster: ProcessCluster;
let node: ProcNode;
let pid: number | undefined;
let admin: ClusterClient;
let apiClient: Client;
let peerClient: Client;
let workerToken: string;
let workflowId: string;
let ctx: FuzzContext;
let methods: FuzzMethod[];

const templateYaml = `version: "0.1"
name: two-steps
global_timeout: 600
tasks:
  - name: provision
    worker: "{{ hardware.id }}"
    actions:
      - name: one
        command: ["true"]
        timeout: 600
`;

function hardwareDoc(id: string, i: number): string {
  const mac = `02:00:00:00:02:${i.toString(16).padStart(2, '0')}`;
  return JSON.stringify({ id, interfaces: [{ mac, ip: `10.79.0.${String(10 + i)}/24` }] });
}

const sha256Hex = (text: string): string => createHash('sha256').update(text).digest('hex');

/** The kinds of state a listing covers; an accepted call may change only those its method acts on. */
const categories = [
  'hardware',
  'templates',
  'workflows',
  'kv',
  'powerJobs',
  'artifacts',
  'leases',
  'members',
  'retention',
  'acceptRule',
  'pools',
] as const;
type Category = (typeof categories)[number];
type DomainState = Record<Category, string>;

const changes: Readonly<Record<string, readonly Category[]>> = {
  'Kv/Put': ['kv'],
  'Kv/Delete': ['kv'],
  'Kv/CompareAndSet': ['kv'],
  'Kv/MemberAdd': ['members'],
  'Kv/MemberRemove': ['members'],
  'Control/HardwareCreate': ['hardware'],
  'Control/HardwareDelete': ['hardware', 'workflows', 'powerJobs'],
  'Control/HardwareToken': ['hardware'],
  // The machine lifecycle (docs/decisions/0028): a drain --now also cancels the owner workflow.
  'Control/HardwareTransition': ['hardware', 'workflows'],
  'Control/HardwareLabel': ['hardware'],
  'Control/TemplateCreate': ['templates'],
  'Control/TemplateDelete': ['templates'],
  // A workflow takes, or on its end leaves, its machine: its lifecycle moves (0028).
  'Control/WorkflowCreate': ['workflows', 'powerJobs', 'hardware'],
  'Control/WorkflowCancel': ['workflows', 'powerJobs', 'hardware'],
  'Control/WorkflowRetry': ['workflows', 'powerJobs', 'hardware'],
  'Control/WorkflowDelete': ['workflows'],
  'Control/PowerChange': ['powerJobs'],
  'Control/PowerStatus': ['powerJobs'],
  // Pools (docs/decisions/0035, 0036): a deleted pool frees its spares (their machines change).
  'Control/PoolCreate': ['pools'],
  'Control/PoolScale': ['pools'],
  'Control/PoolTaint': ['pools'],
  'Control/PoolResume': ['pools'],
  'Control/PoolDelete': ['pools', 'hardware'],
  'Control/ArtifactAdd': ['artifacts'],
  'Control/ArtifactDelete': ['artifacts'],
  'Audit/AuditRetention': ['retention'],
  // The auto-accept rule (docs/decisions/0037): a valid selector sets it, clear clears it.
  'Control/HardwareAcceptRule': ['acceptRule'],
  // A first start moves the machine's provisioning deadline to the workflow's own (0028).
  'Worker/Connect': ['workflows', 'hardware'],
};

async function domainState(): Promise<DomainState> {
  const page = { local: false, limit: 1000, continue: '' };
  const [
    hardware,
    templates,
    workflows,
    kv,
    powerJobs,
    artifacts,
    leases,
    members,
    retention,
    acceptRule,
    pools,
  ] = await Promise.all([
    admin.control('hardwareList', page),
    admin.control('templateList', page),
    admin.control('workflowList', { ...page, hardwareId: '' }),
    admin.call('range', { prefix: '', limit: 0, local: false }),
    admin.control('powerJobList', { ...page, hardwareId: '' }),
    admin.control('artifactList', page),
    admin.control('leaseList', page),
    admin.call('memberList', { local: false }),
    admin.audit('auditRetention', { entries: 0, days: 0, show: true }),
    admin.control('hardwareAcceptRule', { clear: false }),
    admin.control('poolList', page),
  ]);
  for (const listed of [hardware, templates, workflows, powerJobs, artifacts, leases, pools]) {
    assert.equal(listed.continue, '', 'the state fits one page');
  }
  assert.equal(kv.more, false);
  return {
    hardware: JSON.stringify(hardware.hardwareJson),
    templates: JSON.stringify(templates.templates),
    workflows: JSON.stringify(workflows.workflows),
    kv: JSON.stringify(kv.kvs.map((e) => [e.key, e.value.toString('hex'), e.revision])),
    powerJobs: JSON.stringify(powerJobs.jobs),
    artifacts: JSON.stringify(artifacts.artifacts),
    leases: JSON.stringify(leases.leaseJson),
    members: JSON.stringify(members.members),
    retention: JSON.stringify(retention),
    acceptRule: acceptRule.selector,
    pools: JSON.stringify(pools.pools),
  };
}

function changed(a: DomainState, b: DomainState): Category[] {
  return categories.filter((c) => a[c] !== b[c]);
}

/** Where the log stands: the commit index, and the newest audit entry's seq. */
interface Mark {
  readonly commit: number;
  readonly auditSeq: number;
}

async function mark(): Promise<Mark> {
  let st = await admin.call('status', {});
  // Refusals are recorded before they are answered; this only waits out an apply in flight.
  const deadline = Date.now() + 5_000;
  while (st.applied < st.commit && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 5));
    st = await admin.call('status', {});
  }
  const trail = await admin.audit('auditList', auditQuery(1));
  return { commit: st.commit, auditSeq: trail.entries[0]?.seq ?? 0 };
}

function auditQuery(limit: number): AuditListRequest {
  return { user: '', kind: '', sinceMs: 0, untilMs: 0, limit, continue: '', local: true };
}

// ---- Raw calls --------------------------------------------------------------------------------

interface Answer {
  readonly code: status;
  readonly details: string;
  /** Messages the node sent back. */
  readonly received: number;
  /** A server stream still open when the test stopped listening (see streamQuietMs). */
  readonly open: boolean;
}

const identity = (bytes: Buffer): Buffer => bytes;
const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/**
 * Sends `messages` to `path` as they are and reports how the call ended. `framed` sends them as
 * a stream whatever the method declares: none, or more than one, to a method that takes one.
 */
function rawCall(
  client: Client,
  method: FuzzMethod,
  messages: readonly Uint8Array[],
  md: Metadata,
  framed = method.schema.clientStreaming,
): Promise<Answer> {
  const { path } = method.generated;
  const options = { deadline: Date.now() + callDeadlineMs };
  return new Promise<Answer>((resolve) => {
    let received = 0;
    let settled = false;
    let quiet: NodeJS.Timeout | undefined;
    const done = (code: status, details: string, open = false): void => {
      if (settled) return;
      settled = true;
      if (quiet !== undefined) clearTimeout(quiet);
      resolve({ code, details, received, open });
    };
    const first = messages[0] ?? new Uint8Array();
    const unaryAnswer = (err: ServiceError | null): void => {
      if (err === null) received += 1;
      done(err?.code ?? status.OK, err?.details ?? '');
    };
    if (!framed && !method.schema.serverStreaming) {
      client.makeUnaryRequest(path, identity, identity, asBuffer(first), md, options, unaryAnswer);
      return;
    }
    if (!method.schema.serverStreaming) {
      const call = client.makeClientStreamRequest(path, identity, identity, md, options, unaryAnswer);
      call.on('error', () => undefined);
      for (const m of messages) call.write(asBuffer(m));
      call.end();
      return;
    }
    const listen = (stream: ClientReadableStream<Buffer>, mayStayOpen: boolean): void => {
      const openAfter = (ms: number): void => {
        if (!mayStayOpen) return;
        if (quiet !== undefined) clearTimeout(quiet);
        quiet = setTimeout(() => {
          stream.cancel();
          done(status.OK, '', true);
        }, ms);
      };
      stream.on('error', () => undefined);
      stream.on('status', (s: { code: status; details: string }) => done(s.code, s.details));
      stream.on('data', () => {
        received += 1;
        openAfter(streamQuietMs);
      });
      openAfter(streamSilentMs);
    };
    if (!framed) {
      listen(client.makeServerStreamRequest(path, identity, identity, asBuffer(first), md, options), true);
      return;
    }
    // Bidi: the test half-closes after its messages, and the node must end the call then.
    const stream = client.makeBidiStreamRequest(path, identity, identity, md, options);
    listen(stream, !method.schema.clientStreaming);
    for (const m of messages) stream.write(asBuffer(m));
    stream.end();
  });
}

function adminMetadata(method: FuzzMethod): Metadata {
  const md = new Metadata();
  if (method.name === 'Worker/Connect') {
    md.set('x-worker-id', 'hw-fuzz');
    md.set('authorization', `Bearer ${workerToken}`);
  } else md.set('authorization', `Bearer ${adminToken}`);
  return md;
}

// ---- Inputs -----------------------------------------------------------------------------------

interface FuzzCase {
  readonly messages: readonly Uint8Array[];
  /** Sent as a stream although the method takes one message (see rawCall). */
  readonly framed?: boolean;
  /** What was done, for reports: the mutation, and where in the stream it went. */
  readonly mutation: string;
  readonly oversized: boolean;
}

/** The valid first message of a client stream, before a malformed later one. */
function streamHead(method: FuzzMethod, random: Prng): Uint8Array {
  switch (method.name) {
    case 'Worker/Connect':
      return ConnectRequest.encode({
        kind: { $case: 'hello', value: { pendingResults: [], agentVersion: 'fuzz' } },
      }).finish();
    case 'Control/ArtifactAdd':
      return ArtifactAddRequest.encode({
        name: 'fuzz-artifact',
        bytes: 4,
        sha256: sha256Hex('fuzz'),
        data: Buffer.alloc(0),
        expectVersion: 0,
      }).finish();
    default:
      return validMessage(random, ctx, method.schema.request.name).bytes;
  }
}

/** Input `i` of `method`: a function of the run seed, the method and `i` alone. */
function fuzzCase(method: FuzzMethod, i: number, count: number, limit: number): FuzzCase {
  const random = Prng.derive(seed, `${method.generated.path}/${i}`);
  const request = method.schema.request.name;
  let mutant: Mutant;
  if (i === count - 1) mutant = oversizedMessage(random, ctx, request, limit);
  else if (i === 0) mutant = validMessage(random, ctx, request);
  else if (i <= 4) mutant = randomMessage(random);
  else mutant = mutateMessage(random, ctx, request);
  const oversized = i === count - 1;
  // Client streams: every other input comes after a valid first message.
  if (method.schema.clientStreaming && i % 2 === 1) {
    return {
      messages: [streamHead(method, random), mutant.bytes],
      mutation: `later:${mutant.mutation}`,
      oversized,
    };
  }
  return { messages: [mutant.bytes], mutation: mutant.mutation, oversized };
}

const memberIdPattern = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

/**
 * Why an input must not be sent to the API: a member add the node would carry out, or a drain. A random
 * member added to a one-node cluster would leave it waiting for a peer that never comes.
 * (Removing the only member is sent: raft refuses to remove the last voter.)
 */
function tooReal(method: FuzzMethod, bytes: Uint8Array): string | undefined {
  if (method.name === 'Control/NodeDrain') {
    // A drained one-node cluster would turn away the worker streams the fuzz goes on to send.
    try {
      return NodeDrainRequest.decode(bytes).drained ? 'a node drain' : undefined;
    } catch {
      return undefined;
    }
  }
  if (method.name !== 'Kv/MemberAdd') return undefined;
  try {
    const req = MemberAddRequest.decode(bytes);
    return memberIdPattern.test(req.id) && isHostPort(req.raftAddr) ? 'a valid member add' : undefined;
  } catch {
    return undefined;
  }
}

/** Peer-port methods that only read. */
const peerReads = new Set(['Kv/Get', 'Kv/Range', 'Kv/Status', 'Kv/MemberList', 'Internal/ArtifactRead']);

const refusedBy = (decode: () => unknown): boolean => {
  try {
    decode();
    return false;
  } catch {
    return true;
  }
};

/**
 * Whether the node's own decoders refuse `bytes` as a request of `method` (or it names another
 * node), so that it cannot act on it: the only inputs a plaintext peer port gets, since that
 * port serves anyone by design.
 */
function refusedOnPeerPort(method: FuzzMethod, bytes: Uint8Array): boolean {
  if (method.name === 'Raft/Stream') {
    // Served with raw bytes: the raft codec decodes and checks each message of the envelope.
    let messages: ReturnType<typeof decodeEnvelopeMessages>;
    try {
      messages = decodeEnvelopeMessages(bytes);
    } catch {
      return true;
    }
    return messages.every((m) => m instanceof Error || m.to !== node.id);
  }
  if (refusedBy(() => method.generated.requestDeserialize(asBuffer(bytes)))) return true;
  if (peerReads.has(method.name)) return true;
  switch (method.name) {
    case 'Internal/Propose':
      return refusedBy(() => decodeCommand(ProposeRequest.decode(bytes).command));
    case 'Internal/ProposeBatch':
      return ProposeBatchRequest.decode(bytes).commands.every((c) => refusedBy(() => decodeCommand(c)));
    case 'Internal/ProposeStream':
      return ProposeStreamRequest.decode(bytes).commands.every((c) => refusedBy(() => decodeCommand(c)));
    case 'Raft/InstallSnapshot':
      return SnapshotChunk.decode(bytes).to !== node.id;
    default:
      return false;
  }
}

// ---- Checks -------------------------------------------------------------------------------------

interface Tally {
  calls: number;
  skipped: number;
  byCode: Map<string, number>;
}

const tallies = new Map<string, Tally>();
/** How each refusal was shown to change nothing: no write, audit records only, or the listing. */
const verdicts = { unwritten: 0, recordsOnly: 0, listed: 0 };
const problems: string[] = [];
/** Accepted calls that changed state, and what they changed. */
const accepted: string[] = [];
let known: DomainState;
let last: Mark;

function tally(key: string): Tally {
  let t = tallies.get(key);
  if (t === undefined) {
    t = { calls: 0, skipped: 0, byCode: new Map() };
    tallies.set(key, t);
  }
  return t;
}

/**
 * Sends one input and checks its answer and what it did to the state (see the file comment).
 * `audited`: refusals of this call may be recorded in the audit trail (an authenticated API call).
 */
async function fuzzOne(
  client: Client,
  method: FuzzMethod,
  input: FuzzCase,
  md: Metadata,
  label: string,
  limit: number,
  audited: boolean,
): Promise<Answer> {
  if (trace) process.stderr.write(`${label} ${input.mutation}\n`);
  const answer = await rawCall(
    client,
    method,
    input.messages,
    md,
    input.framed ?? method.schema.clientStreaming,
  );
  if (trace) process.stderr.write(`  ${statusName(answer.code)} ${answer.details.slice(0, 200)}\n`);
  const now = await mark();
  const t = tally(label.split(' ')[0] ?? label);
  t.calls += 1;
  const codeName = answer.open ? 'OK(open stream)' : statusName(answer.code);
  t.byCode.set(codeName, (t.byCode.get(codeName) ?? 0) + 1);
  const where = `${label} ${method.generated.path} (${input.mutation}): ${input.messages.map(hexHead).join(' | ')}`;
  const problem = (what: string): void => {
    problems.push(`${what}; ${where}`);
  };
  if (answer.code !== status.OK) {
    if (!refusals.has(answer.code)) problem(`answered ${statusName(answer.code)} "${answer.details}"`);
    if (answer.details.trim() === '') problem(`answered ${statusName(answer.code)} with no message`);
  }
  // A request the generated codec cannot decode never reaches a handler: it is refused as such.
  // (A client stream's handler starts before its first message, and may refuse the call first.)
  const [only] = input.messages;
  if (
    !input.oversized &&
    input.framed !== true &&
    !method.schema.clientStreaming &&
    only !== undefined &&
    refusedBy(() => method.generated.requestDeserialize(asBuffer(only))) &&
    (answer.code !== status.INVALID_ARGUMENT || !/does not decode/.test(answer.details))
  ) {
    problem(`an undecodable request was answered ${statusName(answer.code)} "${answer.details}"`);
  }
  if (input.oversized) {
    if (answer.code !== status.RESOURCE_EXHAUSTED || !answer.details.includes(String(limit))) {
      problem(`an oversized message was answered ${statusName(answer.code)} "${answer.details}"`);
    }
  }
  const moved = now.commit - last.commit;
  if (moved === 0) {
    last = now;
    verdicts.unwritten += answer.code === status.OK ? 0 : 1;
    return answer;
  }
  // An unauthenticated call, or one on the peer port, has nothing to record when refused.
  if (!audited && answer.code !== status.OK) problem(`a refused call moved the commit index by ${moved}`);
  if (answer.code === status.OK) {
    const state = await domainState();
    const kinds = changed(known, state);
    const allowed = changes[method.name] ?? [];
    const stray = kinds.filter((k) => !allowed.includes(k));
    if (stray.length > 0) problem(`an accepted call changed ${stray.join(', ')}`);
    if (kinds.length > 0) accepted.push(`${method.name} (${input.mutation}) changed ${kinds.join(', ')}`);
    known = state;
    last = await mark();
    return answer;
  }
  // Refused: moved only by refusal records? Otherwise the state itself must be as it was.
  const audits = now.auditSeq - last.auditSeq;
  let recordsOnly = false;
  if (audited && audits === moved) {
    const trail = await admin.audit('auditList', auditQuery(audits));
    const fresh = trail.entries.filter((e) => e.seq > last.auditSeq);
    recordsOnly = fresh.length === audits && fresh.every((e) => e.outcome !== 'ok');
  }
  if (recordsOnly) verdicts.recordsOnly += 1;
  else {
    verdicts.listed += 1;
    const state = await domainState();
    const kinds = changed(known, state);
    if (kinds.length > 0) problem(`a refused call (${statusName(answer.code)}) changed ${kinds.join(', ')}`);
    known = state;
  }
  last = await mark();
  return answer;
}

/** One line per method: its calls and their answers. */
function report(prefix: string): string[] {
  return [...tallies]
    .filter(([name]) => name.startsWith(prefix))
    .map(([name, t]) => {
      const codes = [...t.byCode].map(([code, n]) => `${code} ${n}`).join(', ');
      return `${name}: ${t.calls} calls${t.skipped > 0 ? `, ${t.skipped} inputs not sent` : ''} (${codes})`;
    });
}

// ---- The run ------------------------------------------------------------------------------------

before(async () => {
  process.stdout.write(`grpc fuzz seed ${seed}; reproduce with ${reproduce}\n`);
  cluster = new ProcessCluster(1, [
    '--auth-failures-max',
    '100000',
    '--api-message-bytes-max',
    String(apiMessageBytesMax),
  ]);
  cluster.requireToken(adminToken);
  cluster.startAll();
  node = await cluster.waitForLeader();
  await cluster.waitForClusterVersion(node, stateVersionOfThisBuild);
  pid = node.proc?.pid;
  admin = new ClusterClient([node.apiAddr], { timeoutMs: 20_000, token: adminToken });
  await admin.control('templateCreate', { source: templateYaml, replace: false });
  for (const [i, id] of ['hw-1', 'hw-2', 'hw-fuzz'].entries()) {
    await admin.control('hardwareCreate', { documentJson: hardwareDoc(id, i + 1), replace: false });
  }
  const created = await admin.control('workflowCreate', {
    template: 'two-steps',
    hardwareId: 'hw-1',
    hardwareMap: {},
    netboot: false,
  });
  workflowId = created.workflow?.id ?? '';
  await admin.call('put', { key: 'fuzz/present', value: Buffer.from('here') });
  workerToken = (await admin.control('hardwareToken', { id: 'hw-fuzz' })).token;
  apiClient = new Client(node.apiAddr, credentials.createInsecure());
  peerClient = new Client(node.raftAddr, credentials.createInsecure());

  const schema = readProtoSchema(protoDir);
  ctx = {
    schema,
    // Names the node knows (so requests reach past the lookups) and names it does not.
    words: [
      '',
      'x',
      'hw-1',
      'hw-2',
      'hw-9',
      'two-steps',
      'fuzz-template',
      'fuzz/present',
      'fuzz/absent',
      workflowId,
      'admin',
      'operator',
      'viewer',
      'on',
      'off',
      'cycle',
      'netboot',
      'status',
      node.id,
      'n9',
      'slipway.kv.v1.Kv',
      'fuzz-artifact',
      sha256Hex('fuzz'),
      sha256Hex(''),
      hardwareDoc('hw-9', 9),
      '{"id":"hw-8"}',
      templateYaml.replace('two-steps', 'fuzz-template'),
      'version: "0.1"\nname: fuzz-template\ntasks: []\n',
    ],
    fieldWords: {
      document_json: [hardwareDoc('hw-9', 9), hardwareDoc('hw-2', 2), '{"id":"hw-8"}'],
      source: [templateYaml.replace('two-steps', 'fuzz-template'), templateYaml],
      role: ['admin', 'operator', 'viewer'],
      op: ['on', 'off', 'cycle', 'netboot', 'status'],
      sha256: [sha256Hex('fuzz'), sha256Hex('')],
      name: ['fuzz-token', 'two-steps', 'fuzz-template', 'fuzz-artifact'],
      template: ['two-steps', 'fuzz-template'],
      hardware_id: ['hw-1', 'hw-2', 'hw-9'],
      id: ['hw-1', 'hw-2', workflowId, node.id, 'n9'],
      workflow_id: [workflowId],
      key: ['fuzz/present', 'fuzz/absent'],
      prefix: ['fuzz/', ''],
      service: ['', 'slipway.kv.v1.Kv', 'grpc.health.v1.Health'],
      // Server reflection: symbols and files it describes, and ones it does not.
      file_containing_symbol: ['slipway.kv.v1.Kv', 'slipway.kv.v1.PutRequest', 'slipway.raft.v1.Raft'],
      file_by_filename: ['slipway_kv_v1.proto', 'kv.proto', 'raft.proto'],
      list_services: ['*', ''],
      containing_type: ['slipway.kv.v1.PutRequest'],
      all_extension_numbers_of_type: ['slipway.kv.v1.PutRequest'],
      raft_addr: ['not-an-address', '127.0.0.1:0'],
      to: [node.id, 'n9'],
    },
  };
  methods = (await generatedMethods()).map((generated) => {
    const methodSchema = schema.methods.get(generated.path);
    assert.ok(methodSchema !== undefined, `${generated.path} is generated but in no proto`);
    const name = generated.path.replace(/^\/(?:[^/.]+\.)*([^/.]+)\/(\w+)$/, '$1/$2');
    return { generated, schema: methodSchema, name };
  });
});

after(async () => {
  apiClient?.close();
  peerClient?.close();
  admin?.close();
  await cluster?.destroy();
});

describe('gRPC methods under malformed and oversized requests', { timeout: runBudgetMs * 2 }, () => {
  const startedMs = Date.now();

  it('every generated method has its request in the protos and a port that serves it', () => {
    assert.ok(methods.length > 40, `only ${methods.length} methods found in src/gen`);
    for (const m of methods) {
      assert.equal(
        m.schema.clientStreaming,
        m.generated.requestStream,
        `${m.generated.path}: client streaming`,
      );
      assert.equal(
        m.schema.serverStreaming,
        m.generated.responseStream,
        `${m.generated.path}: server streaming`,
      );
      assert.ok(
        apiServices.has(m.generated.service) || peerServices.has(m.generated.service),
        `${m.generated.service} is served on no port this test knows; add it to apiServices or peerServices`,
      );
    }
  });

  it(`API port: ${apiCasesPerMethod} inputs per method with the admin token`, async (t) => {
    t.diagnostic(`seed ${seed}`);
    known = await domainState();
    last = await mark();
    for (const method of methods.filter((m) => apiServices.has(m.generated.service))) {
      const md = adminMetadata(method);
      for (let i = 0; i < apiCasesPerMethod; i++) {
        const input = fuzzCase(method, i, apiCasesPerMethod, apiMessageBytesMax);
        const label = `api:${method.name} #${i}`;
        const why = input.messages.map((m) => tooReal(method, m)).find((r) => r !== undefined);
        if (why !== undefined) {
          tally(`api:${method.name}`).skipped += 1;
          continue;
        }
        await fuzzOne(apiClient, method, input, md, label, apiMessageBytesMax, true);
      }
      if (!method.schema.clientStreaming) {
        // A method that takes one request message, sent none or two of them.
        const random = Prng.derive(seed, `${method.generated.path}/frames`);
        const two = [0, 1].map(() => validMessage(random, ctx, method.schema.request.name).bytes);
        for (const messages of [[], two]) {
          if (messages.some((m) => tooReal(method, m) !== undefined)) continue;
          const input = { messages, framed: true, mutation: `${messages.length} messages`, oversized: false };
          await fuzzOne(apiClient, method, input, md, `api:${method.name} frames`, apiMessageBytesMax, true);
        }
      }
      assert.ok(
        Date.now() - startedMs < runBudgetMs,
        `over ${runBudgetMs} ms at ${method.name}; ${reproduce}`,
      );
    }
    for (const line of report('api:')) t.diagnostic(line);
    t.diagnostic(`refusals shown to change nothing: ${JSON.stringify(verdicts)}`);
    for (const line of accepted) t.diagnostic(`accepted: ${line}`);
    assert.deepEqual(problems.slice(0, 20), [], `${problems.length} problems; ${reproduce}`);
  });

  it('API port without a token: every method refuses, and nothing reaches the log', async (t) => {
    const before = problems.length;
    for (const method of methods.filter((m) => apiServices.has(m.generated.service))) {
      for (let i = 0; i < 3; i++) {
        const input = fuzzCase(method, i, apiCasesPerMethod, apiMessageBytesMax);
        if (input.messages.some((m) => tooReal(method, m) !== undefined)) continue;
        const answer = await fuzzOne(
          apiClient,
          method,
          input,
          new Metadata(),
          `anon:${method.name} #${i}`,
          apiMessageBytesMax,
          false,
        );
        // Health, server reflection and xDS need no token (decisions 0025 and 0024).
        const open =
          method.name.startsWith('Health/') ||
          method.name.startsWith('ServerReflection/') ||
          method.name.startsWith('AggregatedDiscoveryService/');
        if (!open && answer.code === status.OK) {
          problems.push(`anon:${method.name} #${i} (${input.mutation}) was served without a token`);
        }
      }
    }
    for (const line of report('anon:')) t.diagnostic(line);
    assert.deepEqual(
      problems.slice(before, before + 20),
      [],
      `${problems.length - before} problems; ${reproduce}`,
    );
  });

  it(`peer port: up to ${peerCasesPerMethod} inputs per method that its decoders refuse, and one oversized`, async (t) => {
    const before = problems.length;
    for (const method of methods.filter((m) => peerServices.has(m.generated.service))) {
      let sent = 0;
      for (let i = 0; i < peerCasesPerMethod * 25 && sent < peerCasesPerMethod; i++) {
        // Never the last case: the oversized one goes below, unfiltered.
        const input = fuzzCase(method, i, Number.MAX_SAFE_INTEGER, messageBytesMaxDefault);
        const [bytes] = input.messages;
        if (input.messages.length !== 1 || bytes === undefined || !refusedOnPeerPort(method, bytes)) {
          tally(`peer:${method.name}`).skipped += 1;
          continue;
        }
        sent += 1;
        await fuzzOne(
          peerClient,
          method,
          input,
          new Metadata(),
          `peer:${method.name} #${i}`,
          messageBytesMaxDefault,
          false,
        );
      }
      assert.ok(
        sent > 0,
        `no input for ${method.name} was refused by its decoders: the mutator is too gentle`,
      );
      if (!method.schema.clientStreaming) {
        const none = { messages: [], framed: true, mutation: '0 messages', oversized: false };
        await fuzzOne(
          peerClient,
          method,
          none,
          new Metadata(),
          `peer:${method.name} frames`,
          messageBytesMaxDefault,
          false,
        );
      }
      // Refused by its size before anything decodes it, so it needs no filter.
      const random = Prng.derive(seed, `${method.generated.path}/oversized`);
      const big = oversizedMessage(random, ctx, method.schema.request.name, messageBytesMaxDefault);
      const input = { messages: [big.bytes], mutation: big.mutation, oversized: true };
      await fuzzOne(
        peerClient,
        method,
        input,
        new Metadata(),
        `peer:${method.name} oversized`,
        messageBytesMaxDefault,
        false,
      );
    }
    for (const line of report('peer:')) t.diagnostic(line);
    assert.deepEqual(
      problems.slice(before, before + 20),
      [],
      `${problems.length - before} problems; ${reproduce}`,
    );
  });

  it('regressions: a long status message is cut and its connection keeps serving', async () => {
    const adminMd = new Metadata();
    adminMd.set('authorization', `Bearer ${adminToken}`);
    const byName = (name: string): FuzzMethod => {
      const found = methods.find((m) => m.name === name);
      assert.ok(found !== undefined, name);
      return found;
    };
    // A 300 KB id is quoted in "not found"; sent whole, the trailers were too large to send:
    // the call hung until its deadline, and so did every later call on the connection.
    const get = await rawCall(
      apiClient,
      byName('Control/HardwareGet'),
      [HardwareGetRequest.encode({ id: 'a'.repeat(300_000), local: true }).finish()],
      adminMd,
    );
    assert.equal(get.code, status.NOT_FOUND, get.details.slice(0, 200));
    assert.ok(
      Buffer.byteLength(get.details) <= statusDetailsBytesMax,
      `${Buffer.byteLength(get.details)} bytes`,
    );
    assert.match(get.details, /^hardware "a+…$/);
    // The same without a token: Health needs none.
    const health = await rawCall(
      apiClient,
      byName('Health/Check'),
      [HealthCheckRequest.encode({ service: '%'.repeat(300_000) }).finish()],
      new Metadata(),
    );
    assert.equal(health.code, status.NOT_FOUND, health.details.slice(0, 200));
    assert.ok(Buffer.byteLength(health.details) <= statusDetailsBytesMax);
    // And on the peer port, where the Kv copy quotes the member id it refuses.
    const member = await rawCall(
      peerClient,
      byName('Kv/MemberAdd'),
      [
        MemberAddRequest.encode({
          id: '-'.repeat(300_000),
          raftAddr: '',
          apiAddr: '',
          learner: true,
        }).finish(),
      ],
      new Metadata(),
    );
    assert.equal(member.code, status.INVALID_ARGUMENT, member.details.slice(0, 200));
    assert.ok(Buffer.byteLength(member.details) <= statusDetailsBytesMax);
    const status_ = await rawCall(apiClient, byName('Kv/Status'), [new Uint8Array()], adminMd);
    assert.equal(status_.code, status.OK, 'the connection still serves');
  });

  it('regressions: an undecodable request is INVALID_ARGUMENT naming the method, on both ports', async () => {
    const adminMd = new Metadata();
    adminMd.set('authorization', `Bearer ${adminToken}`);
    const put = methods.find((m) => m.name === 'Kv/Put');
    assert.ok(put !== undefined);
    const key = Buffer.from('0a08', 'hex');
    const inputs: [string, Uint8Array][] = [
      // A key whose length runs past the end of the message: grpc-js answered INTERNAL.
      ['cut', Uint8Array.of(0x0a, 0x05, 0x61)],
      // Valid up to a stray END_GROUP (or a field number 0): the generated decoder stopped there
      // and the node put the key with an empty value.
      ['end-group', Buffer.concat([key, Buffer.from('fuzz/cut'), Buffer.of(0x0c, 0x12, 0x01, 0x76)])],
      ['field-0', Buffer.concat([key, Buffer.from('fuzz/cut'), Buffer.of(0x00, 0x12, 0x01, 0x76)])],
    ];
    for (const [client, md] of [
      [apiClient, adminMd],
      [peerClient, new Metadata()],
    ] as const) {
      for (const [what, bytes] of inputs) {
        const answer = await rawCall(client, put, [bytes], md);
        assert.equal(answer.code, status.INVALID_ARGUMENT, `${what}: ${answer.details}`);
        assert.match(answer.details, /^the request to \/slipway\.kv\.v1\.Kv\/Put does not decode: /, what);
      }
    }
    const got = await admin.call('get', { key: 'fuzz/cut', local: false });
    assert.equal(got.found, false, 'nothing was put');
    // No request message, or two, where the method takes one: grpc-js answered UNIMPLEMENTED.
    const valid = PutRequest.encode({
      key: 'fuzz/framed',
      value: Buffer.from('v'),
      session: undefined,
    }).finish();
    for (const messages of [[], [valid, valid]]) {
      const answer = await rawCall(apiClient, put, messages, adminMd, true);
      assert.equal(answer.code, status.INVALID_ARGUMENT, answer.details);
      assert.match(
        answer.details,
        /^\/slipway\.kv\.v1\.Kv\/Put takes one request message; the call sent (none|more)$/,
      );
    }
    const framed = await admin.call('get', { key: 'fuzz/framed', local: false });
    assert.equal(framed.found, false, 'nothing was put');
  });

  it('regressions: a forwarded command that does not decode is INVALID_ARGUMENT, not INTERNAL', async () => {
    const internal = new InternalClient(node.raftAddr, credentials.createInsecure());
    const garbage = Buffer.from([0xba, 0x84, 0x14]);
    try {
      const err = await new Promise<ServiceError | null>((resolve) =>
        internal.propose({ command: garbage }, new Metadata(), { deadline: Date.now() + 5_000 }, (e) =>
          resolve(e),
        ),
      );
      assert.equal(err?.code, status.INVALID_ARGUMENT, err?.details);
      assert.match(err.details, /^the forwarded command does not decode: /);
      const batch = await new Promise<ProposeBatchResponse>((resolve, reject) =>
        internal.proposeBatch(
          { commands: [garbage, Buffer.alloc(0)] },
          new Metadata(),
          { deadline: Date.now() + 5_000 },
          (e, res) => (e === null ? resolve(res) : reject(e)),
        ),
      );
      assert.deepEqual(
        batch.outcomes.map((o) => o.code),
        [status.INVALID_ARGUMENT, status.INVALID_ARGUMENT],
      );
    } finally {
      internal.close();
    }
  });

  it('afterwards the node is the same process, healthy, and its state is what the accepted calls made it', async (t) => {
    assert.equal(node.proc?.pid, pid, 'the node was not restarted');
    assert.equal(node.proc?.exitCode, null, 'the node is running');
    assert.equal(node.proc?.signalCode, null, 'the node is running');
    const health = new HealthClient(node.apiAddr, credentials.createInsecure());
    try {
      const answer = await new Promise<number>((resolve, reject) =>
        health.check({ service: '' }, new Metadata(), { deadline: Date.now() + 5_000 }, (err, res) =>
          err === null ? resolve(res.status) : reject(err),
        ),
      );
      assert.equal(answer, HealthCheckResponse_ServingStatus.SERVING);
    } finally {
      health.close();
    }
    const st = await admin.call('status', {});
    assert.equal(st.leader, node.id);
    assert.deepEqual(await domainState(), known, 'the state is what the last accepted call left');
    const ids = (JSON.parse(known.hardware) as string[]).map((j) => (JSON.parse(j) as { id: string }).id);
    t.diagnostic(`hardware at the end: ${ids.join(', ')}; ${accepted.length} accepted calls changed state`);
    assert.ok(Date.now() - startedMs < runBudgetMs, `the run took over ${runBudgetMs} ms`);
  });
});

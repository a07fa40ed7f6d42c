// Goal: one API connection holds at most --api-streams-per-connection-max calls at once
// (docs/decisions/0011-security.md, Limits), and a connection at its cap costs no one else.
// The node announces the cap in its HTTP/2 SETTINGS: a gRPC client (grpc-js, nghttp2) holds a
// further call back until one of its streams ends, so the call waits; a client that ignores the
// cap has the extra streams refused (REFUSED_STREAM) while it has not acknowledged the
// SETTINGS, and its connection closed once it has. Other connections are served throughout.
// Method: one real `slipway server` with tokens required and a cap of 8; long-lived
// WorkflowEvents streams hold a grpc-js connection's streams; hand-written HTTP/2 frames
// (bench/h2-raw.ts) open more streams than the cap on one connection.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import type { ClientReadableStream, ServiceError } from '@grpc/grpc-js';
import { ClusterClient } from '../../src/cli/client.js';
import type { HardwareListResponse, WorkflowEventsResponse } from '../../src/gen/control.js';
import { ControlClient, HardwareListRequest } from '../../src/gen/control.js';
import {
  grpcMessage,
  grpcRequestHeaders,
  h2ErrorNames,
  RawH2Connection,
  settingMaxConcurrentStreams,
} from '../../bench/h2-raw.js';
import { ProcessCluster, type ProcNode } from '../support/process-cluster.js';
import { waitingTemplateYaml } from '../support/balancer-streams.js';

const adminToken = 'admin-token-for-the-api-streams-test';
const cap = 8;

let cluster: ProcessCluster;
let node: ProcNode;
let admin: ClusterClient;
let workflowId = '';

function metadata(): Metadata {
  const md = new Metadata();
  md.set('authorization', `Bearer ${adminToken}`);
  return md;
}

/** A client on a connection of its own (grpc-js otherwise shares one between clients). */
function ownConnection(): ControlClient {
  return new ControlClient(node.apiAddr, credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
  });
}

function hardwareList(c: ControlClient, timeoutMs: number): Promise<ServiceError | HardwareListResponse> {
  return new Promise((resolve) => {
    c.hardwareList({ local: false }, metadata(), { deadline: Date.now() + timeoutMs }, (err, res) =>
      resolve(err ?? res),
    );
  });
}

/** A WorkflowEvents stream that follows the pending workflow: it stays open. Resolves once it delivered. */
async function heldStream(c: ControlClient): Promise<ClientReadableStream<WorkflowEventsResponse>> {
  const stream = c.workflowEvents({ workflowId, fromSeq: 0, follow: true }, metadata());
  stream.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error('a WorkflowEvents stream delivered nothing in 10 s')),
      10_000,
    );
    stream.once('data', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  return stream;
}

before(async () => {
  cluster = new ProcessCluster(1, ['--api-streams-per-connection-max', String(cap)]);
  cluster.requireToken(adminToken);
  cluster.startAll();
  node = await cluster.waitForLeader();
  admin = new ClusterClient([node.apiAddr], { timeoutMs: 20_000, token: adminToken });
  await admin.control('templateCreate', { source: waitingTemplateYaml, replace: true });
  const hw = { id: 'hw-1', interfaces: [{ mac: '02:00:00:00:02:01', ip: '10.79.0.11/24' }] };
  await admin.control('hardwareCreate', { documentJson: JSON.stringify(hw), replace: false });
  const created = await admin.control('workflowCreate', {
    template: 'waits',
    hardwareId: 'hw-1',
    hardwareMap: {},
    netboot: false,
  });
  workflowId = created.workflow?.id ?? '';
  assert.notEqual(workflowId, '');
});

after(async () => {
  admin.close();
  await cluster.destroy();
});

test('a call beyond the cap waits for a free stream on its connection; other connections are served', async () => {
  const full = ownConnection();
  const other = ownConnection();
  try {
    const held = [];
    for (let i = 0; i < cap; i++) held.push(await heldStream(full));
    // The ninth call on the full connection is held back by the client: it is not served
    // before its deadline, whatever the machine's speed.
    const waited = await hardwareList(full, 1500);
    assert.ok('code' in waited, 'the call beyond the cap was not served while the cap was in use');
    assert.equal(waited.code, status.DEADLINE_EXCEEDED, waited.details);
    // Meanwhile another connection is served.
    const served = await hardwareList(other, 10_000);
    assert.ok(!('code' in served), `another connection is served: ${'code' in served ? served.details : ''}`);
    assert.equal(served.hardwareJson.length, 1);
    // One stream ends, and the full connection serves calls again.
    held[0]?.cancel();
    const after = await hardwareList(full, 10_000);
    assert.ok(!('code' in after), `served once a stream ended: ${'code' in after ? after.details : ''}`);
    for (const s of held) s.cancel();
  } finally {
    full.close();
    other.close();
  }
});

/** A HardwareList call as raw HTTP/2: headers with the admin token, an empty request. */
const hardwareListHeaders = (): (readonly [string, string])[] =>
  grpcRequestHeaders('/slipway.control.v1.Control/HardwareList', node.apiAddr, [
    ['authorization', `Bearer ${adminToken}`],
  ]);
const emptyRequest = (): Buffer =>
  grpcMessage(Buffer.from(HardwareListRequest.encode({ local: false }).finish()));

test('a client that ignores the cap has the streams beyond it refused; the rest are served', async () => {
  const [host = '', port = ''] = node.apiAddr.split(':');
  const raw = await RawH2Connection.open({ host, port: Number(port), ackSettings: false });
  try {
    assert.equal(raw.serverSettings.get(settingMaxConcurrentStreams), cap, 'the node announces the cap');
    const extra = 4;
    const ids = raw.openStreams(cap + extra, hardwareListHeaders(), emptyRequest());
    const settled = (id: number): boolean => raw.answered.has(id) || raw.resets.has(id);
    await raw.until(() => ids.every(settled) || raw.closed, 'every stream answered or reset', 10_000);
    const within = ids.slice(0, cap);
    const beyond = ids.slice(cap);
    assert.deepEqual(
      within.filter((id) => !raw.answered.has(id)),
      [],
      'the streams within the cap are answered',
    );
    assert.deepEqual(
      beyond.map((id) => h2ErrorNames[raw.resets.get(id) ?? -1] ?? String(raw.resets.get(id))),
      Array<string>(extra).fill('REFUSED_STREAM'),
    );
    assert.equal(raw.closed, false, 'the connection itself stays open');
    const listed = await admin.control('hardwareList', { local: false });
    assert.equal(listed.hardwareJson.length, 1, 'other connections are served');
  } finally {
    raw.close();
  }
});

test('a client that acknowledged the cap and exceeds it loses its connection; others are served', async () => {
  const [host = '', port = ''] = node.apiAddr.split(':');
  const raw = await RawH2Connection.open({ host, port: Number(port), ackSettings: true });
  try {
    // Streams left open (no end of request), so none of them ends before the last one arrives.
    raw.openStreams(cap + 1, hardwareListHeaders(), undefined, false);
    await raw.until(() => raw.closed, 'the node to close the connection', 10_000);
    assert.ok(raw.goaway !== undefined, 'the node says GOAWAY before closing');
    const listed = await admin.control('hardwareList', { local: false });
    assert.equal(listed.hardwareJson.length, 1, 'other connections are served');
  } finally {
    raw.close();
  }
});

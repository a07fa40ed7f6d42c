// Goal: on the wire, an inventory report is taken only with the machine's inventory-boot
// credential (docs/decisions/0029): a stream authenticated with the machine's static worker
// token may say hello, but its report is refused with why, in an InventoryAck, and the refusal is
// in the audit trail under the worker's name; a stream with a credential that is nobody's is not
// opened at all; a report that is not JSON is answered, not dropped. A report the cluster cannot
// record for now (no quorum) is not answered, which the agent would take as final: its stream
// ends UNAVAILABLE ("send it again"), and the same report sent once the quorum is back is
// answered.
// Method: three real `slipway server` processes with authentication on
// (test/support/process-cluster.ts), the quorum taken away by SIGSTOP of the leader and one
// follower, so the other follower's forward of the report finds no answer; the
// worker stream spoken with the generated gRPC client, as the agent does.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { ClusterClient } from '../../src/cli/client.js';
import { WorkerClient, type ConnectResponse, type InventoryAck } from '../../src/gen/worker.js';
import { ProcessCluster, type ProcNode } from '../support/process-cluster.js';
import { exampleInventory } from '../support/inventory-arbitrary.js';
import { stateVersionFleet } from '../../src/state/versions.js';

const adminToken = 'admin-token-for-the-inventory-report-test';
let cluster: ProcessCluster;
let node: ProcNode;
let admin: ClusterClient;
let workerToken = '';

before(async () => {
  cluster = new ProcessCluster(3);
  cluster.requireToken(adminToken);
  cluster.startAll();
  node = await cluster.waitForLeader();
  await cluster.waitForClusterVersion(node, stateVersionFleet, 30_000);
  admin = new ClusterClient([node.apiAddr], { timeoutMs: 20_000, token: adminToken });
  const hw = { id: 'hw-1', interfaces: [{ mac: '02:00:00:00:03:01', ip: '10.79.0.21/24' }] };
  await cluster.waitForClusterVersion(
    cluster.nodes.find((n) => n !== node)!,
    stateVersionFleet,
    30_000,
  );
  await admin.control('hardwareCreate', { documentJson: JSON.stringify(hw), replace: false });
  workerToken = (await admin.control('hardwareToken', { id: 'hw-1' })).token;
});

after(async () => {
  admin.close();
  await cluster.destroy();
});

/** Hello, then `report` as the inventory; the InventoryAck, or the stream's error. */
function report(token: string, text: string, to = node): Promise<InventoryAck | ServiceError> {
  const client = new WorkerClient(to.apiAddr, credentials.createInsecure());
  const md = new Metadata();
  md.set('x-worker-id', 'hw-1');
  md.set('authorization', `Bearer ${token}`);
  return new Promise((resolve) => {
    const stream = client.connect(md, { deadline: Date.now() + 20_000 });
    const done = (answer: InventoryAck | ServiceError): void => {
      stream.cancel();
      client.close();
      resolve(answer);
    };
    stream.on('data', (msg: ConnectResponse) => {
      if (msg.kind?.$case === 'inventoryAck') done(msg.kind.value);
    });
    stream.on('error', (err: ServiceError) => done(err));
    stream.write({ kind: { $case: 'hello', value: { pendingResults: [], agentVersion: 'test' } } });
    stream.write({ kind: { $case: 'inventory', value: { inventoryJson: text } } });
  });
}

test("a report with the machine's static token is refused, answered and recorded", async () => {
  const answer = await report(workerToken, JSON.stringify(exampleInventory));
  assert.ok(!('code' in answer), `answered, not dropped: ${'details' in answer ? answer.details : ''}`);
  assert.equal(answer.accepted, false);
  assert.match(
    answer.message,
    /inventory report for hardware "hw-1" refused: it holds no inventory-boot credential/,
  );
  const trail = await admin.audit('auditList', {
    user: '',
    kind: 'hardware.inventory',
    sinceMs: 0,
    untilMs: 0,
    limit: 10,
    continue: '',
    local: false,
  });
  assert.equal(trail.entries.length, 1);
  assert.equal(trail.entries[0]?.user, 'worker hw-1');
  assert.equal(trail.entries[0]?.target, 'hw-1');
  const got = await admin.control('hardwareGet', { id: 'hw-1', local: false });
  assert.doesNotMatch(got.hardwareJson, /"inventory"/, 'nothing stored');
});

test('a report that is not JSON is answered', async () => {
  const answer = await report(workerToken, '{cpu');
  assert.ok(!('code' in answer));
  assert.equal(answer.accepted, false);
  assert.match(answer.message, /^the inventory is not JSON/);
});

test("a credential that is nobody's opens no stream", async () => {
  const answer = await report('not-a-credential', JSON.stringify(exampleInventory));
  assert.ok('code' in answer);
  assert.equal(answer.code, status.UNAUTHENTICATED);
});

test('a report the cluster cannot record now ends its stream UNAVAILABLE, and is answered when sent again', async () => {
  const [asked, stopped] = cluster.nodes.filter((n) => n !== node);
  assert.ok(asked !== undefined && stopped !== undefined);
  cluster.pause(node);
  cluster.pause(stopped);
  let answer: InventoryAck | ServiceError;
  try {
    answer = await report(workerToken, JSON.stringify(exampleInventory), asked);
  } finally {
    cluster.resume(node);
    cluster.resume(stopped);
  }
  assert.ok('code' in answer, `not answered while there is no quorum: ${JSON.stringify(answer)}`);
  assert.equal(answer.code, status.UNAVAILABLE);
  assert.match(answer.details, /^inventory report not recorded: .*; send it again$/);
  const leader = await cluster.waitForLeader();
  const again = await report(workerToken, JSON.stringify(exampleInventory), leader);
  assert.ok(
    !('code' in again),
    `answered once the quorum is back: ${'details' in again ? again.details : ''}`,
  );
  assert.match(again.message, /refused: it holds no inventory-boot credential/);
});

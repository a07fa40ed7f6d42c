// Goal: the CLI client never sends a write twice when the first try may still commit.
// Method: two real gRPC servers on loopback serve the Kv service; the first answers as a node
// would in each failure case (a proposal dropped by a leadership change, a not-leader refusal),
// the second counts what reaches it. A third address has nothing listening (refused connection).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Metadata, Server, ServerCredentials, status } from '@grpc/grpc-js';
import type {
  sendUnaryData,
  ServerUnaryCall,
  ServiceError,
  UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { raftCodeKey } from '../../src/api/errors.js';
import { ClusterClient } from '../../src/cli/client.js';
import type { GetRequest, GetResponse, PutRequest, PutResponse } from '../../src/gen/kv.js';
import { KvService } from '../../src/gen/kv.js';

/** What the first node answers: UNAVAILABLE with this raft code, or without one (a lost call). */
let firstAnswer: { raftCode?: string; details: string } = { details: '' };
const reachedSecond = { put: 0, get: 0 };

function unavailable(): Partial<ServiceError> {
  const metadata = new Metadata();
  if (firstAnswer.raftCode !== undefined) metadata.set(raftCodeKey, firstAnswer.raftCode);
  return { code: status.UNAVAILABLE, details: firstAnswer.details, metadata };
}

function kvServer(answer: 'refuse' | 'serve'): UntypedServiceImplementation {
  return {
    put: (_call: ServerUnaryCall<PutRequest, PutResponse>, cb: sendUnaryData<PutResponse>) => {
      if (answer === 'refuse') return cb(unavailable(), null);
      reachedSecond.put++;
      cb(null, { revision: 7 });
    },
    get: (_call: ServerUnaryCall<GetRequest, GetResponse>, cb: sendUnaryData<GetResponse>) => {
      if (answer === 'refuse') return cb(unavailable(), null);
      reachedSecond.get++;
      cb(null, { found: true, value: Buffer.from('v'), revision: 7, createRevision: 1 });
    },
  };
}

const servers: Server[] = [];
const addrs: string[] = [];

async function listen(answer: 'refuse' | 'serve'): Promise<string> {
  const server = new Server();
  server.addService(KvService, kvServer(answer));
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) =>
      err === null ? resolve(p) : reject(err),
    ),
  );
  servers.push(server);
  return `127.0.0.1:${String(port)}`;
}

before(async () => {
  addrs.push(await listen('refuse'), await listen('serve'));
  // A port that was just bound and released: nothing listens there.
  const closed = await listen('serve');
  servers.pop()?.forceShutdown();
  addrs.push(closed);
});

after(() => {
  for (const s of servers) s.forceShutdown();
});

function reset(answer: { raftCode?: string; details: string }): void {
  firstAnswer = answer;
  reachedSecond.put = 0;
  reachedSecond.get = 0;
}

const put = { key: 'k', value: Buffer.from('v') };

async function withClient(servers: string[], f: (client: ClusterClient) => Promise<void>): Promise<void> {
  const client = new ClusterClient(servers, 3000);
  try {
    await f(client);
  } finally {
    client.close();
  }
}

test('a write whose proposal was dropped is not sent to another node, and says its outcome is unknown', async () => {
  reset({ raftCode: 'E_PROPOSAL_DROPPED', details: 'leadership changed before the write committed; retry' });
  await withClient([addrs[0]!, addrs[1]!], async (client) => {
    await assert.rejects(client.call('put', put), (err: ServiceError) => {
      assert.equal(err.code, status.UNAVAILABLE);
      assert.match(err.details, /may still be applied; it was not sent again/);
      return true;
    });
    assert.equal(reachedSecond.put, 0);
  });
});

test('a write whose connection was lost mid-call is not sent again', async () => {
  reset({ details: 'Connection dropped' });
  await withClient([addrs[0]!, addrs[1]!], async (client) => {
    await assert.rejects(client.call('put', put), { code: status.UNAVAILABLE });
    assert.equal(reachedSecond.put, 0);
  });
});

test('a write refused before it was appended moves on to the next node', async () => {
  reset({ raftCode: 'E_NOT_LEADER', details: 'n1 is not the leader' });
  await withClient([addrs[0]!, addrs[1]!], async (client) => {
    assert.deepEqual(await client.call('put', put), { revision: 7 });
    assert.equal(reachedSecond.put, 1);
  });
});

test('a write to a node whose port refuses connections moves on to the next node', async () => {
  reset({ details: '' });
  await withClient([addrs[2]!, addrs[1]!], async (client) => {
    assert.deepEqual(await client.call('put', put), { revision: 7 });
    assert.equal(reachedSecond.put, 1);
  });
});

test('a write in a session moves on after any UNAVAILABLE: the cluster answers a repeat once', async () => {
  reset({ raftCode: 'E_PROPOSAL_DROPPED', details: 'leadership changed before the write committed; retry' });
  await withClient([addrs[0]!, addrs[1]!], async (client) => {
    const inSession = { ...put, session: { clientId: 3, seq: 1, ackedSeq: 0 } };
    assert.deepEqual(await client.call('put', inSession), { revision: 7 });
    assert.equal(reachedSecond.put, 1);
  });
});

test('a read moves on after any UNAVAILABLE', async () => {
  reset({ details: 'Connection dropped' });
  await withClient([addrs[0]!, addrs[1]!], async (client) => {
    const res = await client.call('get', { key: 'k', local: false });
    assert.equal(res.found, true);
    assert.equal(reachedSecond.get, 1);
  });
});

test('when no node can be reached, the error names every address tried and what to do', async () => {
  reset({ details: '' });
  const closed = addrs[2]!;
  await withClient([closed, closed], async (client) => {
    await assert.rejects(client.call('get', { key: 'k', local: false }), (err: ServiceError) => {
      assert.equal(err.code, status.UNAVAILABLE);
      assert.match(
        err.details,
        new RegExp(`^no Slipway node answered at ${closed}, ${closed} \\(connection refused\\)`),
      );
      assert.match(err.details, /--server HOST:PORT/);
      return true;
    });
  });
  // A node that answers with a refusal is not "no node answered": its own error stays.
  reset({ raftCode: 'E_PROPOSAL_DROPPED', details: 'leadership changed before the write committed; retry' });
  await withClient([addrs[0]!, closed], async (client) => {
    await assert.rejects(client.call('get', { key: 'k', local: false }), (err: ServiceError) => {
      assert.doesNotMatch(err.details, /no Slipway node answered/);
      return true;
    });
  });
});

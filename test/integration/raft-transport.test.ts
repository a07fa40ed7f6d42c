// Goal: prove GrpcTransport carries raft traffic between real processes' worth of gRPC: messages
// arrive intact and in order, heartbeats overtake queued appends, an unreachable peer costs
// dropped messages (never an exception) and recovers, snapshots arrive whole, and corrupt or
// malformed input is refused without reaching the driver.
// Method: two or three transports in this process on 127.0.0.1 port 0, each with a recording
// inbox as its handlers; raw generated gRPC clients play a faulty peer where a test needs one.
// Every wait polls a condition against a deadline; every transport is stopped after its test.
import assert from 'node:assert/strict';
import { createConnection, createServer, type Socket } from 'node:net';
import { crc32 } from 'node:zlib';
import { describe, it, type TestContext } from 'node:test';
import { credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import {
  message,
  type Entry,
  type Message,
  type NodeId,
  type SnapshotMeta,
} from '../../src/raft/core/types.js';
import type { Snapshot } from '../../src/raft/storage/log-store.js';
import type { TransportHandlers } from '../../src/raft/transport/transport.js';
import { GrpcTransport } from '../../src/raft/transport/grpc-transport.js';
import {
  MessageType,
  RaftClient,
  RaftEnvelope,
  type SnapshotAck,
  type SnapshotChunk,
} from '../../src/gen/raft.js';
import { messageToWire, snapshotMetaToWire } from '../../src/raft/transport/codec.js';
import {
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthClient,
  HealthService,
  type HealthCheckResponse,
} from '../../src/gen/health.js';
import { waitFor } from '../support/wait.js';

class Inbox implements TransportHandlers {
  readonly messages: Message[] = [];
  readonly snapshots: { from: NodeId; snapshot: Snapshot }[] = [];
  onMessage(msg: Message): void {
    this.messages.push(msg);
  }
  onSnapshot(from: NodeId, snapshot: Snapshot): Promise<void> {
    this.snapshots.push({ from, snapshot });
    return Promise.resolve();
  }
}

interface Node {
  readonly id: NodeId;
  readonly transport: GrpcTransport;
  readonly inbox: Inbox;
  readonly addr: string;
}

async function startNode(t: TestContext, id: NodeId, port = 0): Promise<Node> {
  const transport = new GrpcTransport({ id, listenAddr: `127.0.0.1:${port}` });
  const inbox = new Inbox();
  await transport.start(inbox);
  t.after(() => transport.stop());
  return { id, transport, inbox, addr: `127.0.0.1:${transport.port}` };
}

/** Makes every node a peer of every other. */
function connect(nodes: readonly Node[]): void {
  const members = nodes.map((n) => ({ id: n.id, addr: n.addr, apiAddr: '' }));
  for (const n of nodes) n.transport.setPeers(members);
}

function heartbeat(from: NodeId, to: NodeId, context: number): Message {
  return message({ type: 'heartbeat', from, to, term: 3, commit: context, context });
}

function append(from: NodeId, to: NodeId, prevIndex: number, payloadBytes: number): Message {
  const entry: Entry = {
    term: 3,
    index: prevIndex + 1,
    type: 'normal',
    data: pattern(payloadBytes, prevIndex),
  };
  return message({
    type: 'app',
    from,
    to,
    term: 3,
    index: prevIndex,
    logTerm: 3,
    commit: prevIndex,
    entries: [entry],
  });
}

/** Deterministic, position-dependent bytes, so a misplaced or altered byte shows. */
function pattern(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let x = (seed * 2654435761 + 1) >>> 0;
  for (let i = 0; i < length; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    bytes[i] = x >>> 24;
  }
  return bytes;
}

/** Received entries carry Buffers; compare them as plain bytes. */
function plain(msg: Message): Message {
  return { ...msg, entries: msg.entries.map((e) => ({ ...e, data: new Uint8Array(e.data) })) };
}

/**
 * A TCP relay that can go silent without closing anything, like a peer whose host froze or a
 * network path that black-holes: only keepalive can tell.
 */
async function startFreezableRelay(
  t: TestContext,
  targetPort: number,
): Promise<{ port: number; freeze(): void }> {
  const sockets = new Set<Socket>();
  let frozen = false;
  const relay = createServer((inbound) => {
    const outbound = createConnection(targetPort, '127.0.0.1');
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => s.destroy());
      s.on('close', () => sockets.delete(s));
    }
    if (frozen) return;
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => relay.close(resolve));
  });
  const address = relay.address();
  assert.ok(address !== null && typeof address === 'object');
  return {
    port: address.port,
    freeze: () => {
      frozen = true;
      for (const s of sockets) {
        s.unpipe();
        s.pause();
      }
    },
  };
}

const membership = { voters: [{ id: 'a', addr: '127.0.0.1:1', apiAddr: '' }], learners: [] };

void describe('GrpcTransport', () => {
  void it('delivers every message intact and in send order', async (t) => {
    const [a, b, c] = await Promise.all([startNode(t, 'a'), startNode(t, 'b'), startNode(t, 'c')]);
    connect([a, b, c]);
    const toB: Message[] = [];
    const toC: Message[] = [];
    for (let i = 0; i < 300; i++) {
      const batch = [append('a', 'b', i, 100 + i), append('a', 'c', i, 50)];
      toB.push(batch[0]!);
      toC.push(batch[1]!);
      a.transport.send(batch);
      // Yield now and then so the sends spread over many writes, not one.
      if (i % 50 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    await waitFor(
      '300 appends at b and at c',
      () => b.inbox.messages.length >= 300 && c.inbox.messages.length >= 300,
    );
    assert.deepEqual(b.inbox.messages.map(plain), toB);
    assert.deepEqual(c.inbox.messages.map(plain), toC);
  });

  void it('lets a heartbeat overtake appends queued before it', async (t) => {
    const [a, b] = await Promise.all([startNode(t, 'a'), startNode(t, 'b')]);
    connect([a, b]);
    a.transport.send([heartbeat('a', 'b', 1)]);
    await waitFor('the stream to open', () => b.inbox.messages.length === 1);

    const appends = Array.from({ length: 200 }, (_, i) => append('a', 'b', i, 32 << 10));
    a.transport.send(appends);
    a.transport.send([heartbeat('a', 'b', 2)]);
    await waitFor('200 appends and the heartbeat', () => b.inbox.messages.length === 202);

    const received = b.inbox.messages.slice(1);
    const heartbeatAt = received.findIndex((m) => m.type === 'heartbeat');
    const lastAppendAt = received.findLastIndex((m) => m.type === 'app');
    assert.ok(
      heartbeatAt < lastAppendAt,
      `heartbeat arrived at ${heartbeatAt}, after the last append at ${lastAppendAt}`,
    );
    // The appends themselves kept their order and none was lost.
    const indexes = received.filter((m) => m.type === 'app').map((m) => m.index);
    assert.deepEqual(
      indexes,
      appends.map((m) => m.index),
    );
  });

  void it('drops messages for a stopped peer, reports it unreachable, and resumes after it restarts', async (t) => {
    const [a, b] = await Promise.all([startNode(t, 'a'), startNode(t, 'b')]);
    connect([a, b]);
    a.transport.send([heartbeat('a', 'b', 1)]);
    await waitFor('first delivery', () => b.inbox.messages.length === 1);
    assert.deepEqual(a.transport.takeUnreachable(), []);

    const port = b.transport.port;
    await b.transport.stop();
    let context = 2;
    await waitFor('b to be reported unreachable', () => {
      a.transport.send([heartbeat('a', 'b', context++), append('a', 'b', context, 10)]);
      return a.transport.takeUnreachable().includes('b');
    });
    assert.equal(b.inbox.messages.length, 1, 'a stopped transport must not deliver');

    const b2 = await startNode(t, 'b', port);
    await waitFor('delivery to the restarted b', () => {
      a.transport.send([heartbeat('a', 'b', context++)]);
      return b2.inbox.messages.length > 0;
    });
    const first = b2.inbox.messages[0]!;
    assert.equal(first.from, 'a');
    assert.equal(first.type, 'heartbeat');
  });

  void it('does not deliver to an address that answers as another node', async (t) => {
    const [a, c] = await Promise.all([startNode(t, 'a'), startNode(t, 'c')]);
    // A misconfigured member list: 'b' is said to live at c's address.
    a.transport.setPeers([{ id: 'b', addr: c.addr, apiAddr: '' }]);
    await waitFor('the wrong node to be detected', () => {
      a.transport.send([heartbeat('a', 'b', 1)]);
      return a.transport.takeUnreachable().includes('b');
    });
    assert.equal(c.inbox.messages.length, 0);
  });

  void it('notices a silent peer through keepalive within a few seconds', async (t) => {
    const [a, b] = await Promise.all([startNode(t, 'a'), startNode(t, 'b')]);
    const relay = await startFreezableRelay(t, b.transport.port);
    a.transport.setPeers([{ id: 'b', addr: `127.0.0.1:${relay.port}`, apiAddr: '' }]);
    a.transport.send([heartbeat('a', 'b', 1)]);
    await waitFor('delivery through the relay', () => b.inbox.messages.length === 1);

    relay.freeze();
    const frozenAt = Date.now();
    let context = 2;
    await waitFor(
      'the silent peer to be reported unreachable',
      () => {
        a.transport.send([heartbeat('a', 'b', context++)]);
        return a.transport.takeUnreachable().includes('b');
      },
      10_000,
    );
    const noticedAfterMs = Date.now() - frozenAt;
    // keepalive interval + timeout is ~2 s; allow for a loaded machine.
    assert.ok(noticedAfterMs < 5000, `took ${noticedAfterMs} ms to notice`);
    assert.equal(b.inbox.messages.length, 1);
  });

  void it('streams a 3 MiB snapshot that arrives intact', async (t) => {
    const [a, b] = await Promise.all([startNode(t, 'a'), startNode(t, 'b')]);
    connect([a, b]);
    const meta: SnapshotMeta = {
      index: 4242,
      term: 7,
      membership: {
        voters: [{ id: 'a', addr: a.addr, apiAddr: '127.0.0.1:9' }],
        learners: [{ id: 'b', addr: b.addr, apiAddr: '' }],
      },
    };
    const data = pattern(3 << 20, 99);
    await a.transport.sendSnapshot('b', { meta, data });

    assert.equal(b.inbox.snapshots.length, 1);
    const got = b.inbox.snapshots[0]!;
    assert.equal(got.from, 'a');
    assert.deepEqual(got.snapshot.meta, meta);
    assert.equal(got.snapshot.data.byteLength, data.byteLength);
    assert.ok(Buffer.from(got.snapshot.data).equals(data), 'snapshot bytes differ');
  });

  void it('rejects sendSnapshot to a node that is not a peer', async (t) => {
    const a = await startNode(t, 'a');
    await assert.rejects(
      a.transport.sendSnapshot('zz', { meta: { index: 1, term: 1, membership }, data: new Uint8Array(1) }),
      /'zz': not a peer/,
    );
  });

  void it('refuses a snapshot whose data does not match its CRC, without installing it', async (t) => {
    const b = await startNode(t, 'b');
    const client = new RaftClient(b.addr, credentials.createInsecure());
    t.after(() => client.close());
    const data = pattern(2_500_000, 5);
    const chunkBytes = 1 << 20;
    const checksum = crc32(data);

    const err = await new Promise<ServiceError | null>((resolve) => {
      const call = client.installSnapshot(new Metadata(), (e: ServiceError | null, _ack: SnapshotAck) =>
        resolve(e),
      );
      for (let offset = 0; offset < data.byteLength; offset += chunkBytes) {
        const piece = Buffer.from(data.subarray(offset, offset + chunkBytes));
        if (offset === chunkBytes) piece[17] = piece[17]! ^ 0xff; // corrupted in transit
        const done = offset + chunkBytes >= data.byteLength;
        const chunk: SnapshotChunk = {
          from: 'a',
          to: 'b',
          offset,
          data: piece,
          done,
          crc32: done ? checksum : 0,
        };
        if (offset === 0) chunk.meta = snapshotMetaToWire({ index: 10, term: 2, membership });
        call.write(chunk);
      }
      call.end();
    });
    assert.equal(err?.code, status.DATA_LOSS, `expected DATA_LOSS, got ${err?.code}: ${err?.details}`);
    assert.match(err.details, /CRC-32 mismatch/);
    assert.equal(b.inbox.snapshots.length, 0);
  });

  void it('drops a malformed message from a stream and keeps delivering the rest', async (t) => {
    const b = await startNode(t, 'b');
    const client = new RaftClient(b.addr, credentials.createInsecure());
    t.after(() => client.close());
    const call = client.stream();
    t.after(() => call.cancel());
    call.on('error', () => undefined);

    const good1 = messageToWire(heartbeat('a', 'b', 1));
    const unknownType = { ...messageToWire(heartbeat('a', 'b', 2)), type: 99 as MessageType };
    const snapWithoutMeta = { ...messageToWire(heartbeat('a', 'b', 3)), type: MessageType.MESSAGE_TYPE_SNAP };
    const misaddressed = messageToWire(heartbeat('a', 'c', 4));
    const good2 = messageToWire(heartbeat('a', 'b', 5));
    call.write(
      RaftEnvelope.fromPartial({ messages: [good1, unknownType, snapWithoutMeta, misaddressed, good2] }),
    );

    await waitFor('the two valid heartbeats', () => b.inbox.messages.length >= 2);
    assert.deepEqual(
      b.inbox.messages.map((m) => m.context),
      [1, 5],
    );
  });

  void it('serves an added service on the raft address', async (t) => {
    const transport = new GrpcTransport({ id: 'a', listenAddr: '127.0.0.1:0' });
    t.after(() => transport.stop());
    let checks = 0;
    transport.addService(HealthService, {
      check: (_call: unknown, callback: (err: null, res: HealthCheckResponse) => void) => {
        checks++;
        callback(null, { status: ServingStatus.SERVING });
      },
      watch: () => undefined,
    });
    await transport.start(new Inbox());
    const client = new HealthClient(`127.0.0.1:${transport.port}`, credentials.createInsecure());
    t.after(() => client.close());
    const res = await new Promise<HealthCheckResponse>((resolve, reject) => {
      client.check({ service: '' }, (err, r) => (err === null ? resolve(r) : reject(err)));
    });
    assert.equal(res.status, ServingStatus.SERVING);
    assert.equal(checks, 1);
  });

  void it('refuses bad construction options with an error naming the option', () => {
    assert.throws(
      () => new GrpcTransport({ id: 'a', listenAddr: 'localhost' }),
      /listenAddr 'localhost' must be host:port/,
    );
    assert.throws(() => new GrpcTransport({ id: 'a', listenAddr: '127.0.0.1:70000' }), /listenAddr/);
    assert.throws(() => new GrpcTransport({ id: '', listenAddr: '127.0.0.1:0' }), /id must be a non-empty/);
    assert.throws(
      () => new GrpcTransport({ id: 'a', listenAddr: '127.0.0.1:0', maxMessageBytes: 1000 }),
      /maxMessageBytes must be an integer of at least/,
    );
  });
});

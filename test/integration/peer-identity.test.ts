// Goal: on the raft address, a call is accepted only from the member its certificate names. A
// certificate of the cluster CA for node n2 cannot open a raft stream as n3, carry a message from
// n3 on its own stream, or send a snapshot as n3; a certificate the same CA signed for a node that
// is not a member cannot call the Internal service (Propose) or the raft stream at all. n2 as
// itself is accepted, so the checks refuse only what they should.
// Method: `slipway bootstrap`'s code (bootstrapPki) makes a CA with certificates for n1, n2, n3 and
// n9; a real GrpcTransport for n1 with mutual TLS on a loopback port, members n1-n3, serving an
// Internal service that answers every Propose; raw grpc-js clients with each certificate.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Client, credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { pino } from 'pino';
import { InternalClient, InternalService, type InternalServer } from '../../src/gen/internal.js';
import { RaftService, type SnapshotAck, type StreamAck } from '../../src/gen/raft.js';
import { bootstrapPki, caDirOf } from '../../src/platform/pki.js';
import { message, type Message } from '../../src/raft/core/types.js';
import { encodeMessageFrame } from '../../src/raft/transport/codec.js';
import { GrpcTransport } from '../../src/raft/transport/grpc-transport.js';
import { isRemovedNotice, removedNoticeDetails } from '../../src/raft/transport/removed-notice.js';
import { waitFor } from '../support/wait.js';

let dir: string;
let transport: GrpcTransport;
let addr: string;
const received: Message[] = [];
const refusals: string[] = [];

/** Channel credentials of node `id`'s certificate from the bootstrap directory. */
function certOf(id: string): ReturnType<typeof credentials.createSsl> {
  return credentials.createSsl(
    readFileSync(join(caDirOf(dir), 'ca.crt')),
    readFileSync(join(dir, id, `${id}.key`)),
    readFileSync(join(dir, id, `${id}.crt`)),
  );
}

const heartbeat = (from: string): Message => message({ type: 'heartbeat', from, to: 'n1', term: 1 });

/**
 * Opens a raft stream to n1 with `id`'s certificate, claiming `claimed` in x-raft-from, and sends
 * `msgs`. Resolves with the status the stream ended with, 'open' once the messages arrived with
 * the stream still open, or 'silent' if neither happened within 5 s (a failure for every caller).
 */
async function streamAs(
  id: string,
  claimed: string | undefined,
  msgs: Message[],
): Promise<number | 'open' | 'silent'> {
  const client = new Client(addr, certOf(id));
  const md = new Metadata();
  if (claimed !== undefined) md.set('x-raft-from', claimed);
  const before = received.length;
  try {
    return await new Promise<number | 'open' | 'silent'>((resolve) => {
      const call = client.makeBidiStreamRequest(
        RaftService.stream.path,
        (frames: Buffer) => frames,
        RaftService.stream.responseDeserialize,
        md,
        {},
      );
      call.on('error', () => undefined);
      call.on('status', (s: { code: number }) => resolve(s.code));
      call.on('data', (_ack: StreamAck) => {
        for (const m of msgs) call.write(Buffer.from(encodeMessageFrame(m)));
      });
      const check = setInterval(() => {
        if (received.length >= before + msgs.length) {
          clearInterval(check);
          resolve('open');
        }
      }, 10);
      setTimeout(() => {
        clearInterval(check);
        resolve('silent');
      }, 5000);
    });
  } finally {
    client.close();
  }
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'slipway-peer-identity-'));
  const ids = ['n1', 'n2', 'n3', 'n8', 'n9'];
  await bootstrapPki(
    dir,
    ids.map((id) => ({ id, hosts: [] })),
  );
  const logger = pino(
    { level: 'warn' },
    {
      write: (line: string) => {
        refusals.push(line);
      },
    },
  );
  const tls = {
    ca: readFileSync(join(dir, 'n1', 'ca.crt')),
    cert: readFileSync(join(dir, 'n1', 'n1.crt')),
    key: readFileSync(join(dir, 'n1', 'n1.key')),
  };
  transport = new GrpcTransport({ id: 'n1', listenAddr: '127.0.0.1:0', logger, tls });
  const unused = { code: status.UNIMPLEMENTED, details: 'not used here' };
  const internal: InternalServer = {
    propose: (_call, callback) => callback(null, { result: Buffer.from('ok'), resultAtMs: 0 }),
    proposeBatch: (_call, callback) => callback(unused, null),
    proposeStream: (call) => call.destroy(Object.assign(new Error(unused.details), unused)),
    artifactRead: (_call, callback) => callback(unused, null),
  };
  transport.addService(InternalService, internal);
  await transport.start({
    onMessage: (m) => received.push(m),
    onSnapshot: () => Promise.resolve(),
    // n8 has a certificate of this cluster's CA and was removed by a change this node applied.
    isRemoved: (id) => id === 'n8',
  });
  addr = `127.0.0.1:${transport.port}`;
  // Unreachable addresses: only the membership matters here.
  transport.setPeers(['n1', 'n2', 'n3'].map((id) => ({ id, addr: '127.0.0.1:9', apiAddr: '' })));
});

after(async () => {
  await transport.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("a member's certificate sending as itself is accepted (the control)", async () => {
  const before = received.length;
  assert.equal(await streamAs('n2', 'n2', [heartbeat('n2')]), 'open');
  assert.deepEqual(
    received.slice(before).map((m) => m.from),
    ['n2'],
  );
});

test("n2's certificate cannot open a raft stream claiming to be n3", async () => {
  const before = received.length;
  assert.equal(await streamAs('n2', 'n3', [heartbeat('n3')]), status.PERMISSION_DENIED);
  assert.equal(received.length, before, 'nothing reached raft');
  assert.ok(refusals.some((l) => l.includes('the certificate of n2 cannot send as n3 (x-raft-from)')));
});

test("n2's own stream cannot carry a message from n3", async () => {
  const before = received.length;
  assert.equal(await streamAs('n2', 'n2', [heartbeat('n3')]), status.PERMISSION_DENIED);
  assert.equal(received.length, before, 'nothing reached raft');
  assert.ok(refusals.some((l) => l.includes('a stream from n2 cannot carry a message from n3')));
});

test("n2's certificate cannot send a snapshot as n3", async () => {
  const client = new Client(addr, certOf('n2'));
  try {
    const code = await new Promise<number>((resolve) => {
      const call = client.makeClientStreamRequest(
        RaftService.installSnapshot.path,
        RaftService.installSnapshot.requestSerialize,
        RaftService.installSnapshot.responseDeserialize,
        new Metadata(),
        {},
        (err: ServiceError | null, _ack?: SnapshotAck) => resolve(err === null ? status.OK : err.code),
      );
      call.write({ from: 'n3', to: 'n1', offset: 0, data: Buffer.alloc(0), done: false, crc32: 0 });
    });
    assert.equal(code, status.PERMISSION_DENIED);
  } finally {
    client.close();
  }
});

test('a certificate of the same CA for a non-member is refused on the Internal service and the raft stream', async () => {
  const propose = (id: string, forwardedAs?: string): Promise<number> => {
    const client = new InternalClient(addr, certOf(id));
    const md = new Metadata();
    if (forwardedAs !== undefined) md.set('x-slipway-forwarded', forwardedAs);
    return new Promise<number>((resolve) => {
      client.propose({ command: Buffer.from('x') }, md, { deadline: Date.now() + 3000 }, (err) => {
        client.close();
        resolve(err === null ? status.OK : err.code);
      });
    });
  };
  assert.equal(await propose('n2', 'n2'), status.OK, 'a member proposing as itself');
  assert.equal(await propose('n9'), status.PERMISSION_DENIED);
  assert.equal(await propose('n9', 'n2'), status.PERMISSION_DENIED);
  assert.equal(await propose('n2', 'n3'), status.PERMISSION_DENIED, 'a member forwarding as another');
  assert.equal(await streamAs('n9', 'n9', [heartbeat('n9')]), status.PERMISSION_DENIED);
  await waitFor('the refusal to be logged', () =>
    refusals.some((l) => l.includes('the certificate of n9 names no member of this cluster')),
  );
});

test('a member this node removed is told so, with the notice its transport recognises', async () => {
  const before = received.length;
  assert.equal(await streamAs('n8', 'n8', [heartbeat('n8')]), status.FAILED_PRECONDITION);
  assert.equal(received.length, before, 'nothing reached raft');
  assert.ok(
    isRemovedNotice(status.FAILED_PRECONDITION, removedNoticeDetails('n1', 'n8')),
    'the details its link looks for',
  );
});

// Goal: the bytes HAProxy's health check sends (lb/grpc-health-probe.ts) are a grpc.health.v1
// Check a node answers, and the bytes it looks for are in the answer exactly when the node is
// SERVING.
// Method: the node's own HealthService (src/api/health-service.ts) on a grpc-js server on
// loopback; a plain TCP socket sends the probe, as HAProxy's tcp-check does, and collects the
// reply until the response message arrives, once while the node knows a leader and once while
// it does not.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { HealthService } from '../../src/api/health-service.js';
import {
  healthCheckRequestBytes,
  healthCheckResponseMessage,
  servingStatus,
  toHex,
} from '../../lb/grpc-health-probe.js';

let knowsLeader = true;
const server = new Server();
let port = 0;

before(async () => {
  new HealthService(() => knowsLeader).register(server);
  port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) =>
      err === null ? resolve(p) : reject(err),
    ),
  );
});

after(() => server.forceShutdown());

/** Sends the probe on a fresh connection; resolves to the reply (hex) once a status message is in it. */
function probe(): Promise<string> {
  const anyStatus = toHex(healthCheckResponseMessage(0)).slice(0, -2);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = connect({ host: '127.0.0.1', port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no health answer within 5 s; got ${toHex(Buffer.concat(chunks))}`));
    }, 5000);
    socket.on('connect', () => socket.write(healthCheckRequestBytes('slipway')));
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      const reply = toHex(Buffer.concat(chunks));
      const at = reply.indexOf(anyStatus);
      if (at >= 0 && reply.length >= at + anyStatus.length + 2) {
        clearTimeout(timer);
        socket.destroy();
        resolve(reply);
      }
    });
    socket.on('error', reject);
  });
}

test('a node that knows a leader answers SERVING, the bytes the check expects', async () => {
  knowsLeader = true;
  const reply = await probe();
  assert.ok(reply.includes(toHex(healthCheckResponseMessage(servingStatus.SERVING))), reply);
});

test('a node without a leader answers NOT_SERVING, which the check does not take', async () => {
  knowsLeader = false;
  const reply = await probe();
  assert.ok(reply.includes(toHex(healthCheckResponseMessage(servingStatus.NOT_SERVING))), reply);
  assert.ok(!reply.includes(toHex(healthCheckResponseMessage(servingStatus.SERVING))), reply);
});

test('the request is one h2c stream: preface, SETTINGS, HEADERS, DATA with END_STREAM', () => {
  const bytes = Buffer.from(healthCheckRequestBytes('slipway'));
  const preface = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';
  assert.equal(bytes.subarray(0, preface.length).toString('latin1'), preface);
  const frames: { type: number; flags: number; stream: number; payload: Buffer }[] = [];
  for (let at = preface.length; at < bytes.length;) {
    const length = bytes.readUIntBE(at, 3);
    frames.push({
      type: bytes[at + 3]!,
      flags: bytes[at + 4]!,
      stream: bytes.readUInt32BE(at + 5),
      payload: bytes.subarray(at + 9, at + 9 + length),
    });
    at += 9 + length;
  }
  assert.deepEqual(
    frames.map((f) => [f.type, f.flags, f.stream]),
    [
      [0x4, 0, 0], // SETTINGS, empty
      [0x1, 0x4, 1], // HEADERS, END_HEADERS
      [0x0, 0x1, 1], // DATA, END_STREAM
    ],
  );
  assert.ok(frames[1]!.payload.includes('/grpc.health.v1.Health/Check'));
  assert.ok(frames[1]!.payload.includes('application/grpc'));
  assert.deepEqual([...frames[2]!.payload], [0, 0, 0, 0, 0], 'an empty HealthCheckRequest: service ""');
});

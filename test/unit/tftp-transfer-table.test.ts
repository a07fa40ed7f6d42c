// Goal: the per-thread transfer table keeps the contract the admitting server relies on, the
// same in a worker and on the server's own thread: 'started' is reported before the client can
// answer the first packet; a repeated request is a retransmission only while the transfer has
// heard nothing from its client and the request is the same; otherwise the transfer is
// superseded and its 'ended' comes before the 'repeated' answer, unless a packet the client sent
// before repeating (EDK2's ERROR 8) ends it first; close() ends every transfer
// (including one still binding its socket) before 'closed'; a transfer answers from the local
// address it was started on, and ends (silently) when that address leaves the host, while
// transfers on other addresses carry on.
// Method: a TransferTable driven directly with commands, its events recorded in order, real
// transfer sockets on 127.0.0.1 and a bare dgram socket as the client.
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { TftpErrorCode, decodePacket, encodePacket, type TftpPacket } from '../../src/boot/tftp/packet.js';
import { TRANSFER_LIMITS_DEFAULT } from '../../src/boot/tftp/limits.js';
import { TransferTable } from '../../src/boot/tftp/transfer-table.js';
import type { TransferEvent } from '../../src/boot/tftp/transfer-protocol.js';

const HOST = '127.0.0.1';
const content = new Uint8Array(new SharedArrayBuffer(5000)).fill(7);

interface Client {
  readonly port: number;
  /** Resolves with the next packet and the port (and address) it came from. */
  next(): Promise<{ packet: TftpPacket; from: number; fromAddress: string }>;
  send(packet: TftpPacket, port: number): void;
  close(): void;
}

const opened: Client[] = [];
afterEach(() => {
  for (const client of opened.splice(0)) client.close();
});

async function openClient(): Promise<Client> {
  const socket = dgram.createSocket('udp4');
  const queue: { packet: TftpPacket; from: number; fromAddress: string }[] = [];
  let wake: (() => void) | null = null;
  socket.on('message', (message, from) => {
    const decoded = decodePacket(message);
    assert.ok(decoded.ok);
    queue.push({ packet: decoded.packet, from: from.port, fromAddress: from.address });
    wake?.();
  });
  await new Promise<void>((resolve) => socket.bind(0, HOST, resolve));
  const client: Client = {
    port: socket.address().port,
    async next() {
      while (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
      return queue.shift()!;
    },
    send: (packet, port) => socket.send(encodePacket(packet), port, HOST),
    close: () => socket.close(),
  };
  opened.push(client);
  return client;
}

function recordingTable(): {
  table: TransferTable;
  events: TransferEvent[];
  next: () => Promise<TransferEvent>;
} {
  const events: TransferEvent[] = [];
  let read = 0;
  let wake: (() => void) | null = null;
  const table = new TransferTable({ limits: TRANSFER_LIMITS_DEFAULT, socketType: 'udp4' }, (event) => {
    events.push(event);
    wake?.();
  });
  const next = async (): Promise<TransferEvent> => {
    while (events.length === read) await new Promise<void>((resolve) => (wake = resolve));
    return events[read++]!;
  };
  return { table, events, next };
}

const rrq = (filename: string): TftpPacket & { type: 'rrq' } => ({
  type: 'rrq',
  filename,
  mode: 'octet',
  options: new Map(),
});

void test("'started' is reported before the first packet reaches the client", async () => {
  const { table, events, next } = recordingTable();
  const client = await openClient();
  table.handle({
    type: 'start',
    id: 1,
    client: { address: HOST, port: client.port },
    local: HOST,
    request: rrq('a'),
    content,
  });
  const first = await client.next();
  assert.equal(first.packet.type, 'data');
  assert.deepEqual(events[0], { type: 'started', id: 1, blockSize: 512, windowSize: 1 });
  table.handle({ type: 'close' });
  assert.equal((await next()).type, 'started');
  assert.deepEqual((await next()).type, 'ended');
  assert.deepEqual(await next(), { type: 'closed' });
});

void test('a repeat is a retransmission only while nothing was heard and the request is the same', async () => {
  const { table, events, next } = recordingTable();
  const client = await openClient();
  const peer = { address: HOST, port: client.port };
  table.handle({ type: 'start', id: 1, client: peer, local: HOST, request: rrq('a'), content });
  assert.equal((await next()).type, 'started');
  const first = await client.next();

  table.handle({ type: 'repeat', id: 1, sameRequest: true });
  assert.deepEqual(await next(), { type: 'repeated', id: 1, admit: false });

  // Once the client has spoken on the transfer's port, even the same request means a new start.
  client.send({ type: 'ack', block: 1 }, first.from);
  assert.equal((await client.next()).packet.type, 'data');
  table.handle({ type: 'repeat', id: 1, sameRequest: true });
  const ended = await next();
  assert.equal(ended.type === 'ended' ? ended.end.error?.reason : null, 'superseded');
  assert.deepEqual(await next(), { type: 'repeated', id: 1, admit: true });

  // A different request supersedes at once; the end is reported before the answer.
  table.handle({ type: 'start', id: 2, client: peer, local: HOST, request: rrq('b'), content });
  assert.equal((await next()).type, 'started');
  table.handle({ type: 'repeat', id: 2, sameRequest: false });
  const superseded = await next();
  assert.equal(superseded.type === 'ended' ? superseded.id : null, 2);
  assert.deepEqual(await next(), { type: 'repeated', id: 2, admit: true });

  // A transfer that has already ended admits the new request.
  table.handle({ type: 'repeat', id: 99, sameRequest: true });
  assert.deepEqual(await next(), { type: 'repeated', id: 99, admit: true });
  assert.equal(events.length, 8);
});

void test('a packet the client sent before repeating its request is handled first (EDK2: ERROR 8, then RRQ)', async () => {
  const { table, next } = recordingTable();
  const client = await openClient();
  const probe: TftpPacket & { type: 'rrq' } = { ...rrq('a'), options: new Map([['tsize', '0']]) };
  table.handle({
    type: 'start',
    id: 1,
    client: { address: HOST, port: client.port },
    local: HOST,
    request: probe,
    content,
  });
  assert.equal((await next()).type, 'started');
  const oack = await client.next();
  assert.equal(oack.packet.type, 'oack');
  // On loopback the datagram is queued on the transfer's socket before send() returns; the
  // repeat arrives in the same turn, ahead of it.
  client.send({ type: 'error', code: TftpErrorCode.optionsDeclined, message: 'size known' }, oack.from);
  table.handle({ type: 'repeat', id: 1, sameRequest: false });
  const ended = await next();
  assert.equal(ended.type === 'ended' ? ended.end.end : null, 'optionsDeclined');
  assert.deepEqual(await next(), { type: 'repeated', id: 1, admit: true });
});

void test('close() ends every transfer with ERROR 0, one still binding its socket included, then says closed', async () => {
  const { table, events, next } = recordingTable();
  const a = await openClient();
  const b = await openClient();
  table.handle({
    type: 'start',
    id: 1,
    client: { address: HOST, port: a.port },
    local: HOST,
    request: rrq('a'),
    content,
  });
  assert.equal((await next()).type, 'started');
  // Its socket is bound asynchronously: close() arrives while it is still opening.
  table.handle({
    type: 'start',
    id: 2,
    client: { address: HOST, port: b.port },
    local: HOST,
    request: rrq('b'),
    content,
  });
  table.handle({ type: 'close' });
  while (events.at(-1)?.type !== 'closed') await next();
  const ends = events.filter((e) => e.type === 'ended');
  assert.deepEqual(ends.map((e) => [e.id, e.end.error]).sort(), [
    [1, { reason: 'serverClosed' }],
    [2, { reason: 'serverClosed' }],
  ]);
  for (const client of [a, b]) {
    let packet = (await client.next()).packet;
    while (packet.type === 'data') packet = (await client.next()).packet;
    assert.equal(packet.type === 'error' ? packet.code : -1, TftpErrorCode.notDefined);
  }
});

void test('a transfer answers from its local address and ends when that address leaves the host', async () => {
  const { table, events, next } = recordingTable();
  const a = await openClient();
  const b = await openClient();
  // Both addresses are on loopback (127.0.0.0/8 is local without being configured).
  const staying = '127.0.0.1';
  const leaving = '127.0.0.2';
  table.handle({
    type: 'start',
    id: 1,
    client: { address: HOST, port: a.port },
    local: staying,
    request: rrq('a'),
    content,
  });
  table.handle({
    type: 'start',
    id: 2,
    client: { address: HOST, port: b.port },
    local: leaving,
    request: rrq('b'),
    content,
  });
  const firstA = await a.next();
  const firstB = await b.next();
  assert.equal(firstA.fromAddress, staying);
  assert.equal(firstB.fromAddress, leaving);
  while (events.filter((e) => e.type === 'started').length < 2) await next();

  table.handle({ type: 'addressGone', address: leaving });
  let ended = await next();
  while (ended.type !== 'ended') ended = await next();
  assert.deepEqual(
    [ended.id, ended.end.end, ended.end.error],
    [2, 'failed', { reason: 'addressGone', address: leaving }],
  );

  // The other transfer goes on: its client's ACK gets the next block, from the same address.
  a.send({ type: 'ack', block: 1 }, firstA.from);
  const second = await a.next();
  assert.deepEqual([second.packet.type, second.fromAddress], ['data', staying]);
  assert.equal(events.filter((e) => e.type === 'ended').length, 1);
  table.handle({ type: 'close' });
  while (events.at(-1)?.type !== 'closed') await next();
});

// Goal: with an AddressFeed, the TFTP server on 0.0.0.0 answers every request from the address
// it was sent to: OACK, DATA and ERROR alike, on worker threads and on the server's own thread.
// Listeners follow the feed: an address added is answered from itself; an address removed has
// its in-flight transfers ended at once ('addressGone', counted). The wildcard listener, which
// hears requests to addresses the feed has not reported (the VIP just after it was added), does
// not answer them, since its reply would not leave from the address asked: the request is counted
// as dropped ('notListening'), and the client's retransmission is answered from the VIP once its
// listener is bound. Should a listener fail to bind, the wildcard one answers again, and a client
// it answered from the wrong address is served from the right one when it asks again from the
// same port. A feed with a host other than 0.0.0.0 is refused with a clear error.
// Method: real servers and sockets on loopback, where every 127.0.0.0/8 address is local
// without being configured, so 127.0.0.2 and 127.0.0.3 stand in for the node address and the
// VIP; the feed is a plain subject the test drives. A small dgram client on 127.0.0.1 records
// the source address of every packet it receives. test/e2e/tftp-reply-address.test.ts does the
// same with real interface addresses in a network namespace.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  startTftpServer,
  type RequestDroppedEvent,
  type TftpServer,
  type TransferEndEvent,
} from '../../src/boot/tftp/server.js';
import type { AddressFeed } from '../../src/boot/tftp/address-feed.js';
import { decodePacket, encodePacket, type TftpPacket } from '../../src/boot/tftp/packet.js';
import { waitFor } from '../support/wait.js';

const CLIENT = '127.0.0.1';
const NODE = '127.0.0.2';
const VIP = '127.0.0.3';
const file = randomBytes(30 * 1468 + 100);

/** A feed whose addresses the test sets. */
class AddressSubject implements AddressFeed {
  #addresses: readonly string[];
  readonly #listeners = new Set<(ipv4: readonly string[]) => void>();

  constructor(addresses: readonly string[]) {
    this.#addresses = addresses;
  }

  subscribe(listener: (ipv4: readonly string[]) => void): () => void {
    this.#listeners.add(listener);
    listener(this.#addresses);
    return () => this.#listeners.delete(listener);
  }

  set(addresses: readonly string[]): void {
    this.#addresses = addresses;
    for (const listener of this.#listeners) listener(addresses);
  }
}

interface Arrival {
  readonly packet: TftpPacket;
  readonly address: string;
  readonly port: number;
}

/** A client on 127.0.0.1 that keeps every packet with where it came from. */
async function openClient(): Promise<{
  next(): Promise<Arrival>;
  /** Resolves once the datagram has left (a close right after a bare send may drop it). */
  send(packet: TftpPacket, address: string, port: number): Promise<void>;
  /** Packets received and not yet taken with next(). */
  pending(): number;
  close(): void;
}> {
  const socket = dgram.createSocket('udp4');
  const queue: Arrival[] = [];
  let wake: (() => void) | null = null;
  socket.on('message', (message, from) => {
    const decoded = decodePacket(message);
    assert.ok(decoded.ok, 'the server sent a malformed packet');
    queue.push({ packet: decoded.packet, address: from.address, port: from.port });
    wake?.();
  });
  await new Promise<void>((resolve) => socket.bind(0, CLIENT, resolve));
  return {
    async next() {
      const deadline = Date.now() + 5000;
      while (queue.length === 0) {
        assert.ok(Date.now() < deadline, 'no packet within 5 s');
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 100);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      return queue.shift()!;
    },
    send: (packet, address, port) =>
      new Promise<void>((resolve) => socket.send(encodePacket(packet), port, address, () => resolve())),
    pending: () => queue.length,
    close: () => socket.close(),
  };
}

const rrq = (filename: string): TftpPacket => ({
  type: 'rrq',
  filename,
  mode: 'octet',
  options: new Map([
    ['tsize', '0'],
    ['blksize', '1468'],
  ]),
});

/** Reads `filename` from `address`; returns the source addresses of every packet received. */
async function readFrom(
  port: number,
  address: string,
  filename: string,
): Promise<{ sources: string[]; bytes: number }> {
  const client = await openClient();
  try {
    await client.send(rrq(filename), address, port);
    const sources: string[] = [];
    let bytes = 0;
    for (let expected = 1; ;) {
      const { packet, address: from, port: tid } = await client.next();
      sources.push(from);
      if (packet.type === 'error') return { sources, bytes: -packet.code };
      if (packet.type === 'oack') await client.send({ type: 'ack', block: 0 }, from, tid);
      if (packet.type !== 'data' || packet.block !== expected) continue;
      bytes += packet.data.length;
      expected += 1;
      await client.send({ type: 'ack', block: packet.block }, from, tid);
      if (packet.data.length < 1468) return { sources, bytes };
    }
  } finally {
    client.close();
  }
}

let dir = '';
const servers: TftpServer[] = [];
after(async () => {
  await Promise.all(servers.map((s) => s.close()));
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

async function fixtureDir(): Promise<string> {
  dir = await mkdtemp(path.join(tmpdir(), 'slipway-tftp-addr-'));
  await writeFile(path.join(dir, 'ipxe.efi'), file);
  return dir;
}

async function start(
  feed: AddressFeed,
  workers: number,
  ends: TransferEndEvent[],
  drops: RequestDroppedEvent[] = [],
): Promise<TftpServer> {
  if (dir === '') await fixtureDir();
  const server = await startTftpServer({
    host: '0.0.0.0',
    port: 0,
    root: dir,
    workers,
    addresses: feed,
    hooks: { onTransferEnd: (e) => ends.push(e), onRequestDropped: (e) => drops.push(e) },
  });
  servers.push(server);
  return server;
}

for (const workers of [2, 0]) {
  void test(`every reply leaves from the address asked, and listeners follow the feed (workers: ${workers})`, async () => {
    const feed = new AddressSubject([CLIENT, NODE]);
    const ends: TransferEndEvent[] = [];
    const drops: RequestDroppedEvent[] = [];
    const server = await start(feed, workers, ends, drops);
    assert.deepEqual(server.stats.listening, [CLIENT, NODE]);

    // The node's address: OACK and DATA from it; an ERROR too.
    const fromNode = await readFrom(server.port, NODE, 'ipxe.efi');
    assert.equal(fromNode.bytes, file.length);
    assert.deepEqual(new Set(fromNode.sources), new Set([NODE]));
    assert.deepEqual(await readFrom(server.port, NODE, 'missing.efi'), { sources: [NODE], bytes: -1 });

    // The VIP before the feed reports it: the wildcard listener hears the request and says
    // nothing (its reply would leave from the kernel's pick, here the client's own loopback
    // address, which firmware rejects).
    const early = await openClient();
    try {
      await early.send(rrq('ipxe.efi'), VIP, server.port);
      await waitFor('the request to the VIP dropped', () => drops.length === 1);
      assert.deepEqual(
        drops.map((d) => [d.reason, d.filename, d.client.address]),
        [['notListening', 'ipxe.efi', CLIENT]],
      );
      assert.equal(early.pending(), 0, 'nothing answered the request to an address without a listener');

      // The VIP arrives: the retransmission is answered from it.
      feed.set([CLIENT, NODE, VIP]);
      await waitFor('a listener on the VIP', () => server.stats.listening.includes(VIP));
      await early.send(rrq('ipxe.efi'), VIP, server.port);
      const answer = await early.next();
      assert.deepEqual([answer.packet.type, answer.address], ['oack', VIP]);
      assert.equal(drops.length, 1);
      // The client ends that transfer itself, so that only the one below is in flight later.
      const ended = ends.length;
      await early.send({ type: 'error', code: 0, message: 'enough' }, answer.address, answer.port);
      await waitFor('the transfer the client ended', () => ends.length === ended + 1);
    } finally {
      early.close();
    }
    const fromVip = await readFrom(server.port, VIP, 'ipxe.efi');
    assert.deepEqual([fromVip.bytes, [...new Set(fromVip.sources)]], [file.length, [VIP]]);

    // A transfer in flight when the VIP leaves ends at once, without a word to its client.
    const held = await openClient();
    try {
      await held.send(rrq('ipxe.efi'), VIP, server.port);
      const oack = await held.next();
      assert.deepEqual([oack.packet.type, oack.address], ['oack', VIP]);
      feed.set([CLIENT, NODE]);
      await waitFor('the held transfer to end', () => ends.some((e) => e.error?.reason === 'addressGone'));
      assert.deepEqual(
        ends.filter((e) => e.error?.reason === 'addressGone').map((e) => e.error),
        [{ reason: 'addressGone', address: VIP }],
      );
      assert.equal(server.stats.transfersAddressGone, 1);
      assert.deepEqual(server.stats.listening, [CLIENT, NODE]);
    } finally {
      held.close();
    }
    // A request to the VIP gone is dropped again, and the node address is still served.
    const late = await openClient();
    try {
      await late.send(rrq('ipxe.efi'), VIP, server.port);
      await waitFor('the request to the VIP gone dropped', () => drops.length === 2);
      assert.deepEqual([drops[1]?.reason, late.pending()], ['notListening', 0]);
    } finally {
      late.close();
    }
    assert.deepEqual(new Set((await readFrom(server.port, NODE, 'ipxe.efi')).sources), new Set([NODE]));
    await waitFor('every transfer to end', () => server.stats.transfersActive === 0);
  });
}

void test('while a listener failed to bind, the catch-all answers; a client it answered from the wrong address is served from the right one when it asks again', async () => {
  // 192.0.2.1 (TEST-NET-1) is no address of this host: its bind fails. Nothing is sent to it.
  const feed = new AddressSubject([CLIENT, NODE, '192.0.2.1']);
  const ends: TransferEndEvent[] = [];
  const errors: unknown[] = [];
  const server = await startTftpServer({
    host: '0.0.0.0',
    port: 0,
    root: dir === '' ? await fixtureDir() : dir,
    workers: 0,
    addresses: feed,
    hooks: { onTransferEnd: (e) => ends.push(e), onError: (e) => errors.push(e) },
  });
  servers.push(server);
  assert.deepEqual(server.stats.listening, [CLIENT, NODE]);
  assert.match(String(errors[0]), /could not listen on 192\.0\.2\.1/);
  const client = await openClient();
  try {
    // Asked at the VIP before its listener exists: the catch-all answers from another address,
    // which the client (as EDK2) ignores.
    await client.send(rrq('ipxe.efi'), VIP, server.port);
    const wrong = await client.next();
    assert.deepEqual([wrong.packet.type, wrong.address], ['oack', CLIENT]);
    feed.set([CLIENT, NODE, VIP]);
    await waitFor('a listener on the VIP', () => server.stats.listening.includes(VIP));
    // The same request again from the same port, as firmware retransmits it: not a duplicate,
    // since it reached another listener; the old transfer is superseded.
    await client.send(rrq('ipxe.efi'), VIP, server.port);
    let answer = await client.next();
    while (answer.address !== VIP) answer = await client.next();
    assert.equal(answer.packet.type, 'oack');
    await waitFor('the first transfer to end', () => ends.length === 1);
    assert.deepEqual(ends[0]?.error, { reason: 'superseded' });
  } finally {
    client.close();
  }
});

void test('an address feed with a listen host other than 0.0.0.0 is refused, naming the fix', async () => {
  await assert.rejects(
    startTftpServer({
      host: CLIENT,
      port: 0,
      root: tmpdir(),
      workers: 0,
      addresses: new AddressSubject([CLIENT]),
    }),
    (error: Error) => error instanceof RangeError && /needs the listen host 0\.0\.0\.0/.test(error.message),
  );
});

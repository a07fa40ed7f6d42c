// Goal: the storm's simulated firmware checks what EDK2 checks, so the benchmark cannot pass
// where real firmware would fail: a TFTP read is accepted only from the address it was sent to
// (against the server's old behaviour, answering a second local address from another one, the
// read fails and says why; against the fixed server it succeeds, with nothing ignored), and a
// DHCP ACK counts only when its server identifier is the server the REQUEST named.
// Method: a real Slipway TFTP server on loopback, on 0.0.0.0, where 127.0.0.3 stands in for
// the VIP: once without an address feed (the kernel picks the source: 127.0.0.1), once with a
// feed listing 127.0.0.3. The storm's own tftpRead is the client.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fromServerAsked, tftpRead } from '../../bench/storm-protocols.js';
import { startTftpServer, type TftpServer } from '../../src/boot/tftp/server.js';
import type { DhcpPacket } from '../../src/boot/index.js';

const CLIENT = '127.0.0.1';
const VIP = '127.0.0.3';
const binary = randomBytes(20 * 1432 + 7);
let dir = '';
const servers: TftpServer[] = [];

after(async () => {
  await Promise.all(servers.map((s) => s.close()));
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

async function serve(followVip: boolean): Promise<TftpServer> {
  if (dir === '') {
    dir = await mkdtemp(path.join(tmpdir(), 'slipway-storm-fw-'));
    await writeFile(path.join(dir, 'undionly.kpxe'), binary);
  }
  const server = await startTftpServer({
    host: '0.0.0.0',
    port: 0,
    root: dir,
    workers: 0,
    ...(followVip
      ? { addresses: { subscribe: (listener) => (listener([CLIENT, VIP]), () => undefined) } }
      : {}),
  });
  servers.push(server);
  return server;
}

void test('a TFTP reply from another address than the one asked is ignored, so the old server fails the read', async () => {
  const old = await serve(false);
  await assert.rejects(
    tftpRead(CLIENT, VIP, 'undionly.kpxe', Date.now() + 2500, old.port),
    /not read before the deadline; \d+ packet\(s\) came from another address than 127\.0\.0\.3/,
  );
});

void test('the same read from a server answering from the address asked succeeds, nothing ignored', async () => {
  const fixed = await serve(true);
  const read = await tftpRead(CLIENT, VIP, 'undionly.kpxe', Date.now() + 10_000, fixed.port);
  assert.deepEqual(
    [read.bytes, read.sha256, read.otherSource],
    [binary.length, createHash('sha256').update(binary).digest('hex'), 0],
  );
});

void test('a DHCP answer counts only from the server the REQUEST named', () => {
  const ack = (serverId: string | undefined): DhcpPacket =>
    ({ options: serverId === undefined ? {} : { serverId } }) as unknown as DhcpPacket;
  assert.equal(fromServerAsked(ack('10.213.0.100'), '10.213.0.100'), true);
  assert.equal(fromServerAsked(ack('10.213.0.12'), '10.213.0.100'), false);
  assert.equal(fromServerAsked(ack(undefined), '10.213.0.100'), false);
});

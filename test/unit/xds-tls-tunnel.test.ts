// Goal: the loopback tunnel that carries proxyless gRPC's xDS stream over TLS
// (src/platform/xds-tls-tunnel.ts) sends nothing in plaintext beyond the process and skips no
// check: bytes pass both ways only over TLS verified against the cluster CA and the server's
// address, with h2 agreed; a wrong CA, a server named by no certificate, a plaintext server, one
// without h2 and one that never finishes the handshake are each refused with an error that says
// so, within the time given; a dead server is passed over for the next; a peer that closes ends
// the client's connection and the client closing ends the peer's; close() ends everything.
// Method: real TLS servers on 127.0.0.1/127.0.0.2 with certificates from `slipway bootstrap`'s
// code (src/platform/pki.ts), a second bootstrap for a CA the tunnel does not trust, real sockets.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer as createTcpServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createServer as createTlsServer } from 'node:tls';
import type { TlsOptions } from 'node:tls';
import { bootstrapPki } from '../../src/platform/pki.js';
import { XdsTlsTunnel, XdsTunnelError } from '../../src/platform/xds-tls-tunnel.js';
import { waitFor } from '../support/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'slipway-tunnel-'));
let ca: Buffer;
let otherCa: Buffer;
let identity: { cert: Buffer; key: Buffer };
let otherIdentity: { cert: Buffer; key: Buffer };
const servers: Server[] = [];
const tunnels: XdsTlsTunnel[] = [];

before(async () => {
  const pki = await bootstrapPki(join(dir, 'pki'), [{ id: 'n1', hosts: [] }]);
  const other = await bootstrapPki(join(dir, 'other'), [{ id: 'x1', hosts: [] }]);
  ca = readFileSync(pki.caCert);
  otherCa = readFileSync(other.caCert);
  identity = { cert: readFileSync(pki.nodes[0]!.cert), key: readFileSync(pki.nodes[0]!.key) };
  otherIdentity = { cert: readFileSync(other.nodes[0]!.cert), key: readFileSync(other.nodes[0]!.key) };
});

after(async () => {
  for (const t of tunnels) await t.close();
  for (const s of servers) s.close();
  rmSync(dir, { recursive: true, force: true });
});

/** What a server received, and its open sockets. */
interface Heard {
  readonly address: string;
  readonly bytes: Buffer[];
  readonly sockets: Socket[];
  alpn: string | false | null;
}

async function listen(server: Server, heard: Omit<Heard, 'address'>, host = '127.0.0.1'): Promise<Heard> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return Object.assign(heard, { address: `${host}:${(server.address() as AddressInfo).port}` });
}

/** A TLS server that echoes what it gets, prefixed with "echo:"; `close` ends each connection instead. */
function tlsServer(
  opts: TlsOptions = {},
  behaviour: 'echo' | 'close' = 'echo',
  host = '127.0.0.1',
): Promise<Heard> {
  const heard: Omit<Heard, 'address'> = { bytes: [], sockets: [], alpn: null };
  const server = createTlsServer({ ...identity, ALPNProtocols: ['h2'], ...opts }, (socket) => {
    heard.sockets.push(socket);
    heard.alpn = socket.alpnProtocol;
    socket.on('error', () => undefined);
    socket.on('data', (b: Buffer) => {
      heard.bytes.push(b);
      if (behaviour === 'close') socket.destroy();
      else socket.write(Buffer.concat([Buffer.from('echo:'), b]));
    });
  });
  return listen(server, heard, host);
}

/** A TCP server that records bytes and never answers (a plaintext or a hung server). */
function silentServer(): Promise<Heard> {
  const heard: Omit<Heard, 'address'> = { bytes: [], sockets: [], alpn: null };
  const server = createTcpServer((socket) => {
    heard.sockets.push(socket);
    socket.on('error', () => undefined);
    socket.on('data', (b: Buffer) => heard.bytes.push(b));
  });
  return listen(server, heard);
}

/** A port nothing listens on. */
async function deadAddress(): Promise<string> {
  const s = createTcpServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return `127.0.0.1:${port}`;
}

async function tunnel(addrs: string[], trust = ca, extra: Partial<{ handshakeTimeoutMs: number }> = {}) {
  const errors: XdsTunnelError[] = [];
  const t = await XdsTlsTunnel.open({ servers: addrs, ca: trust, onError: (e) => errors.push(e), ...extra });
  tunnels.push(t);
  return { t, errors };
}

/** A plaintext client of the tunnel, as grpc-js-xds is: what it got; `closed` waits for its close. */
function client(address: string): { socket: Socket; got: Buffer[]; closed: () => Promise<void> } {
  const [host = '', port = ''] = address.split(':');
  const socket = connect({ host, port: Number(port) });
  const got: Buffer[] = [];
  socket.on('data', (b: Buffer) => got.push(b));
  socket.on('error', () => undefined);
  return { socket, got, closed: () => closedWithin(socket, 'the client connection') };
}

/** Waits (with a deadline) until `socket` has closed. */
function closedWithin(socket: Socket, what: string): Promise<void> {
  return waitFor(`${what} to close`, () => socket.closed, 10_000, 10);
}

const secret = 'plaintext-payload';

/** Rejects with the XdsTunnelError of check(), asserting it is one. */
async function checkFails(t: XdsTlsTunnel, timeoutMs?: number): Promise<XdsTunnelError> {
  try {
    await t.check(timeoutMs);
  } catch (err) {
    assert.ok(err instanceof XdsTunnelError, String(err));
    return err;
  }
  assert.fail('check() succeeded');
}

describe('the xDS TLS tunnel', () => {
  test('carries bytes both ways over TLS with h2, listens on loopback only, and close() ends it', async () => {
    const node = await tlsServer();
    const { t } = await tunnel([node.address]);
    assert.match(t.address, /^127\.0\.0\.1:\d+$/);
    assert.equal(await t.check(), node.address);
    const c = client(t.address);
    c.socket.write(secret);
    await waitFor('the echo', () => Buffer.concat(c.got).toString() === `echo:${secret}`, 5000, 10);
    assert.equal(node.alpn, 'h2');
    const address = t.address;
    await t.close();
    await c.closed();
    tunnels.splice(tunnels.indexOf(t), 1);
    await assert.rejects(
      new Promise((resolve, reject) => {
        const again = client(address);
        again.socket.once('connect', resolve);
        again.socket.once('error', reject);
      }),
      /ECONNREFUSED/,
    );
  });

  test('a peer that closes ends the client connection; a client that closes ends the peer connection', async () => {
    const closing = await tlsServer({}, 'close');
    const { t } = await tunnel([closing.address]);
    const c = client(t.address);
    c.socket.write(secret);
    await c.closed();
    assert.equal(Buffer.concat(closing.bytes).toString(), secret);

    const node = await tlsServer();
    const { t: t2 } = await tunnel([node.address]);
    const c2 = client(t2.address);
    c2.socket.write(secret);
    await waitFor('the echo', () => c2.got.length > 0, 5000, 10);
    const peer = node.sockets[0]!;
    c2.socket.destroy();
    await closedWithin(peer, "the server's connection");
  });

  test('a CA that did not sign the server: refused, named, and the client gets nothing through', async () => {
    const stranger = await tlsServer({ ...otherIdentity });
    const { t, errors } = await tunnel([stranger.address]);
    const err = await checkFails(t);
    assert.ok(err.refusedByTls);
    assert.match(err.message, new RegExp(`${stranger.address}: .*(certificate|issuer)`));
    assert.match(err.message, /--ca \(or SLIPWAY_CA\) is the cluster's ca\.crt/);
    const c = client(t.address);
    c.socket.write(secret);
    await c.closed();
    assert.deepEqual(stranger.bytes, [], 'no byte was carried');
    assert.equal(errors.length, 1);
    // The other way round: the tunnel trusts another CA than the server's.
    const node = await tlsServer();
    const { t: t2 } = await tunnel([node.address], otherCa);
    assert.ok((await checkFails(t2)).refusedByTls);
  });

  test('a server whose certificate does not name its address is refused (TLS handshake failure)', async () => {
    // The node's certificate names 127.0.0.1 and localhost only.
    const elsewhere = await tlsServer({}, 'echo', '127.0.0.2');
    const { t } = await tunnel([elsewhere.address]);
    const err = await checkFails(t);
    assert.ok(err.refusedByTls);
    assert.match(err.message, /127\.0\.0\.2 is not in the cert's list/);
  });

  test('a plaintext server gets a TLS ClientHello and never the payload; refused as no TLS node', async () => {
    const plain = await silentServer();
    plain.sockets.length = 0;
    const { t } = await tunnel([plain.address], ca, { handshakeTimeoutMs: 300 });
    const c = client(t.address);
    c.socket.write(secret);
    await c.closed();
    const all = Buffer.concat(plain.bytes);
    assert.equal(all[0], 0x16, 'a TLS handshake record');
    assert.ok(!all.toString('latin1').includes(secret), 'the payload went out in plaintext');
    // A plaintext server that answers with something: not TLS.
    const chatty = createTcpServer((s) => {
      s.on('error', () => undefined);
      s.end('HTTP/1.1 400 Bad Request\r\n\r\n');
    });
    const chattyAt = await listen(chatty, { bytes: [], sockets: [], alpn: null });
    const { t: t2 } = await tunnel([chattyAt.address]);
    const err = await checkFails(t2);
    assert.ok(err.refusedByTls);
    assert.match(err.message, /is it a TLS node's API address\?/);
  });

  test('a server that never finishes the handshake is given up within the time allowed', async () => {
    const hung = await silentServer();
    const { t } = await tunnel([hung.address], ca, { handshakeTimeoutMs: 60_000 });
    const started = Date.now();
    const err = await checkFails(t, 400);
    assert.ok(Date.now() - started < 5000, 'the timeout was respected');
    assert.match(err.message, /no TLS handshake within 400 ms/);
  });

  test('a server without h2 is refused: it is no gRPC server', async () => {
    const http1 = await tlsServer({ ALPNProtocols: ['http/1.1'] });
    const noAlpn = await tlsServer({ ALPNProtocols: [] });
    for (const server of [http1, noAlpn]) {
      const { t } = await tunnel([server.address]);
      const err = await checkFails(t);
      assert.ok(err.refusedByTls, err.message);
      assert.match(err.message, /did not agree to HTTP\/2 by ALPN/);
    }
  });

  test('a dead server is passed over; with none alive, the error names each and --xds-server', async () => {
    const dead = await deadAddress();
    const node = await tlsServer();
    const { t } = await tunnel([dead, node.address]);
    assert.equal(await t.check(), node.address);
    const c = client(t.address);
    c.socket.write(secret);
    await waitFor('the echo', () => c.got.length > 0, 5000, 10);
    c.socket.destroy();

    const { t: t2, errors } = await tunnel([dead, await deadAddress()]);
    const err = await checkFails(t2);
    assert.ok(!err.refusedByTls);
    assert.equal(err.failures.length, 2);
    assert.match(err.message, /ECONNREFUSED/);
    assert.match(err.message, /Check --xds-server/);
    const c2 = client(t2.address);
    await c2.closed();
    await waitFor('the failure to be reported', () => errors.length === 1, 5000, 10);
  });

  test('a tunnel needs a server, and a server that is not HOST:PORT is named', async () => {
    await assert.rejects(XdsTlsTunnel.open({ servers: [], ca }), /at least one xDS server/);
    const { t } = await tunnel(['nowhere']);
    assert.match((await checkFails(t)).message, /nowhere: not HOST:PORT/);
  });
});

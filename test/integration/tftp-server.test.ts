// Goal: the TFTP server delivers files byte-exact to real clients, speaks RFC 7440 windows,
// refuses what it must with the right ERROR codes (not found 1, access violation 2, illegal
// operation 4, unknown TID 5), keeps a transfer alive despite packets from a wrong TID, ends
// quietly on ERROR 8, gives up on a silent client, and bounds concurrent transfers by dropping
// requests past the cap (the client's retransmission is served once a slot frees). Transfers
// run on worker threads (the main server uses 2 whatever the machine has), and also on the
// server's own thread (workers: 0); a worker killed or crashing mid-transfer ends its transfers,
// is reported and replaced, and the server keeps serving.
// Method: servers on 127.0.0.1 with ephemeral ports serving a temporary root directory. curl
// (always installed here) downloads files; a small dgram client written below implements
// windowsize and sends hand-made packets. Bytes are compared by SHA-256. Server hooks record
// events and the test waits on them with deadlines. tftp-hpa's client is also used when
// installed (CI: `apt-get install tftp-hpa`).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import dgram from 'node:dgram';
import { mkdtemp, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  startTftpServer,
  transferWorkersForTesting,
  type TftpPeer,
  type TftpServer,
  type TftpServerHooks,
  type TransferEndEvent,
  type TransferStartEvent,
} from '../../src/boot/tftp/server.js';
import { TftpErrorCode, decodePacket, encodePacket, type TftpPacket } from '../../src/boot/tftp/packet.js';

const run = promisify(execFile);
const HOST = '127.0.0.1';
const WAIT_MS = 5000;

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

// ---- Recording server hooks and waiting on them -----------------------------------------

type ServerEvent =
  | ({ kind: 'start' } & TransferStartEvent)
  | ({ kind: 'end' } & TransferEndEvent)
  | { kind: 'refused'; filename: string; code: number; client: TftpPeer }
  | { kind: 'dropped'; filename: string; reason: string; client: TftpPeer }
  | { kind: 'error'; error: unknown };

type EventOf<K extends ServerEvent['kind']> = Extract<ServerEvent, { kind: K }>;

const isKind =
  <K extends ServerEvent['kind']>(kind: K) =>
  (e: ServerEvent): e is EventOf<K> =>
    e.kind === kind;

class Recorder {
  readonly events: ServerEvent[] = [];
  readonly #waiters = new Set<() => void>();

  readonly hooks: TftpServerHooks = {
    onTransferStart: (e) => this.#push({ kind: 'start', ...e }),
    onTransferEnd: (e) => this.#push({ kind: 'end', ...e }),
    onRequestRefused: (e) =>
      this.#push({ kind: 'refused', filename: e.filename, code: e.code, client: e.client }),
    onRequestDropped: (e) =>
      this.#push({ kind: 'dropped', filename: e.filename, reason: e.reason, client: e.client }),
    onError: (error) => this.#push({ kind: 'error', error }),
  };

  /** Waits until count recorded events of that kind match the predicate. */
  async waitForCount<K extends ServerEvent['kind']>(
    kind: K,
    matches: (e: EventOf<K>) => boolean,
    count: number,
  ): Promise<void> {
    const seen = new Set<ServerEvent>();
    while (seen.size < count) seen.add(await this.waitFor(kind, (e) => !seen.has(e) && matches(e)));
  }

  #push(event: ServerEvent): void {
    this.events.push(event);
    for (const wake of this.#waiters) wake();
  }

  /** Resolves with the first recorded event of that kind matching the predicate, waiting up to the deadline. */
  async waitFor<K extends ServerEvent['kind']>(
    kind: K,
    matches: (e: EventOf<K>) => boolean,
  ): Promise<EventOf<K>> {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      const found = this.events.filter(isKind(kind)).find(matches);
      if (found !== undefined) return found;
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`no matching ${kind} event within ${WAIT_MS} ms`);
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer);
          this.#waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, remaining);
        this.#waiters.add(wake);
      });
    }
  }
}

// ---- A tiny TFTP client over dgram ------------------------------------------------------

interface Received {
  readonly packet: TftpPacket;
  readonly from: number;
}

type Arrival = Received | { readonly malformed: string };

class TinyClient {
  readonly #socket = dgram.createSocket('udp4');
  readonly #queue: Arrival[] = [];
  #wake: (() => void) | null = null;
  readonly #sending: Promise<void>[] = [];

  private constructor() {
    this.#socket.on('message', (message, from) => {
      const decoded = decodePacket(message);
      this.#queue.push(
        decoded.ok ? { packet: decoded.packet, from: from.port } : { malformed: decoded.error.message },
      );
      this.#wake?.();
    });
  }

  static async open(): Promise<TinyClient> {
    const client = new TinyClient();
    await new Promise<void>((resolve) => client.#socket.bind(0, HOST, resolve));
    return client;
  }

  get port(): number {
    return this.#socket.address().port;
  }

  send(packet: TftpPacket | Uint8Array, port: number): void {
    const bytes = packet instanceof Uint8Array ? packet : encodePacket(packet);
    // dgram drops a send still queued when the socket closes; close() waits for these.
    this.#sending.push(new Promise((resolve) => this.#socket.send(bytes, port, HOST, () => resolve())));
  }

  /** The next packet received, waiting up to the deadline. */
  async next(timeoutMs = WAIT_MS): Promise<Received> {
    const deadline = Date.now() + timeoutMs;
    while (this.#queue.length === 0) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`client ${this.port}: no packet within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = null;
    }
    const arrival = this.#queue.shift()!;
    if ('malformed' in arrival) throw new Error(`the server sent a malformed packet: ${arrival.malformed}`);
    return arrival;
  }

  /** The next ERROR, passing over DATA retransmissions that may arrive first. */
  async nextError(): Promise<{ code: number; message: string }> {
    for (;;) {
      const { packet } = await this.next();
      if (packet.type === 'error') return packet;
      assert.equal(packet.type, 'data', `expected ERROR, got ${packet.type}`);
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.#sending);
    await new Promise<void>((resolve) => this.#socket.close(resolve));
  }
}

interface Download {
  readonly content: Uint8Array;
  readonly oack: ReadonlyMap<string, string> | null;
  readonly acksSent: number;
  readonly dataReceived: number;
}

/** Reads a file the RFC 7440 way: ACK every windowsize in-order blocks and the final one. */
async function download(
  serverPort: number,
  filename: string,
  options: Record<string, string> = {},
  mode: 'octet' | 'netascii' = 'octet',
): Promise<Download> {
  const client = await TinyClient.open();
  try {
    return await receiveFile(client, serverPort, filename, options, mode);
  } finally {
    await client.close();
  }
}

async function receiveFile(
  client: TinyClient,
  serverPort: number,
  filename: string,
  options: Record<string, string>,
  mode: 'octet' | 'netascii',
): Promise<Download> {
  client.send({ type: 'rrq', filename, mode, options: new Map(Object.entries(options)) }, serverPort);
  let first = await client.next();
  const tid = first.from;
  assert.notEqual(tid, serverPort, 'the transfer runs on a new TID');
  let oack: ReadonlyMap<string, string> | null = null;
  if (first.packet.type === 'oack') {
    oack = first.packet.options;
    client.send({ type: 'ack', block: 0 }, tid);
    first = await client.next();
  }
  const blockSize = Number(oack?.get('blksize') ?? 512);
  const windowSize = Number(oack?.get('windowsize') ?? 1);
  const chunks: Uint8Array[] = [];
  let expected = 1;
  let sinceAck = 0;
  let acksSent = oack === null ? 0 : 1;
  let dataReceived = 0;
  const sendAck = (block: number): void => {
    client.send({ type: 'ack', block }, tid);
    acksSent += 1;
    sinceAck = 0;
  };
  for (let received: Received = first; ; received = await client.next()) {
    assert.equal(received.from, tid, 'every packet comes from the transfer TID');
    const { packet } = received;
    if (packet.type === 'error') throw new Error(`server error ${packet.code}: ${packet.message}`);
    assert.equal(packet.type, 'data');
    if (packet.type !== 'data') continue;
    dataReceived += 1;
    if (packet.block !== (expected & 0xffff)) {
      sendAck((expected - 1) & 0xffff);
      continue;
    }
    chunks.push(packet.data);
    expected += 1;
    sinceAck += 1;
    if (packet.data.length < blockSize) {
      sendAck(packet.block);
      return { content: Buffer.concat(chunks), oack, acksSent, dataReceived };
    }
    if (sinceAck === windowSize) sendAck(packet.block);
  }
}

async function curl(port: number, file: string, out: string, extra: readonly string[] = []): Promise<number> {
  try {
    await run('curl', ['-sS', '--max-time', '20', ...extra, '-o', out, `tftp://${HOST}:${port}/${file}`]);
    return 0;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'number' ? code : -1;
  }
}

/** tftp-hpa's client prints its name for -V; other `tftp` clients take different arguments. */
async function isTftpHpaInstalled(): Promise<boolean> {
  try {
    const { stdout, stderr } = await run('tftp', ['-V'], { timeout: 5000 });
    return `${stdout}${stderr}`.includes('tftp-hpa');
  } catch {
    return false;
  }
}

// ---- Fixtures ---------------------------------------------------------------------------

let base = '';
let rootDir = '';
let outDir = '';
const ipxe = randomBytes(850_528); // the size of Debian's ipxe.efi (ipxe-qemu)
const exact = randomBytes(1468 * 20);
const resolverCalls: { filename: string; client: TftpPeer }[] = [];
const recorder = new Recorder();
let server: TftpServer;

before(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'slipway-tftp-it-'));
  rootDir = path.join(base, 'root');
  outDir = path.join(base, 'out');
  await mkdir(path.join(rootDir, 'sub'), { recursive: true });
  await mkdir(outDir);
  await writeFile(path.join(rootDir, 'ipxe.efi'), ipxe);
  await writeFile(path.join(rootDir, 'sub', 'exact.bin'), exact);
  await writeFile(path.join(rootDir, 'menu.txt'), 'line 1\nline 2\r\n');
  await writeFile(path.join(base, 'secret'), 'do not serve');
  await symlink(path.join(base, 'secret'), path.join(rootDir, 'escape'));
  server = await startTftpServer({
    host: HOST,
    port: 0,
    root: rootDir,
    workers: 2,
    hooks: recorder.hooks,
    resolve: (filename, client) => {
      resolverCalls.push({ filename, client });
      if (filename === 'mac/explode') return Promise.reject(new Error('resolver exploded'));
      if (!filename.startsWith('mac/')) return Promise.resolve(null);
      return Promise.resolve(Buffer.from(`#!ipxe\n# for ${filename.slice(4)} at ${client.address}\n`));
    },
  });
});

after(async () => {
  await server.close();
  await rm(base, { recursive: true, force: true });
});

// ---- Downloads --------------------------------------------------------------------------

void test('curl downloads ipxe.efi byte-exact at the default 512-byte blocks', async () => {
  const out = path.join(outDir, 'curl-512');
  assert.equal(await curl(server.port, 'ipxe.efi', out), 0);
  assert.equal(sha256(await readFile(out)), sha256(ipxe));
  const end = await recorder.waitFor('end', (e) => e.filename === 'ipxe.efi' && e.end === 'completed');
  assert.equal(end.bytes, ipxe.length);
});

void test('curl with --tftp-blksize 1468 negotiates 1468-byte blocks', async () => {
  const out = path.join(outDir, 'curl-1468');
  const before = recorder.events.length;
  assert.equal(await curl(server.port, 'ipxe.efi', out, ['--tftp-blksize', '1468']), 0);
  assert.equal(sha256(await readFile(out)), sha256(ipxe));
  const start = recorder.events.slice(before).find((e) => e.kind === 'start');
  assert.equal(start?.kind === 'start' ? start.blockSize : 0, 1468);
});

void test('curl downloads a file whose size is a multiple of blksize (empty final block)', async () => {
  const out = path.join(outDir, 'curl-exact');
  assert.equal(await curl(server.port, 'sub/exact.bin', out, ['--tftp-blksize', '1468']), 0);
  assert.equal(sha256(await readFile(out)), sha256(exact));
});

void test('the resolver hook serves generated files first and sees the client address', async () => {
  const out = path.join(outDir, 'generated');
  assert.equal(await curl(server.port, 'mac/52-54-00-12-34-56.ipxe', out), 0);
  assert.equal(await readFile(out, 'utf8'), `#!ipxe\n# for 52-54-00-12-34-56.ipxe at ${HOST}\n`);
  const call = resolverCalls.find((c) => c.filename === 'mac/52-54-00-12-34-56.ipxe');
  assert.equal(call?.client.address, HOST);
  assert.ok(
    resolverCalls.some((c) => c.filename === 'ipxe.efi'),
    'the resolver is asked before the root',
  );
});

void test('RFC 7440: a windowsize 8 client gets the file with one ACK per 8 blocks, and tsize', async () => {
  const result = await download(server.port, 'ipxe.efi', { blksize: '1468', windowsize: '8', tsize: '0' });
  assert.equal(sha256(result.content), sha256(ipxe));
  assert.equal(result.oack?.get('windowsize'), '8');
  assert.equal(result.oack?.get('blksize'), '1468');
  assert.equal(result.oack?.get('tsize'), String(ipxe.length));
  const blocks = Math.floor(ipxe.length / 1468) + 1;
  assert.ok(result.dataReceived >= blocks);
  // ACK 0 plus one per full window plus the final one; lock-step would need one per block.
  assert.ok(result.acksSent <= Math.ceil(blocks / 8) + 2, `${result.acksSent} ACKs for ${blocks} blocks`);
});

void test('windowsize and blksize are clamped to the server maxima (16, 1468)', async () => {
  const result = await download(server.port, 'sub/exact.bin', { blksize: '9000', windowsize: '64' });
  assert.equal(result.oack?.get('windowsize'), '16');
  assert.equal(result.oack?.get('blksize'), '1468');
  assert.equal(sha256(result.content), sha256(exact));
});

void test('netascii mode is translated: LF → CR LF, CR → CR NUL', async () => {
  const result = await download(server.port, 'menu.txt', {}, 'netascii');
  assert.equal(Buffer.from(result.content).toString('latin1'), 'line 1\r\nline 2\r\0\r\n');
});

void test('tftp-hpa downloads byte-exact', async () => {
  assert.ok(await isTftpHpaInstalled(), 'tftp-hpa is required: apt-get install tftp-hpa (.ci/run does)');
  const out = path.join(outDir, 'tftp-hpa');
  await run('tftp', ['-m', 'binary', HOST, String(server.port), '-c', 'get', 'ipxe.efi', out], {
    timeout: 20_000,
  });
  assert.equal(sha256(await readFile(out)), sha256(ipxe));
});

// ---- Refusals ---------------------------------------------------------------------------

async function requestError(
  packet: TftpPacket | Uint8Array,
  port = server.port,
): Promise<{ code: number; message: string; from: number }> {
  const client = await TinyClient.open();
  try {
    client.send(packet, port);
    const { packet: reply, from } = await client.next();
    assert.equal(reply.type, 'error', `expected ERROR, got ${reply.type}`);
    return reply.type === 'error'
      ? { code: reply.code, message: reply.message, from }
      : { code: -1, message: '', from };
  } finally {
    await client.close();
  }
}

const read = (filename: string, mode: 'octet' | 'mail' = 'octet'): TftpPacket => ({
  type: 'rrq',
  filename,
  mode,
  options: new Map(),
});

void test('an unknown file is ERROR 1 (tiny client and curl)', async () => {
  const reply = await requestError(read('missing.efi'));
  assert.equal(reply.code, TftpErrorCode.fileNotFound);
  assert.match(reply.message, /missing\.efi/);
  assert.equal(await curl(server.port, 'missing.efi', path.join(outDir, 'missing')), 68); // CURLE_TFTP_NOTFOUND
});

void test('path traversal and symlinks out of the root are ERROR 2; absolute names stay in the root', async () => {
  for (const name of ['../secret', 'sub/../../secret', '..\\secret', 'escape']) {
    assert.equal((await requestError(read(name))).code, TftpErrorCode.accessViolation, name);
  }
  assert.equal((await requestError(read('/etc/passwd'))).code, TftpErrorCode.fileNotFound);
  const viaCurl = await curl(server.port, '../secret', path.join(outDir, 'traversal'), ['--path-as-is']);
  assert.equal(viaCurl, 69); // CURLE_TFTP_PERM
  const leading = await download(server.port, '/sub/exact.bin');
  assert.equal(sha256(leading.content), sha256(exact), 'a leading slash is relative to the root');
});

void test('a write request is ERROR 2: the server is read-only', async () => {
  const reply = await requestError({
    type: 'wrq',
    filename: 'upload.bin',
    mode: 'octet',
    options: new Map(),
  });
  assert.equal(reply.code, TftpErrorCode.accessViolation);
  assert.match(reply.message, /read-only/);
});

void test('malformed requests and mail mode are ERROR 4; stray ACKs to port 69 are ERROR 5', async () => {
  assert.equal((await requestError(Uint8Array.from([0, 9, 1, 2]))).code, TftpErrorCode.illegalOperation);
  assert.equal((await requestError(Uint8Array.from([0, 1, 0x66]))).code, TftpErrorCode.illegalOperation);
  assert.equal((await requestError(read('ipxe.efi', 'mail'))).code, TftpErrorCode.illegalOperation);
  assert.equal((await requestError({ type: 'ack', block: 1 })).code, TftpErrorCode.unknownTransferId);
  assert.equal(
    (await requestError({ type: 'oack', options: new Map() })).code,
    TftpErrorCode.illegalOperation,
  );
});

void test('a failing resolver is ERROR 0 to the client and reported through onError', async () => {
  const reply = await requestError(read('mac/explode'));
  assert.equal(reply.code, TftpErrorCode.notDefined);
  assert.match(reply.message, /internal server error/);
  const reported = await recorder.waitFor('error', () => true);
  assert.match(String(reported.error), /resolver exploded/);
  recorder.events.splice(recorder.events.indexOf(reported), 1); // expected; later checks look for errors
});

void test('a malformed packet from the client on the transfer port gets ERROR 4; the transfer goes on', async () => {
  const client = await TinyClient.open();
  try {
    client.send(read('menu.txt'), server.port);
    const first = await client.next();
    assert.equal(first.packet.type, 'data');
    client.send(Uint8Array.from([0, 4, 0]), first.from); // a truncated ACK
    assert.equal((await client.nextError()).code, TftpErrorCode.illegalOperation);
    client.send({ type: 'ack', block: 1 }, first.from);
    const end = await recorder.waitFor('end', (e) => e.client.port === client.port);
    assert.equal(end.end, 'completed');
  } finally {
    await client.close();
  }
});

// ---- Transfer behaviour -----------------------------------------------------------------

// After a failover the new VIP holder may serve a transfer from the very port a transfer of the
// dead leader used; that transfer's client still ACKs there. Told ERROR 5 (unknown transfer ID),
// firmware gives the boot up; hearing nothing, it stalls and asks again from the start.
void test('a packet from a wrong TID gets no answer and the transfer carries on', async () => {
  const client = await TinyClient.open();
  const orphan = await TinyClient.open();
  try {
    client.send(read('menu.txt'), server.port);
    const first = await client.next();
    assert.equal(first.packet.type, 'data');
    orphan.send({ type: 'ack', block: 1 }, first.from);
    // The real client's transfer is untouched: its ACK 1 completes it.
    client.send({ type: 'ack', block: 1 }, first.from);
    const end = await recorder.waitFor('end', (e) => e.client.port === client.port);
    assert.equal(end.end, 'completed');
    // The orphan asks again: the first thing it hears is its own transfer's DATA, so nothing
    // answered the ACK it sent to another transfer's port before.
    orphan.send(read('menu.txt'), server.port);
    const own = await orphan.next();
    assert.equal(own.packet.type, 'data', `heard ${JSON.stringify(own.packet)}`);
    orphan.send({ type: 'ack', block: 1 }, own.from);
    const orphanEnd = await recorder.waitFor('end', (e) => e.client.port === orphan.port);
    assert.equal(orphanEnd.end, 'completed');
  } finally {
    await Promise.all([client.close(), orphan.close()]);
  }
});

void test('ERROR 8 after the OACK (EDK2 learning tsize) ends the transfer quietly', async () => {
  const client = await TinyClient.open();
  try {
    client.send(
      { type: 'rrq', filename: 'ipxe.efi', mode: 'octet', options: new Map([['tsize', '0']]) },
      server.port,
    );
    const oack = await client.next();
    assert.equal(oack.packet.type, 'oack');
    assert.equal(oack.packet.type === 'oack' ? oack.packet.options.get('tsize') : '', String(ipxe.length));
    client.send({ type: 'error', code: TftpErrorCode.optionsDeclined, message: 'tsize only' }, oack.from);
    const end = await recorder.waitFor('end', (e) => e.client.port === client.port);
    assert.equal(end.end, 'optionsDeclined');
    assert.equal(end.error, null);
  } finally {
    await client.close();
  }
});

/** EDK2 asks for tsize, declines the OACK with ERROR 8 and at once asks again from the same port. */
async function checkEdk2ReAsk(port: number, events: Recorder): Promise<void> {
  const client = await TinyClient.open();
  try {
    const probe = { tsize: '0', blksize: '1468' };
    client.send(
      { type: 'rrq', filename: 'ipxe.efi', mode: 'octet', options: new Map(Object.entries(probe)) },
      port,
    );
    const oack = await client.next();
    assert.equal(oack.packet.type, 'oack');
    client.send({ type: 'error', code: TftpErrorCode.optionsDeclined, message: 'size known' }, oack.from);
    const result = await receiveFile(client, port, 'ipxe.efi', { blksize: '1468' }, 'octet');
    assert.equal(sha256(result.content), sha256(ipxe));
    const first = await events.waitFor('end', (e) => e.client.port === client.port);
    assert.equal(first.end, 'optionsDeclined');
  } finally {
    await client.close();
  }
}

async function checkSupersede(port: number, events: Recorder): Promise<void> {
  const client = await TinyClient.open();
  try {
    client.send(read('menu.txt'), port);
    assert.equal((await client.next()).packet.type, 'data');
    const result = await receiveFile(client, port, 'sub/exact.bin', { blksize: '1468' }, 'octet');
    assert.equal(sha256(result.content), sha256(exact));
    const first = await events.waitFor(
      'end',
      (e) => e.client.port === client.port && e.filename === 'menu.txt',
    );
    assert.deepEqual(first.error, { reason: 'superseded' });
  } finally {
    await client.close();
  }
}

void test('EDK2 pattern: ERROR 8 then a new RRQ at once from the same port is served', () =>
  checkEdk2ReAsk(server.port, recorder));

void test('a different RRQ from the same port supersedes the unanswered transfer', () =>
  checkSupersede(server.port, recorder));

void test('a retransmitted RRQ does not start a second transfer', async () => {
  const client = await TinyClient.open();
  try {
    client.send(read('menu.txt'), server.port);
    client.send(read('menu.txt'), server.port);
    const first = await client.next();
    client.send({ type: 'ack', block: 1 }, first.from);
    await recorder.waitFor('end', (e) => e.client.port === client.port);
    const starts = recorder.events.filter((e) => e.kind === 'start' && e.client.port === client.port);
    assert.equal(starts.length, 1);
  } finally {
    await client.close();
  }
});

void test('startTftpServer refuses bad configuration and a port in use', async () => {
  await assert.rejects(
    startTftpServer({ host: HOST, port: 0, root: rootDir, limits: { blockSizeMax: 4 } }),
    /blockSizeMax/,
  );
  await assert.rejects(startTftpServer({ host: HOST, port: 0 }), /root directory, a resolver/);
  await assert.rejects(
    startTftpServer({ host: HOST, port: 0, root: path.join(rootDir, 'ipxe.efi') }),
    /not a directory/,
  );
  await assert.rejects(startTftpServer({ host: HOST, port: 0, root: rootDir, workers: 65 }), /workers/);
  // The workers started before the port turned out to be taken are stopped again.
  await assert.rejects(startTftpServer({ host: HOST, port: server.port, root: rootDir, workers: 2 }), {
    code: 'EADDRINUSE',
  });
});

// ---- Limits: concurrency, give-up, shutdown (a server with tight limits) ---------------

for (const workers of [0, 2]) {
  void test(`concurrency bound, retransmission give-up and shutdown with tight limits (workers: ${workers})`, async (t) => {
    const limited = new Recorder();
    const tight = await startTftpServer({
      host: HOST,
      port: 0,
      root: rootDir,
      workers,
      hooks: limited.hooks,
      limits: { transfersMax: 1, timeoutMs: 40, timeoutMaxMs: 80, retriesMax: 2 },
    });
    const clients: TinyClient[] = [];
    const open = async (): Promise<TinyClient> => {
      const c = await TinyClient.open();
      clients.push(c);
      return c;
    };
    try {
      assert.equal(tight.stats.workers, workers);

      await t.test(
        'beyond transfersMax a request is dropped unanswered and counted; its retransmission is served later',
        async () => {
          const holder = await open();
          holder.send(read('ipxe.efi'), tight.port);
          const first = await holder.next();
          assert.equal(first.packet.type, 'data');
          const late = await open();
          late.send(read('menu.txt'), tight.port);
          const dropped = await limited.waitFor('dropped', (e) => e.client.port === late.port);
          assert.equal(dropped.reason, 'busy');
          assert.equal(tight.stats.requestsDropped, 1);
          holder.send({ type: 'error', code: TftpErrorCode.notDefined, message: 'bye' }, first.from);
          const end = await limited.waitFor('end', (e) => e.client.port === holder.port);
          assert.deepEqual(end.error, { reason: 'clientError', code: 0, message: 'bye' });
          // Nothing came back for the dropped request: no ERROR for the firmware to give up on.
          await assert.rejects(late.next(1), /no packet/);
          // The client retransmits its request, as firmware does, and is served now.
          const after = await receiveFile(late, tight.port, 'menu.txt', {}, 'octet');
          assert.equal(Buffer.from(after.content).toString(), 'line 1\nline 2\r\n');
          // The slot is free again once the server has seen the final ACK and closed the transfer.
          await limited.waitFor('end', (e) => e.client.port === late.port && e.end === 'completed');
          assert.equal(tight.stats.transfersActive, 0);
        },
      );

      await t.test(
        'a silent client gets DATA 1 three times (1 + retriesMax 2), then the server gives up',
        async () => {
          const silent = await open();
          silent.send(read('ipxe.efi'), tight.port);
          const end = await limited.waitFor('end', (e) => e.client.port === silent.port);
          assert.equal(end.end, 'failed');
          assert.deepEqual(end.error, { reason: 'timedOut', retries: 2 });
          // The transfer socket is closed by now; a marker sent afterwards arrives after every DATA.
          const marker = await open();
          marker.send({ type: 'ack', block: 4242 }, silent.port);
          const blocks: number[] = [];
          for (;;) {
            const { packet } = await silent.next();
            if (packet.type === 'ack') break;
            assert.equal(packet.type, 'data');
            blocks.push(packet.type === 'data' ? packet.block : -1);
          }
          assert.deepEqual(blocks, [1, 1, 1]);
        },
      );

      await t.test('close() tells a client mid-transfer with ERROR 0 and resolves', async () => {
        const client = await open();
        client.send(read('ipxe.efi'), tight.port);
        assert.equal((await client.next()).packet.type, 'data');
        await tight.close();
        const bye = await client.nextError();
        assert.equal(bye.code, TftpErrorCode.notDefined);
        assert.match(bye.message, /shutting down/);
        // close() resolves only once every transfer's end has been reported.
        const end = limited.events.find((e) => e.kind === 'end' && e.client.port === client.port);
        assert.deepEqual(end?.kind === 'end' ? end.error : null, { reason: 'serverClosed' });
        assert.deepEqual(transferWorkersForTesting(tight), [], 'the workers are gone');
      });
    } finally {
      await tight.close();
      await Promise.all(clients.map((c) => c.close()));
    }
    assert.deepEqual(
      limited.events.filter((e) => e.kind === 'error'),
      [],
      'no unexpected errors were reported',
    );
  });
}

// ---- Worker threads ---------------------------------------------------------------------

void test('40 concurrent downloads spread over the two workers arrive byte-exact', async () => {
  const before = recorder.events.length;
  const options = [
    {},
    { blksize: '1468' },
    { blksize: '1468', windowsize: '16' },
    { blksize: '1024', windowsize: '4' },
  ];
  const results = await Promise.all(
    Array.from({ length: 40 }, (_, i) => download(server.port, 'ipxe.efi', options[i % options.length])),
  );
  for (const result of results) assert.equal(sha256(result.content), sha256(ipxe));
  // A client is done at its final ACK; the server reports the end when that ACK has reached it.
  await recorder.waitForCount('end', (e) => recorder.events.indexOf(e) >= before, 40);
  const ends = recorder.events.slice(before).filter(isKind('end'));
  assert.deepEqual(
    ends.map((e) => e.end),
    Array.from({ length: 40 }, () => 'completed'),
  );
  assert.equal(server.stats.workers, 2);
});

void test('without workers (workers: 0) transfers run on the server thread alike', async () => {
  const events = new Recorder();
  const local = await startTftpServer({
    host: HOST,
    port: 0,
    root: rootDir,
    workers: 0,
    hooks: events.hooks,
  });
  try {
    assert.equal(local.stats.workers, 0);
    const out = path.join(outDir, 'curl-local');
    assert.equal(await curl(local.port, 'ipxe.efi', out, ['--tftp-blksize', '1468']), 0);
    assert.equal(sha256(await readFile(out)), sha256(ipxe));
    const windowed = await download(local.port, 'ipxe.efi', { blksize: '1468', windowsize: '16' });
    assert.equal(sha256(windowed.content), sha256(ipxe));
    await checkEdk2ReAsk(local.port, events);
    await checkSupersede(local.port, events);
  } finally {
    await local.close();
  }
  assert.deepEqual(events.events.filter(isKind('error')), []);
});

void test('a worker killed or crashing mid-transfer ends its transfers, is replaced, and the server serves on', async (t) => {
  const events = new Recorder();
  const srv = await startTftpServer({ host: HOST, port: 0, root: rootDir, workers: 2, hooks: events.hooks });
  const clients: TinyClient[] = [];
  const holdTransfer = async (): Promise<{ client: TinyClient; tid: number }> => {
    const client = await TinyClient.open();
    clients.push(client);
    client.send(read('ipxe.efi'), srv.port);
    const first = await client.next();
    assert.equal(first.packet.type, 'data');
    return { client, tid: first.from };
  };
  try {
    await t.test('terminated: its transfer fails as workerFailed, the other worker’s goes on', async () => {
      // Each new transfer goes to the worker with the fewest: one held transfer per worker.
      const onFirst = await holdTransfer();
      const onSecond = await holdTransfer();
      const [first] = transferWorkersForTesting(srv);
      assert.ok(first !== undefined);
      await first.terminate();
      const failed = await events.waitFor('end', (e) => e.client.port === onFirst.client.port);
      assert.equal(failed.end, 'failed');
      assert.equal(failed.error?.reason, 'workerFailed');
      const reported = await events.waitFor('error', () => true);
      assert.match(
        String(reported.error),
        /TFTP transfer worker \d+ exited with code 1; 1 transfer\(s\) failed/,
      );
      assert.equal(srv.stats.workerRestarts, 1);
      // The transfer on the other worker is untouched: ACK 1 brings DATA 2.
      onSecond.client.send({ type: 'ack', block: 1 }, onSecond.tid);
      const next = await onSecond.client.next();
      assert.equal(next.packet.type === 'data' ? next.packet.block : -1, 2);
      onSecond.client.send({ type: 'error', code: TftpErrorCode.notDefined, message: 'done' }, onSecond.tid);
      await events.waitFor('end', (e) => e.client.port === onSecond.client.port);
    });

    await t.test('an uncaught exception: reported with its cause, and the worker replaced', async () => {
      const held = await holdTransfer();
      const [first, second] = transferWorkersForTesting(srv);
      assert.ok(first !== undefined && second !== undefined);
      // A command the worker does not know throws inside it, uncaught.
      first.postMessage({ type: 'no such command' });
      second.postMessage({ type: 'no such command' });
      const failed = await events.waitFor('end', (e) => e.client.port === held.client.port);
      assert.equal(failed.error?.reason, 'workerFailed');
      const crashed = (e: EventOf<'error'>): boolean => /unknown transfer command/.test(String(e.error));
      const one = await events.waitFor('error', crashed);
      await events.waitFor('error', (e) => e !== one && crashed(e));
      assert.equal(srv.stats.workerRestarts, 3);
    });

    await t.test('the replacements serve', async () => {
      const results = await Promise.all(
        Array.from({ length: 4 }, () =>
          download(srv.port, 'ipxe.efi', { blksize: '1468', windowsize: '16' }),
        ),
      );
      for (const result of results) assert.equal(sha256(result.content), sha256(ipxe));
      assert.equal(transferWorkersForTesting(srv).length, 2);
    });
  } finally {
    await srv.close();
    await Promise.all(clients.map((c) => c.close()));
  }
  assert.ok(events.events.filter(isKind('error')).every((e) => /TFTP transfer worker/.test(String(e.error))));
});

void test('the main server reported no unexpected errors during the whole file', () => {
  assert.deepEqual(recorder.events.filter(isKind('error')), []);
});

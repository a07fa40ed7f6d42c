// Goal: the HTTP boot server answers a known machine with its script on every URL form, a
// machine it must not boot (unknown, or allowPXE off) with 404 on every form, serves artifacts
// whole, by single range (206, Content-Range), with 416 past the end and HEAD without a body,
// and never serves a file outside its directory (.., absolute names, NUL, backslashes,
// symlinks leaving the root) or answers methods other than GET and HEAD; and that a download no
// byte of which moves for its stall bound is closed and reported, while a slow reader is kept.
// Method: a real server on 127.0.0.1 with an ephemeral port over a temporary artifacts
// directory (with a symlink inside and one leading out), requests with node:http using raw
// paths so nothing is normalised on the client side.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { defaultBootArtifacts } from '../../src/boot/http/ipxe-script.js';
import {
  startHttpBootServer,
  type HttpBootServer,
  type HttpRequestEvent,
} from '../../src/boot/http/server.js';
import { staticInventory } from '../../src/boot/inventory.js';
import { hardwareRecord } from '../support/netns.js';
import { httpRequest } from '../support/http-fetch.js';
import { waitFor } from '../support/wait.js';

const known = '52:54:00:00:00:01';
const off = '52:54:00:00:00:02';
const broken = '52:54:00:00:00:03';
const unknown = '52:54:00:00:00:09';
const kernel = randomBytes(5000);
const script = {
  httpBaseUrl: 'http://10.0.0.100:8080',
  apiAddress: '10.0.0.100:7001',
  artifacts: defaultBootArtifacts,
  extraKernelArgs: [],
};

let dir: string;
let server: HttpBootServer;
const events: HttpRequestEvent[] = [];

function request(target: string, options: { method?: string; headers?: http.OutgoingHttpHeaders } = {}) {
  return httpRequest('127.0.0.1', server.port, target, options);
}

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'slipway-http-'));
  const artifacts = path.join(dir, 'artifacts');
  await mkdir(path.join(artifacts, 'nested'), { recursive: true });
  await writeFile(path.join(artifacts, 'vmlinuz-x86_64'), kernel);
  await writeFile(path.join(artifacts, 'empty.txt'), '');
  await writeFile(path.join(artifacts, 'nested', 'config.json'), '{"a":1}');
  await writeFile(path.join(dir, 'secret'), 'outside the root');
  await symlink(path.join(dir, 'secret'), path.join(artifacts, 'leak'));
  await symlink('vmlinuz-x86_64', path.join(artifacts, 'kernel-link'));
  const inventory = staticInventory([
    hardwareRecord({ id: 'node-1', mac: known }),
    hardwareRecord({ id: 'node-2', mac: off, allowPXE: false }),
    hardwareRecord({ id: 'bad id', mac: broken }),
  ]);
  server = await startHttpBootServer({
    host: '127.0.0.1',
    port: 0,
    inventory,
    script,
    artifactsDir: artifacts,
    logger: pino({ level: 'silent' }),
    onRequest: (event) => events.push(event),
  });
});

after(async () => {
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

describe('iPXE scripts', () => {
  it('serves the machine its script on every URL form', async () => {
    for (const target of [
      `/ipxe/${known}`,
      '/ipxe/52%3A54%3A00%3A00%3A00%3A01',
      '/ipxe/52-54-00-00-00-01',
      '/ipxe/52-54-00-00-00-01.ipxe?from=ipxe',
    ]) {
      const res = await request(target);
      assert.equal(res.status, 200, target);
      assert.equal(res.headers['cache-control'], 'no-store');
      const text = res.body.toString('utf8');
      assert.match(text, /^#!ipxe\n/, target);
      assert.match(
        text,
        /slipway\.worker_id=node-1 slipway\.server=10\.0\.0\.100:7001 slipway\.http=http:\/\/10\.0\.0\.100:8080/,
      );
    }
  });

  it('answers 404 for unknown machines and machines that must not boot, on every form', async () => {
    for (const mac of [unknown, off]) {
      for (const target of [`/ipxe/${mac}`, `/ipxe/${mac.replaceAll(':', '-')}`, `/ipxe/${mac}.ipxe`]) {
        const res = await request(target);
        assert.equal(res.status, 404, target);
        assert.match(res.body.toString(), mac === off ? /network boot is off/ : /unknown hardware/);
      }
    }
    assert.equal((await request('/ipxe/not-a-mac')).status, 404);
  });

  it('answers 500 naming the field when a record cannot be put in a script', async () => {
    const res = await request(`/ipxe/${broken}`);
    assert.equal(res.status, 500);
    assert.match(res.body.toString(), /hardware\.id/);
  });

  it('answers HEAD with the headers only', async () => {
    const res = await request(`/ipxe/${known}`, { method: 'HEAD' });
    assert.equal(res.status, 200);
    assert.ok(Number(res.headers['content-length']) > 0);
    assert.equal(res.body.length, 0);
  });
});

describe('artifacts', () => {
  it('serves a whole file with its length, type and range support', async () => {
    const res = await request('/artifacts/vmlinuz-x86_64');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, kernel);
    assert.equal(res.headers['content-length'], String(kernel.length));
    assert.equal(res.headers['accept-ranges'], 'bytes');
    assert.equal(res.headers['content-type'], 'application/octet-stream');
    const nested = await request('/artifacts/nested/config.json');
    assert.equal(nested.headers['content-type'], 'application/json');
    assert.equal(nested.body.toString(), '{"a":1}');
  });

  it('serves a single range as 206 with Content-Range', async () => {
    const res = await request('/artifacts/vmlinuz-x86_64', { headers: { range: 'bytes=100-199' } });
    assert.equal(res.status, 206);
    assert.equal(res.headers['content-range'], `bytes 100-199/${kernel.length}`);
    assert.deepEqual(res.body, kernel.subarray(100, 200));
    const tail = await request('/artifacts/vmlinuz-x86_64', { headers: { range: 'bytes=-10' } });
    assert.deepEqual(tail.body, kernel.subarray(kernel.length - 10));
  });

  it('answers 416 with the size for a range past the end', async () => {
    const res = await request('/artifacts/vmlinuz-x86_64', { headers: { range: `bytes=${kernel.length}-` } });
    assert.equal(res.status, 416);
    assert.equal(res.headers['content-range'], `bytes */${kernel.length}`);
  });

  it('serves several ranges, or a stale If-Range, as the whole file', async () => {
    const many = await request('/artifacts/vmlinuz-x86_64', { headers: { range: 'bytes=0-1,5-6' } });
    assert.equal(many.status, 200);
    assert.equal(many.body.length, kernel.length);
    const stale = await request('/artifacts/vmlinuz-x86_64', {
      headers: { range: 'bytes=0-1', 'if-range': '"stale"' },
    });
    assert.equal(stale.status, 200);
  });

  it('answers HEAD and empty files without a body', async () => {
    const head = await request('/artifacts/vmlinuz-x86_64', {
      method: 'HEAD',
      headers: { range: 'bytes=0-9' },
    });
    assert.equal(head.status, 206);
    assert.equal(head.headers['content-length'], '10');
    assert.equal(head.body.length, 0);
    const empty = await request('/artifacts/empty.txt');
    assert.equal(empty.status, 200);
    assert.equal(empty.headers['content-length'], '0');
  });

  it('follows a symlink inside the root and refuses one leading out', async () => {
    const inside = await request('/artifacts/kernel-link');
    assert.equal(inside.status, 200);
    assert.deepEqual(inside.body, kernel);
    const outside = await request('/artifacts/leak');
    assert.equal(outside.status, 403);
    assert.doesNotMatch(outside.body.toString(), /outside the root/);
  });

  it('refuses traversal, absolute names, NUL and backslashes with 400', async () => {
    for (const target of [
      '/artifacts/../secret',
      '/artifacts/%2e%2e/secret',
      '/artifacts/nested/%2E%2E/%2E%2E/secret',
      `/artifacts/${encodeURIComponent(path.join(dir, 'secret'))}`,
      '/artifacts//etc/passwd',
      '/artifacts/vmlinuz-x86_64%00.txt',
      '/artifacts/nested%5C..%5C..%5Csecret',
    ]) {
      const res = await request(target);
      assert.equal(res.status, 400, target);
      assert.doesNotMatch(res.body.toString(), /outside the root/, target);
    }
  });

  it('answers 404 for missing files, directories and unknown paths', async () => {
    for (const target of ['/artifacts/nope', '/artifacts/nested', '/binaries/ipxe.efi', '/', '/index.html']) {
      assert.equal((await request(target)).status, 404, target);
    }
  });
});

describe('methods and observers', () => {
  it('refuses methods other than GET and HEAD with 405 and Allow', async () => {
    const res = await request(`/ipxe/${known}`, { method: 'POST' });
    assert.equal(res.status, 405);
    assert.equal(res.headers.allow, 'GET, HEAD');
  });

  it('reports each finished request with its route and status', async () => {
    await request('/artifacts/vmlinuz-x86_64', { headers: { range: 'bytes=0-9' } });
    const seen = events.findLast((e) => e.url === '/artifacts/vmlinuz-x86_64');
    assert.deepEqual(
      seen && { method: seen.method, route: seen.route, status: seen.status, bytes: seen.bytes },
      { method: 'GET', route: 'artifact', status: 206, bytes: 10 },
    );
  });
});

describe('stalled connections', () => {
  it('closes a download no byte of which moves for the stall bound, and keeps a slow reader', async () => {
    const big = path.join(dir, 'big');
    await mkdir(big, { recursive: true });
    // Larger than what the kernel's buffers on both ends hold, so a reader that stops reading
    // stops the server's writes.
    await writeFile(path.join(big, 'disk.img'), Buffer.alloc(48 * 1024 * 1024, 7));
    const seen: HttpRequestEvent[] = [];
    const stalling = await startHttpBootServer({
      host: '127.0.0.1',
      port: 0,
      inventory: staticInventory([]),
      script,
      artifactsDir: big,
      logger: pino({ level: 'silent' }),
      onRequest: (event) => seen.push(event),
      stalledMs: 1000,
    });
    const open = (): net.Socket => {
      const socket = net.connect(stalling.port, '127.0.0.1');
      socket.write('GET /artifacts/disk.img HTTP/1.1\r\nHost: x\r\n\r\n');
      return socket;
    };
    try {
      // A machine that stopped reading: paused, it reads nothing more (nor the server's close).
      const stalled = open();
      stalled.once('data', () => stalled.pause());
      stalled.on('error', () => undefined);
      const reportOf = (): HttpRequestEvent | undefined => seen.find((e) => e.url === '/artifacts/disk.img');
      await waitFor(
        'the stalled download closed and reported by the server',
        () => reportOf() !== undefined,
        15_000,
        20,
      );
      assert.equal(reportOf()?.status, 200, JSON.stringify(seen));
      // Reported with the machine's address although its connection is gone.
      assert.equal(reportOf()?.remoteAddress, '127.0.0.1');
      // Read on: what the kernel still held arrives, then the end, short of the whole file.
      let received = 0;
      const ended = new Promise<void>((resolve) => stalled.once('close', () => resolve()));
      stalled.on('data', (chunk: Buffer) => (received += chunk.length));
      stalled.resume();
      await ended;
      assert.ok(received < 48 * 1024 * 1024, `the server stopped sending (${String(received)} bytes)`);

      // A reader that reads in bursts, every 100 ms, for three times the stall bound: bytes keep
      // moving, so it is kept.
      const slow = open();
      slow.on('error', () => undefined);
      slow.pause();
      let slowReceived = 0;
      for (let i = 0; i < 30; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        const chunk = slow.read(1024 * 1024) as Buffer | null;
        slowReceived += chunk?.length ?? 0;
      }
      assert.equal(seen.length, 1, `the slow reader was kept: ${JSON.stringify(seen)}`);
      assert.ok(slowReceived > 0, 'the slow reader received bytes');
      slow.destroy();
    } finally {
      await stalling.close();
    }
  });
});

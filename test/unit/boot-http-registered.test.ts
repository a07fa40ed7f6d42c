// Goal: the HTTP boot server serves a registered artifact from this node's verified copy (by
// digest, whole and by range, with the digest as ETag), ahead of a same-named file in the
// artifacts directory; falls back to the directory for unregistered names; serves a registered
// boot OS under /boot/ ahead of --bootos-dir; holds a request while the copy is fetched from a
// peer and serves it once verified; answers 503 with Retry-After when the wait runs out or the
// content is missing everywhere (never a partial file).
// Method: a real server on 127.0.0.1 over the real catalogue, fetcher and content store, with a
// fake registry and fake peers whose answers the test releases; requests with node:http.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { ArtifactCatalogue } from '../../src/artifacts/catalogue.js';
import { ContentStore } from '../../src/artifacts/content-store.js';
import { ArtifactFetcher, type ArtifactPeer, type PeerReader } from '../../src/artifacts/fetcher.js';
import { defaultBootArtifacts } from '../../src/boot/http/ipxe-script.js';
import { startHttpBootServer, type HttpBootServer } from '../../src/boot/http/server.js';
import { staticInventory } from '../../src/boot/inventory.js';
import type { Artifact } from '../../src/model/records.js';
import { httpRequest } from '../support/http-fetch.js';

const logger = pino({ level: 'silent' });

function blob(bytes: number): { data: Buffer; sha256: string } {
  const data = randomBytes(bytes);
  return { data, sha256: createHash('sha256').update(data).digest('hex') };
}

const image = blob(300_000);
const kernel = blob(70_000);
const slow = blob(50_000);
const nowhere = blob(10);

function record(name: string, b: { data: Buffer; sha256: string }): Artifact {
  return { name, sha256: b.sha256, bytes: b.data.length, createdMs: 1, updatedMs: 1, version: 1 };
}

const registered = new Map<string, Artifact>([
  ['debian.raw', record('debian.raw', image)],
  ['vmlinuz-x86_64', record('vmlinuz-x86_64', kernel)],
  ['slow.img', record('slow.img', slow)],
  ['lost.img', record('lost.img', nowhere)],
]);

/** Has `slow` only once released; never has `nowhere`. */
class GatedPeer implements PeerReader {
  #release: () => void = () => undefined;
  readonly released = new Promise<void>((resolve) => {
    this.#release = resolve;
  });
  release(): void {
    this.#release();
  }
  peers(): readonly ArtifactPeer[] {
    return [{ id: 'n2', addr: 'n2:1' }];
  }
  async read(_peer: ArtifactPeer, sha256: string, offset: number, length: number): Promise<Uint8Array> {
    if (sha256 !== slow.sha256) throw new Error(`no verified copy of sha256 ${sha256} here`);
    await this.released;
    return slow.data.subarray(offset, offset + length);
  }
}

let dir: string;
let server: HttpBootServer;
let fetcher: ArtifactFetcher;
const peer = new GatedPeer();

function get(target: string, headers: http.OutgoingHttpHeaders = {}) {
  return httpRequest('127.0.0.1', server.port, target, { headers });
}

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'slipway-http-registered-'));
  const artifactsDir = path.join(dir, 'artifacts');
  const bootOsDir = path.join(dir, 'bootos');
  await mkdir(artifactsDir);
  await mkdir(bootOsDir);
  await writeFile(path.join(artifactsDir, 'debian.raw'), 'the local, unregistered file');
  await writeFile(path.join(artifactsDir, 'local-only.txt'), 'local');
  await writeFile(path.join(bootOsDir, 'vmlinuz-x86_64'), 'the locally built kernel');
  await writeFile(path.join(bootOsDir, 'initramfs-x86_64'), 'the locally built initramfs');
  const store = await ContentStore.open(path.join(dir, 'store'));
  for (const b of [image, kernel]) {
    const w = await store.writer(b.sha256, b.data.length);
    await w.write(b.data);
    await w.finish();
  }
  fetcher = new ArtifactFetcher({ store, peers: peer, logger, retryMsMin: 60_000, retryMsMax: 60_000 });
  const catalogue = new ArtifactCatalogue(
    { artifact: (name) => registered.get(name), artifacts: () => [...registered.values()] },
    fetcher,
    store,
  );
  catalogue.sync();
  server = await startHttpBootServer({
    host: '127.0.0.1',
    port: 0,
    inventory: staticInventory([]),
    script: {
      httpBaseUrl: 'http://10.0.0.100:8080',
      apiAddress: '10.0.0.100:7001',
      artifacts: defaultBootArtifacts,
      extraKernelArgs: [],
    },
    artifactsDir,
    bootOsDir,
    registered: catalogue,
    registeredWaitMs: 300,
    logger,
  });
});

after(async () => {
  fetcher.stop();
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

describe('registered artifacts over HTTP', () => {
  it('serves the registered content by digest, ahead of a local file with the same name', async () => {
    const res = await get('/artifacts/debian.raw');
    assert.equal(res.status, 200);
    assert.ok(res.body.equals(image.data));
    assert.equal(res.headers.etag, `"sha256:${image.sha256}"`);
    assert.equal(res.headers['content-length'], String(image.data.length));
  });

  it('serves ranges of the registered content, and If-Range with the digest ETag', async () => {
    const part = await get('/artifacts/debian.raw', { range: 'bytes=1000-1999' });
    assert.equal(part.status, 206);
    assert.equal(part.headers['content-range'], `bytes 1000-1999/${image.data.length}`);
    assert.ok(part.body.equals(image.data.subarray(1000, 2000)));
    const resumed = await get('/artifacts/debian.raw', {
      range: 'bytes=299990-',
      'if-range': `"sha256:${image.sha256}"`,
    });
    assert.equal(resumed.status, 206);
    assert.ok(resumed.body.equals(image.data.subarray(299_990)));
    assert.equal((await get('/artifacts/debian.raw', { range: `bytes=${image.data.length}-` })).status, 416);
  });

  it('falls back to the directory for names that are not registered', async () => {
    const res = await get('/artifacts/local-only.txt');
    assert.equal(res.status, 200);
    assert.equal(res.body.toString(), 'local');
  });

  it('serves a registered boot OS under /boot/ ahead of the local build; other files stay local', async () => {
    const res = await get('/boot/vmlinuz-x86_64');
    assert.equal(res.status, 200);
    assert.ok(res.body.equals(kernel.data));
    const initrd = await get('/boot/initramfs-x86_64');
    assert.equal(initrd.body.toString(), 'the locally built initramfs');
  });

  it('answers 503 with Retry-After for content no node has, and never a partial body', async () => {
    const res = await get('/artifacts/lost.img');
    assert.equal(res.status, 503);
    assert.ok(Number(res.headers['retry-after']) > 0);
    assert.match(
      res.body.toString(),
      new RegExp(
        `artifact "lost.img" \\(sha256 ${nowhere.sha256}\\) is missing on this node: no peer has a verified copy`,
      ),
    );
  });

  it('holds a request while the content is fetched, 503 once the wait runs out, then serves it', async () => {
    const early = await get('/artifacts/slow.img');
    assert.equal(early.status, 503);
    assert.match(early.body.toString(), /still being fetched from a peer/);
    assert.equal(early.headers['retry-after'], '5');
    const waiting = get('/artifacts/slow.img');
    peer.release();
    const res = await waiting;
    assert.equal(res.status, 200);
    assert.ok(res.body.equals(slow.data));
  });
});

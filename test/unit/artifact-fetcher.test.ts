// Goal: prove the content store and the peer fetcher keep wrong bytes out: content is stored
// under its digest only once size and SHA-256 match (an upload that is short, long or different
// stores nothing); a fetch resumes at the same offset on the next peer when one fails mid-way;
// a corrupted chunk from a peer is detected, the copy thrown away and fetched again from
// another peer; a digest no peer has ends missing with every peer's reason and no file, and is
// fetched once a peer has it; concurrency is bounded.
// Method: a real ContentStore in a temporary directory and fake peers (in-memory content, with
// failures and corruption injected), no sockets; waits are on the fetcher's own settle promise.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { ContentMismatchError, ContentStore } from '../../src/artifacts/content-store.js';
import { ArtifactFetcher, type ArtifactPeer, type PeerReader } from '../../src/artifacts/fetcher.js';
import { waitFor } from '../support/wait.js';

const logger = pino({ level: 'silent' });
const content = randomBytes(5 * 1024 + 123);
const digest = createHash('sha256').update(content).digest('hex');
let dir: string;

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'slipway-fetcher-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function freshStore(name: string): Promise<ContentStore> {
  return ContentStore.open(path.join(dir, name));
}

type Behaviour = 'good' | 'missing' | 'corrupt' | 'dies-after-one' | 'long';

/** Peers with in-memory content; `behaviour` may change between calls. */
class FakePeers implements PeerReader {
  readonly calls: { peer: string; offset: number; length: number }[] = [];
  active = 0;
  maxActive = 0;
  readonly behaviour: Map<string, Behaviour>;

  constructor(behaviour: Record<string, Behaviour>) {
    this.behaviour = new Map(Object.entries(behaviour));
  }

  peers(): readonly ArtifactPeer[] {
    return [...this.behaviour.keys()].map((id) => ({ id, addr: `${id}:1` }));
  }

  async read(peer: ArtifactPeer, sha256: string, offset: number, length: number): Promise<Uint8Array> {
    this.calls.push({ peer: peer.id, offset, length });
    this.active += 1;
    this.maxActive = Math.max(this.maxActive, this.active);
    try {
      await Promise.resolve();
      const how = this.behaviour.get(peer.id);
      if (sha256 !== digest || how === 'missing')
        throw new Error(`no verified copy of sha256 ${sha256} here`);
      if (how === 'dies-after-one' && this.calls.filter((c) => c.peer === peer.id).length > 1) {
        throw new Error('connection reset');
      }
      const data = Buffer.from(content.subarray(offset, offset + length));
      if (how === 'corrupt' && offset === 1024) data[7] = (data[7] ?? 0) ^ 0xff;
      if (how === 'long') return Buffer.concat([data, Buffer.from('x')]);
      return data;
    } finally {
      this.active -= 1;
    }
  }
}

function fetcherOf(store: ContentStore, peers: PeerReader, concurrency = 2): ArtifactFetcher {
  return new ArtifactFetcher({
    store,
    peers,
    logger,
    chunkBytes: 1024,
    concurrency,
    retryMsMin: 5,
    retryMsMax: 20,
  });
}

describe('content store', () => {
  it('stores content under its digest only when size and SHA-256 match', async () => {
    const store = await freshStore('store');
    const good = await store.writer(digest, content.length);
    await good.write(content.subarray(0, 100));
    await good.write(content.subarray(100));
    await good.finish();
    assert.deepEqual(await readFile(store.pathOf(digest)), content);
    assert.equal(await store.has(digest, content.length), true);
    const other = 'c'.repeat(64);
    const short = await store.writer(other, 10);
    await short.write(Buffer.alloc(9));
    await assert.rejects(
      short.finish(),
      (e: unknown) => e instanceof ContentMismatchError && /9 bytes, not the 10/.test(e.message),
    );
    const long = await store.writer(other, 10);
    await assert.rejects(long.write(Buffer.alloc(11)), /longer than the 10 bytes announced/);
    await long.abort();
    const wrong = await store.writer(other, 10);
    await wrong.write(Buffer.alloc(10));
    await assert.rejects(wrong.finish(), /SHA-256 is [0-9a-f]{64}, not the c{64} announced/);
    assert.deepEqual(await store.list(), [digest]);
    assert.deepEqual(await readdir(path.join(dir, 'store', 'tmp')), [], 'no temporary file is left');
    assert.deepEqual((await store.read(digest, 5000, 1000))?.data, content.subarray(5000, 6000));
    assert.equal(await store.read(other, 0, 10), undefined);
  });
});

describe('artifact fetcher', () => {
  it('fetches in chunks, moving on from a missing peer and resuming where a dying one stopped', async () => {
    const store = await freshStore('resume');
    const peers = new FakePeers({ n2: 'missing', n3: 'dies-after-one', n4: 'good' });
    const fetcher = fetcherOf(store, peers);
    fetcher.ensure(digest, content.length);
    assert.deepEqual(await fetcher.settled(digest, 5000), { kind: 'present' });
    assert.deepEqual(await readFile(store.pathOf(digest)), content);
    // n3 gave the first chunk; n4 carried on from offset 1024, not from the start.
    const fromN4 = peers.calls.filter((c) => c.peer === 'n4');
    assert.equal(fromN4[0]?.offset, 1024);
    assert.ok(peers.calls.every((c) => c.length <= 1024));
    fetcher.stop();
  });

  it('detects a corrupted chunk, throws the copy away and gets a verified one from another peer', async () => {
    const store = await freshStore('corrupt');
    const peers = new FakePeers({ n2: 'corrupt', n3: 'good' });
    const fetcher = fetcherOf(store, peers);
    fetcher.ensure(digest, content.length);
    assert.deepEqual(await fetcher.settled(digest, 5000), { kind: 'present' });
    assert.deepEqual(await readFile(store.pathOf(digest)), content);
    // The second round started with n3 at offset 0.
    assert.ok(peers.calls.some((c) => c.peer === 'n3' && c.offset === 0));
    fetcher.stop();
  });

  it('reports a digest no peer has (or only corrupted or oversized) as missing, stores nothing, and fetches it once a peer has it', async () => {
    const store = await freshStore('missing');
    const peers = new FakePeers({ n2: 'missing', n3: 'corrupt', n4: 'long' });
    const fetcher = fetcherOf(store, peers);
    fetcher.ensure(digest, content.length);
    const state = await fetcher.settled(digest, 5000);
    assert.equal(state?.kind, 'missing');
    assert.match(
      state?.kind === 'missing' ? state.error : '',
      new RegExp(
        `no peer has a verified copy of sha256 ${digest} \\(.*n2: no verified copy.*did not verify.*n4: answered 1025 bytes`,
      ),
    );
    assert.equal(await store.has(digest, content.length), false);
    assert.deepEqual(await store.list(), []);
    // A retry in the background leaves it missing until a peer has a good copy.
    peers.behaviour.set('n2', 'good');
    await waitFor('the retry to fetch the content', () => fetcher.state(digest)?.kind === 'present', 5000);
    assert.deepEqual(await readFile(store.pathOf(digest)), content);
    fetcher.stop();
  });

  it('is present at once when the store holds the content, and fetches at most `concurrency` digests at once', async () => {
    const store = await freshStore('bounded');
    const held = fetcherOf(store, new FakePeers({}));
    const w = await store.writer(digest, content.length);
    await w.write(content);
    await w.finish();
    held.ensure(digest, content.length);
    assert.deepEqual(await held.settled(digest, 1000), { kind: 'present' });
    held.stop();
    const peers = new FakePeers({ n2: 'missing' });
    const fetcher = fetcherOf(await freshStore('bounded-2'), peers, 2);
    const digests = Array.from({ length: 6 }, (_, i) => String(i).repeat(64));
    for (const d of digests) fetcher.ensure(d, 10);
    for (const d of digests) assert.equal((await fetcher.settled(d, 5000))?.kind, 'missing');
    assert.ok(peers.maxActive <= 2, `at most 2 reads at once, saw ${peers.maxActive}`);
    fetcher.forget(digests[0] ?? '');
    assert.equal(fetcher.state(digests[0] ?? ''), undefined);
    fetcher.stop();
  });
});

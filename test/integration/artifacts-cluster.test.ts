// Goal: boot artifacts are the same on every node. An artifact added through the CLI to one node
// is served byte for byte by every node's HTTP boot server (whole and by range); a node whose
// copy was deleted while it was stopped fetches it from a peer at start; a registered digest no
// node holds is answered 503 (never a partial body) and `artifact list` names the problem; and
// `artifact create` of a missing file is bad input (exit 2).
// Method: 3 real `slipway server` processes on loopback, each with its own --http-addr; the CLI
// as a child process; HTTP with node:http to 127.0.0.1; content checked by SHA-256; waits with
// deadlines (waitFor), never sleeps.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { nextPort, ProcessCluster, runSlipway, type CliResult } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';
import { httpRequest, type HttpReply } from '../support/http-fetch.js';

const cli = (args: string[]): Promise<CliResult> => runSlipway(args, { timeoutMs: 60_000 });

function get(addr: string, target: string, headers: http.OutgoingHttpHeaders = {}): Promise<HttpReply> {
  const [host, port] = addr.split(':');
  return httpRequest(host ?? '', Number(port), target, { headers });
}

const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

interface ListedArtifact {
  readonly name: string;
  readonly sha256: string;
  readonly bytes: number;
  readonly local: string;
  readonly localError: string;
}

let cluster: ProcessCluster;
const httpAddr = new Map<string, string>();
const content = randomBytes(5 * 1024 * 1024);
const digest = sha256(content);
let file: string;

before(async () => {
  cluster = new ProcessCluster(3);
  for (const n of cluster.nodes) {
    const addr = `127.0.0.1:${nextPort()}`;
    httpAddr.set(n.id, addr);
    cluster.nodeArgs.set(n.id, ['--http-addr', addr]);
  }
  cluster.startAll();
  await cluster.waitForLeader();
  file = join(cluster.dir, 'disk.img');
  writeFileSync(file, content);
});
after(async () => {
  await cluster.destroy();
});

function addrOf(id: string): string {
  const addr = httpAddr.get(id);
  assert.ok(addr !== undefined);
  return addr;
}

/** Waits until the node serves the artifact (a fetch may still be under way), then returns it. */
async function served(id: string, name: string): Promise<HttpReply> {
  let last: HttpReply | undefined;
  await waitFor(
    `node ${id} to serve /artifacts/${name}`,
    async () => {
      last = await get(addrOf(id), `/artifacts/${name}`).catch(() => undefined);
      return last?.status === 200;
    },
    60_000,
    100,
  );
  assert.ok(last !== undefined);
  return last;
}

async function list(server: string): Promise<{ code: number; stderr: string; artifacts: ListedArtifact[] }> {
  const r = await cli(['--server', server, '-o', 'json', 'artifact', 'list']);
  const doc = JSON.parse(r.stdout) as { artifacts: ListedArtifact[] };
  return { code: r.code, stderr: r.stderr, artifacts: doc.artifacts };
}

describe('replicated artifacts', () => {
  test('added through a follower, every node serves identical bytes, whole and by range', async () => {
    const leader = await cluster.waitForLeader();
    const follower = cluster.nodes.find((n) => n.id !== leader.id);
    assert.ok(follower !== undefined);
    const add = await cli(['--server', follower.apiAddr, '-o', 'json', 'artifact', 'create', file]);
    assert.equal(add.code, 0, add.stderr);
    const record = JSON.parse(add.stdout) as ListedArtifact & { version: number };
    assert.equal(record.name, 'disk.img');
    assert.equal(record.sha256, digest);
    assert.equal(record.bytes, content.length);
    assert.equal(record.version, 1);
    for (const n of cluster.nodes) {
      const res = await served(n.id, 'disk.img');
      assert.equal(sha256(res.body), digest, `node ${n.id} served other bytes`);
      assert.equal(res.headers.etag, `"sha256:${digest}"`);
      const part = await get(addrOf(n.id), '/artifacts/disk.img', { range: 'bytes=1048000-2097999' });
      assert.equal(part.status, 206);
      assert.equal(part.headers['content-range'], `bytes 1048000-2097999/${content.length}`);
      assert.ok(part.body.equals(content.subarray(1_048_000, 2_098_000)), `range from node ${n.id}`);
    }
    for (const n of cluster.nodes) {
      const listed = await list(n.apiAddr);
      assert.equal(listed.code, 0, listed.stderr);
      assert.deepEqual(
        listed.artifacts.map((a) => [a.name, a.sha256, a.bytes, a.local]),
        [['disk.img', digest, content.length, 'present']],
        `node ${n.id}`,
      );
    }
    // The same content again is a no-op: the version stays.
    const again = await cli([
      '--server',
      cluster.apiAddrs().join(','),
      '-o',
      'json',
      'artifact',
      'add',
      file,
    ]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal((JSON.parse(again.stdout) as { version: number }).version, 1);
  });

  test('a missing file is bad input (exit 2); a bad name too', async () => {
    const server = cluster.apiAddrs().join(',');
    const missing = await cli(['--server', server, 'artifact', 'create', join(cluster.dir, 'no-such.img')]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /cannot read .*no-such\.img/);
    const badName = await cli(['--server', server, 'artifact', 'add', file, '--name', '../etc/passwd']);
    assert.equal(badName.code, 2);
    assert.match(badName.stderr, /--name "\.\.\/etc\/passwd" must be/);
  });

  test('a node whose copy was deleted while stopped fetches it from a peer; content no node has is 503 and listed as missing', async () => {
    const server = cluster.apiAddrs().join(',');
    const ghost = randomBytes(64 * 1024);
    const ghostFile = join(cluster.dir, 'ghost.img');
    writeFileSync(ghostFile, ghost);
    const add = await cli(['--server', server, 'artifact', 'create', ghostFile]);
    assert.equal(add.code, 0, add.stderr);
    for (const n of cluster.nodes) await served(n.id, 'ghost.img');
    // Stop every node; n3 loses its copy of disk.img, every node its copy of ghost.img.
    for (const n of cluster.nodes) await cluster.kill(n);
    const [, , n3] = cluster.nodes;
    assert.ok(n3 !== undefined);
    const store = (id: string, hex: string): string => join(cluster.dir, id, 'artifacts', 'sha256', hex);
    rmSync(store(n3.id, digest));
    for (const n of cluster.nodes) rmSync(store(n.id, sha256(ghost)));
    cluster.startAll();
    await cluster.waitForLeader();
    const res = await served(n3.id, 'disk.img');
    assert.equal(sha256(res.body), digest);
    assert.ok(existsSync(store(n3.id, digest)), 'the fetched copy is in the store');
    for (const n of cluster.nodes) {
      let reply: HttpReply | undefined;
      await waitFor(
        `node ${n.id} to answer 503 for ghost.img`,
        async () => {
          reply = await get(addrOf(n.id), '/artifacts/ghost.img').catch(() => undefined);
          return reply?.status === 503 && /is missing on this node/.test(reply.body.toString());
        },
        60_000,
        100,
      );
      assert.ok(Number(reply?.headers['retry-after']) > 0);
      assert.match(reply?.body.toString() ?? '', /no peer has a verified copy/);
      assert.ok(!existsSync(store(n.id, sha256(ghost))), 'nothing half-fetched was stored');
    }
    const listed = await list(n3.apiAddr);
    const entry = listed.artifacts.find((a) => a.name === 'ghost.img');
    assert.equal(entry?.local, 'missing');
    assert.match(entry?.localError ?? '', /no peer has a verified copy of sha256/);
    assert.match(listed.stderr, /artifact "ghost\.img" is missing on node n3/);
    // Deleting it unregisters it: the name is no longer served.
    const del = await cli(['--server', server, 'artifact', 'delete', 'ghost.img']);
    assert.equal(del.code, 0, del.stderr);
    assert.equal((await get(addrOf(n3.id), '/artifacts/ghost.img')).status, 404);
  });
});

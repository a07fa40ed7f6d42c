// Goal: every try of one claim is sealed to the same key, also across an agent restart, so a
// claim whose answer was lost (the node died after committing it) is answered again instead of
// being refused as a second claimant; once a credential is held, the key is dropped.
// Method: a local HTTP server that records each claim's public key, loses the first answers and
// then seals a credential to the key it was sent.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { seal } from '../../src/platform/sealed-box.js';
import { ClaimedCredential } from '../../src/worker/credential-claim.js';

interface ClaimServer {
  readonly url: string;
  readonly keys: string[];
  close(): Promise<void>;
}

/** Answers 503 to the first `lose` claims, then seals `credential-N` to the claim's key. */
async function claimServer(lose: number): Promise<ClaimServer> {
  const keys: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      const { publicKey } = JSON.parse(body) as { publicKey: string };
      keys.push(publicKey);
      if (keys.length <= lose) {
        res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"the node went away"}');
        return;
      }
      const sealed = seal(Buffer.from(`credential-${String(keys.length)}`), publicKey);
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ workflowId: 'wf1', sealed }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}/credential`,
    keys,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const dir = mkdtempSync(join(tmpdir(), 'slipway-claim-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const logger = pino({ level: 'silent' });

describe('credential claim', () => {
  it('sends the same key on every try until a credential is held, then drops it', async () => {
    const server = await claimServer(2);
    const file = join(dir, 'a.credential');
    const claim = new ClaimedCredential({
      url: server.url,
      workerId: 'm1',
      mac: '52:54:00:00:00:01',
      file,
      logger,
      retryMinMs: 1,
      retryMaxMs: 5,
    });
    const credential = await claim.current(AbortSignal.timeout(10_000));
    assert.equal(credential, 'credential-3');
    assert.equal(server.keys.length, 3);
    assert.equal(new Set(server.keys).size, 1, 'one key for every try');
    assert.equal(readFileSync(file, 'utf8'), 'credential-3');
    assert.equal(existsSync(`${file}.key`), false, 'the key is dropped once the credential is held');
    await claim.invalidate();
    await claim.current(AbortSignal.timeout(10_000));
    assert.notEqual(server.keys[3], server.keys[0], 'the next claim (a new workflow) has a new key');
    await server.close();
  });

  it('an agent restarted in the same boot goes on with the key of the claim it had begun', async () => {
    const server = await claimServer(1);
    const file = join(dir, 'b.credential');
    const options = { url: server.url, workerId: 'm1', mac: '52:54:00:00:00:01', file, logger };
    await assert.rejects(new ClaimedCredential(options).claimOnce(), /went away/);
    assert.ok(existsSync(`${file}.key`), 'the begun claim keeps its key on the tmpfs');
    const restarted = new ClaimedCredential(options);
    assert.equal(await restarted.current(AbortSignal.timeout(10_000)), 'credential-2');
    assert.equal(server.keys[0], server.keys[1]);
    await server.close();
  });
});

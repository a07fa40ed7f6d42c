// Goal: a file streamed to an HTTP response is closed whatever the client does: read to the
// end, or gone while the server was still opening the file (under a boot storm, clients that
// time out do exactly that, and each such request used to leave its descriptor to the garbage
// collector).
// Method: a real node:http server on 127.0.0.1 whose handler opens a real file and hands it to
// pipeFile; the client reads the whole answer in one case and, in the other, the handler
// destroys the connection and waits for the response to close before it opens the file.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, open, rm, writeFile, type FileHandle } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { pipeFile } from '../../src/boot/http/pipe-file.js';
import { waitFor } from '../support/wait.js';

const content = randomBytes(256 * 1024);
let dir: string;
let file: string;

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'slipway-pipe-file-'));
  file = path.join(dir, 'initramfs');
  await writeFile(file, content);
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A server whose every request is answered by `answer`; the handles it opened, in order. */
async function serve(
  answer: (req: http.IncomingMessage, res: http.ServerResponse, handles: FileHandle[]) => Promise<void>,
): Promise<{ server: http.Server; port: number; handles: FileHandle[]; answered: () => number }> {
  const handles: FileHandle[] = [];
  let answered = 0;
  const server = http.createServer((req, res) => {
    void answer(req, res, handles).then(() => {
      answered++;
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port, handles, answered: () => answered };
}

it('streams the whole range and closes the file after it', async () => {
  const s = await serve(async (_req, res, handles) => {
    const handle = await open(file, 'r');
    handles.push(handle);
    res.writeHead(200, { 'content-length': content.length });
    await pipeFile(handle, res, 0, content.length - 1);
  });
  try {
    const body = await new Promise<Buffer>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: s.port, path: '/' }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve(Buffer.concat(chunks)));
          res.on('error', reject);
        })
        .on('error', reject);
    });
    assert.ok(body.equals(content), 'the client has the file, byte for byte');
    await waitFor('pipeFile to return', () => s.answered() === 1);
    await waitFor('the handle to close', () => s.handles[0]?.fd === -1);
  } finally {
    s.server.close();
  }
});

it('closes the file at once when the client left before it was opened', async () => {
  const s = await serve(async (req, res, handles) => {
    req.socket.destroy();
    await once(res, 'close');
    const handle = await open(file, 'r');
    handles.push(handle);
    res.writeHead(200, { 'content-length': content.length });
    await pipeFile(handle, res, 0, content.length - 1);
  });
  try {
    const client = http.get({ host: '127.0.0.1', port: s.port, path: '/' });
    client.on('error', () => {
      // The server hung up without an answer, as this case means it to.
    });
    // Before the fix this never returned: the response had closed already and said so no more.
    await waitFor('pipeFile to return', () => s.answered() === 1);
    assert.equal(s.handles.length, 1);
    assert.equal(s.handles[0]?.fd, -1, 'the handle is closed when pipeFile returns');
  } finally {
    s.server.close();
  }
});

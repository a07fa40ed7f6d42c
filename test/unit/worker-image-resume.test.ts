// Goal: image2disk's download survives the loss of the node serving it (the VIP moves to
// another node serving the same file): a body cut mid-way is resumed with a Range request from
// the byte it stopped at, the image is written once and whole, and a server that cannot resume
// ends the action with a clear message once the resume window has passed. The first request is
// tried again when the VIP answers nothing yet (refused) or the server is between owners (503),
// within the same window.
// Method: a real HTTP server on 127.0.0.1 that destroys the socket after part of the body on
// its first answer and honours Range afterwards (or refuses it), and runBuiltin('image2disk')
// into a regular file.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runBuiltin } from '../../src/worker/actions/builtin.js';
import { openImage } from '../../src/worker/actions/image-source.js';

const image = randomBytes(3 * 1024 * 1024 + 17);
const digest = createHash('sha256').update(image).digest('hex');

describe('image2disk resumes a broken download', () => {
  let dir: string;
  let server: http.Server;
  let base: string;
  const requests: string[] = [];
  let mode: 'cut-once' | 'no-range' = 'cut-once';
  let cut = false;

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'slipway-resume-'));
    server = http.createServer((req, res) => {
      const range = req.headers.range;
      requests.push(range ?? 'full');
      const match = range === undefined ? null : /^bytes=(\d+)-$/.exec(range);
      if (match !== null && mode === 'cut-once') {
        const start = Number(match[1]);
        res.writeHead(206, {
          'content-length': image.length - start,
          'content-range': `bytes ${start}-${image.length - 1}/${image.length}`,
          'accept-ranges': 'bytes',
        });
        res.end(image.subarray(start));
        return;
      }
      if (match !== null) {
        res.writeHead(503);
        res.end();
        return;
      }
      res.writeHead(200, { 'content-length': image.length, 'accept-ranges': 'bytes' });
      if (cut) {
        res.end(image);
        return;
      }
      cut = true;
      // The serving node dies after 1 MiB: the connection breaks mid-body.
      res.write(image.subarray(0, 1024 * 1024), () => req.socket.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  });

  it('writes the whole image once, resuming from the byte it stopped at', async () => {
    const dest = path.join(dir, 'disk-a');
    await writeFile(dest, '');
    const outcome = await runBuiltin(
      'image2disk',
      { IMG_URL: `${base}/disk.raw`, DEST_DISK: dest, IMG_SHA256: digest },
      { timeoutMs: 60_000 },
    );
    assert.equal(outcome.success, true, outcome.message);
    assert.ok((await readFile(dest)).equals(image));
    assert.deepEqual(requests, ['full', 'bytes=1048576-']);
    assert.match(outcome.outputTail, /the download broke at byte 1048576 .*resumed from there/);
  });

  it('gives up with a clear message when the server cannot resume within the window', async () => {
    mode = 'no-range';
    cut = false;
    const source = await openImage(`${base}/disk.raw`, new AbortController().signal, {
      resumeWindowMs: 1500,
    });
    let read = 0;
    await assert.rejects(async () => {
      for await (const chunk of source.body as AsyncIterable<Buffer>) read += chunk.length;
    }, /broke at byte 1048576 of 3145745 and could not be resumed/);
    assert.equal(read, 1024 * 1024);
  });

  it('tries the first request again while it is refused or answered 503, then reads the image', async () => {
    let busy = 2;
    const flaky = http.createServer((_req, res) => {
      if (busy-- > 0) {
        res.writeHead(503);
        res.end();
        return;
      }
      res.writeHead(200, { 'content-length': image.length });
      res.end(image);
    });
    await new Promise<void>((resolve) => flaky.listen(0, '127.0.0.1', resolve));
    try {
      const retries: string[] = [];
      const source = await openImage(
        `http://127.0.0.1:${(flaky.address() as AddressInfo).port}/disk.raw`,
        new AbortController().signal,
        { resumeWindowMs: 10_000, onResume: (m) => retries.push(m) },
      );
      let read = 0;
      for await (const chunk of source.body as AsyncIterable<Buffer>) read += chunk.length;
      assert.equal(read, image.length);
      assert.equal(retries.length, 2);
      assert.match(retries[0] ?? '', /fetching the image failed \(503 Service Unavailable\); trying again/);
    } finally {
      await new Promise<void>((resolve) => flaky.close(() => resolve()));
    }
    // Nothing listens: refused until the window passes, then a clear message.
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const retries: string[] = [];
    await assert.rejects(
      openImage(`http://127.0.0.1:${port}/disk.raw`, new AbortController().signal, {
        resumeWindowMs: 800,
        onResume: (m) => retries.push(m),
      }),
      /cannot fetch IMG_URL http:\/\/127\.0\.0\.1:\d+\/disk\.raw: connect ECONNREFUSED/,
    );
    assert.ok(retries.length >= 2, `${retries.length} tries`);
  });
});

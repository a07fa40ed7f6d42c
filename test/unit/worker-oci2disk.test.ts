// Goal: prove that the built-in oci2disk pulls a disk image pushed to an OCI registry as oras
// pushes one (a manifest with one application/vnd.oci.image.layer.v1.tar layer) and writes it to
// a real block device, plain or gzip by the tag's suffix, through the registry's Bearer token
// auth and a blob redirect, checking the layer's digest; and that an unreachable registry, an
// image it does not have, missing credentials, a layer whose bytes do not match its digest and
// an IMG_URL naming no registry fail with messages naming them.
// Method: a tiny OCI distribution registry served by node:http on 127.0.0.1 (manifests, blobs, a
// token endpoint); targets are a loop device and regular files, read back and compared.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { runBuiltin } from '../../src/worker/actions/builtin.js';
import { canUseLoopDevices, withLoopDevice } from '../support/block-devices.js';

const mib = 1024 * 1024;
const dir = mkdtempSync(path.join(tmpdir(), 'slipway-oci2disk-'));
const image = Buffer.concat([randomBytes(2 * mib), Buffer.alloc(mib, 9), randomBytes(4321)]);
const corrupted = Buffer.concat([image, Buffer.from('one byte more')]);
const blobs = new Map<string, Buffer>();
/** repository:tag → the manifest's layer digest. */
const manifests = new Map<string, string>();
let server: Server;
let registry: string;
const token = 'token-for-foo';

function sha256(data: Buffer): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

function push(repositoryTag: string, layer: Buffer, served: Buffer = layer): void {
  const digest = sha256(layer);
  blobs.set(digest, served);
  manifests.set(repositoryTag, digest);
}

before(async () => {
  push('test/debian:raw', image);
  push('test/debian:raw.gz', gzipSync(image));
  push('private/disk:raw', image);
  // Its manifest names the digest of other bytes than the registry serves.
  push('test/corrupt:raw', corrupted, image);
  server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://registry');
    if (url.pathname === '/token') {
      const basic = `Basic ${Buffer.from('foo:bar').toString('base64')}`;
      const scoped = url.searchParams.get('scope') === 'repository:private/disk:pull';
      if (request.headers.authorization !== basic || !scoped) response.writeHead(401).end();
      else response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token }));
      return;
    }
    const storage = /^\/storage\/(sha256:[0-9a-f]{64})$/.exec(url.pathname);
    if (storage !== null) {
      const blob = blobs.get(storage[1] ?? '');
      response.writeHead(200, { 'content-length': blob?.length ?? 0 }).end(blob);
      return;
    }
    const api = /^\/v2\/(.+)\/(manifests|blobs)\/(.+)$/.exec(url.pathname);
    const [, repository = '', kind, reference = ''] = api ?? [];
    if (repository.startsWith('private/') && request.headers.authorization !== `Bearer ${token}`) {
      const realm = `http://${request.headers.host}/token`;
      response
        .writeHead(401, {
          'www-authenticate': `Bearer realm="${realm}",service="registry",scope="repository:${repository}:pull"`,
        })
        .end();
      return;
    }
    if (kind === 'blobs' && blobs.has(reference)) {
      // Blobs live in storage elsewhere, as registries keep them.
      response.writeHead(307, { location: `/storage/${reference}` }).end();
      return;
    }
    const digest = kind === 'manifests' ? manifests.get(`${repository}:${reference}`) : undefined;
    if (digest === undefined) {
      response.writeHead(404).end();
      return;
    }
    const manifest = {
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.empty.v1+json', digest: sha256(Buffer.from('{}')), size: 2 },
      layers: [
        {
          mediaType: 'application/vnd.oci.image.layer.v1.tar',
          digest,
          size: blobs.get(digest)?.length,
          annotations: { 'org.opencontainers.image.title': 'disk.raw' },
        },
      ],
    };
    response.writeHead(200, { 'content-type': manifest.mediaType }).end(JSON.stringify(manifest));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  registry = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

function oci2disk(env: Record<string, string>): ReturnType<typeof runBuiltin> {
  return runBuiltin('oci2disk', env, { timeoutMs: 60_000 });
}

function target(name: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, 'old contents');
  return file;
}

describe('oci2disk', () => {
  it('pulls an image from the registry onto a block device', async () => {
    assert.ok(canUseLoopDevices(), 'needs root and losetup');
    await withLoopDevice(dir, 8 * mib, async (device) => {
      const outcome = await oci2disk({ IMG_URL: `${registry}/test/debian:raw`, DEST_DISK: device });
      assert.equal(outcome.success, true, `${outcome.message}\n${outcome.outputTail}`);
      assert.match(
        outcome.message,
        new RegExp(
          `^wrote ${image.length} bytes of the image to ${device} in .*, digest ${sha256(image)} verified$`,
        ),
      );
      assert.ok(readFileSync(device).subarray(0, image.length).equals(image));
    });
  });

  it('decompresses by the suffix of the tag, and authenticates with a Bearer token', async () => {
    const gz = target('gz.img');
    const compressed = await oci2disk({
      IMG_URL: `${registry}/test/debian:raw.gz`,
      DEST_DISK: gz,
      COMPRESSED: 'true',
    });
    assert.equal(compressed.success, true, `${compressed.message}\n${compressed.outputTail}`);
    assert.match(compressed.message, /bytes of the gzip image/);
    assert.ok(readFileSync(gz).equals(image));
    const privateDisk = target('private.img');
    const authenticated = await oci2disk({
      IMG_URL: `${registry}/private/disk:raw`,
      DEST_DISK: privateDisk,
      REGISTRY_USERNAME: 'foo',
      REGISTRY_PASSWORD: 'bar',
    });
    assert.equal(authenticated.success, true, `${authenticated.message}\n${authenticated.outputTail}`);
    assert.ok(readFileSync(privateDisk).equals(image));
  });

  it('names the registry when it cannot be reached, lacks the image or wants credentials', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const file = target('refused.img');
    for (const [env, message] of [
      [
        { IMG_URL: `127.0.0.1:${port}/test/debian:raw` },
        `oci2disk: cannot reach registry 127.0.0.1:${port} for IMG_URL 127.0.0.1:${port}/test/debian: connect ECONNREFUSED 127.0.0.1:${port}`,
      ],
      [
        { IMG_URL: `${registry}/test/debian:missing` },
        `oci2disk: registry ${registry} has no image ${registry}/test/debian:missing (404)`,
      ],
      [
        { IMG_URL: `${registry}/private/disk:raw` },
        `oci2disk: registry ${registry}'s token service http://${registry} answered 401: set REGISTRY_USERNAME and REGISTRY_PASSWORD`,
      ],
      [
        { IMG_URL: 'debian:raw.gz' },
        'oci2disk: IMG_URL debian:raw.gz names no registry; give REGISTRY/REPOSITORY:TAG, e.g. 192.168.0.173/test/debian:raw.gz',
      ],
      [
        { IMG_URL: `${registry}/test/debian:raw.lz4`, COMPRESSED: 'true' },
        `oci2disk: IMG_URL ${registry}/test/debian:raw.lz4 has no compression suffix (.gz, .zs, .zst, .xz, .bzip2 or .bz2) and COMPRESSED is true; tag it so, or set COMPRESSED=false`,
      ],
      [
        { IMG_URL: `${registry}/test/debian:raw`, COMPRESSED: 'yes' },
        'oci2disk: COMPRESSED=yes is not one of true, false',
      ],
    ] as const) {
      const outcome = await oci2disk({ DEST_DISK: file, ...env });
      assert.equal(outcome.success, false);
      assert.equal(outcome.message, message);
    }
    assert.equal(readFileSync(file, 'utf8'), 'old contents', 'nothing was written');
  });

  it('zeroes the first MiB when the layer does not match its digest', async () => {
    const file = target('corrupt.img');
    const outcome = await oci2disk({ IMG_URL: `${registry}/test/corrupt:raw`, DEST_DISK: file });
    assert.equal(outcome.success, false);
    assert.match(
      outcome.message,
      new RegExp(
        `^oci2disk: the layer of ${registry}/test/corrupt:raw has digest sha256:[0-9a-f]{64}, not the manifest's ${sha256(corrupted)}; the first MiB of ${file} is zeroed`,
      ),
    );
    assert.ok(readFileSync(file).subarray(0, mib).equals(Buffer.alloc(mib)));
  });
});

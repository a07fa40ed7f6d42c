// Goal: server reflection describes exactly the services it is given, from the package's proto/
// folder, behind the call guard, and refuses to load when the folder is missing or not this
// build's; health answers for the same services and no others.
// Method: ServerReflection and HealthService on a grpc-js server on loopback with the call guard,
// asked by a reflection client that knows only the published reflection protocol
// (test/support/reflection-client.ts); the load errors against folders made in a temp dir.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client, credentials, Metadata, Server, ServerCredentials, status } from '@grpc/grpc-js';
import type { ClientReadableStream, ServiceError } from '@grpc/grpc-js';
import { HealthService } from '../../src/api/health-service.js';
import {
  packageProtoDir,
  protoFilesDeclaring,
  reflectionServiceNames,
  ServerReflection,
} from '../../src/api/server-reflection.js';
import { serviceNameOf } from '../../src/api/service-name.js';
import {
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthClient,
  HealthService as HealthDefinition,
} from '../../src/gen/health.js';
import type { HealthCheckResponse } from '../../src/gen/health.js';
import { KvService } from '../../src/gen/kv.js';
import { refusingUndecodable, callGuard } from '../../src/platform/grpc-call-guard.js';
import {
  packageFromDescriptors,
  ReflectionClient,
  ReflectionRefusal,
  serviceClient,
} from '../support/reflection-client.js';

const run = promisify(execFile);
const served = ['slipway.kv.v1.Kv', serviceNameOf(HealthDefinition), ...reflectionServiceNames].sort();
const server = new Server({ interceptors: [callGuard] });
let address = '';
const scratch = mkdtempSync(join(tmpdir(), 'slipway-reflection-'));

before(async () => {
  ServerReflection.load(packageProtoDir(), served).addTo(server);
  const health = new HealthService(() => true, served);
  server.addService(refusingUndecodable(HealthDefinition), health.handlers());
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) =>
      err === null ? resolve(p) : reject(err),
    ),
  );
  address = `127.0.0.1:${port}`;
});

after(() => {
  server.forceShutdown();
  rmSync(scratch, { recursive: true, force: true });
});

describe('server reflection', () => {
  test('both versions list exactly the services given, themselves included', async () => {
    for (const version of ['v1', 'v1alpha'] as const) {
      const client = new ReflectionClient(address, version);
      try {
        assert.deepEqual(await client.listServices(), served, version);
      } finally {
        client.close();
      }
    }
  });

  test('a service is described by its file; the peer protocol is not described at all', async () => {
    const client = new ReflectionClient(address);
    try {
      const files = await client.fileContainingSymbol('slipway.kv.v1.Kv');
      assert.equal(files.length, 1);
      const Kv = serviceClient(packageFromDescriptors(files), 'slipway.kv.v1.Kv');
      assert.deepEqual(
        Object.keys(Kv.service).sort(),
        Object.values(KvService)
          .map((m) => m.path.slice(m.path.lastIndexOf('/') + 1))
          .sort(),
      );
      for (const symbol of ['slipway.raft.v1.Raft', 'slipway.internal.v1.Internal', 'slipway.control.v1']) {
        await assert.rejects(
          client.fileContainingSymbol(symbol),
          (err: unknown) => err instanceof ReflectionRefusal && err.code === status.NOT_FOUND,
          symbol,
        );
      }
    } finally {
      client.close();
    }
  });

  test('a request that does not decode is INVALID_ARGUMENT naming the method (the call guard)', async () => {
    const raw = new Client(address, credentials.createInsecure());
    const identity = (b: Buffer): Buffer => b;
    try {
      const path = '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo';
      const code = await new Promise<{ code: number; details: string }>((resolve) => {
        const stream = raw.makeBidiStreamRequest(path, identity, identity, new Metadata(), {
          deadline: Date.now() + 5000,
        });
        stream.on('data', () => undefined);
        stream.on('error', () => undefined);
        stream.on('status', (s: { code: number; details: string }) => resolve(s));
        // Field 3 (file_by_filename) whose length runs past the end.
        stream.write(Buffer.of(0x1a, 0x05, 0x61));
        stream.end();
      });
      assert.equal(code.code, status.INVALID_ARGUMENT);
      assert.match(
        code.details,
        /^the request to \/grpc\.reflection\.v1\.ServerReflection\/\S+ does not decode/,
      );
    } finally {
      raw.close();
    }
  });
});

describe('loading the descriptors', () => {
  test('a missing proto folder is an error naming it and the way out', () => {
    const missing = join(scratch, 'no-such-folder');
    assert.throws(
      () => ServerReflection.load(missing, served),
      (err: Error) => err.message.includes(missing) && /reinstall the package/.test(err.message),
    );
  });

  test("a folder that lacks a served service's file is not this build's", () => {
    const partial = join(scratch, 'partial');
    mkdirSync(partial);
    copyFileSync(join(packageProtoDir(), 'health.proto'), join(partial, 'health.proto'));
    assert.throws(
      () => ServerReflection.load(partial, ['grpc.health.v1.Health', 'slipway.kv.v1.Kv']),
      /^Error: no \.proto file in .*partial declares slipway\.kv\.v1\.Kv: the folder is not this build's/,
    );
  });

  test('a file that does not parse: the node starts, and the first reflection call is INTERNAL naming the folder', async () => {
    const broken = join(scratch, 'broken');
    mkdirSync(broken);
    for (const file of ['reflection.proto', 'reflection_v1alpha.proto'])
      copyFileSync(join(packageProtoDir(), file), join(broken, file));
    writeFileSync(join(broken, 'broken.proto'), 'syntax = "proto3";\npackage x.v1;\nservice S {\n  rpc M(\n');
    const other = new Server({ interceptors: [callGuard] });
    try {
      ServerReflection.load(broken, ['x.v1.S', ...reflectionServiceNames]).addTo(other);
      const port = await new Promise<number>((resolve, reject) =>
        other.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) =>
          err === null ? resolve(p) : reject(err),
        ),
      );
      const client = new ReflectionClient(`127.0.0.1:${port}`, 'v1');
      try {
        // 13: INTERNAL.
        await assert.rejects(
          client.listServices(),
          /^Error: reflection call ended 13: cannot read the API's \.proto files in .*broken: /,
        );
      } finally {
        client.close();
      }
    } finally {
      other.forceShutdown();
    }
  });

  test('the descriptors are read at the first reflection call, not when the node starts', async () => {
    // A process of its own: this one has read them already. It loads the module and checks the
    // folder, as a starting node does, then lists what CommonJS modules it holds.
    const script = [
      `const { ServerReflection, packageProtoDir, reflectionServiceNames } = await import(${JSON.stringify(
        new URL('../../src/api/server-reflection.ts', import.meta.url).href,
      )});`,
      "ServerReflection.load(packageProtoDir(), ['slipway.kv.v1.Kv', ...reflectionServiceNames]);",
      "const { createRequire } = await import('node:module');",
      'const held = Object.keys(createRequire(import.meta.url).cache);',
      'console.log(JSON.stringify(held.filter((f) => /@grpc\\/(proto-loader|reflection)|protobufjs/.test(f)).length));',
    ].join('\n');
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script]);
    assert.equal(stdout.trim(), '0');
  });

  test('only the files declaring the services are read', () => {
    assert.deepEqual(protoFilesDeclaring(packageProtoDir(), ['slipway.kv.v1.Kv', 'grpc.health.v1.Health']), [
      'health.proto',
      'kv.proto',
    ]);
  });
});

describe('health', () => {
  const watchFirst = (client: HealthClient, service: string): Promise<HealthCheckResponse> =>
    new Promise((resolve, reject) => {
      const stream: ClientReadableStream<HealthCheckResponse> = client.watch({ service });
      stream.on('data', (m: HealthCheckResponse) => {
        resolve(m);
        stream.cancel();
      });
      stream.on('error', (err: ServiceError) => {
        if (err.code !== status.CANCELLED) reject(err);
      });
    });

  test('every service given is SERVING; any other is NOT_FOUND, and SERVICE_UNKNOWN to Watch', async () => {
    const client = new HealthClient(address, credentials.createInsecure());
    try {
      for (const service of ['', ...served]) {
        const answer = await new Promise<HealthCheckResponse>((resolve, reject) =>
          client.check({ service }, (err, res) => (err === null ? resolve(res) : reject(err))),
        );
        assert.equal(answer.status, ServingStatus.SERVING, service);
      }
      await assert.rejects(
        new Promise((resolve, reject) =>
          client.check({ service: 'slipway.raft.v1.Raft' }, (err, res) =>
            err === null ? resolve(res) : reject(err),
          ),
        ),
        (err: ServiceError) => err.code === status.NOT_FOUND,
      );
      assert.equal((await watchFirst(client, 'slipway.kv.v1.Kv')).status, ServingStatus.SERVING);
      assert.equal((await watchFirst(client, 'slipway.raft.v1.Raft')).status, ServingStatus.SERVICE_UNKNOWN);
    } finally {
      client.close();
    }
  });
});

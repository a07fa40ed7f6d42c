// Goal: the tools operators already point at gRPC servers work with Slipway's API without our
// .proto files. Each node of a cluster answers server reflection (v1 and v1alpha) and health
// checks without a token, for every service a client can reach on its API port and no other; a
// client built from the reflected descriptors alone calls the API (with a token, which the API
// still requires); and the peer protocol is not described.
// Method: a real 3-node cluster with tokens required (test/support/process-cluster.ts). The
// reflection client knows only the published reflection protocol, as grpcurl does
// (test/support/reflection-client.ts; grpcurl itself is not packaged in Debian): it lists the
// services, fetches the descriptors of Control, Kv and Health over reflection, builds grpc-js
// clients from them, creates an operator token with Control as the bootstrap admin, puts a key
// as that operator on one node and reads it on another, and checks health for every listed
// service on every node. What the API port really serves is found by calling each generated
// service there without a token (UNIMPLEMENTED: not served), so a service added to the API
// port and not to reflection, or the other way round, fails here.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { Client, credentials, Metadata, status } from '@grpc/grpc-js';
import type { GrpcObject, ServiceError, StatusObject } from '@grpc/grpc-js';
import { ProcessCluster, type ProcNode } from '../support/process-cluster.js';
import {
  packageFromDescriptors,
  ReflectionClient,
  ReflectionRefusal,
  serviceClient,
} from '../support/reflection-client.js';

const bootstrapToken = 'admin-token-for-the-reflection-test';
const callDeadlineMs = 10_000;
const genDir = fileURLToPath(new URL('../../src/gen', import.meta.url));

let cluster: ProcessCluster;
let nodes: readonly ProcNode[];

before(async () => {
  cluster = new ProcessCluster(3);
  cluster.requireToken(bootstrapToken);
  cluster.startAll();
  await cluster.waitForLeader(60_000);
  nodes = cluster.nodes;
});

after(async () => {
  await cluster?.destroy();
});

/** A unary call on a client built from reflected descriptors: its answer, or its error. */
function unary(
  client: Client,
  method: string,
  request: Record<string, unknown>,
  token?: string,
): Promise<Record<string, unknown>> {
  const md = new Metadata();
  if (token !== undefined) md.set('authorization', `Bearer ${token}`);
  const fn = (client as unknown as Record<string, unknown>)[method];
  assert.equal(typeof fn, 'function', `the reflected client has no method ${method}`);
  return new Promise((resolve, reject) => {
    (fn as (...args: unknown[]) => void).call(
      client,
      request,
      md,
      { deadline: Date.now() + callDeadlineMs },
      (err: ServiceError | null, res: Record<string, unknown>) => (err === null ? resolve(res) : reject(err)),
    );
  });
}

/** The services of the generated definitions (src/gen), each with one method to probe it by. */
async function generatedServices(): Promise<
  Map<string, { path: string; stream: 'unary' | 'server' | 'client' }>
> {
  const found = new Map<string, { path: string; stream: 'unary' | 'server' | 'client' }>();
  for (const file of readdirSync(genDir).filter((name) => name.endsWith('.ts'))) {
    const mod = (await import(pathToFileURL(join(genDir, file)).href)) as Record<string, unknown>;
    for (const value of Object.values(mod)) {
      if (typeof value !== 'object' || value === null) continue;
      const [first] = Object.values(value as Record<string, unknown>);
      const m = first as { path?: unknown; requestStream?: unknown; responseStream?: unknown } | undefined;
      if (typeof m?.path !== 'string' || typeof m.requestStream !== 'boolean') continue;
      const name = /^\/([^/]+)\//.exec(m.path)?.[1];
      if (name === undefined) continue;
      found.set(name, {
        path: m.path,
        stream: m.requestStream ? 'client' : m.responseStream === true ? 'server' : 'unary',
      });
    }
  }
  return found;
}

/** How the API port answers `path` without a token and with an empty message. */
function probe(address: string, path: string, stream: 'unary' | 'server' | 'client'): Promise<status> {
  const raw = new Client(address, credentials.createInsecure());
  const identity = (b: Buffer): Buffer => b;
  const options = { deadline: Date.now() + callDeadlineMs };
  return new Promise<status>((resolve) => {
    const settle = (s: NodeJS.EventEmitter & { cancel(): void }): void => {
      s.on('data', () => {
        resolve(status.OK);
        s.cancel();
      });
      s.on('error', () => undefined);
      s.on('status', (st: StatusObject) => resolve(st.code));
    };
    if (stream === 'unary') {
      raw.makeUnaryRequest(path, identity, identity, Buffer.alloc(0), new Metadata(), options, (err) =>
        resolve(err?.code ?? status.OK),
      );
    } else if (stream === 'server') {
      settle(raw.makeServerStreamRequest(path, identity, identity, Buffer.alloc(0), new Metadata(), options));
    } else {
      const s = raw.makeBidiStreamRequest(path, identity, identity, new Metadata(), options);
      settle(s);
      s.end();
    }
  }).finally(() => raw.close());
}

describe('server reflection and health on every node', () => {
  test('each node lists, in both versions, exactly the services its API port answers', async (t) => {
    const generated = await generatedServices();
    const answered: string[] = [];
    for (const [name, { path, stream }] of generated) {
      const code = await probe(nodes[0]?.apiAddr ?? '', path, stream);
      if (code !== status.UNIMPLEMENTED) answered.push(name);
    }
    answered.sort();
    t.diagnostic(`the API port answers: ${answered.join(', ')}`);
    assert.ok(answered.includes('grpc.reflection.v1.ServerReflection'));
    assert.ok(
      !answered.includes('slipway.raft.v1.Raft') && !answered.includes('slipway.internal.v1.Internal'),
    );
    for (const node of nodes) {
      for (const version of ['v1', 'v1alpha'] as const) {
        const client = new ReflectionClient(node.apiAddr, version);
        try {
          assert.deepEqual(await client.listServices(), answered, `${node.id} ${version}`);
        } finally {
          client.close();
        }
      }
    }
  });

  test('a client built from reflected descriptors alone calls the API, with a token', async () => {
    const [first, second] = nodes;
    assert.ok(first !== undefined && second !== undefined);
    const reflect = new ReflectionClient(first.apiAddr);
    let pkg: GrpcObject;
    try {
      const files = [
        ...(await reflect.fileContainingSymbol('slipway.control.v1.Control')),
        ...(await reflect.fileContainingSymbol('slipway.kv.v1.Kv')),
      ];
      pkg = packageFromDescriptors(files);
      // The peer protocol is not described.
      for (const symbol of ['slipway.raft.v1.Raft', 'slipway.internal.v1.Internal']) {
        await assert.rejects(
          reflect.fileContainingSymbol(symbol),
          (err: unknown) => err instanceof ReflectionRefusal && err.code === status.NOT_FOUND,
        );
      }
    } finally {
      reflect.close();
    }
    const Control = serviceClient(pkg, 'slipway.control.v1.Control');
    const Kv = serviceClient(pkg, 'slipway.kv.v1.Kv');
    const control = new Control(first.apiAddr, credentials.createInsecure());
    const kvFirst = new Kv(first.apiAddr, credentials.createInsecure());
    const kvSecond = new Kv(second.apiAddr, credentials.createInsecure());
    try {
      // Reflection opens no door: the API still wants a token.
      await assert.rejects(
        unary(kvFirst, 'Status', {}),
        (err: ServiceError) => err.code === status.UNAUTHENTICATED,
      );
      const created = await unary(
        control,
        'TokenCreate',
        { name: 'reflected-operator', role: 'operator' },
        bootstrapToken,
      );
      const token = created['token'];
      assert.ok(typeof token === 'string' && token.length > 0, JSON.stringify(created));
      await unary(kvFirst, 'Put', { key: 'reflected', value: Buffer.from('by a reflected client') }, token);
      const got = await unary(kvSecond, 'Get', { key: 'reflected', local: false }, token);
      assert.equal(got['found'], true);
      assert.equal(Buffer.from(got['value'] as Uint8Array).toString(), 'by a reflected client');
    } finally {
      control.close();
      kvFirst.close();
      kvSecond.close();
    }
  });

  test('health, from reflected descriptors and without a token, is SERVING for every listed service', async () => {
    for (const node of nodes) {
      const reflect = new ReflectionClient(node.apiAddr);
      let listed: string[];
      let pkg: GrpcObject;
      try {
        listed = await reflect.listServices();
        pkg = packageFromDescriptors(await reflect.fileContainingSymbol('grpc.health.v1.Health'));
      } finally {
        reflect.close();
      }
      const Health = serviceClient(pkg, 'grpc.health.v1.Health');
      const health = new Health(node.apiAddr, credentials.createInsecure());
      try {
        for (const service of ['', ...listed]) {
          const answer = await unary(health, 'Check', { service });
          assert.equal(answer['status'], 'SERVING', `${node.id} ${service}`);
        }
        await assert.rejects(
          unary(health, 'Check', { service: 'slipway.raft.v1.Raft' }),
          (err: ServiceError) => err.code === status.NOT_FOUND,
        );
      } finally {
        health.close();
      }
    }
  });
});

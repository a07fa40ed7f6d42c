// Goal: the proxyless flags of the CLI and the worker (src/platform/xds-target.ts) take exactly
// `xds:///NAME` alone, refuse bad xDS server lists and a missing bootstrap with a message naming
// the fix, render the bootstrap grpc-js-xds reads, and put a reachable xDS server first.
// Method: the functions called directly; one loopback listener for reachability.
import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { parseServers } from '../../src/cli/client.js';
import { UsageError } from '../../src/cli/output.js';
import {
  enableXds,
  isXdsTarget,
  parseXdsServers,
  reachableFirst,
  xdsBootstrapJson,
  XdsTargetError,
} from '../../src/platform/xds-target.js';

test('xds:///NAME is a target on its own; anything else is HOST:PORT', () => {
  assert.ok(isXdsTarget('xds:///slipway'));
  assert.ok(!isXdsTarget('xds://authority/slipway'));
  assert.ok(!isXdsTarget('xds:///'));
  assert.deepEqual(parseServers('xds:///slipway'), ['xds:///slipway']);
  assert.throws(() => parseServers('xds:///slipway,127.0.0.1:7001'), /stands alone/);
  assert.throws(
    () => parseServers('dns:///x'),
    (err: unknown) => err instanceof UsageError && /xds:\/\/\/NAME/.test(err.message),
  );
});

test('--xds-server takes HOST:PORT,... and names a bad entry', () => {
  assert.deepEqual(parseXdsServers('127.0.0.1:7001, [::1]:7002'), ['127.0.0.1:7001', '[::1]:7002']);
  assert.throws(
    () => parseXdsServers('127.0.0.1'),
    (err: unknown) => err instanceof XdsTargetError && /"127.0.0.1"/.test(err.message),
  );
});

test('the bootstrap: plaintext to each xDS server, a node id and a locality', () => {
  assert.deepEqual(JSON.parse(xdsBootstrapJson(['127.0.0.1:7001'], 'slipway-cli')), {
    xds_servers: [
      { server_uri: '127.0.0.1:7001', channel_creds: [{ type: 'insecure' }], server_features: ['xds_v3'] },
    ],
    node: { id: 'slipway-cli', locality: {} },
  });
});

test('without xDS servers or a bootstrap of its own, enabling xDS says what to give', () => {
  const saved = [process.env['GRPC_XDS_BOOTSTRAP'], process.env['GRPC_XDS_BOOTSTRAP_CONFIG']];
  delete process.env['GRPC_XDS_BOOTSTRAP'];
  delete process.env['GRPC_XDS_BOOTSTRAP_CONFIG'];
  try {
    assert.throws(() => enableXds([], 'x'), /--xds-server HOST:PORT/);
  } finally {
    if (saved[0] !== undefined) process.env['GRPC_XDS_BOOTSTRAP'] = saved[0];
    if (saved[1] !== undefined) process.env['GRPC_XDS_BOOTSTRAP_CONFIG'] = saved[1];
  }
});

test('a reachable xDS server goes first; none reachable keeps the order', async () => {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const live = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const closed = await new Promise<string>((resolve) => {
    const probe = createServer();
    probe.listen(0, '127.0.0.1', () => {
      const port = (probe.address() as AddressInfo).port;
      probe.close(() => resolve(`127.0.0.1:${port}`));
    });
  });
  try {
    assert.deepEqual(await reachableFirst([closed, 'bad', live]), [live, closed, 'bad']);
    assert.deepEqual(await reachableFirst([closed]), [closed]);
  } finally {
    server.close();
  }
});

// Goal: lb/envoy.ts renders the routing lb/haproxy.ts does, in Envoy's terms: a ring hash on
// x-worker-id, grpc health checks, h2c to the nodes, no route timeout on streams, and retries
// only for calls that never reached a node. Envoy is not installable here, so nothing runs it.
// Method: the bootstrap for 3 nodes is read field by field, as Envoy would read it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BalancerSpecError } from '../../src/model/balancer-spec.js';
import type { Json } from '../../lb/envoy.js';
import { renderEnvoyBootstrap } from '../../lb/envoy.js';

const nodes = [
  { id: 'n1', apiAddr: '127.0.0.1:7001' },
  { id: 'n2', apiAddr: '127.0.0.1:7002' },
  { id: 'n3', apiAddr: '127.0.0.1:7003' },
];

/** The value at a path of keys and indexes; fails naming the path when it is not there. */
function at(doc: Json, ...path: (string | number)[]): Json {
  let here: Json = doc;
  for (const key of path) {
    const next: Json | undefined =
      typeof key === 'number'
        ? Array.isArray(here)
          ? (here as readonly Json[])[key]
          : undefined
        : typeof here === 'object' && here !== null && !Array.isArray(here)
          ? (here as { readonly [k: string]: Json })[key]
          : undefined;
    assert.ok(next !== undefined, `no ${path.join('.')} (stopped at ${String(key)})`);
    here = next;
  }
  return here;
}

const doc = renderEnvoyBootstrap({ listenAddr: '127.0.0.1:7000', nodes, statsAddr: '127.0.0.1:7090' });
const resources = at(doc, 'static_resources');
const manager = at(resources, 'listeners', 0, 'filter_chains', 0, 'filters', 0, 'typed_config');
const route = at(manager, 'route_config', 'virtual_hosts', 0, 'routes', 0, 'route');
const cluster = at(resources, 'clusters', 0);

test('listens on the address given, h2c, with the admin page on the status address', () => {
  assert.deepEqual(at(resources, 'listeners', 0, 'address'), {
    socket_address: { address: '127.0.0.1', port_value: 7000 },
  });
  assert.equal(at(manager, 'codec_type'), 'HTTP2');
  assert.deepEqual(at(doc, 'admin', 'address', 'socket_address', 'port_value'), 7090);
});

test('hashes each call on x-worker-id over a ring, with no timeout cutting streams', () => {
  assert.deepEqual(at(route, 'hash_policy'), [{ header: { header_name: 'x-worker-id' }, terminal: true }]);
  assert.equal(at(route, 'timeout'), '0s');
  assert.equal(at(route, 'cluster'), at(cluster, 'name'));
  assert.equal(at(cluster, 'lb_policy'), 'RING_HASH');
  assert.deepEqual(at(cluster, 'common_lb_config', 'healthy_panic_threshold'), { value: 0 });
});

test('retries only calls that never reached a node, on another node', () => {
  assert.equal(at(route, 'retry_policy', 'retry_on'), 'connect-failure,refused-stream');
  assert.equal(
    at(route, 'retry_policy', 'retry_host_predicate', 0, 'name'),
    'envoy.retry_host_predicates.previous_hosts',
  );
});

test('sends h2c to every node, in order, checked with grpc.health.v1', () => {
  assert.equal(at(cluster, 'type'), 'STATIC');
  const endpoints = at(cluster, 'load_assignment', 'endpoints', 0, 'lb_endpoints') as readonly Json[];
  assert.deepEqual(
    endpoints.map((e) => [
      at(e, 'endpoint', 'hostname'),
      at(e, 'endpoint', 'address', 'socket_address', 'port_value'),
    ]),
    [
      ['n1', 7001],
      ['n2', 7002],
      ['n3', 7003],
    ],
  );
  const options = at(cluster, 'typed_extension_protocol_options');
  assert.ok(
    typeof options === 'object' &&
      options !== null &&
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions' in options,
  );
  const keepalive = at(
    cluster,
    'typed_extension_protocol_options',
    'envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
    'explicit_http_config',
    'http2_protocol_options',
    'connection_keepalive',
  );
  assert.deepEqual(keepalive, { interval: '10s', timeout: '5s' }, 'a frozen node is noticed without a FIN');
  const check = at(cluster, 'health_checks', 0);
  assert.deepEqual(at(check, 'grpc_health_check'), {});
  assert.equal(at(check, 'interval'), '1s');
  assert.equal(at(check, 'unhealthy_threshold'), 2);
});

test('resolves host names (STRICT_DNS) and takes IPv6 without brackets', () => {
  const named = renderEnvoyBootstrap({
    listenAddr: '[::1]:7000',
    nodes: [{ id: 'a', apiAddr: 'node-a.example:7001' }],
  });
  assert.equal(at(named, 'static_resources', 'clusters', 0, 'type'), 'STRICT_DNS');
  assert.equal(at(named, 'static_resources', 'listeners', 0, 'address', 'socket_address', 'address'), '::1');
  assert.equal((named as Record<string, Json>)['admin'], undefined, 'no admin page unless asked');
});

test('with TLS: the certificate and key served to clients, each node verified against the CA, HTTP/2 by ALPN', () => {
  const tls = {
    certFile: '/pki/n1.crt',
    keyFile: '/pki/n1.key',
    pemFile: '/pki/n1.pem',
    caFile: '/pki/ca.crt',
  };
  const secured = renderEnvoyBootstrap({ listenAddr: '127.0.0.1:7000', nodes, tls });
  const down = at(secured, 'static_resources', 'listeners', 0, 'filter_chains', 0, 'transport_socket');
  assert.equal(at(down, 'name'), 'envoy.transport_sockets.tls');
  const served = at(down, 'typed_config', 'common_tls_context');
  assert.equal(at(served, 'tls_certificates', 0, 'certificate_chain', 'filename'), '/pki/n1.crt');
  assert.equal(at(served, 'tls_certificates', 0, 'private_key', 'filename'), '/pki/n1.key');
  assert.deepEqual(at(served, 'alpn_protocols'), ['h2']);
  const up = at(secured, 'static_resources', 'clusters', 0, 'transport_socket', 'typed_config');
  assert.equal(
    at(up, '@type'),
    'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
  );
  assert.equal(at(up, 'common_tls_context', 'validation_context', 'trusted_ca', 'filename'), '/pki/ca.crt');
  assert.deepEqual(at(up, 'common_tls_context', 'alpn_protocols'), ['h2']);
  const plain = at(doc, 'static_resources', 'clusters', 0) as Record<string, Json>;
  assert.equal(plain['transport_socket'], undefined, 'h2c without TLS');
});

test('refuses the bad input the HAProxy renderer refuses', () => {
  assert.throws(() => renderEnvoyBootstrap({ listenAddr: 'nowhere', nodes }), BalancerSpecError);
});

// Goal: what Slipway sends an xDS client, and the Envoy bootstraps it renders, are valid by
// Envoy's own definitions (no Envoy binary can be installed here): every field is one Envoy
// declares, every Any names an Envoy message, the cheap protoc-gen-validate rules hold, and the
// values mean what the design says (ring hash on x-worker-id, EDS over ADS, health per member;
// on a TLS node, TLS on both sides of Envoy through secrets its TLS bootstrap defines, and none for
// gRPC clients).
// The checker itself is shown to catch an unknown field, a bad type URL, a broken rule and an
// unknown JSON key. A DiscoveryRequest as Envoy encodes it decodes with Slipway's subset.
// Method: protobufjs loads Envoy's data-plane-api protos shipped in @grpc/grpc-js-xds/deps
// (test/support/envoy-protos.ts); responses come from the pure core (lb/xds/ads-stream.ts),
// encoded by the generated subset (proto/xds.proto). test/integration/xds.test.ts checks the
// same over the wire from a running node.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AdsStream } from '../../lb/xds/ads-stream.js';
import { envoyListenKey, xdsTypeUrl } from '../../lb/xds/resources.js';
import type { XdsMember } from '../../lb/xds/resources.js';
import { renderEnvoyBootstrap } from '../../lb/envoy.js';
import { renderEnvoyXdsBootstrap } from '../../lb/envoy-xds.js';
import { Cluster, DiscoveryRequest, DiscoveryResponse } from '../../src/gen/xds.js';
import { checkEnvoyBytes, checkEnvoyJson, envoyType } from '../support/envoy-protos.js';

const members: XdsMember[] = [
  { id: 'n1', apiAddr: '127.0.0.1:7001', health: 'HEALTHY' },
  { id: 'n2', apiAddr: '[::1]:7002', health: 'DRAINING' },
  { id: 'n3', apiAddr: '127.0.0.1:7003', health: 'UNHEALTHY' },
];
const nodes = [
  { id: 'n1', apiAddr: '127.0.0.1:7001' },
  { id: 'n2', apiAddr: '127.0.0.1:7002' },
];
const discoveryResponse = envoyType('envoy.service.discovery.v3.DiscoveryResponse');
const bootstrap = envoyType('envoy.config.bootstrap.v3.Bootstrap');

/** Every response a wildcard (Envoy) and a named (gRPC) subscriber get, encoded for the wire. */
function everyResponse(tls: boolean): Uint8Array[] {
  const out: Uint8Array[] = [];
  const node = { id: 'envoy', metadata: { fields: { [envoyListenKey]: { stringValue: '0.0.0.0:7000' } } } };
  for (const names of [[], ['slipway']]) {
    const s = new AdsStream(members, { tls });
    for (const typeUrl of Object.values(xdsTypeUrl)) {
      const step = s.request({ typeUrl, resourceNames: names, versionInfo: '', responseNonce: '', node });
      for (const r of step.responses)
        out.push(DiscoveryResponse.encode({ ...r, resources: [...r.resources] }).finish());
    }
  }
  return out;
}

type Plain = Record<string, unknown>;

/** The value at a path of keys and indexes; fails naming the path when it is not there. */
function at(doc: unknown, ...path: (string | number)[]): unknown {
  let here = doc;
  for (const key of path) {
    const next: unknown =
      typeof here === 'object' && here !== null ? (here as Record<string | number, unknown>)[key] : undefined;
    assert.ok(next !== undefined, `no ${path.join('.')} (stopped at ${String(key)})`);
    here = next;
  }
  return here;
}

function decodedAs(typeUrl: string, bytes: Uint8Array): Plain {
  const t = envoyType(typeUrl);
  return t.toObject(t.decode(bytes), { enums: String, longs: Number });
}

describe('xDS resources against Envoy protos', () => {
  test('every response and resource decodes as Envoy declares it, with no unknown field or broken rule', () => {
    const responses = [...everyResponse(false), ...everyResponse(true)];
    assert.equal(responses.length, 16);
    for (const bytes of responses) {
      assert.deepEqual(checkEnvoyBytes(discoveryResponse, bytes), []);
      const r = discoveryResponse.decode(bytes) as unknown as {
        type_url: string;
        resources: { type_url: string }[];
      };
      assert.ok(r.resources.length > 0);
      for (const any of r.resources)
        assert.equal(any.type_url, r.type_url, 'each resource is of the type asked for');
    }
  });

  test('they mean what the design says', () => {
    const s = new AdsStream(members);
    const get = (typeUrl: string): Plain => {
      const [r] = s.request({
        typeUrl,
        resourceNames: ['slipway'],
        versionInfo: '',
        responseNonce: '',
      }).responses;
      assert.ok(r !== undefined);
      return decodedAs(typeUrl, r.resources[0]!.value);
    };
    const cluster = get(xdsTypeUrl.cluster);
    assert.equal(cluster['type'], 'EDS');
    assert.equal(cluster['lb_policy'], 'RING_HASH');
    assert.deepEqual((cluster['eds_cluster_config'] as Plain)['eds_config'], {
      ads: {},
      resource_api_version: 'V3',
    });
    const route = get(xdsTypeUrl.route);
    assert.deepEqual(at(route, 'virtual_hosts', 0, 'routes', 0, 'route', 'hash_policy'), [
      { header: { header_name: 'x-worker-id' }, terminal: true },
    ]);
    const cla = get(xdsTypeUrl.endpoints);
    assert.deepEqual(
      (at(cla, 'endpoints', 0, 'lb_endpoints') as unknown[]).map((e) => [
        at(e, 'endpoint', 'address', 'socket_address', 'address'),
        at(e, 'health_status'),
      ]),
      [
        ['127.0.0.1', 'HEALTHY'],
        ['::1', 'DRAINING'],
        ['127.0.0.1', 'UNHEALTHY'],
      ],
    );
    assert.deepEqual(at(cla, 'endpoints', 0, 'load_balancing_weight'), { value: 1 });
    const listener = get(xdsTypeUrl.listener);
    const api = (listener['api_listener'] as Plain)['api_listener'] as { type_url: string };
    assert.match(api.type_url, /HttpConnectionManager$/);
  });

  test('a TLS node gives Envoy TLS on both sides, through the secrets its bootstrap defines; gRPC none', () => {
    const envoyNode = {
      id: 'envoy',
      metadata: { fields: { [envoyListenKey]: { stringValue: '0.0.0.0:7000' } } },
    };
    const served = (tls: boolean, envoy: boolean, typeUrl: string): Plain => {
      const s = new AdsStream(members, { tls });
      const [r] = s.request({
        typeUrl,
        resourceNames: envoy ? [] : ['slipway'],
        versionInfo: '',
        responseNonce: '',
        ...(envoy ? { node: envoyNode } : {}),
      }).responses;
      assert.ok(r !== undefined);
      return decodedAs(typeUrl, r.resources[0]!.value);
    };
    const upstream = at(served(true, true, xdsTypeUrl.cluster), 'transport_socket', 'typed_config') as {
      type_url: string;
      value: Uint8Array;
    };
    assert.match(upstream.type_url, /\.UpstreamTlsContext$/);
    assert.deepEqual(decodedAs(upstream.type_url, upstream.value)['common_tls_context'], {
      alpn_protocols: ['h2'],
      validation_context_sds_secret_config: { name: 'slipway_ca' },
    });
    const listener = served(true, true, xdsTypeUrl.listener);
    assert.equal(listener['name'], 'slipway_grpc_in');
    const downstream = at(listener, 'filter_chains', 0, 'transport_socket', 'typed_config') as {
      type_url: string;
      value: Uint8Array;
    };
    assert.match(downstream.type_url, /\.DownstreamTlsContext$/);
    assert.deepEqual(decodedAs(downstream.type_url, downstream.value)['common_tls_context'], {
      alpn_protocols: ['h2'],
      tls_certificate_sds_secret_configs: [{ name: 'slipway_cert' }],
    });
    // gRPC clients reach the nodes with their own channel's TLS (grpc-js-xds would refuse secrets).
    assert.equal(served(true, false, xdsTypeUrl.cluster)['transport_socket'], undefined);
    // A plaintext node gives Envoy none.
    assert.equal(served(false, true, xdsTypeUrl.cluster)['transport_socket'], undefined);
    const plainChain = at(served(false, true, xdsTypeUrl.listener), 'filter_chains', 0) as Plain;
    assert.equal(plainChain['transport_socket'], undefined);
  });

  test('the checker catches an unknown field, a bad type URL and a broken rule', () => {
    const cluster = envoyType(xdsTypeUrl.cluster);
    const good = Cluster.encode(Cluster.fromPartial({ name: 'c' })).finish();
    assert.deepEqual(checkEnvoyBytes(cluster, good), []);
    const unknown = Buffer.concat([good, Buffer.from([0xb8, 0x3e, 0x01])]); // field 999, varint 1
    assert.match(checkEnvoyBytes(cluster, unknown).join(), /field number 999/);
    const unnamed = Cluster.encode(Cluster.fromPartial({ name: '' })).finish();
    assert.match(checkEnvoyBytes(cluster, unnamed).join(), /name: shorter than 1/);
    const badAny = DiscoveryResponse.encode({
      versionInfo: '1',
      typeUrl: xdsTypeUrl.cluster,
      nonce: '1',
      resources: [{ typeUrl: 'type.googleapis.com/no.Such', value: Buffer.alloc(0) }],
    }).finish();
    assert.match(checkEnvoyBytes(discoveryResponse, badAny).join(), /names no Envoy message/);
    assert.match(checkEnvoyJson(bootstrap, { nodes: {} }).join(), /nodes: not a field/);
  });

  test("Envoy's DiscoveryRequest decodes with Slipway's subset, node metadata included", () => {
    const request = envoyType('envoy.service.discovery.v3.DiscoveryRequest');
    const bytes = request
      .encode(
        request.fromObject({
          version_info: 'v1',
          node: {
            id: 'envoy-1',
            user_agent_name: 'envoy',
            metadata: {
              // google.protobuf.Value as protobufjs declares it (camelCase), same field numbers.
              fields: { [envoyListenKey]: { stringValue: '0.0.0.0:7000' }, other: { numberValue: 3 } },
            },
            client_features: ['envoy.lb.does_not_support_overprovisioning'],
          },
          resource_names: ['slipway'],
          type_url: xdsTypeUrl.cluster,
          response_nonce: '4',
          error_detail: { code: 3, message: 'no' },
        }),
      )
      .finish();
    const ours = DiscoveryRequest.decode(bytes);
    assert.equal(ours.node?.id, 'envoy-1');
    assert.equal(ours.node?.metadata?.fields[envoyListenKey]?.stringValue, '0.0.0.0:7000');
    assert.deepEqual(ours.resourceNames, ['slipway']);
    assert.equal(ours.responseNonce, '4');
    assert.equal(ours.errorDetail?.message, 'no');
  });
});

describe('Envoy bootstraps against Envoy protos', () => {
  test('the xDS bootstrap is a valid Bootstrap: ADS to a static cluster of the nodes, LDS and CDS over ADS', () => {
    const doc = renderEnvoyXdsBootstrap({ listenAddr: '0.0.0.0:7000', nodes, statsAddr: '127.0.0.1:7090' });
    assert.deepEqual(checkEnvoyJson(bootstrap, doc), []);
    const ads = at(doc, 'dynamic_resources');
    assert.equal(at(ads, 'ads_config', 'grpc_services', 0, 'envoy_grpc', 'cluster_name'), 'slipway_xds');
    assert.deepEqual(at(ads, 'lds_config'), { ads: {}, resource_api_version: 'V3' });
    assert.deepEqual(at(ads, 'cds_config'), { ads: {}, resource_api_version: 'V3' });
    assert.equal(at(doc, 'node', 'metadata', envoyListenKey), '0.0.0.0:7000');
    const cluster = at(doc, 'static_resources', 'clusters', 0);
    assert.equal(at(cluster, 'name'), 'slipway_xds');
    assert.deepEqual(
      (at(cluster, 'load_assignment', 'endpoints', 0, 'lb_endpoints') as unknown[]).map((e) =>
        at(e, 'endpoint', 'hostname'),
      ),
      ['n1', 'n2'],
    );
    assert.equal(at(doc, 'admin', 'address', 'socket_address', 'port_value'), 7090);
    const named = renderEnvoyXdsBootstrap({
      listenAddr: '0.0.0.0:7000',
      nodes: [{ id: 'a', apiAddr: 'a.example:7001' }],
    });
    assert.deepEqual(checkEnvoyJson(bootstrap, named), []);
    assert.equal(at(named, 'static_resources', 'clusters', 0, 'type'), 'STRICT_DNS');
  });

  test('the static bootstrap (--static), plain and with TLS, is a valid Bootstrap too', () => {
    const tls = {
      certFile: '/pki/n1.crt',
      keyFile: '/pki/n1.key',
      pemFile: '/pki/n1.pem',
      caFile: '/pki/ca.crt',
    };
    assert.deepEqual(
      checkEnvoyJson(bootstrap, renderEnvoyBootstrap({ listenAddr: '127.0.0.1:7000', nodes })),
      [],
    );
    assert.deepEqual(
      checkEnvoyJson(bootstrap, renderEnvoyBootstrap({ listenAddr: '127.0.0.1:7000', nodes, tls })),
      [],
    );
  });

  test('the xDS bootstrap with TLS: ADS over TLS, and the secrets the TLS resources name, from its files', () => {
    const tls = {
      certFile: '/pki/n1/n1.crt',
      keyFile: '/pki/n1/n1.key',
      pemFile: '/pki/n1/n1.pem',
      caFile: '/pki/n1/ca.crt',
    };
    const doc = renderEnvoyXdsBootstrap({ listenAddr: '0.0.0.0:7000', nodes, tls });
    assert.deepEqual(checkEnvoyJson(bootstrap, doc), []);
    const xds = at(doc, 'static_resources', 'clusters', 0, 'transport_socket', 'typed_config');
    assert.match(at(xds, '@type') as string, /\.UpstreamTlsContext$/);
    assert.deepEqual(at(xds, 'common_tls_context'), {
      validation_context_sds_secret_config: { name: 'slipway_ca' },
      alpn_protocols: ['h2'],
    });
    assert.deepEqual(at(doc, 'static_resources', 'secrets'), [
      { name: 'slipway_ca', validation_context: { trusted_ca: { filename: '/pki/n1/ca.crt' } } },
      {
        name: 'slipway_cert',
        tls_certificate: {
          certificate_chain: { filename: '/pki/n1/n1.crt' },
          private_key: { filename: '/pki/n1/n1.key' },
        },
      },
    ]);
    const plain = renderEnvoyXdsBootstrap({ listenAddr: '0.0.0.0:7000', nodes });
    assert.equal((at(plain, 'static_resources') as Plain)['secrets'], undefined);
    assert.equal((at(plain, 'static_resources', 'clusters', 0) as Plain)['transport_socket'], undefined);
  });
});

// The same balancer as lb/haproxy.ts, as an Envoy v3 static bootstrap (JSON): h2c (or TLS) in and out,
// with the nodes as a fixed list (`balancer config --proxy envoy --static`; the default is the
// xDS bootstrap of lb/envoy-xds.ts, which follows the membership),
// a ring hash on x-worker-id, grpc.health.v1 checks, and retries only for calls that never
// reached a node. Envoy cannot be installed here, so this is rendered and checked for its shape
// only (test/unit/lb-envoy-bootstrap.test.ts); HAProxy is what runs (docs/decisions/0013).
// Pure: a BalancerSpec in, a JSON-ready object out.
import type { BalancerSpec, ValidBalancerSpec } from '../src/model/balancer-spec.js';
import { hostPortOf, stickyHeader, validBalancerSpec } from '../src/model/balancer-spec.js';

export type Json = string | number | boolean | null | readonly Json[] | { readonly [key: string]: Json };

const clusterName = 'slipway_nodes';
/** As lb/haproxy.ts: no gRPC call is idle this long in normal operation. */
const streamIdleTimeout = '3600s';
export const ipLiteral = /^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\])$/;

/** Renders the bootstrap; throws BalancerSpecError on bad input. */
export function renderEnvoyBootstrap(input: BalancerSpec): Json {
  const spec = validBalancerSpec(input);
  const cluster = nodesCluster(spec);
  return {
    ...(spec.statsAddr === undefined ? {} : { admin: { address: socketAddress(spec.statsAddr) } }),
    static_resources: { listeners: [grpcListener(spec)], clusters: [cluster] },
  };
}

/** Every call to the nodes' cluster, hashed on the worker's id, retried only if it never got there. */
function stickyRoute(): Json {
  return {
    cluster: clusterName,
    // The default 15 s would end every worker stream; idle streams are bounded below instead.
    timeout: '0s',
    idle_timeout: streamIdleTimeout,
    // One hash per call (per stream); a call without the header gets a random node.
    hash_policy: [{ header: { header_name: stickyHeader }, terminal: true }],
    // A call that reached a node may have been applied: retry only what never got there (0012),
    // on another host, as HAProxy's redispatch does.
    retry_policy: {
      retry_on: 'connect-failure,refused-stream',
      num_retries: 2,
      retry_host_predicate: [
        {
          name: 'envoy.retry_host_predicates.previous_hosts',
          typed_config: {
            '@type':
              'type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate',
          },
        },
      ],
      host_selection_retry_max_attempts: 3,
    },
  };
}

/** HTTP/2 in, routed by stickyRoute. */
function connectionManager(): Json {
  return {
    '@type':
      'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
    stat_prefix: 'grpc_in',
    codec_type: 'HTTP2',
    stream_idle_timeout: streamIdleTimeout,
    route_config: {
      name: 'slipway',
      virtual_hosts: [
        { name: 'slipway', domains: ['*'], routes: [{ match: { prefix: '/' }, route: stickyRoute() }] },
      ],
    },
    http_filters: [
      {
        name: 'envoy.filters.http.router',
        typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' },
      },
    ],
  };
}

/** The listener machines and operators dial: h2c, or TLS with the balancer's certificate. */
function grpcListener(spec: ValidBalancerSpec): Json {
  const tls = spec.tls;
  return {
    name: 'grpc_in',
    address: socketAddress(spec.listenAddr),
    filter_chains: [
      {
        ...(tls === undefined
          ? {}
          : {
              transport_socket: tlsSocket({
                '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
                common_tls_context: {
                  tls_certificates: [
                    {
                      certificate_chain: { filename: tls.certFile },
                      private_key: { filename: tls.keyFile },
                    },
                  ],
                  alpn_protocols: ['h2'],
                },
              }),
            }),
        filters: [
          { name: 'envoy.filters.network.http_connection_manager', typed_config: connectionManager() },
        ],
      },
    ],
  };
}

/** The nodes, by ring hash, health-checked over grpc.health.v1. */
function nodesCluster(spec: ValidBalancerSpec): Json {
  const { intervalMs, fall, rise } = spec.healthCheck;
  const allIps = spec.nodes.every((n) => ipLiteral.test(hostPortOf('apiAddr', n.apiAddr).host));
  const tls = spec.tls;
  return {
    name: clusterName,
    // To each node: TLS verified against the cluster CA, HTTP/2 by ALPN (health checks too).
    ...(tls === undefined
      ? {}
      : {
          transport_socket: tlsSocket({
            '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
            common_tls_context: {
              validation_context: { trusted_ca: { filename: tls.caFile } },
              alpn_protocols: ['h2'],
            },
          }),
        }),
    type: allIps ? 'STATIC' : 'STRICT_DNS',
    connect_timeout: '2s',
    lb_policy: 'RING_HASH',
    ring_hash_lb_config: { minimum_ring_size: 1024, maximum_ring_size: 8192 },
    // The default (50 %) sends calls to dead nodes once half are down; refuse instead.
    common_lb_config: { healthy_panic_threshold: { value: 0 } },
    typed_extension_protocol_options: http2WithKeepalive(),
    load_assignment: nodesAssignment(clusterName, spec),
    health_checks: [
      {
        timeout: '1s',
        interval: `${intervalMs / 1000}s`,
        // Checked alike with or without traffic (the default slows to 60 s without).
        no_traffic_interval: `${intervalMs / 1000}s`,
        unhealthy_threshold: fall,
        healthy_threshold: rise,
        grpc_health_check: {},
      },
    ],
  };
}

function tlsSocket(typedConfig: Record<string, Json>): Json {
  return { name: 'envoy.transport_sockets.tls', typed_config: typedConfig };
}

/**
 * h2 to the nodes with PINGs: a node that freezes or is cut off sends no FIN, and a failed health
 * check does not end streams already open to it, so only the keepalive notices.
 */
export function http2WithKeepalive(): Json {
  return {
    'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
      '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
      explicit_http_config: {
        http2_protocol_options: { connection_keepalive: { interval: '10s', timeout: '5s' } },
      },
    },
  };
}

/** Every node's API address as the endpoints of cluster `name`. */
export function nodesAssignment(name: string, spec: Pick<BalancerSpec, 'nodes'>): Json {
  return {
    cluster_name: name,
    endpoints: [
      {
        lb_endpoints: spec.nodes.map((n) => ({
          endpoint: { address: socketAddress(n.apiAddr), hostname: n.id },
        })),
      },
    ],
  };
}

/** An Envoy `address` for HOST:PORT (IPv6 without brackets). */
export function socketAddress(addr: string): Json {
  const { host, port } = hostPortOf('address', addr);
  return { socket_address: { address: host.replace(/^\[|\]$/g, ''), port_value: port } };
}

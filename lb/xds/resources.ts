// The xDS resources a node serves (docs/decisions/0024-xds.md), built from the membership and
// each member's health: one route to one cluster of every voter's API address, a ring hash on
// x-worker-id as lb/haproxy.ts and lb/envoy.ts route. Two listeners lead to the same route:
//  - `slipway`, an api_listener, for proxyless gRPC clients (`xds:///slipway`): gRPC asks for it
//    by name, and it is never sent to a wildcard subscription (Envoy refuses api_listeners over LDS);
//  - `slipway_grpc_in`, a socket listener for Envoy, on the address its bootstrap puts in the node
//    metadata (envoyListenKey); Envoy subscribes to every listener (wildcard) and gets only this.
// A node that serves TLS gives Envoy TLS on both sides: its listener presents the certificate, and
// its cluster verifies the nodes against the CA, each named as a secret the Envoy bootstrap defines
// from the balancer's own files (only that side knows their paths). gRPC clients get no TLS
// settings: they reach the nodes with the TLS credentials of their own channel.
// Pure: members and client in, encoded resources out.
import { isIP } from 'node:net';
import { stickyHeader } from '../../src/model/balancer-spec.js';
import {
  envoyCaSecret,
  envoyCertSecret,
  envoyListenKey,
  envoyListenerName,
  xdsServiceName,
} from './names.js';
import { parseHostPort } from '../../src/platform/host-port.js';
import type { Any, Duration } from '../../src/gen/xds.js';
import {
  ApiVersion,
  Cluster,
  ClusterLoadAssignment,
  CodecType,
  DiscoveryType,
  DownstreamTlsContext,
  HealthStatus,
  HttpConnectionManager,
  HttpProtocolOptions,
  LbPolicy,
  Listener,
  PreviousHostsPredicate,
  RouteConfiguration,
  Router,
  UpstreamTlsContext,
} from '../../src/gen/xds.js';
import type { TransportSocket } from '../../src/gen/xds.js';

export const xdsTypeUrl = {
  listener: 'type.googleapis.com/envoy.config.listener.v3.Listener',
  route: 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration',
  cluster: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
  endpoints: 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment',
} as const;
export type XdsTypeUrl = (typeof xdsTypeUrl)[keyof typeof xdsTypeUrl];
export const xdsTypeUrls: readonly XdsTypeUrl[] = Object.values(xdsTypeUrl);

export function isXdsTypeUrl(url: string): url is XdsTypeUrl {
  return (xdsTypeUrls as readonly string[]).includes(url);
}

export { envoyListenKey, envoyListenerName, xdsServiceName };

const typeUrlOf = {
  connectionManager:
    'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
  router: 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
  previousHosts: 'type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate',
  httpProtocolOptions: 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
  upstreamTls: 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
  downstreamTls: 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
} as const;
const httpProtocolOptionsName = 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions';

/** How the node's probes last found a member (lb/xds/member-health.ts). */
export type MemberHealth = 'HEALTHY' | 'UNHEALTHY' | 'DRAINING';

export interface XdsMember {
  readonly id: string;
  /** HOST:PORT of its API; xDS endpoints must be IP literals, so a host name is left out. */
  readonly apiAddr: string;
  readonly health: MemberHealth;
}

/** What the server knows of one client, from the node in its first request. */
export interface XdsClient {
  /** HOST:PORT for Envoy's socket listener (node metadata envoyListenKey); none for gRPC clients. */
  readonly envoyListenAddr?: string | undefined;
}

/** What the serving node is: the same for every client it serves. */
export interface XdsServing {
  /** Whether the node's API speaks TLS (--tls-dir): Envoy then speaks TLS on both sides too. */
  readonly tls: boolean;
}

export interface XdsResource {
  readonly name: string;
  /** Whether a wildcard subscription (Envoy's LDS and CDS) gets it. */
  readonly wildcard: boolean;
  readonly any: Any;
}

/** As lb/envoy.ts: no gRPC call is idle this long in normal operation. */
const streamIdleTimeout: Duration = { seconds: 3600, nanos: 0 };
const zero: Duration = { seconds: 0, nanos: 0 };
const adsSource = { ads: {}, resourceApiVersion: ApiVersion.API_VERSION_V3 };

const healthStatus: Record<MemberHealth, HealthStatus> = {
  HEALTHY: HealthStatus.HEALTH_STATUS_HEALTHY,
  UNHEALTHY: HealthStatus.HEALTH_STATUS_UNHEALTHY,
  DRAINING: HealthStatus.HEALTH_STATUS_DRAINING,
};

function any<T>(typeUrl: string, fns: { encode(m: T): { finish(): Uint8Array } }, message: T): Any {
  return { typeUrl, value: Buffer.from(fns.encode(message).finish()) };
}

/** The IP and port of HOST:PORT when HOST is an IP literal (brackets dropped), else undefined. */
export function ipSocket(addr: string): { address: string; portValue: number } | undefined {
  const hp = parseHostPort(addr);
  if (hp === undefined) return undefined;
  const host = hp.host.replace(/^\[|\]$/g, '');
  return isIP(host) === 0 ? undefined : { address: host, portValue: hp.port };
}

/** Every resource for `client`, by type: what a subscription selects from (lb/xds/ads-stream.ts). */
export function xdsResources(
  members: readonly XdsMember[],
  client: XdsClient,
  serving: XdsServing = { tls: false },
): ReadonlyMap<XdsTypeUrl, readonly XdsResource[]> {
  // Envoy is the client that names its listen address; TLS settings are for it alone.
  const envoyTls = serving.tls && client.envoyListenAddr !== undefined;
  return new Map<XdsTypeUrl, readonly XdsResource[]>([
    [xdsTypeUrl.listener, listeners(client, envoyTls)],
    [xdsTypeUrl.route, [{ name: xdsServiceName, wildcard: true, any: routeConfiguration() }]],
    [xdsTypeUrl.cluster, [{ name: xdsServiceName, wildcard: true, any: cluster(envoyTls) }]],
    [xdsTypeUrl.endpoints, [{ name: xdsServiceName, wildcard: true, any: loadAssignment(members) }]],
  ]);
}

function connectionManager(forEnvoy: boolean): Any {
  return any(typeUrlOf.connectionManager, HttpConnectionManager, {
    // h2c from gRPC clients, where Envoy would otherwise guess (AUTO). gRPC ignores these two.
    codecType: forEnvoy ? CodecType.CODEC_TYPE_HTTP2 : CodecType.CODEC_TYPE_AUTO,
    statPrefix: forEnvoy ? envoyListenerName : xdsServiceName,
    rds: { configSource: adsSource, routeConfigName: xdsServiceName },
    // The router last: Envoy and gRPC both require it.
    httpFilters: [{ name: 'envoy.filters.http.router', typedConfig: any(typeUrlOf.router, Router, {}) }],
    ...(forEnvoy ? { streamIdleTimeout } : {}),
  });
}

/**
 * Envoy's TLS: h2 by ALPN, the certificate and the CA as the static secrets its bootstrap holds.
 * A secret Envoy lacks makes it refuse the resource (a NACK): no TLS setting is ever dropped.
 */
function tlsSocket(side: 'upstream' | 'downstream'): TransportSocket {
  const alpnProtocols = ['h2'];
  return {
    name: 'envoy.transport_sockets.tls',
    typedConfig:
      side === 'upstream'
        ? any(typeUrlOf.upstreamTls, UpstreamTlsContext, {
            commonTlsContext: {
              alpnProtocols,
              tlsCertificateSdsSecretConfigs: [],
              validationContextSdsSecretConfig: { name: envoyCaSecret },
            },
          })
        : any(typeUrlOf.downstreamTls, DownstreamTlsContext, {
            commonTlsContext: { alpnProtocols, tlsCertificateSdsSecretConfigs: [{ name: envoyCertSecret }] },
          }),
  };
}

function listeners(client: XdsClient, tls: boolean): XdsResource[] {
  const api: XdsResource = {
    name: xdsServiceName,
    wildcard: false,
    any: any(xdsTypeUrl.listener, Listener, {
      name: xdsServiceName,
      filterChains: [],
      apiListener: { apiListener: connectionManager(false) },
    }),
  };
  const listen = client.envoyListenAddr === undefined ? undefined : ipSocket(client.envoyListenAddr);
  if (listen === undefined) return [api];
  const socket: XdsResource = {
    name: envoyListenerName,
    wildcard: true,
    any: any(xdsTypeUrl.listener, Listener, {
      name: envoyListenerName,
      address: { socketAddress: listen },
      filterChains: [
        {
          filters: [
            { name: 'envoy.filters.network.http_connection_manager', typedConfig: connectionManager(true) },
          ],
          ...(tls ? { transportSocket: tlsSocket('downstream') } : {}),
        },
      ],
    }),
  };
  return [api, socket];
}

function routeConfiguration(): Any {
  return any(xdsTypeUrl.route, RouteConfiguration, {
    name: xdsServiceName,
    virtualHosts: [
      {
        name: xdsServiceName,
        domains: ['*'],
        routes: [
          {
            match: { prefix: '/' },
            route: {
              cluster: xdsServiceName,
              // Envoy's default 15 s would end every worker stream (gRPC ignores it).
              timeout: zero,
              idleTimeout: streamIdleTimeout,
              // One hash per call, so per stream: a worker's stream lands where its id hashes.
              hashPolicy: [{ header: { headerName: stickyHeader }, terminal: true }],
              // As lb/envoy.ts: only calls that never reached a node, on another one (0012).
              retryPolicy: {
                retryOn: 'connect-failure,refused-stream',
                numRetries: { value: 2 },
                retryHostPredicate: [
                  {
                    name: 'envoy.retry_host_predicates.previous_hosts',
                    typedConfig: any(typeUrlOf.previousHosts, PreviousHostsPredicate, {}),
                  },
                ],
                hostSelectionRetryMaxAttempts: 3,
              },
            },
          },
        ],
      },
    ],
  });
}

function cluster(tls: boolean): Any {
  return any(xdsTypeUrl.cluster, Cluster, {
    name: xdsServiceName,
    // Envoy to a TLS node: TLS verified against the cluster CA, as lb/envoy.ts's static bootstrap.
    ...(tls ? { transportSocket: tlsSocket('upstream') } : {}),
    type: DiscoveryType.DISCOVERY_TYPE_EDS,
    edsClusterConfig: { edsConfig: adsSource, serviceName: xdsServiceName },
    connectTimeout: { seconds: 2, nanos: 0 },
    lbPolicy: LbPolicy.LB_POLICY_RING_HASH,
    ringHashLbConfig: { minimumRingSize: { value: 1024 }, maximumRingSize: { value: 8192 } },
    // Envoy: with every node out, refuse rather than spread calls over dead nodes.
    commonLbConfig: { healthyPanicThreshold: { value: 0 } },
    // Envoy: h2 to the nodes (h2c, or TLS above), with PINGs that notice a node that froze (lb/envoy.ts).
    typedExtensionProtocolOptions: {
      [httpProtocolOptionsName]: any(typeUrlOf.httpProtocolOptions, HttpProtocolOptions, {
        explicitHttpConfig: {
          http2ProtocolOptions: {
            connectionKeepalive: { interval: { seconds: 10, nanos: 0 }, timeout: { seconds: 5, nanos: 0 } },
          },
        },
      }),
    },
  });
}

function loadAssignment(members: readonly XdsMember[]): Any {
  const endpoints = members.flatMap((m) => {
    const socketAddress = ipSocket(m.apiAddr);
    if (socketAddress === undefined) return [];
    return [
      {
        endpoint: { address: { socketAddress }, hostname: m.id },
        healthStatus: healthStatus[m.health],
      },
    ];
  });
  return any(xdsTypeUrl.endpoints, ClusterLoadAssignment, {
    clusterName: xdsServiceName,
    // One locality with a weight: gRPC skips a locality without one.
    endpoints: [
      {
        locality: { region: '', zone: '', subZone: '' },
        lbEndpoints: endpoints,
        loadBalancingWeight: { value: 1 },
      },
    ],
  });
}

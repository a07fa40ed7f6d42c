// An Envoy v3 bootstrap that follows the membership (docs/decisions/0024-xds.md): listeners and
// clusters come over ADS from the nodes' own xDS server (lb/xds/), so a member added, removed,
// drained or dead changes what Envoy routes to without a new configuration. The static part is
// only the way to the xDS server: a cluster of the nodes' API addresses (HTTP/2, as gRPC needs),
// any one of which serves it. The node metadata tells the xDS server where Envoy's listener
// listens (lb/xds/resources.ts envoyListenKey).
// With TLS (`--tls-dir`): ADS goes over TLS verified against the cluster CA, and the bootstrap
// defines two static secrets from the balancer's own files: the CA (`slipway_ca`) and the
// certificate its listener presents (`slipway_cert`). A TLS node names those secrets in the
// listener and cluster it serves: it knows that the cluster speaks TLS, only this side knows where
// the files are (docs/decisions/0024-xds.md).
// Pure: a BalancerSpec in, a JSON-ready object out.
import type { BalancerSpec, BalancerTls } from '../src/model/balancer-spec.js';
import { hostPortOf, validBalancerSpec } from '../src/model/balancer-spec.js';
import type { Json } from './envoy.js';
import { http2WithKeepalive, ipLiteral, nodesAssignment, socketAddress } from './envoy.js';
import { envoyCaSecret, envoyCertSecret, envoyListenKey, xdsServiceName } from './xds/names.js';

/** The static cluster of the nodes' API addresses that Envoy's ADS stream goes to. */
export const xdsClusterName = 'slipway_xds';

/** Renders the bootstrap; throws BalancerSpecError on bad input. */
export function renderEnvoyXdsBootstrap(input: BalancerSpec): Json {
  const spec = validBalancerSpec(input);
  const tls = spec.tls;
  const allIps = spec.nodes.every((n) => ipLiteral.test(hostPortOf('apiAddr', n.apiAddr).host));
  const ads = { ads: {}, resource_api_version: 'V3' };
  return {
    node: {
      id: `envoy-${spec.listenAddr}`,
      cluster: xdsServiceName,
      metadata: { [envoyListenKey]: spec.listenAddr },
    },
    ...(spec.statsAddr === undefined ? {} : { admin: { address: socketAddress(spec.statsAddr) } }),
    dynamic_resources: {
      ads_config: {
        api_type: 'GRPC',
        transport_api_version: 'V3',
        grpc_services: [{ envoy_grpc: { cluster_name: xdsClusterName } }],
        set_node_on_first_message_only: true,
      },
      lds_config: ads,
      cds_config: ads,
    },
    static_resources: {
      clusters: [
        {
          name: xdsClusterName,
          ...(tls === undefined ? {} : { transport_socket: xdsServerTls() }),
          type: allIps ? 'STATIC' : 'STRICT_DNS',
          connect_timeout: '2s',
          typed_extension_protocol_options: http2WithKeepalive(),
          load_assignment: nodesAssignment(xdsClusterName, spec),
        },
      ],
      ...(tls === undefined ? {} : { secrets: secrets(tls) }),
    },
  };
}

/** TLS to the xDS server (the nodes' API): verified against the cluster CA, HTTP/2 by ALPN. */
function xdsServerTls(): Json {
  return {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
      common_tls_context: {
        validation_context_sds_secret_config: { name: envoyCaSecret },
        alpn_protocols: ['h2'],
      },
    },
  };
}

/** The secrets the TLS resources of the nodes name, from the balancer's own files. */
function secrets(tls: BalancerTls): Json {
  return [
    { name: envoyCaSecret, validation_context: { trusted_ca: { filename: tls.caFile } } },
    {
      name: envoyCertSecret,
      tls_certificate: {
        certificate_chain: { filename: tls.certFile },
        private_key: { filename: tls.keyFile },
      },
    },
  ];
}

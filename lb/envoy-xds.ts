// An Envoy v3 bootstrap that follows the membership (docs/decisions/0024-xds.md): listeners and
// clusters come over ADS from the nodes' own xDS server (lb/xds/), so a member added, removed,
// drained or dead changes what Envoy routes to without a new configuration. The static part is
// only the way to the xDS server: a cluster of the nodes' API addresses (HTTP/2, as gRPC needs),
// any one of which serves it. The node metadata tells the xDS server where Envoy's listener
// listens (lb/xds/resources.ts envoyListenKey). Plaintext only: the xDS server has no file
// paths to give Envoy for TLS to the nodes; a TLS cluster uses the static bootstrap (lb/envoy.ts).
// Pure: a BalancerSpec in, a JSON-ready object out.
import type { BalancerSpec } from './balancer-spec.js';
import { BalancerSpecError, hostPortOf, validBalancerSpec } from './balancer-spec.js';
import type { Json } from './envoy.js';
import { http2WithKeepalive, ipLiteral, nodesAssignment, socketAddress } from './envoy.js';
import { envoyListenKey, xdsServiceName } from './xds/names.js';

/** The static cluster of the nodes' API addresses that Envoy's ADS stream goes to. */
export const xdsClusterName = 'slipway_xds';

/** Renders the bootstrap; throws BalancerSpecError on bad input. */
export function renderEnvoyXdsBootstrap(input: BalancerSpec): Json {
  const spec = validBalancerSpec(input);
  if (spec.tls !== undefined) {
    throw new BalancerSpecError(
      'the xDS bootstrap is for plaintext clusters: with TLS, render the static one (--static)',
    );
  }
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
          type: allIps ? 'STATIC' : 'STRICT_DNS',
          connect_timeout: '2s',
          typed_extension_protocol_options: http2WithKeepalive(),
          load_assignment: nodesAssignment(xdsClusterName, spec),
        },
      ],
    },
  };
}

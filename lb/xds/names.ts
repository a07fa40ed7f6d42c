// The names the xDS server and its clients agree on (lb/xds/resources.ts serves them; the Envoy
// bootstrap of lb/envoy-xds.ts and `--server xds:///slipway` use them). Constants only, so the
// renderers load without the protobuf code.

/** The name of the api_listener, the route, the cluster and its endpoints: `xds:///slipway`. */
export const xdsServiceName = 'slipway';
/** Envoy's socket listener. */
export const envoyListenerName = 'slipway_grpc_in';
/** The node metadata key (a string) naming HOST:PORT where Envoy's socket listener listens. */
export const envoyListenKey = 'slipway.listen_addr';
/**
 * On a TLS cluster, the Envoy secrets the served resources name and the Envoy bootstrap defines
 * from its own files (docs/decisions/0024-xds.md): the cluster CA, and the certificate Envoy's
 * listener presents to clients.
 */
export const envoyCaSecret = 'slipway_ca';
export const envoyCertSecret = 'slipway_cert';

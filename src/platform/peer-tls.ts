// TLS between the nodes of a cluster: the gRPC credentials of a node's peer channels and of its
// server. The raft transport, the API's forwards to the leader and to other members, and the
// artifact fetcher all dial peers with them, so TLS between nodes is set up in one place.
import { credentials, ServerCredentials, type ChannelCredentials } from '@grpc/grpc-js';

/** A node's certificate, key and the cluster CA: mutual TLS between nodes when present. */
export interface PeerTls {
  readonly ca: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
}

export function peerChannelCredentials(tls?: PeerTls): ChannelCredentials {
  return tls === undefined ? credentials.createInsecure() : credentials.createSsl(tls.ca, tls.key, tls.cert);
}

/** With TLS, a peer must present a certificate of the cluster CA (mutual TLS). */
export function peerServerCredentials(tls?: PeerTls): ServerCredentials {
  return tls === undefined
    ? ServerCredentials.createInsecure()
    : ServerCredentials.createSsl(tls.ca, [{ cert_chain: tls.cert, private_key: tls.key }], true);
}

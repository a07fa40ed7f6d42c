// How a command that asks every node by itself (cluster status, version, upgrade check, the
// balancer) reaches them: the node list and a client per node, from the global flags.
import type { ClusterClient } from './client.js';

export interface StatusAccess {
  /** The global --server list (or SLIPWAY_SERVER, or the local cluster). */
  readonly servers: () => string[];
  /** A client for one node, with the global token and CA. */
  readonly clientFor: (server: string) => ClusterClient;
}

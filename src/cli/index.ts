// The CLI's public entry, for code outside src/ (the benchmarks): the cluster client that every
// command uses to reach the nodes.
export { ClusterClient } from './client.js';

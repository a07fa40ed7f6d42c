// The balancer as the CLI reaches it, lazily and through this module alone: the renderers of
// `balancer config`, the HAProxy process that `cluster up` runs, and the `balancer follow`
// daemon. The node wires lb/'s modules itself (src/node/start-node.ts, xds-service.ts).
export { renderEnvoyBootstrap } from './envoy.js';
export { renderEnvoyXdsBootstrap } from './envoy-xds.js';
export { runFollowDaemon } from './follow.js';
export type { Member } from './haproxy-membership.js';
export {
  findHaproxy,
  HaproxyError,
  isHaproxyRunning,
  startHaproxy,
  stopHaproxy,
  type RunningHaproxy,
} from './haproxy-process.js';
export { renderHaproxyConfig } from './haproxy.js';

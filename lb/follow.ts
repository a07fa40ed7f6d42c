// The `slipway balancer follow` daemon: an HaproxyFollower on one HAProxy's runtime socket, in the
// foreground until SIGINT or SIGTERM (docs/decisions/0013, "Following the membership"). The
// caller checks the flags and hands in how to ask the cluster for its members.
import { createLogger } from '../src/platform/logger.js';
import type { HealthCheckTiming } from '../src/model/balancer-spec.js';
import { haproxyServerId, haproxyServerOptions } from './haproxy.js';
import { HaproxyFollower } from './haproxy-follower.js';
import type { Member } from './haproxy-membership.js';

export interface FollowDaemonOptions {
  readonly socketPath: string;
  readonly backend: string;
  readonly intervalMs: number;
  readonly drainGraceMs: number;
  readonly healthCheck: HealthCheckTiming;
  /** The cluster CA that servers added at run time are verified against, as the file's are. */
  readonly tls: { caFile: string } | undefined;
  /** The cluster's members; rejects when no node answers. */
  readonly members: () => Promise<readonly Member[]>;
}

/** Checks the socket and backend at once, then follows the membership until a signal. */
export async function runFollowDaemon(o: FollowDaemonOptions): Promise<void> {
  const logger = createLogger({ component: 'balancer-follow', socket: o.socketPath, backend: o.backend });
  const follower = new HaproxyFollower({
    socketPath: o.socketPath,
    backend: o.backend,
    serverOptions: haproxyServerOptions({ healthCheck: o.healthCheck, tls: o.tls }),
    serverId: haproxyServerId,
    drainGraceMs: o.drainGraceMs,
    intervalMs: o.intervalMs,
    members: o.members,
    logger,
  });
  // A wrong socket or backend is told at once, not as a warning every interval.
  const servers = await follower.check();
  logger.info({ servers: servers.map((x) => x.name) }, 'following the membership');
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await follower.run(stop.signal);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  logger.info('stopped');
}

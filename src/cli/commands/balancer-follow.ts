// `slipway balancer follow`: keeps a running HAProxy's server list in step with the cluster's
// membership through its runtime socket, in the foreground until SIGINT or SIGTERM: this module
// checks the flags and asks the cluster for its members; the daemon is lb/follow.ts, loaded
// through lb/index.ts. `cluster up` runs it beside its HAProxy; an operator runs it beside each
// HAProxy of their own (docs/decisions/0013, "Following the membership").
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Member } from '../../../lb/index.js';
import { BalancerSpecError, validHealthCheck } from '../../model/balancer-spec.js';
import { Suffrage } from '../../gen/kv.js';
import type { ClusterClient } from '../client.js';
import { UsageError } from '../output.js';
import type { StatusAccess } from '../status-access.js';

export interface FollowSettings {
  readonly socketPath: string;
  readonly backend: string;
  readonly intervalMs: number;
  readonly drainGraceMs: number;
  readonly healthCheck: { intervalMs: number; fall: number; rise: number };
  readonly tlsDir: string | undefined;
}

export async function runFollow(s: FollowSettings, access: StatusAccess): Promise<void> {
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(s.backend)) {
    throw new UsageError(
      `--backend "${s.backend}" must be an HAProxy backend name (letters, digits, _ . : -)`,
    );
  }
  if (s.intervalMs < 100 || s.intervalMs > 60_000) {
    throw new UsageError(`--interval must be 100 to 60000 ms, got ${s.intervalMs}`);
  }
  try {
    validHealthCheck(s.healthCheck);
  } catch (err) {
    if (!(err instanceof BalancerSpecError)) throw err;
    const flags = { intervalMs: '--check-interval', fall: '--fall', rise: '--rise' };
    throw new UsageError(
      err.message.replace(/healthCheck\.(intervalMs|fall|rise)/, (_, f: keyof typeof flags) => flags[f]),
    );
  }
  const tls = caOf(s.tlsDir);
  const { runFollowDaemon } = await import('../../../lb/index.js');
  await runFollowDaemon({
    socketPath: s.socketPath,
    backend: s.backend,
    intervalMs: s.intervalMs,
    drainGraceMs: s.drainGraceMs,
    healthCheck: s.healthCheck,
    tls,
    members: membershipSource(access.servers(), access),
  });
}

/** Servers added at run time verify each node against the cluster CA, as the file's do. */
function caOf(tlsDir: string | undefined): { caFile: string } | undefined {
  if (tlsDir === undefined) return undefined;
  const caFile = join(resolve(tlsDir), 'ca.crt');
  if (!existsSync(caFile)) throw new UsageError(`--tls-dir: no ${caFile} (made by \`slipway bootstrap\`)`);
  return { caFile };
}

/**
 * MemberList (linearizable) from the first node that answers: the --server list at first, then
 * the members' own API addresses, so that the follower keeps finding the cluster after the
 * nodes it was given have left it.
 */
function membershipSource(seeds: readonly string[], access: StatusAccess): () => Promise<Member[]> {
  let known = [...seeds];
  const clients = new Map<string, ClusterClient>();
  return async () => {
    const problems: string[] = [];
    for (const addr of known) {
      let client = clients.get(addr);
      if (client === undefined) {
        client = access.clientFor(addr);
        clients.set(addr, client);
      }
      try {
        const res = await client.call('memberList', { local: false });
        const members = res.members.map((m) => ({
          id: m.id,
          apiAddr: m.apiAddr,
          voter: m.suffrage !== Suffrage.SUFFRAGE_LEARNER,
        }));
        known = [...new Set([addr, ...members.map((m) => m.apiAddr).filter((a) => a !== ''), ...seeds])];
        return members;
      } catch (err) {
        problems.push(`${addr}: ${(err as Error).message}`);
      }
    }
    throw new Error(`no node answered MemberList (${problems.join('; ')})`);
  };
}

// What `slipway cluster version` and `slipway upgrade check` conclude from each member's Status
// (docs/decisions/0019-version-gates.md). Pure: the command gathers the answers, this decides.
import { advertisedStateVersion } from '../model/versions.js';

/** One member as its Status described it, or as unreachable. */
export interface MemberReport {
  readonly id: string;
  readonly voter: boolean;
  /** Undefined when the member did not answer. */
  readonly status?: {
    readonly build: string;
    /** The highest state version its build applies (0 from builds before 0.2.0: version 1). */
    readonly stateVersion: number;
    readonly clusterVersion: number;
    readonly leader: string;
    readonly commit: number;
    readonly applied: number;
    readonly stopped: string;
    readonly leaderTransferee: string;
  };
  /** Why it did not answer. */
  readonly error?: string;
}

export interface VersionSummary {
  /** The cluster's effective version: the highest any member has applied. */
  readonly effective: number;
  /** The version every voter's build applies: what the leader raises the cluster to. Undefined when a voter did not answer. */
  readonly votersSupport: number | undefined;
}

export function buildName(build: string): string {
  return build === '' ? 'before 0.2.0' : build;
}

export function versionSummary(members: readonly MemberReport[]): VersionSummary {
  let effective = 1;
  let votersSupport: number | undefined = Number.MAX_SAFE_INTEGER;
  for (const m of members) {
    if (m.status !== undefined) effective = Math.max(effective, m.status.clusterVersion || 1);
    if (!m.voter) continue;
    if (m.status === undefined) votersSupport = undefined;
    else if (votersSupport !== undefined)
      votersSupport = Math.min(votersSupport, advertisedStateVersion(m.status.stateVersion));
  }
  return { effective, votersSupport: votersSupport === Number.MAX_SAFE_INTEGER ? 1 : votersSupport };
}

export interface Check {
  readonly ok: boolean;
  readonly what: string;
}

/** How far behind the leader's commit index a member may be and still count as caught up. */
export const caughtUpEntriesMax = 100;

/**
 * Whether `member` (or, without one, any single voter) may be restarted now: a leader is known
 * and agreed, every voter answers, not stopped, caught up, and no leadership transfer is under
 * way. Restarting one voter of a healthy cluster keeps a quorum; restarting one while another is
 * down or behind may not.
 */
export function upgradeChecks(members: readonly MemberReport[], member?: string): Check[] {
  const checks: Check[] = [];
  const voters = members.filter((m) => m.voter);
  if (member !== undefined && !members.some((m) => m.id === member)) {
    return [{ ok: false, what: `${member} is not a member of the cluster` }];
  }
  const down = voters.filter((m) => m.status === undefined);
  checks.push(
    down.length === 0
      ? { ok: true, what: `every voter answers (${voters.map((m) => m.id).join(', ')})` }
      : {
          ok: false,
          what: `voter(s) not answering: ${down.map((m) => `${m.id} (${m.error ?? 'no answer'})`).join(', ')}; restarting another could lose the quorum`,
        },
  );
  const answered = members.filter((m) => m.status !== undefined);
  const leaders = new Set(answered.map((m) => m.status!.leader));
  const leader = leaders.size === 1 ? [...leaders][0]! : '';
  checks.push(
    leader !== ''
      ? { ok: true, what: `every member agrees on the leader, ${leader}` }
      : {
          ok: false,
          what: `no agreed leader (${answered.map((m) => `${m.id}: ${m.status!.leader || 'none'}`).join(', ')})`,
        },
  );
  const stopped = answered.filter((m) => m.status!.stopped !== '');
  checks.push(
    stopped.length === 0
      ? { ok: true, what: 'no member has stopped applying' }
      : {
          ok: false,
          what: `stopped applying: ${stopped.map((m) => `${m.id} (${m.status!.stopped})`).join('; ')}`,
        },
  );
  const leaderReport = answered.find((m) => m.id === leader);
  if (leaderReport !== undefined) {
    const commit = leaderReport.status!.commit;
    const behind = answered.filter(
      (m) => (member === undefined || m.id === member) && commit - m.status!.applied > caughtUpEntriesMax,
    );
    checks.push(
      behind.length === 0
        ? {
            ok: true,
            what: `${member ?? 'every member'} caught up (within ${caughtUpEntriesMax} entries of the leader's commit index ${commit})`,
          }
        : {
            ok: false,
            what: `behind the leader's commit index ${commit}: ${behind.map((m) => `${m.id} applied ${m.status!.applied}`).join(', ')}`,
          },
    );
    const transferee = leaderReport.status!.leaderTransferee;
    checks.push(
      transferee === ''
        ? { ok: true, what: 'no leadership transfer under way' }
        : { ok: false, what: `leadership is being handed to ${transferee}; wait for it to finish` },
    );
  }
  return checks;
}

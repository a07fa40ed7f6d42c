// Raises the cluster's effective state version once every voter supports more
// (docs/decisions/0019-version-gates.md). Only the leader does it, on a timer: it reads each
// voter's Status over the raft address, takes the lowest state version they apply, and proposes
// cluster.version when that is above the version in the state. A voter that does not answer
// holds the version where it is: the cluster moves on only when it knows every voter can follow.
// While something may still raise it (a new cluster whose voters have not all answered yet, a
// leader just elected), the leader asks again within a fraction of a second, so a cluster just
// started serves every command within moments of its first election; once every voter has
// answered and one's build holds the version back (a rolling upgrade), every two seconds.
import type { Logger } from 'pino';
import type { Member } from '../raft/core/types.js';
import type { RaftNode } from '../raft/node.js';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import { advertisedStateVersion, stateVersionOfThisBuild } from '../state/versions.js';
import type { Clock, Cancel } from '../platform/clock.js';

/** Between rounds once a voter's build holds the version, or when it is at this build's. */
const checkIntervalMs = 2000;
/** Between rounds while the version may yet rise: no leader here yet, or a voter unheard. */
const retryIntervalMs = 200;

/** How long a voter has to answer Status in one round. */
export const versionCheckTimeoutMs = 1500;

export interface ClusterVersionKeeperOptions {
  readonly node: RaftNode;
  readonly control: ControlState;
  /** A voter's Status: the state version it applies (0 from builds that predate versions). */
  readonly stateVersionOf: (member: Member) => Promise<number>;
  readonly propose: (command: ControlCommand) => Promise<ControlResult>;
  readonly logger: Logger;
  readonly intervalMs?: number;
  readonly retryIntervalMs?: number;
  /** Its timers (src/platform/clock.ts: real ones in a node, virtual ones in the simulation). */
  readonly clock: Clock;
}

/** The version every voter can apply: the lowest among them (a missing answer means 1). */
export function versionAllVotersApply(versions: readonly number[]): number {
  let lowest = stateVersionOfThisBuild;
  for (const v of versions) lowest = Math.min(lowest, advertisedStateVersion(v));
  return lowest;
}

/**
 * What one round found: not the leader here; the version already at this build's; every voter
 * heard and one's build holds it back; a voter unheard; or raised.
 */
type Round =
  | { readonly kind: 'follower' | 'current' | 'held' | 'unheard' }
  | { readonly kind: 'raised'; readonly version: number };

export class ClusterVersionKeeper {
  readonly #opts: ClusterVersionKeeperOptions;
  #stopTimer: Cancel | undefined;
  #running = false;
  #started = false;
  /** The pause before the next round while the version may yet rise; doubles while unheard. */
  #retryMs: number;

  constructor(opts: ClusterVersionKeeperOptions) {
    this.#opts = opts;
    this.#retryMs = opts.retryIntervalMs ?? retryIntervalMs;
  }

  start(): void {
    this.#started = true;
    this.#next(this.#retryMs);
  }

  stop(): void {
    this.#started = false;
    this.#stopTimer?.();
    this.#stopTimer = undefined;
  }

  #next(ms: number): void {
    this.#stopTimer = this.#opts.clock.after(
      ms,
      () => {
        void this.#round().then((round) => {
          if (this.#started) this.#next(this.#pauseAfter(round));
        });
      },
      { unref: true },
    );
  }

  /** Soon while the version may rise; backs off while a voter stays unheard (a voter down). */
  #pauseAfter(round: Round): number {
    const slow = this.#opts.intervalMs ?? checkIntervalMs;
    const fast = this.#opts.retryIntervalMs ?? retryIntervalMs;
    switch (round.kind) {
      case 'current':
      case 'held':
        return slow;
      case 'unheard':
        this.#retryMs = Math.min(slow, this.#retryMs * 2);
        return this.#retryMs;
      case 'follower':
      case 'raised':
        this.#retryMs = fast;
        return fast;
    }
  }

  /** One round: the version the cluster was raised to, or undefined when it stayed. */
  async check(): Promise<number | undefined> {
    const round = await this.#round();
    return round.kind === 'raised' ? round.version : undefined;
  }

  async #round(): Promise<Round> {
    const { node, control, logger } = this.#opts;
    if (control.clusterVersion >= stateVersionOfThisBuild) return { kind: 'current' };
    if (this.#running || node.softState().role !== 'leader') return { kind: 'follower' };
    this.#running = true;
    try {
      const voters = node.membership().voters;
      const versions = await Promise.all(
        voters.map((m) =>
          m.id === node.id ? Promise.resolve(stateVersionOfThisBuild) : this.#opts.stateVersionOf(m),
        ),
      );
      const target = versionAllVotersApply(versions);
      if (node.softState().role !== 'leader') return { kind: 'follower' };
      if (target <= control.clusterVersion) return { kind: 'held' };
      const result = await this.#opts.propose({ type: 'cluster.version', version: target });
      if (result.type !== 'clusterVersion') {
        logger.warn({ result }, 'raising the cluster version was refused');
        return { kind: 'unheard' };
      }
      logger.info(
        { clusterVersion: result.version, voters: voters.map((m) => m.id) },
        'every voter supports a newer state version: the cluster version is raised',
      );
      return { kind: 'raised', version: result.version };
    } catch (err) {
      // A voter down or slow, or leadership lost: the next round tries again.
      logger.debug({ err }, 'cluster version check did not complete');
      return { kind: 'unheard' };
    } finally {
      this.#running = false;
    }
  }
}

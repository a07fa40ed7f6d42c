// Raises the cluster's effective state version once every voter supports more
// (docs/decisions/0019-version-gates.md). Only the leader does it, on a timer: it reads each
// voter's Status over the raft address, takes the lowest state version they apply, and proposes
// cluster.version when that is above the version in the state. A voter that does not answer
// holds the version where it is: the cluster moves on only when it knows every voter can follow.
import type { Logger } from 'pino';
import type { Member } from '../raft/core/types.js';
import type { RaftNode } from '../raft/node.js';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import { advertisedStateVersion, stateVersionOfThisBuild } from '../state/versions.js';
import type { Clock, Cancel } from '../platform/clock.js';

const checkIntervalMs = 2000;

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
  /** Its timers (src/platform/clock.ts: real ones in a node, virtual ones in the simulation). */
  readonly clock: Clock;
}

/** The version every voter can apply: the lowest among them (a missing answer means 1). */
export function versionAllVotersApply(versions: readonly number[]): number {
  let lowest = stateVersionOfThisBuild;
  for (const v of versions) lowest = Math.min(lowest, advertisedStateVersion(v));
  return lowest;
}

export class ClusterVersionKeeper {
  readonly #opts: ClusterVersionKeeperOptions;
  #stopTimer: Cancel | undefined;
  #running = false;

  constructor(opts: ClusterVersionKeeperOptions) {
    this.#opts = opts;
  }

  start(): void {
    this.#stopTimer = this.#opts.clock.every(
      this.#opts.intervalMs ?? checkIntervalMs,
      () => {
        void this.check();
      },
      { unref: true },
    );
  }

  stop(): void {
    this.#stopTimer?.();
    this.#stopTimer = undefined;
  }

  /** One round: the version the cluster was raised to, or undefined when it stayed. */
  async check(): Promise<number | undefined> {
    const { node, control, logger } = this.#opts;
    if (this.#running || node.softState().role !== 'leader') return undefined;
    if (control.clusterVersion >= stateVersionOfThisBuild) return undefined;
    this.#running = true;
    try {
      const voters = node.membership().voters;
      const versions = await Promise.all(
        voters.map((m) =>
          m.id === node.id ? Promise.resolve(stateVersionOfThisBuild) : this.#opts.stateVersionOf(m),
        ),
      );
      const target = versionAllVotersApply(versions);
      if (target <= control.clusterVersion || node.softState().role !== 'leader') return undefined;
      const result = await this.#opts.propose({ type: 'cluster.version', version: target });
      if (result.type !== 'clusterVersion') {
        logger.warn({ result }, 'raising the cluster version was refused');
        return undefined;
      }
      logger.info(
        { clusterVersion: result.version, voters: voters.map((m) => m.id) },
        'every voter supports a newer state version: the cluster version is raised',
      );
      return result.version;
    } catch (err) {
      // A voter down or slow, or leadership lost: the next round tries again.
      logger.debug({ err }, 'cluster version check did not complete');
      return undefined;
    } finally {
      this.#running = false;
    }
  }
}

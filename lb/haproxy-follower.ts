// Drives lb/haproxy-membership.ts: every interval it asks the cluster for its members, reads the
// backend's servers from HAProxy's runtime API, and sends the commands the plan names, logging
// each change. A failed round changes nothing it did not finish and is tried again next
// interval: a cluster without a leader or an HAProxy being restarted only delays the follower.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Member, RuntimeServer, ServerChange, SkippedMember } from './haproxy-membership.js';
import { parseRuntimeServers, planFollow } from './haproxy-membership.js';
import { HaproxyRuntimeError, runtimeCommand } from './haproxy-runtime.js';

export interface FollowerOptions {
  readonly socketPath: string;
  readonly backend: string;
  /** What follows address and id on an added server's line (haproxyServerOptions). */
  readonly serverOptions: string;
  readonly serverId: (memberId: string) => number;
  readonly drainGraceMs: number;
  readonly intervalMs: number;
  /** The cluster's members; rejects when no node answers in time. */
  readonly members: () => Promise<readonly Member[]>;
  readonly logger: Logger;
  readonly now?: () => number;
}

/** What one round did. */
export interface RoundResult {
  readonly applied: readonly ServerChange[];
  /** Changes HAProxy refused a command of, with its answer. */
  readonly refused: readonly { change: ServerChange; answer: string }[];
}

export class HaproxyFollower {
  readonly #o: FollowerOptions;
  #held: ReadonlyMap<string, number> = new Map();
  #skippedSeen = '';

  constructor(options: FollowerOptions) {
    this.#o = options;
  }

  /**
   * Checks that the socket answers and the backend exists; throws HaproxyRuntimeError naming
   * what is wrong, so that a follower pointed at the wrong place says so at once.
   */
  async check(): Promise<RuntimeServer[]> {
    return this.#servers();
  }

  /** One round: members, servers, plan, commands. Throws when either side cannot be read. */
  async round(): Promise<RoundResult> {
    const members = await this.#o.members();
    const current = await this.#servers();
    const plan = planFollow({
      members,
      current,
      held: this.#held,
      now: (this.#o.now ?? Date.now)(),
      settings: this.#o,
    });
    this.#held = plan.held;
    this.#logSkipped(plan.skipped);
    const applied: ServerChange[] = [];
    const refused: { change: ServerChange; answer: string }[] = [];
    for (const change of plan.changes) {
      const answer = await this.#apply(change);
      if (answer === undefined) applied.push(change);
      else refused.push({ change, answer });
    }
    return { applied, refused };
  }

  /** Rounds every interval until `signal` aborts; a failed round is logged and tried again. */
  async run(signal: AbortSignal): Promise<void> {
    const log = this.#o.logger;
    let failing = false;
    while (!signal.aborted) {
      try {
        await this.round();
        if (failing) log.info('following the membership again');
        failing = false;
      } catch (err) {
        // Once per outage at warn, then quietly: an election or a restart lasts a few rounds.
        if (!failing) log.warn({ err: (err as Error).message }, 'a round failed; HAProxy left as it is');
        else log.debug({ err: (err as Error).message }, 'a round failed');
        failing = true;
      }
      await sleep(this.#o.intervalMs, undefined, { signal }).catch(() => undefined);
    }
  }

  async #servers(): Promise<RuntimeServer[]> {
    const { socketPath, backend } = this.#o;
    const state = await runtimeCommand(socketPath, `show servers state ${backend}`);
    if (!state.startsWith('1\n')) {
      throw new HaproxyRuntimeError(
        `HAProxy on ${socketPath} has no backend "${backend}" ("show servers state" answered: ${state}); name it with --backend`,
      );
    }
    const stat = await runtimeCommand(socketPath, `show stat ${backend} 4 -1`);
    return parseRuntimeServers(state, stat);
  }

  /** Sends a change's commands in order; undefined when all worked, else the refusing answer. */
  async #apply(change: ServerChange): Promise<string | undefined> {
    const log = this.#o.logger;
    for (const command of change.commands) {
      let answer: string;
      try {
        answer = await runtimeCommand(this.#o.socketPath, command.text);
      } catch (err) {
        answer = (err as Error).message;
      }
      if (!command.ok.test(answer)) {
        log.warn(
          { server: change.server, change: change.kind, command: command.text, answer },
          'HAProxy refused a command; trying again next round',
        );
        return answer;
      }
    }
    log.info(
      { server: change.server, change: change.kind, backend: this.#o.backend },
      changeWords[change.kind],
    );
    return undefined;
  }

  #logSkipped(skipped: readonly SkippedMember[]): void {
    const seen = JSON.stringify(skipped);
    if (seen === this.#skippedSeen) return;
    this.#skippedSeen = seen;
    for (const s of skipped)
      this.#o.logger.info({ member: s.member, reason: s.reason }, 'member not balanced');
  }
}

const changeWords: Record<ServerChange['kind'], string> = {
  add: 'added a server for a new member',
  readdress: "moved a server to its member's API address",
  ready: 'put a server back into rotation',
  drain: 'draining the server of a member that left: no new calls, its streams go on',
  delete: 'deleted the server of a member that left',
};

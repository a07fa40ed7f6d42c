// Puts this node's API address into the replicated state (docs/decisions/0038-member-api-addresses.md),
// so that `member list` and `cluster status` show it whichever node answers. Every member does it
// for itself, on a timer: while it is a member, a leader is known and the cluster runs at state
// version 3, it proposes member.apiAddr when the state lacks its address or names another (it
// was restarted on a new one), with the ids of the membership it sees. A refusal or a lost leader
// is tried again on a later round; once the state holds the address, a round proposes nothing.
// Rounds come every 250 ms while the state lacks the address (a new cluster raises its version
// within a second of starting, and the address then follows at once, not up to 2 s later in the
// middle of whatever the operator does first), every 2 s once it holds it.
import type { Logger } from 'pino';
import type { RaftNode } from '../raft/node.js';
import { allMembers } from '../raft/core/membership.js';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import { stateVersionFleet } from '../state/versions.js';
import type { Clock, Cancel } from '../platform/clock.js';

const checkIntervalMs = 2000;
/** The rounds' interval while the state lacks this node's address. */
const pendingIntervalMs = 250;

export interface ApiAddressKeeperOptions {
  readonly node: RaftNode;
  readonly control: ControlState;
  /** The address this node serves its API on, as Status names it. */
  readonly apiAddr: string;
  readonly propose: (command: ControlCommand) => Promise<ControlResult>;
  readonly logger: Logger;
  /** The rounds' interval once the state holds the address; default 2 s. */
  readonly intervalMs?: number;
  /** Its timers (src/platform/clock.ts: real ones in a node, virtual ones in the simulation). */
  readonly clock: Clock;
}

export class ApiAddressKeeper {
  readonly #o: ApiAddressKeeperOptions;
  #stopTimer: Cancel | undefined;
  #stopped = true;
  #running = false;

  constructor(o: ApiAddressKeeperOptions) {
    this.#o = o;
  }

  start(): void {
    this.#stopped = false;
    this.#round();
  }

  stop(): void {
    this.#stopped = true;
    this.#stopTimer?.();
    this.#stopTimer = undefined;
  }

  /** Whether the replicated state holds this node's address as it serves it. */
  recorded(): boolean {
    const { control, node, apiAddr } = this.#o;
    return control.memberApiAddrs.find((m) => m.id === node.id)?.apiAddr === apiAddr;
  }

  #round(): void {
    void this.check().finally(() => {
      if (this.#stopped) return;
      const settled = this.#o.apiAddr === '' || this.recorded();
      const ms = settled ? (this.#o.intervalMs ?? checkIntervalMs) : pendingIntervalMs;
      this.#stopTimer = this.#o.clock.after(ms, () => this.#round(), { unref: true });
    });
  }

  /** The command a round would propose now, or undefined when there is nothing to say. */
  due(): ControlCommand | undefined {
    const { node, control, apiAddr } = this.#o;
    if (apiAddr === '' || control.clusterVersion < stateVersionFleet) return undefined;
    if (node.softState().leader === '') return undefined;
    const members = allMembers(node.membership()).map((m) => m.id);
    if (!members.includes(node.id)) return undefined;
    if (this.recorded()) return undefined;
    return { type: 'member.apiAddr', id: node.id, apiAddr, members: members.sort() };
  }

  /** One round: true when it recorded the address. */
  async check(): Promise<boolean> {
    const command = this.#running ? undefined : this.due();
    if (command === undefined) return false;
    this.#running = true;
    try {
      const result = await this.#o.propose(command);
      if (result.type !== 'memberApiAddrs') {
        this.#o.logger.warn({ result }, 'recording this node’s API address was refused');
        return false;
      }
      this.#o.logger.info({ apiAddr: this.#o.apiAddr }, 'this node’s API address is in the replicated state');
      return true;
    } catch (err) {
      // No leader for the moment, or it changed: the next round tries again.
      this.#o.logger.debug({ err }, 'recording this node’s API address did not complete');
      return false;
    } finally {
      this.#running = false;
    }
  }
}

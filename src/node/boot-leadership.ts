// Leadership follows the node that can serve boot (docs/decisions/0033), as keepalived's
// track_interface moves a VIP: the leader holds the VIP and answers DHCP, so a leader whose
// configured boot services are not serving (its provisioning link down, an address gone) hands
// leadership to a caught-up follower whose boot services all serve, and a node whose boot
// services are not serving holds its elections while such a follower exists. It never costs the
// replicated state its availability: with no healthy peer, nothing is held and nothing moves.
//
// Every node runs it. While its own boot services serve it does nothing but release a hold; while
// they do not, it asks each voter's Status over the raft address (the boot services' states are in
// it) every round, so the cost is paid only by a node that is not serving.
import type { Logger } from 'pino';
import type { Member, NodeId } from '../raft/core/types.js';
import type { RaftNode } from '../raft/node.js';

const roundMsDefault = 250;
/** How long a peer has to answer its Status in one round. */
export const peerBootTimeoutMs = 1000;
/** How long a handover may take before the next round tries again. */
const transferTimeoutMs = 2000;

export interface BootLeadershipOptions {
  readonly node: RaftNode;
  /** Whether this node is configured with boot services at all. */
  readonly configured: boolean;
  /** Whether every configured boot service of this node serves now. */
  readonly serving: () => boolean;
  /**
   * Whether every boot service of `member` serves, from its Status: false for a member with none
   * configured (it cannot take the VIP's duties), undefined when it did not answer.
   */
  readonly peerServing: (member: Member) => Promise<boolean | undefined>;
  readonly logger: Logger;
  readonly roundMs?: number;
}

export class BootLeadership {
  readonly #o: BootLeadershipOptions;
  #timer: NodeJS.Timeout | undefined;
  #running = false;
  /** The healthy peers last found, for logging changes once. */
  #lastHealthy = '';

  constructor(o: BootLeadershipOptions) {
    this.#o = o;
  }

  start(): void {
    if (!this.#o.configured) return;
    this.#timer = setInterval(() => void this.round(), this.#o.roundMs ?? roundMsDefault);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One round: hold or release elections, and hand leadership over when this node should not lead. */
  async round(): Promise<void> {
    const { node, logger } = this.#o;
    if (this.#running || node.stoppedBy !== null) return;
    this.#running = true;
    try {
      if (this.#o.serving()) {
        this.#hold(false, []);
        return;
      }
      const healthy = await this.#healthyPeers();
      this.#hold(healthy.length > 0, healthy);
      if (healthy.length === 0 || node.softState().role !== 'leader') return;
      if (node.status().transferee !== '') return;
      const to = node.bestTransferTarget((id) => !healthy.includes(id));
      if (to === null) return;
      logger.warn(
        { to, healthy },
        'boot services not serving here: handing leadership to a node whose boot serves',
      );
      await node.transferLeadership(to, transferTimeoutMs);
      logger.info({ to }, 'leadership handed to a node whose boot services serve');
    } catch (err) {
      logger.warn({ err }, 'handing leadership to a node whose boot serves did not complete; trying again');
    } finally {
      this.#running = false;
    }
  }

  async #healthyPeers(): Promise<NodeId[]> {
    const { node } = this.#o;
    const peers = node.membership().voters.filter((m) => m.id !== node.id);
    const answers = await Promise.all(
      peers.map(async (m) => {
        try {
          return (await this.#o.peerServing(m)) === true ? m.id : undefined;
        } catch {
          return undefined;
        }
      }),
    );
    return answers.filter((id): id is NodeId => id !== undefined);
  }

  #hold(held: boolean, healthy: readonly NodeId[]): void {
    const { node, logger } = this.#o;
    const key = held ? healthy.join(',') : '';
    if (node.campaignsHeld !== held || this.#lastHealthy !== key) {
      if (held)
        logger.warn(
          { healthy },
          'boot services not serving here: no election started while these peers serve',
        );
      else if (node.campaignsHeld) logger.info('elections no longer held back');
    }
    this.#lastHealthy = key;
    node.holdCampaigns(held);
  }
}

// Goal: the rules of leadership following boot health, one round at a time: a node whose boot
// services serve holds nothing and hands nothing over; one that does not serve holds its
// elections while a peer serves, and as leader hands leadership to the most caught-up peer that
// serves (never to one that does not, nor to one that did not answer); with no peer serving it
// holds nothing and keeps leading.
// Method: BootLeadership over a stand-in for the raft driver that records holds and transfers
// (the driver's own transfer is tested in test/raft and the integration tests); peers' answers
// are set per case.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { BootLeadership } from '../../src/node/boot-leadership.js';
import type { Member, NodeId } from '../../src/raft/core/types.js';
import type { RaftNode } from '../../src/raft/node.js';

const silent = pino({ level: 'silent' });

class StandInNode {
  readonly id = 'n1';
  role: 'leader' | 'follower' = 'leader';
  held = false;
  readonly transfers: NodeId[] = [];
  /** Match index by peer, for bestTransferTarget. */
  readonly match: Record<string, number> = { n2: 10, n3: 12 };
  readonly stoppedBy = null;
  softState(): { role: string } {
    return { role: this.role };
  }
  status(): { transferee: string } {
    return { transferee: '' };
  }
  membership(): { voters: Member[] } {
    return { voters: ['n1', 'n2', 'n3'].map((id) => ({ id, addr: `${id}:7000`, apiAddr: '' })) };
  }
  bestTransferTarget(skip: (id: NodeId) => boolean): NodeId | null {
    const candidates = Object.entries(this.match).filter(([id]) => !skip(id));
    candidates.sort((a, b) => b[1] - a[1]);
    return candidates[0]?.[0] ?? null;
  }
  transferLeadership(to: NodeId): Promise<void> {
    this.transfers.push(to);
    this.role = 'follower';
    return Promise.resolve();
  }
  holdCampaigns(held: boolean): void {
    this.held = held;
  }
  get campaignsHeld(): boolean {
    return this.held;
  }
}

function setUp(serving: boolean, peers: Record<string, boolean | undefined | Error>) {
  const node = new StandInNode();
  const leadership = new BootLeadership({
    node: node as unknown as RaftNode,
    configured: true,
    serving: () => serving,
    peerServing: (m) => {
      const answer = peers[m.id];
      return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
    },
    logger: silent,
  });
  return { node, leadership };
}

describe('leadership following boot health', () => {
  it('a serving node holds nothing and hands nothing over', async () => {
    const { node, leadership } = setUp(true, { n2: true, n3: true });
    node.held = true;
    await leadership.round();
    assert.equal(node.held, false, 'a hold is released once the node serves again');
    assert.deepEqual(node.transfers, []);
  });

  it('a leader that does not serve hands leadership to the most caught-up peer that serves', async () => {
    const both = setUp(false, { n2: true, n3: true });
    await both.leadership.round();
    assert.deepEqual(both.node.transfers, ['n3'], 'n3 is further along');
    assert.equal(both.node.held, true);
    const onlyN2 = setUp(false, { n2: true, n3: false });
    await onlyN2.leadership.round();
    assert.deepEqual(onlyN2.node.transfers, ['n2'], 'never to a peer whose boot does not serve');
    const silentN2 = setUp(false, { n2: new Error('UNAVAILABLE'), n3: true });
    await silentN2.leadership.round();
    assert.deepEqual(silentN2.node.transfers, ['n3'], 'a peer that did not answer is no target');
  });

  it('a follower that does not serve holds its elections while a peer serves', async () => {
    const { node, leadership } = setUp(false, { n2: undefined, n3: true });
    node.role = 'follower';
    await leadership.round();
    assert.equal(node.held, true);
    assert.deepEqual(node.transfers, []);
  });

  it('with no peer that serves, nothing is held and the leader keeps leading', async () => {
    const { node, leadership } = setUp(false, { n2: false, n3: new Error('UNAVAILABLE') });
    node.held = true;
    await leadership.round();
    assert.equal(node.held, false);
    assert.deepEqual(node.transfers, []);
    assert.equal(node.role, 'leader');
  });
});

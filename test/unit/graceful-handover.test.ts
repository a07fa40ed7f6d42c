// Goal: the two causes of slow or failed writes during a graceful handover (SIGTERM on a
// leader, issue 27) stay fixed. A stopping leader always finds a voter to hand over to, even in
// the moments after a quorum check cleared every voter's "recently active" mark (it then handed
// over to nobody, and writes failed for an election timeout); and a write waiting for a leader
// goes on as soon as the node learns one, not at the next tick of a 20 ms poll.
// Method: transferTargetOf on tables of progress; awaitLeader against a node whose soft-state
// changes the test makes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { status } from '@grpc/grpc-js';
import { awaitLeader } from '../../src/api/proposer.js';
import type { Member } from '../../src/raft/core/types.js';
import type { RaftNode } from '../../src/raft/node.js';
import { transferTargetOf, type TransferCandidate } from '../../src/raft/node.js';

const voter = (id: string, match: number, recentActive: boolean): TransferCandidate => ({
  id,
  learner: false,
  recentActive,
  match,
});

describe('graceful handover', () => {
  it('hands over to the most caught-up active voter, else to the most caught-up voter', () => {
    const self = voter('n1', 100, true);
    assert.equal(transferTargetOf([self, voter('n2', 90, true), voter('n3', 99, true)], 'n1'), 'n3');
    // Active beats caught up: an inactive voter may be gone.
    assert.equal(transferTargetOf([self, voter('n2', 90, true), voter('n3', 99, false)], 'n1'), 'n2');
    // Just after a quorum check no voter is marked active: still a target, not none.
    assert.equal(transferTargetOf([self, voter('n2', 98, false), voter('n3', 97, false)], 'n1'), 'n2');
    // Never itself, a learner or one skipped (drained); none left: null.
    const learner = { ...voter('n4', 100, true), learner: true };
    assert.equal(
      transferTargetOf([self, learner, voter('n2', 98, true)], 'n1', (id) => id === 'n2'),
      null,
    );
  });

  it('awaitLeader resolves at the soft-state change that names a leader, without polling', async () => {
    let leader: Member | null = null;
    const waiters: (() => void)[] = [];
    let waits = 0;
    const node = {
      leaderMember: () => leader,
      softStateChange: (timeoutMs: number) =>
        new Promise<void>((resolve) => {
          waits++;
          const timer = setTimeout(resolve, timeoutMs);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        }),
    } as unknown as RaftNode;
    const found = awaitLeader(node, 5_000);
    // The wait is on the node's change, once, until the change comes.
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(waits, 1);
    leader = { id: 'n2', addr: '127.0.0.1:7021', apiAddr: '' };
    for (const wake of waiters.splice(0)) wake();
    assert.equal((await found).id, 'n2');
    assert.equal(waits, 1);
  });

  it('awaitLeader gives up with UNAVAILABLE when no leader comes', async () => {
    const node = {
      leaderMember: () => null,
      softStateChange: (timeoutMs: number) => new Promise<void>((resolve) => setTimeout(resolve, timeoutMs)),
    } as unknown as RaftNode;
    await assert.rejects(awaitLeader(node, 30), (e: { code?: number }) => e.code === status.UNAVAILABLE);
  });
});

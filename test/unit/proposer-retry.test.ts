// Goal: a write refused before it was appended is retried as leadership settles, and at once
// when the handover it was refused for has already ended here: waiting for the next change then
// waited for a change that had already come, for up to the whole pause, on every write that a
// graceful handover caught (the SIGTERM benchmark's gap to etcd).
// Method: retryRefusals against a stand-in for the node's leadership changes (a counter and a
// wait that records being called), with refusals as the raft core raises them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { retryRefusals, type LeadershipChanges } from '../../src/api/proposer.js';
import { RaftError } from '../../src/raft/core/types.js';

class Changes implements LeadershipChanges {
  softStateChanges = 0;
  readonly waits: number[] = [];
  softStateChange(timeoutMs: number): Promise<void> {
    this.waits.push(timeoutMs);
    // The change the caller waits for comes at once.
    this.softStateChanges++;
    return Promise.resolve();
  }
}

const inTransfer = (): RaftError => new RaftError('E_TRANSFER_IN_PROGRESS', 'leadership is moving to n2');

describe('retryRefusals', () => {
  it('retries at once when leadership changed while the refused attempt was out', async () => {
    const node = new Changes();
    let attempts = 0;
    const result = await retryRefusals(node, () => {
      attempts++;
      if (attempts === 1) {
        // The new leader became known here before the old one's refusal arrived.
        node.softStateChanges++;
        return Promise.reject(inTransfer());
      }
      return Promise.resolve('applied');
    });
    assert.equal(result, 'applied');
    assert.equal(attempts, 2);
    assert.deepEqual(node.waits, [], 'no wait for a change that had already come');
  });

  it('waits for the next change when nothing changed during the refused attempt', async () => {
    const node = new Changes();
    let attempts = 0;
    const result = await retryRefusals(node, () => {
      attempts++;
      return attempts < 3 ? Promise.reject(inTransfer()) : Promise.resolve('applied');
    });
    assert.equal(result, 'applied');
    assert.equal(attempts, 3);
    // One wait per refusal, the pause growing.
    assert.deepEqual(node.waits, [10, 20]);
  });

  it('gives an error that does not prove the write was never appended back at once', async () => {
    const node = new Changes();
    let attempts = 0;
    await assert.rejects(
      retryRefusals(node, () => {
        attempts++;
        node.softStateChanges++;
        return Promise.reject(new Error('connection reset after the write was sent'));
      }),
      /connection reset/,
    );
    assert.equal(attempts, 1);
    assert.deepEqual(node.waits, []);
  });
});

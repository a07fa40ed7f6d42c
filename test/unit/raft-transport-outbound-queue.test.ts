// Goal: the per-peer outgoing queue puts priority traffic first, keeps each lane in order,
// bounds both lanes by dropping their oldest frames, and sizes batches in exact bytes.
// Method: push labelled frames of chosen sizes and inspect what takeBatch hands out.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { MessageType } from '../../src/raft/core/types.js';
import { laneOf, OutboundQueue } from '../../src/raft/transport/outbound-queue.js';

/** A frame whose first byte labels it and whose length is chosen. */
function frame(label: number, bytes = 1): Uint8Array {
  const f = new Uint8Array(bytes);
  f[0] = label;
  return f;
}

function labels(frames: readonly Uint8Array[]): number[] {
  return frames.map((f) => f[0]!);
}

const roomy = { priorityMessagesMax: 100, bulkMessagesMax: 100, bulkBytesMax: 1 << 20 };

void describe('raft transport outbound queue', () => {
  void it('assigns elections, heartbeats and reads to the priority lane, log traffic to bulk', () => {
    const priority: MessageType[] = [
      'heartbeat',
      'heartbeatResp',
      'vote',
      'voteResp',
      'preVote',
      'preVoteResp',
      'timeoutNow',
      'readIndex',
      'readIndexResp',
    ];
    const bulk: MessageType[] = ['app', 'appResp', 'snap'];
    for (const t of priority) assert.equal(laneOf(t), 'priority', t);
    for (const t of bulk) assert.equal(laneOf(t), 'bulk', t);
  });

  void it('hands out priority frames before bulk ones, each lane in order', () => {
    const q = new OutboundQueue(roomy);
    q.push('bulk', frame(1));
    q.push('bulk', frame(2));
    q.push('priority', frame(10));
    q.push('bulk', frame(3));
    q.push('priority', frame(11));
    assert.deepEqual(labels(q.takeBatch(1 << 20)), [10, 11, 1, 2, 3]);
    assert.equal(q.length, 0);
    assert.equal(q.bytes, 0);
  });

  void it('stops a batch before it would exceed the byte bound, but always takes one frame', () => {
    const q = new OutboundQueue(roomy);
    q.push('bulk', frame(1, 600));
    q.push('bulk', frame(2, 300));
    q.push('bulk', frame(3, 200));
    assert.deepEqual(labels(q.takeBatch(1000)), [1, 2]);
    assert.deepEqual(labels(q.takeBatch(100)), [3], 'an oversized frame still moves alone');
    assert.deepEqual(q.takeBatch(1000), []);
  });

  void it('drops the oldest bulk frames beyond the message bound and reports how many', () => {
    const q = new OutboundQueue({ ...roomy, bulkMessagesMax: 3 });
    const dropped = [1, 2, 3, 4, 5].map((i) => q.push('bulk', frame(i)));
    assert.deepEqual(dropped, [0, 0, 0, 1, 1]);
    assert.deepEqual(labels(q.takeBatch(1 << 20)), [3, 4, 5]);
  });

  void it('drops the oldest bulk frames beyond the byte bound', () => {
    const q = new OutboundQueue({ ...roomy, bulkBytesMax: 1000 });
    q.push('bulk', frame(1, 400));
    q.push('bulk', frame(2, 400));
    assert.equal(q.push('bulk', frame(3, 400)), 1);
    assert.equal(q.bytes, 800);
    assert.deepEqual(labels(q.takeBatch(1 << 20)), [2, 3]);
  });

  void it('bounds the priority lane without touching bulk', () => {
    const q = new OutboundQueue({ ...roomy, priorityMessagesMax: 2 });
    q.push('bulk', frame(1));
    assert.equal(q.push('priority', frame(10)), 0);
    assert.equal(q.push('priority', frame(11)), 0);
    assert.equal(q.push('priority', frame(12)), 1);
    assert.deepEqual(labels(q.takeBatch(1 << 20)), [11, 12, 1]);
  });

  void it('stays in order across many pushes and partial takes', () => {
    const q = new OutboundQueue({ ...roomy, bulkMessagesMax: 10_000 });
    const seen: number[] = [];
    for (let i = 0; i < 1000; i++) {
      q.push('bulk', frame(i % 256));
      if (i % 7 === 0) seen.push(...labels(q.takeBatch(3)));
    }
    seen.push(...labels(q.takeBatch(1 << 20)));
    assert.deepEqual(
      seen,
      Array.from({ length: 1000 }, (_, i) => i % 256),
    );
  });

  void it('clear() empties both lanes and says how much was dropped', () => {
    const q = new OutboundQueue(roomy);
    q.push('bulk', frame(1, 10));
    q.push('priority', frame(2, 5));
    assert.equal(q.clear(), 2);
    assert.equal(q.length, 0);
    assert.equal(q.bytes, 0);
  });
});

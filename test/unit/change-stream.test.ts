// Goal: the replicated state's one change stream (src/state/control/change-stream.ts): changes
// are numbered 1, 2, ... in publication order; `on(kind)` sees only its kind; an unsubscribed
// listener sees nothing more; apply publishes hardware, then workflows, then workflow events in
// their seq order, with the state already consistent; a restore publishes `restore` alone.
// Method: the stream on its own, then ControlState through apply() (lifecycle-harness).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChangeStream, type NumberedChange } from '../../src/state/control/change-stream.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { LifecycleHarness } from '../support/lifecycle-harness.js';

describe('the change stream', () => {
  it('numbers changes, filters by kind and stops at unsubscribe', () => {
    const stream = new ChangeStream();
    const all: NumberedChange[] = [];
    const drains: number[] = [];
    const stop = stream.subscribe((c) => all.push(c));
    stream.on('drain', (c) => drains.push(c.seq));
    stream.publish({ kind: 'artifact', name: 'a' });
    stream.publish({ kind: 'drain' });
    stop();
    stream.publish({ kind: 'drain' });
    assert.deepEqual(
      all.map((c) => [c.seq, c.kind]),
      [
        [1, 'artifact'],
        [2, 'drain'],
      ],
    );
    assert.deepEqual(drains, [2, 3]);
    assert.equal(stream.seq, 3);
  });

  it('apply publishes hardware, workflows, then events, the state consistent; restore alone', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    h.ok(h.verbCommand('m1', 'accept'), 'hardware');
    const seen: string[] = [];
    h.state.changes.subscribe((c) => {
      if (c.kind === 'hardware')
        seen.push(`hardware ${c.id} ${h.state.hardware(c.id)?.lifecycle?.state ?? '-'}`);
      else if (c.kind === 'workflow') seen.push(`workflow ${c.workflow.id}`);
      else if (c.kind === 'workflowEvent') seen.push(`event ${c.event.type}`);
      else if (c.kind === 'machineEvent') seen.push(`machine ${c.hardwareId} ${c.event.to}`);
      else seen.push(c.kind);
    });
    const before = h.state.changes.seq;
    h.create('w1', 'm1');
    assert.deepEqual(seen, [
      'hardware m1 provisioning',
      'workflow w1',
      'event workflow.created',
      'machine m1 provisioning',
    ]);
    assert.equal(h.state.changes.seq, before + 4);
    const copy = new ControlState();
    const restored: string[] = [];
    copy.changes.subscribe((c) => restored.push(c.kind));
    copy.restore(h.state.snapshot());
    assert.deepEqual(restored, ['restore']);
  });
});

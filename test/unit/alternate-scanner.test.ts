// Goal: the leader's duty of the alternate policy (src/node/alternate-scanner.ts): only a leader
// offers; a failed workflow under the policy is offered the ready matching machines it never
// tried, each with its template rendered for it, once per end; the state's answer moves it.
// Method: a real ControlState (test/support/lifecycle-harness.ts) whose proposals the test applies.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import { AlternateScanner } from '../../src/node/alternate-scanner.js';
import { LifecycleHarness, operator, specFor } from '../support/lifecycle-harness.js';
import { realClock } from '../../src/platform/clock.js';

const template =
  'version: "0.1"\nname: os\nglobal_timeout: 600\ntasks:\n  - name: os\n    worker: "{{ hardware.id }}"\n    actions:\n      - name: install\n        command: ["true"]\n        timeout: 60\n';

describe('the alternate scanner', () => {
  it('offers a failed workflow the untried machines, rendered for each, once per end, as leader only', async () => {
    const h = new LifecycleHarness();
    h.ok({ type: 'template.put', name: 'os', source: template, audit: operator }, 'template');
    for (let n = 1; n <= 3; n++) {
      h.machine(`m${n}`, n);
      h.ok(
        { type: 'hardware.label', id: `m${n}`, set: { rack: 'a' }, remove: [], audit: operator },
        'hardware',
      );
      h.ok(h.verbCommand(`m${n}`, 'accept'), 'hardware');
    }
    h.ok(
      {
        type: 'workflow.allocate',
        id: 'w1',
        template: 'os',
        templateVersion: h.state.template('os')?.version ?? 0,
        selector: 'rack=a',
        hardwareMap: {},
        candidates: [{ hardwareId: 'm1', spec: specFor('m1') }],
        alternateAttempts: 3,
        audit: operator,
      },
      'workflow',
    );
    h.is(h.start('w1'), 'attempt');
    h.finish('w1', false);
    const finishedMs = h.state.workflow('w1')?.finishedMs;
    assert.ok(finishedMs !== undefined);
    let leader = false;
    const proposed: ControlCommand[] = [];
    const scanner = new AlternateScanner({
      control: h.state,
      isLeader: () => leader,
      propose: (command): Promise<ControlResult> => {
        proposed.push(command);
        return Promise.resolve(h.run(command));
      },
      logger: pino({ level: 'silent' }),
      clock: realClock,
    });
    await scanner.scan();
    assert.equal(proposed.length, 0, 'a follower offers nothing');
    leader = true;
    await scanner.scan();
    const offer = proposed[0];
    assert.ok(offer?.type === 'workflow.alternate');
    assert.deepEqual(
      offer.candidates.map((c) => c.hardwareId),
      ['m2', 'm3'],
      'never the machine tried',
    );
    assert.equal(offer.candidates[1]?.spec.tasks[0]?.worker, 'm3', "each machine's own rendering");
    assert.equal(offer.finishedMs, finishedMs, 'the end it answers');
    assert.equal(h.state.workflow('w1')?.hardwareId, 'm2');
    assert.equal(scanner.decided, 1);
    await scanner.scan();
    assert.equal(proposed.length, 1, 'nothing awaits: nothing offered again');
  });
});

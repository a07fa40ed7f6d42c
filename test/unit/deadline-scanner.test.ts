// The leader's deadline scanner (src/node/deadline-scanner.ts) over a real ControlState, driven
// tick by tick with explicit times: it proposes each expiry at its deadline's first tick, and
// walks the workflows and machines only when a deadline it saw is due, a second after its last
// walk, or at once after an expiry settles or when it leads again.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { DeadlineScanner, deadlineScanMs, deadlineWalkMaxMs } from '../../src/node/deadline-scanner.js';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import { realClock } from '../../src/platform/clock.js';
import { LifecycleHarness, specFor } from '../support/lifecycle-harness.js';

interface Rig {
  readonly h: LifecycleHarness;
  readonly scanner: DeadlineScanner;
  /** The expiries proposed, with the time of the tick that proposed them. */
  readonly proposed: { readonly command: ControlCommand; readonly atMs: number }[];
  leading: boolean;
  /** Runs the ticks from the harness's time up to `untilMs`, moving its time along. */
  ticks(untilMs: number): Promise<void>;
}

function rig(): Rig {
  const h = new LifecycleHarness();
  const proposed: Rig['proposed'] = [];
  const r: Rig = {
    h,
    proposed,
    leading: true,
    scanner: new DeadlineScanner({
      control: h.state,
      isLeader: () => r.leading,
      // Applied as the leader would, stamped with the tick's time.
      propose: (command: ControlCommand): Promise<ControlResult> => {
        proposed.push({ command, atMs: h.nowMs });
        return Promise.resolve(h.run(command));
      },
      logger: pino({ level: 'silent' }),
      clock: realClock,
    }),
    async ticks(untilMs) {
      while (h.nowMs + deadlineScanMs <= untilMs) {
        h.nowMs += deadlineScanMs;
        r.scanner.scan(h.nowMs);
        // Lets the settled expiries' callbacks run, as between two ticks of the timer.
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
  };
  return r;
}

/** A machine and a workflow on it whose one action runs with a timeout of `timeoutS`. */
function running(r: Rig, n: number, timeoutS: number): { workflowId: string; deadlineMs: number } {
  const hardwareId = `m${String(n)}`;
  const workflowId = `wf-${String(n)}`;
  r.h.machine(hardwareId, n);
  assert.equal(r.h.create(workflowId, hardwareId, specFor(hardwareId, 3600, timeoutS)).type, 'workflow');
  assert.equal(r.h.start(workflowId).type, 'attempt');
  const deadlineMs = r.h.state.workflow(workflowId)?.actions[0]?.deadlineMs;
  assert.ok(deadlineMs !== undefined);
  return { workflowId, deadlineMs };
}

const expiries = (r: Rig): string[] =>
  r.proposed.filter((p) => p.command.type === 'deadline.expire').map((p) => JSON.stringify(p.command));

describe('the deadline scanner', () => {
  it('walks once a second while nothing is due, not on every tick', async () => {
    const r = rig();
    running(r, 1, 600);
    const from = r.h.nowMs;
    await r.ticks(from + 10 * deadlineWalkMaxMs);
    // Ten seconds of ticks: a walk at the first and one a second after each.
    assert.equal(r.scanner.walks, 10);
    assert.deepEqual(expiries(r), []);
  });

  it('proposes an expiry it has seen at the first tick at or after its deadline', async () => {
    const r = rig();
    await r.ticks(r.h.nowMs + deadlineScanMs);
    // 2.55 s away: walks at about 1 and 2 s, then at the deadline itself, not at 3 s.
    const { workflowId, deadlineMs } = running(r, 1, 2);
    await r.ticks(deadlineMs + 5 * deadlineScanMs);
    const fired = r.proposed.find((p) => p.command.type === 'deadline.expire');
    assert.ok(fired !== undefined, 'the deadline fired');
    assert.deepEqual(fired.command, { type: 'deadline.expire', workflowId });
    assert.ok(
      fired.atMs >= deadlineMs && fired.atMs < deadlineMs + deadlineScanMs,
      `fired at ${String(fired.atMs - deadlineMs)} ms past the deadline`,
    );
  });

  it('sees a deadline that appeared after its last walk within a second and a tick', async () => {
    const r = rig();
    running(r, 1, 600);
    await r.ticks(r.h.nowMs + deadlineScanMs);
    const walks = r.scanner.walks;
    // Created right after a walk, due in 1 s: the next walk is a second after the last.
    const { workflowId, deadlineMs } = running(r, 2, 1);
    await r.ticks(deadlineMs + deadlineWalkMaxMs + deadlineScanMs);
    const fired = r.proposed.find((p) => p.command.type === 'deadline.expire');
    assert.deepEqual(fired?.command, { type: 'deadline.expire', workflowId });
    assert.ok(fired !== undefined && fired.atMs <= deadlineMs + deadlineWalkMaxMs + deadlineScanMs);
    assert.ok(r.scanner.walks > walks);
  });

  it('walks at once when it leads again, and proposes nothing while it follows', async () => {
    const r = rig();
    const { deadlineMs } = running(r, 1, 600);
    await r.ticks(r.h.nowMs + deadlineScanMs);
    r.leading = false;
    await r.ticks(deadlineMs + deadlineScanMs);
    assert.deepEqual(expiries(r), [], 'a follower proposes nothing');
    const walks = r.scanner.walks;
    r.leading = true;
    await r.ticks(r.h.nowMs + deadlineScanMs);
    assert.equal(r.scanner.walks, walks + 1, 'the first tick as leader walks');
    assert.equal(expiries(r).length, 1, 'and proposes the expiry that passed meanwhile');
  });
});

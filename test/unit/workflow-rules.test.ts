// Goal: pin down the pure workflow rules the state machine enforces and the dispatcher and
// deadline scanner follow: the flat action order, which action is next (and when it is not),
// the deterministic retry backoff, the earliest deadline, which attempt a worker's report is
// about, and the one cut of a result's message and output tail.
// Method: hand-built workflows in each interesting state, checked against the rules' answers;
// a fast-check property compares nextAction with a direct reading of its definition.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type {
  ActionState,
  ActionStatus,
  RenderedTemplate,
  Workflow,
  WorkflowState,
} from '../../src/model/records.js';
import { isTerminal } from '../../src/model/records.js';
import {
  attemptMessageBytesMax,
  attemptOutputTailBytesMax,
  retryBackoffBaseMs,
  retryBackoffMaxMs,
} from '../../src/model/limits.js';
import { utf8Length } from '../../src/platform/utf8-text.js';
import {
  actionPositions,
  classifyReport,
  currentActionIndex,
  cutReport,
  nextAction,
  nextDeadline,
  retryBackoffMs,
} from '../../src/workflow/rules.js';

function action(name: string) {
  return { name, command: ['true'], args: [], env: {}, volumes: [], timeoutS: 60, retries: 1 };
}

/** Two tasks on two workers: os (a, b) on m1, then check (c) on m2. */
const spec: RenderedTemplate = {
  version: '0.1',
  name: 'provision',
  globalTimeoutS: 3600,
  tasks: [
    { name: 'os', worker: 'm1', env: {}, volumes: [], actions: [action('a'), action('b')] },
    { name: 'check', worker: 'm2', env: {}, volumes: [], actions: [action('c')] },
  ],
};

function workflow(state: WorkflowState, actions: ActionStatus[], extra: Partial<Workflow> = {}): Workflow {
  return {
    id: 'w',
    template: 't',
    hardwareId: 'm1',
    hardwareMap: {},
    spec,
    state,
    createdMs: 0,
    actions,
    ...extra,
  };
}

const pending = (attempt = 0, extra: Partial<ActionStatus> = {}): ActionStatus => ({
  state: 'PENDING',
  attempt,
  ...extra,
});
const done: ActionStatus = { state: 'SUCCESS', attempt: 1 };

describe('actionPositions', () => {
  it('flattens task by task, action by action, and returns the same list for the same spec', () => {
    const positions = actionPositions(spec);
    assert.deepEqual(
      positions.map((p) => [p.taskIndex, p.actionIndex, p.task.name, p.action.name]),
      [
        [0, 0, 'os', 'a'],
        [0, 1, 'os', 'b'],
        [1, 0, 'check', 'c'],
      ],
    );
    assert.equal(actionPositions(spec), positions, 'computed once per spec');
    assert.ok(Object.isFrozen(positions));
  });
});

describe('nextAction', () => {
  it('is the first action of a new workflow, attempt 1, on its task worker', () => {
    const next = nextAction(workflow('PENDING', [pending(), pending(), pending()]));
    assert.ok(next !== null);
    assert.equal(next.index, 0);
    assert.equal(next.attempt, 1);
    assert.equal(next.workerId, 'm1');
    assert.equal(next.action.name, 'a');
    assert.equal(next.notBeforeMs, undefined);
  });

  it('moves past successful actions, onto the next task and its worker', () => {
    const next = nextAction(workflow('RUNNING', [done, done, pending()]));
    assert.equal(next?.index, 2);
    assert.equal(next?.workerId, 'm2');
    assert.equal(next?.task.name, 'check');
  });

  it('names the attempt after the last one and carries a retry backoff', () => {
    const next = nextAction(workflow('RUNNING', [done, pending(3, { notBeforeMs: 5_000 }), pending()]));
    assert.equal(next?.index, 1);
    assert.equal(next?.attempt, 4);
    assert.equal(next?.notBeforeMs, 5_000);
  });

  it('is null while an action runs, for finished workflows, and when nothing is left', () => {
    const running: ActionStatus = { state: 'RUNNING', attempt: 1, deadlineMs: 10 };
    assert.equal(nextAction(workflow('RUNNING', [done, running, pending()])), null);
    for (const state of ['SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED'] as const) {
      assert.equal(nextAction(workflow(state, [pending(), pending(), pending()])), null, state);
    }
    assert.equal(nextAction(workflow('RUNNING', [done, done, done])), null);
  });

  it('property: agrees with its definition on any mix of action states', () => {
    const states: ActionState[] = ['PENDING', 'RUNNING', 'SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED'];
    const status = fc
      .tuple(fc.constantFrom(...states), fc.nat(5))
      .map(([state, attempt]): ActionStatus => ({ state, attempt }));
    const wfState = fc.constantFrom<WorkflowState>(
      'PENDING',
      'RUNNING',
      'SUCCESS',
      'FAILED',
      'TIMEOUT',
      'CANCELLED',
    );
    fc.assert(
      fc.property(wfState, fc.array(status, { minLength: 3, maxLength: 3 }), (state, actions) => {
        const wf = workflow(state, actions);
        const first = actions.findIndex((s) => s.state !== 'SUCCESS');
        const expectedIndex =
          !isTerminal(state) && first >= 0 && actions[first]?.state === 'PENDING' ? first : undefined;
        const next = nextAction(wf);
        assert.equal(next?.index, expectedIndex);
        if (next !== null) assert.equal(next.attempt, (actions[next.index]?.attempt ?? 0) + 1);
        assert.equal(currentActionIndex(wf), isTerminal(state) || first < 0 ? undefined : first);
      }),
    );
  });
});

describe('retryBackoffMs', () => {
  it('doubles from the base after each failed attempt and stops at the cap', () => {
    const series = [1, 2, 3, 4, 5, 6, 7, 8, 50].map(retryBackoffMs);
    assert.deepEqual(series.slice(0, 3), [
      retryBackoffBaseMs,
      2 * retryBackoffBaseMs,
      4 * retryBackoffBaseMs,
    ]);
    for (let i = 1; i < series.length; i++) {
      const [before, after] = [series[i - 1] ?? 0, series[i] ?? 0];
      assert.ok(after === 2 * before || after === retryBackoffMaxMs, `step ${i}: ${before} → ${after}`);
    }
    assert.equal(series.at(-1), retryBackoffMaxMs);
    assert.equal(retryBackoffMs(1_000), retryBackoffMaxMs, 'huge attempt numbers do not overflow');
  });

  it('is deterministic and refuses attempt numbers below 1', () => {
    assert.equal(retryBackoffMs(3), retryBackoffMs(3));
    assert.throws(() => retryBackoffMs(0), RangeError);
    assert.throws(() => retryBackoffMs(1.5), RangeError);
  });
});

describe('nextDeadline', () => {
  const running = (deadlineMs: number): ActionStatus => ({ state: 'RUNNING', attempt: 1, deadlineMs });

  it('is the earlier of the running attempt and the workflow deadline', () => {
    assert.equal(
      nextDeadline(workflow('RUNNING', [running(500), pending(), pending()], { deadlineMs: 900 })),
      500,
    );
    assert.equal(
      nextDeadline(workflow('RUNNING', [running(950), pending(), pending()], { deadlineMs: 900 })),
      900,
    );
  });

  it('is the workflow deadline between attempts, and undefined before the start or after the end', () => {
    const waiting = workflow('RUNNING', [done, pending(1, { notBeforeMs: 400 }), pending()], {
      deadlineMs: 900,
    });
    assert.equal(nextDeadline(waiting), 900);
    assert.equal(nextDeadline(workflow('PENDING', [pending(), pending(), pending()])), undefined);
    assert.equal(
      nextDeadline(workflow('FAILED', [running(5), pending(), pending()], { deadlineMs: 9 })),
      undefined,
    );
  });
});

describe('classifyReport', () => {
  const running: ActionStatus = { state: 'RUNNING', attempt: 2, deadlineMs: 10, workerId: 'm1' };
  const failed: ActionStatus = { state: 'FAILED', attempt: 2, workerId: 'm1' };
  const report = (attempt: number, actionIndex = 1, workerId = 'm1') => ({ actionIndex, attempt, workerId });

  it('is current for the running attempt from the worker that runs it', () => {
    const wf = workflow('RUNNING', [done, running, pending()]);
    assert.deepEqual(classifyReport(wf, report(2)), { kind: 'current' });
  });

  it('is a duplicate for the current attempt once it is recorded', () => {
    const wf = workflow('FAILED', [done, failed, pending()]);
    assert.deepEqual(classifyReport(wf, report(2)), { kind: 'duplicate' });
  });

  it('refuses, saying why, an attempt never started, an older one, another worker and a bad index', () => {
    const wf = workflow('RUNNING', [done, running, pending()]);
    const refusal = (r: ReturnType<typeof report>) => {
      const standing = classifyReport(wf, r);
      assert.equal(standing.kind, 'refused');
      return standing.kind === 'refused' ? [standing.code, standing.message] : [];
    };
    assert.deepEqual(refusal(report(3)), [
      'E_STALE_ATTEMPT',
      'attempt 3 of action 1 of workflow "w" was never started (the latest is 2)',
    ]);
    assert.deepEqual(refusal(report(0)), [
      'E_STALE_ATTEMPT',
      'attempt 0 of action 1 of workflow "w" was never started (the latest is 2)',
    ]);
    assert.deepEqual(refusal(report(1)), [
      'E_STALE_ATTEMPT',
      'attempt 1 of action 1 of workflow "w" is older than the current attempt 2',
    ]);
    assert.deepEqual(refusal(report(2, 1, 'm2')), [
      'E_STALE_ATTEMPT',
      'attempt 2 of action 1 of workflow "w" ran on worker "m1", not "m2"',
    ]);
    assert.deepEqual(refusal(report(1, 3)), [
      'E_INVALID',
      'actionIndex: 3 is out of range (workflow "w" has 3 actions)',
    ]);
  });
});

describe('cutReport', () => {
  it('keeps a short message and tail as they are', () => {
    assert.deepEqual(cutReport({ message: 'ok', outputTail: 'done\n' }), {
      message: 'ok',
      outputTail: 'done\n',
    });
  });

  it('cuts the message from its head and the output from its end, within the recorded bytes', () => {
    const message = `first ${'é'.repeat(attemptMessageBytesMax)} last`;
    const outputTail = `first ${'€'.repeat(attemptOutputTailBytesMax)} last`;
    const kept = cutReport({ message, outputTail });
    assert.ok(utf8Length(kept.message) <= attemptMessageBytesMax);
    assert.ok(utf8Length(kept.outputTail) <= attemptOutputTailBytesMax);
    assert.ok(kept.message.startsWith('first ') && !kept.message.includes('last'));
    assert.ok(kept.outputTail.endsWith(' last') && !kept.outputTail.includes('first'));
  });
});

// Goal: `workflow create`'s --on-failure and --attempts as the CLI checks them before any call
// (docs/decisions/0037): retry, alternate and race; alternate and race need --selector, and with
// --hardware the error says to give a selector instead of that machine; race's attempts start at 2.
// Method: the pure flag check, src/cli/commands/workflow.ts failurePolicy.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { failurePolicy } from '../../src/cli/commands/workflow.js';
import { UsageError } from '../../src/cli/output.js';

describe('workflow create --on-failure', () => {
  it('takes retry, alternate and race with their attempts', () => {
    assert.deepEqual(failurePolicy({}), {});
    assert.deepEqual(failurePolicy({ onFailure: 'retry' }), { onFailure: 'retry' });
    assert.deepEqual(failurePolicy({ onFailure: 'alternate', selector: 'rack=a' }), {
      onFailure: 'alternate',
      attempts: 3,
    });
    assert.deepEqual(failurePolicy({ onFailure: 'race', selector: 'rack=a' }), {
      onFailure: 'race',
      attempts: 2,
    });
    assert.deepEqual(failurePolicy({ onFailure: 'race', selector: 'rack=a', attempts: '5' }), {
      onFailure: 'race',
      attempts: 5,
    });
  });

  it('refuses a named machine, a race of one, and attempts without a policy, saying why', () => {
    const refused = (o: Parameters<typeof failurePolicy>[0], why: RegExp): void =>
      assert.throws(
        () => failurePolicy(o),
        (e: unknown) => e instanceof UsageError && why.test(e.message),
      );
    refused(
      { onFailure: 'alternate', hardware: 'm1' },
      /^--on-failure alternate needs --selector instead of --hardware m1: .*use --on-failure retry/,
    );
    refused(
      { onFailure: 'race', hardware: 'm1' },
      /^--on-failure race needs --selector instead of --hardware m1/,
    );
    refused(
      { onFailure: 'race', selector: 'a', attempts: '1' },
      /2-16 \(a race starts on two machines\), got 1/,
    );
    refused({ onFailure: 'sprint' }, /must be retry, alternate or race, got "sprint"/);
    refused({ attempts: '2' }, /goes with --on-failure alternate or race/);
  });
});

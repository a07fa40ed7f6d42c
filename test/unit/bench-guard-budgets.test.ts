// The performance guard's rule (bench/guard-budgets.ts): a figure passes while it is at most its
// budget plus the tolerance, a failure names the figure, and a budgets file that is malformed is
// refused with where. Pure logic, held with hand-made budgets.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { Budgets } from '../../bench/guard-budgets.js';
import { judge, parseBudgets, recordBudgets } from '../../bench/guard-budgets.js';

const at = { commit: 'abc1234', date: '2026-11-27', machine: '2 x test', command: 'npm run bench -- guard' };

function budgets(figures: Record<string, number>, tolerance = 0.3): Budgets {
  return {
    tolerance,
    figures: Object.fromEntries(
      Object.entries(figures).map(([k, value]) => [
        k,
        { value, unit: 'CPU ms per write', measured: { ...at, runs: [value] } },
      ]),
    ),
  };
}

test('a figure within 30 % of its budget passes; one past it fails, named, with how far over', () => {
  const b = budgets({ write_leader_cpu_ms: 0.5, control_cpu_ms_per_action_result: 4 });
  const [leader, control] = judge(b, { write_leader_cpu_ms: 0.65, control_cpu_ms_per_action_result: 5.4 });
  assert.equal(leader?.pass, true, 'exactly +30 % still passes');
  assert.equal(leader?.ratio, 1.3);
  assert.equal(leader?.message, undefined);
  assert.equal(control?.pass, false);
  assert.equal(control?.figure, 'control_cpu_ms_per_action_result');
  assert.match(
    control?.message ?? '',
    /^control_cpu_ms_per_action_result: 5\.4 CPU ms per write is 35 % over/,
  );
  assert.match(
    control?.message ?? '',
    /budget 4 \(at most \+30 %; budget measured at abc1234 on 2026-11-27\)/,
  );
});

test('a cheaper figure passes, and the tolerance is the file’s', () => {
  assert.equal(judge(budgets({ f: 1 }), { f: 0.2 })[0]?.pass, true);
  assert.equal(judge(budgets({ f: 1 }, 0.1), { f: 1.15 })[0]?.pass, false);
  assert.equal(judge(budgets({ f: 1 }, 0.1), { f: 1.1 })[0]?.pass, true);
});

test('a budgeted figure the run did not measure fails; an unbudgeted one is not judged', () => {
  const v = judge(budgets({ f: 1 }), { g: 9 });
  assert.equal(v.length, 1);
  assert.equal(v[0]?.pass, false);
  assert.match(v[0]?.message ?? '', /^f: not measured in this run/);
  assert.equal(judge(budgets({ f: 1 }), { f: null })[0]?.pass, false);
  assert.equal(judge(budgets({ f: 1 }), { f: Number.NaN })[0]?.pass, false);
});

test('recorded budgets are the median of the runs, rounded up, with where they came from', () => {
  const prev = budgets({ kept: 2 });
  const next = recordBudgets(
    prev,
    [{ f: 0.8431 }, { f: 0.7002 }, { f: 0.912 }],
    { f: 'CPU ms per write' },
    at,
    'the audit record costs a second entry again',
  );
  assert.equal(next.figures['f']?.value, 0.844);
  assert.deepEqual(next.figures['f']?.measured.runs, [0.8431, 0.7002, 0.912]);
  assert.equal(next.figures['f']?.measured.commit, 'abc1234');
  assert.equal(next.figures['f']?.raised, 'the audit record costs a second entry again');
  assert.equal(next.figures['kept']?.value, 2, 'a figure not measured keeps its budget');
  assert.equal(next.tolerance, 0.3);
  assert.equal(recordBudgets(undefined, [{ f: 12.34 }], { f: 'u' }, at).figures['f']?.value, 12.4);
});

test('a malformed budgets file is refused with what is wrong where', () => {
  assert.throws(() => parseBudgets('{', 'b.json'), /^Error: b\.json: not JSON/);
  assert.throws(
    () => parseBudgets(JSON.stringify({ tolerance: 0.3, figures: { f: { value: -1 } } }), 'b.json'),
    /b\.json: figures\.f\.value: /,
  );
});

test('the budgets in the repo parse, and every one names its measurement', () => {
  const text = readFileSync(new URL('../../bench/budgets.json', import.meta.url), 'utf8');
  const b = parseBudgets(text, 'bench/budgets.json');
  assert.ok(Object.keys(b.figures).length >= 3);
  for (const [name, f] of Object.entries(b.figures)) {
    assert.ok(f.value > 0, name);
    assert.ok(f.measured.runs.length >= 1, name);
  }
});

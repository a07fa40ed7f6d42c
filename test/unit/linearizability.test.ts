// Goal: show the linearizability checker accepts every linearizable register-map history and
// rejects non-linearizable ones (stale reads, lost writes, reads of values never written,
// impossible CAS outcomes), with unknown-outcome operations treated as "maybe, at any later time".
// Method: hand-written histories with known verdicts; then properties over generated histories:
// correct ones are built by choosing a linearization point inside each operation's interval and
// computing outputs from the model in that order, so they are linearizable by construction;
// wrong ones come from a deliberately buggy register, where (for non-overlapping operations) the
// true verdict is simply whether its outputs match the model's. A timed run checks that a few
// thousand concurrent operations on one key are checked quickly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  checkLinearizable,
  describeOp,
  SearchLimitError,
  step,
  type Op,
  type Value,
} from '../support/linearizability.js';

// Builders for readable histories; `unknown` times out: no output, ret = Infinity.
const put = (client: number, key: string, value: Value, call: number, ret: number): Op => ({
  client,
  key,
  kind: 'put',
  input: { value },
  output: { ok: true },
  call,
  ret,
});
const get = (client: number, key: string, value: Value | undefined, call: number, ret: number): Op => ({
  client,
  key,
  kind: 'get',
  input: undefined,
  output: { value },
  call,
  ret,
});
const cas = (
  client: number,
  key: string,
  expected: Value | undefined,
  value: Value,
  ok: boolean,
  call: number,
  ret: number,
): Op => ({ client, key, kind: 'cas', input: { expected, value }, output: { ok }, call, ret });
const del = (client: number, key: string, found: boolean, call: number, ret: number): Op => ({
  client,
  key,
  kind: 'delete',
  input: undefined,
  output: { found },
  call,
  ret,
});
const unknown = (op: Op): Op => ({ ...op, output: undefined, ret: Infinity });

function assertRejected(history: Op[], key: string): string {
  const result = checkLinearizable(history);
  assert.equal(result.ok, false, 'expected a violation');
  assert.ok(!result.ok);
  assert.equal(result.key, key);
  return result.explanation;
}

test('accepts sequential histories that follow the register model', () => {
  const history = [
    get(1, 'x', undefined, 0, 1),
    put(1, 'x', 'a', 2, 3),
    get(2, 'x', 'a', 4, 5),
    cas(2, 'x', 'a', 'b', true, 6, 7),
    cas(1, 'x', 'a', 'c', false, 8, 9),
    del(1, 'x', true, 10, 11),
    del(2, 'x', false, 12, 13),
    cas(1, 'x', undefined, 'd', true, 14, 15),
    get(2, 'x', 'd', 16, 17),
  ];
  assert.deepEqual(checkLinearizable(history), { ok: true });
});

test('accepts concurrent overlapping operations in any order their intervals allow', () => {
  // Two overlapping writes and reads that saw them in the order b, a: legal because the writes
  // overlap each other and the first read.
  const history = [
    put(1, 'x', 'a', 0, 10),
    put(2, 'x', 'b', 1, 8),
    get(3, 'x', 'b', 2, 9),
    get(3, 'x', 'a', 11, 12),
    get(4, 'x', 'a', 13, 14),
  ];
  assert.deepEqual(checkLinearizable(history), { ok: true });
  // A read concurrent with a write may see either value.
  assert.deepEqual(checkLinearizable([put(1, 'y', 'new', 0, 10), get(2, 'y', undefined, 5, 6)]), {
    ok: true,
  });
  assert.deepEqual(checkLinearizable([put(1, 'y', 'new', 0, 10), get(2, 'y', 'new', 5, 6)]), { ok: true });
  // Equal timestamps count as overlapping.
  assert.deepEqual(checkLinearizable([get(2, 'z', 'v', 0, 5), put(1, 'z', 'v', 5, 9)]), { ok: true });
});

test('accepts unknown-outcome operations taking effect late, or never', () => {
  const late = [unknown(put(1, 'x', 'a', 0, 0)), get(2, 'x', undefined, 5, 6), get(2, 'x', 'a', 100, 101)];
  assert.deepEqual(checkLinearizable(late), { ok: true });
  const never = [unknown(put(1, 'x', 'a', 0, 0)), get(2, 'x', undefined, 100, 101)];
  assert.deepEqual(checkLinearizable(never), { ok: true });
  const maybeCas = [
    put(1, 'x', 'a', 0, 1),
    unknown(cas(1, 'x', 'a', 'b', true, 2, 2)),
    get(2, 'x', 'a', 3, 4),
    get(2, 'x', 'b', 5, 6),
  ];
  assert.deepEqual(checkLinearizable(maybeCas), { ok: true });
  const unknownRead = [unknown(get(1, 'x', 'nonsense', 0, 0))];
  assert.deepEqual(checkLinearizable(unknownRead), { ok: true }, 'an unknown read constrains nothing');
});

test('an unknown write cannot take effect twice or undo itself', () => {
  const history = [
    unknown(put(1, 'x', 'a', 0, 0)),
    put(2, 'x', 'b', 1, 2),
    get(3, 'x', 'a', 3, 4),
    get(3, 'x', 'b', 5, 6),
  ];
  assertRejected(history, 'x');
});

test('an unknown write is used only as often as it was issued, even when needed late', () => {
  const twice = (ops: Op[]) => [
    put(1, 'x', 'a', 0, 1),
    ...ops,
    get(2, 'x', 'b', 10, 11),
    put(1, 'x', 'c', 12, 13),
    get(2, 'x', 'b', 14, 15),
  ];
  const one = unknown(put(3, 'x', 'b', 2, 2));
  const other = unknown(put(4, 'x', 'b', 3, 3));
  assertRejected(twice([one]), 'x');
  assert.deepEqual(checkLinearizable(twice([one, other])), { ok: true });
});

test('an unknown write can explain a failed compare-and-set or a missing key', () => {
  const failedCas = [put(1, 'x', 'a', 0, 1), cas(2, 'x', 'a', 'c', false, 3, 4)];
  assertRejected(failedCas, 'x');
  assert.deepEqual(checkLinearizable([...failedCas, unknown(put(3, 'x', 'never-read', 2, 2))]), { ok: true });
  const gone = [put(1, 'x', 'a', 0, 1), del(2, 'x', false, 3, 4)];
  assertRejected(gone, 'x');
  assert.deepEqual(checkLinearizable([...gone, unknown(del(3, 'x', true, 2, 2))]), { ok: true });
});

test('rejects a stale read', () => {
  const explanation = assertRejected(
    [put(1, 'x', 'a', 0, 1), put(1, 'x', 'b', 2, 3), get(2, 'x', 'a', 4, 5)],
    'x',
  );
  assert.match(explanation, /client 2 get → "a" \[4, 5\] returns/);
  assert.match(explanation, /leaving the value "b"/);
});

test('rejects a lost write', () => {
  assertRejected([put(1, 'x', 'a', 0, 1), get(2, 'x', undefined, 2, 3)], 'x');
  assertRejected(
    [put(1, 'x', 'a', 0, 1), put(2, 'x', 'b', 0, 1), get(3, 'x', 'a', 2, 3), get(3, 'x', 'b', 4, 5)],
    'x',
  );
});

test('rejects a read of a value that was never written', () => {
  const explanation = assertRejected([put(1, 'x', 'a', 0, 10), get(2, 'x', 'ghost', 1, 5)], 'x');
  assert.match(explanation, /"ghost"/);
});

test('rejects impossible compare-and-set and delete outcomes', () => {
  assertRejected([cas(1, 'x', undefined, 'a', true, 0, 1), cas(2, 'x', undefined, 'b', true, 2, 3)], 'x');
  assertRejected([put(1, 'x', 'a', 0, 1), cas(2, 'x', 'a', 'b', false, 2, 3)], 'x');
  assertRejected([del(1, 'x', true, 0, 1)], 'x');
  assertRejected([put(1, 'x', 'a', 0, 1), del(1, 'x', true, 2, 3), get(2, 'x', 'a', 4, 5)], 'x');
});

test('checks keys independently and reports the failing key with the fewest operations', () => {
  const history = [
    put(1, 'big', 'a', 0, 1),
    get(1, 'big', 'a', 2, 3),
    put(1, 'big', 'b', 4, 5),
    get(2, 'big', 'a', 6, 7), // stale
    put(1, 'small', 'a', 0, 1),
    get(2, 'small', undefined, 2, 3), // lost
    put(1, 'fine', 'z', 0, 1),
    get(2, 'fine', 'z', 2, 3),
  ];
  assertRejected(history, 'small');
  // Interleaving another key's operations never hides or causes a violation.
  assert.deepEqual(
    checkLinearizable([put(1, 'p', 'a', 0, 1), put(1, 'q', 'b', 2, 3), get(2, 'p', 'a', 4, 5)]),
    {
      ok: true,
    },
  );
});

test('refuses malformed histories with an error naming the operation', () => {
  assert.throws(
    () => checkLinearizable([put(1, 'x', 'a', 5, 4)]),
    /history\[0\] \(put on "x"\): ret 4 is before call 5/,
  );
  assert.throws(
    () => checkLinearizable([get(1, 'x', 'a', 0, 1), { ...unknown(put(1, 'x', 'a', 0, 0)), ret: 7 }]),
    /history\[1\].*needs ret = Infinity, got 7/,
  );
  assert.throws(() => checkLinearizable([get(1, 'x', 'a', Number.NaN, 1)]), /call must be a finite time/);
});

test('describeOp names the client, operation, outcome and interval', () => {
  assert.equal(
    describeOp(cas(3, 'k', undefined, 'v', false, 1, 2)),
    'client 3 cas (absent) → "v": failed [1, 2]',
  );
  assert.equal(describeOp(unknown(del(4, 'k', true, 7, 7))), 'client 4 delete: ? [7, ?]');
});

// ---- generated histories ----

interface OpSpec {
  readonly client: number;
  readonly key: string;
  readonly kind: Op['kind'];
  readonly value: Value;
  readonly expected: Value | undefined;
  /** Idle time before the call, and the call's duration. */
  readonly gap: number;
  readonly duration: number;
  /** Where in the interval the operation takes effect, as a fraction. */
  readonly at: number;
  readonly outcomeUnknown: boolean;
  /** For an unknown outcome: whether it took effect at all. */
  readonly tookEffect: boolean;
}

const values = ['a', 'b', 'c'];
const opSpec = (clients: number): fc.Arbitrary<OpSpec> =>
  fc.record({
    client: fc.nat({ max: clients - 1 }),
    key: fc.constantFrom('x', 'y'),
    kind: fc.constantFrom<Op['kind']>('put', 'get', 'cas', 'delete'),
    value: fc.constantFrom(...values),
    expected: fc.constantFrom(undefined, ...values),
    gap: fc.integer({ min: 0, max: 20 }),
    duration: fc.integer({ min: 1, max: 30 }),
    at: fc.double({ min: 0.01, max: 0.99, noNaN: true }),
    outcomeUnknown: fc.nat({ max: 9 }).map((n) => n === 0),
    tookEffect: fc.boolean(),
  });

/**
 * A history that is linearizable by construction: every operation takes effect at a point
 * inside its interval, and outputs are computed by applying the model in the order of those
 * points. `register` decides each output; the correct one is the model itself.
 */
function buildHistory(
  specs: readonly OpSpec[],
  sequential: boolean,
  register: Register = new ModelRegister(),
): Op[] {
  const clientFreeAt = new Map<number, number>();
  let globalFreeAt = 0;
  const placed = specs.map((s, i) => {
    const start = (sequential ? globalFreeAt : (clientFreeAt.get(s.client) ?? 0)) + s.gap + 1;
    const end = start + s.duration;
    clientFreeAt.set(s.client, end);
    globalFreeAt = end;
    // The tiny tie-breaker keeps points distinct without leaving the interval.
    return { spec: s, call: start, ret: end, point: start + s.at * s.duration + i * 1e-9 };
  });
  const ops: Op[] = new Array<Op>(specs.length);
  const order = placed.map((_, i) => i).sort((a, b) => placed[a]!.point - placed[b]!.point);
  for (const i of order) {
    const { spec, call, ret } = placed[i]!;
    const base = { client: spec.client, key: spec.key, call, ret };
    const skip = spec.outcomeUnknown && !spec.tookEffect;
    let op: Op;
    switch (spec.kind) {
      case 'put':
        if (!skip) register.put(spec.key, spec.value);
        op = { ...base, kind: 'put', input: { value: spec.value }, output: { ok: true } };
        break;
      case 'get':
        op = { ...base, kind: 'get', input: undefined, output: { value: register.get(spec.key) } };
        break;
      case 'cas': {
        const ok = skip ? false : register.cas(spec.key, spec.expected, spec.value);
        op = { ...base, kind: 'cas', input: { expected: spec.expected, value: spec.value }, output: { ok } };
        break;
      }
      case 'delete': {
        const found = skip ? false : register.delete(spec.key);
        op = { ...base, kind: 'delete', input: undefined, output: { found } };
        break;
      }
    }
    ops[i] = spec.outcomeUnknown ? { ...op, output: undefined, ret: Infinity } : op;
  }
  return ops;
}

interface Register {
  put(key: string, value: Value): void;
  get(key: string): Value | undefined;
  cas(key: string, expected: Value | undefined, value: Value): boolean;
  delete(key: string): boolean;
}

class ModelRegister implements Register {
  protected readonly values = new Map<string, Value>();
  put(key: string, value: Value): void {
    this.values.set(key, value);
  }
  get(key: string): Value | undefined {
    return this.values.get(key);
  }
  cas(key: string, expected: Value | undefined, value: Value): boolean {
    if (this.values.get(key) !== expected) return false;
    this.values.set(key, value);
    return true;
  }
  delete(key: string): boolean {
    return this.values.delete(key);
  }
}

/** A register with bugs a real store could have, chosen by `bug`. */
class BuggyRegister extends ModelRegister {
  readonly #bug: 'stale-reads' | 'lost-writes' | 'cas-ignores-expected';
  readonly #replica = new Map<string, Value>();
  #writes = 0;
  constructor(bug: 'stale-reads' | 'lost-writes' | 'cas-ignores-expected') {
    super();
    this.#bug = bug;
  }
  override put(key: string, value: Value): void {
    this.#writes++;
    // lost-writes: every third write is acknowledged but dropped.
    if (this.#bug === 'lost-writes' && this.#writes % 3 === 0) return;
    // stale-reads: reads come from a replica that gets every other write only.
    if (this.#bug === 'stale-reads' && this.#writes % 2 === 0) this.#replica.set(key, value);
    super.put(key, value);
  }
  override get(key: string): Value | undefined {
    return this.#bug === 'stale-reads' ? this.#replica.get(key) : super.get(key);
  }
  override cas(key: string, expected: Value | undefined, value: Value): boolean {
    if (this.#bug !== 'cas-ignores-expected') return super.cas(key, expected, value);
    this.put(key, value);
    return true;
  }
}

test('property: sequential histories from the model are accepted', () => {
  fc.assert(
    fc.property(fc.array(opSpec(3), { maxLength: 60 }), (specs) => {
      const history = buildHistory(specs, true);
      assert.deepEqual(checkLinearizable(history), { ok: true });
    }),
    { numRuns: 200 },
  );
});

test('property: concurrent histories with unknown outcomes, linearizable by construction, are accepted', () => {
  fc.assert(
    fc.property(fc.array(opSpec(4), { maxLength: 80 }), (specs) => {
      const history = buildHistory(specs, false);
      assert.deepEqual(checkLinearizable(history), { ok: true });
    }),
    { numRuns: 200 },
  );
});

test('property: for a buggy register, a sequential history is accepted exactly when its outputs match the model', () => {
  const bugs = ['stale-reads', 'lost-writes', 'cas-ignores-expected'] as const;
  let rejected = 0;
  fc.assert(
    fc.property(
      fc
        .array(opSpec(3), { maxLength: 40 })
        .map((specs) => specs.map((s) => ({ ...s, outcomeUnknown: false }))),
      fc.constantFrom(...bugs),
      (specs, bug) => {
        const buggy = buildHistory(specs, true, new BuggyRegister(bug));
        const correct = buildHistory(specs, true);
        const matches = buggy.every(
          (op, i) => JSON.stringify(op.output) === JSON.stringify(correct[i]!.output),
        );
        const result = checkLinearizable(buggy);
        assert.equal(result.ok, matches, result.ok ? 'accepted a history that differs' : result.explanation);
        if (!result.ok) rejected++;
      },
    ),
    { numRuns: 300 },
  );
  assert.ok(rejected > 30, `the buggy registers should be caught often; caught ${rejected} of 300`);
});

test('property: a stale read after concurrent traffic is rejected, whatever the traffic was', () => {
  fc.assert(
    fc.property(fc.array(opSpec(3), { maxLength: 40 }), fc.constantFrom(...values), (specs, fresh) => {
      const before = buildHistory(specs, false);
      const end = Math.max(0, ...before.map((op) => (op.ret === Infinity ? op.call : op.ret))) + 100;
      // After everything else is over: write `old`, then `fresh`, then read `old` back.
      const old = `${fresh}-old`;
      const history = [...before, put(9, 'x', old, end, end + 1), put(9, 'x', fresh, end + 2, end + 3)];
      history.push(get(8, 'x', old, end + 4, end + 5));
      const result = checkLinearizable(history);
      assert.equal(result.ok, false);
    }),
    { numRuns: 100 },
  );
});

/** Linearizable by exhaustive search: every subset of unknown ops, every order real time allows. */
function bruteForce(ops: readonly Op[]): boolean {
  const known = ops.filter((op) => op.output !== undefined);
  const unknownOps = ops.filter((op) => op.output === undefined && op.kind !== 'get');
  const extend = (order: Op[], left: Op[], state: Value | undefined): boolean => {
    if (left.every((op) => op.output === undefined)) return true;
    return left.some((op, i) => {
      // op may go next only if no other remaining op returned before op was called.
      if (left.some((other) => other !== op && other.ret < op.call)) return false;
      const result = step(state, op);
      return (
        result.ok &&
        extend(
          [...order, op],
          left.filter((_, j) => j !== i),
          result.next,
        )
      );
    });
  };
  for (let mask = 0; mask < 1 << unknownOps.length; mask++) {
    const chosen = unknownOps.filter((_, i) => (mask >> i) & 1);
    if (extend([], [...known, ...chosen], undefined)) return true;
  }
  return false;
}

test('property: on small random histories the checker agrees with exhaustive search', () => {
  const value = fc.constantFrom('a', 'b');
  const maybe = fc.option(value, { nil: undefined });
  const timing = fc.tuple(fc.nat({ max: 12 }), fc.nat({ max: 6 }), fc.nat({ max: 4 }));
  const op: fc.Arbitrary<Op> = fc
    .tuple(fc.constantFrom('put', 'get', 'cas', 'delete'), value, maybe, fc.boolean(), timing)
    .map(([kind, v, other, flag, [call, length, unknownDraw]]): Op => {
      const base = { client: call % 3, key: 'k', call, ret: call + length };
      const op: Op =
        kind === 'put'
          ? { ...base, kind, input: { value: v }, output: { ok: true } }
          : kind === 'get'
            ? { ...base, kind, input: undefined, output: { value: other } }
            : kind === 'cas'
              ? { ...base, kind, input: { expected: other, value: v }, output: { ok: flag } }
              : { ...base, kind, input: undefined, output: { found: flag } };
      return unknownDraw === 0 ? { ...op, output: undefined, ret: Infinity } : op;
    });
  let rejected = 0;
  fc.assert(
    fc.property(fc.array(op, { maxLength: 7 }), (history) => {
      const expected = bruteForce(history);
      assert.equal(checkLinearizable(history).ok, expected);
      if (!expected) rejected++;
    }),
    { numRuns: 400 },
  );
  assert.ok(rejected > 40, `random histories should often be wrong; ${rejected} of 400 were`);
});

test('a search that exceeds its budget throws a clear error instead of running on', () => {
  const history = [
    put(1, 'x', 'a', 0, 1),
    put(2, 'x', 'b', 0, 1),
    get(3, 'x', 'a', 2, 3),
    get(3, 'x', 'b', 4, 5),
  ];
  assert.throws(
    () => checkLinearizable(history, { configurationsMax: 2 }),
    (e: unknown) =>
      e instanceof SearchLimitError && /gave up on key "x" \(4 ops, 0 with unknown outcome\)/.test(e.message),
  );
});

/** A fixed workload: 4,000 ops by 5 overlapping clients on one key, outputs from the model. */
function hotKeyHistory(unknownRate: number): Op[] {
  let seed = 12_345;
  const random = (): number => {
    seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
    return seed / 2 ** 32;
  };
  const specs: OpSpec[] = [];
  for (let i = 0; i < 4_000; i++) {
    specs.push({
      client: Math.floor(random() * 5),
      key: 'hot',
      kind: (['put', 'get', 'get', 'cas', 'delete'] as const)[Math.floor(random() * 5)]!,
      value: `v${Math.floor(random() * 50)}`,
      expected: random() < 0.2 ? undefined : `v${Math.floor(random() * 50)}`,
      gap: Math.floor(random() * 10),
      duration: 1 + Math.floor(random() * 20),
      at: 0.01 + random() * 0.98,
      outcomeUnknown: random() < unknownRate,
      tookEffect: random() < 0.5,
    });
  }
  return buildHistory(specs, false);
}

test('checks thousands of concurrent operations on one key within a bounded search', () => {
  // Speed belongs in benchmarks; here the work is bounded deterministically: the search must
  // finish within a budget of configurations (exceeding it throws SearchLimitError).
  const budget = { configurationsMax: 200_000 };
  assert.deepEqual(checkLinearizable(hotKeyHistory(0.01), budget), { ok: true });
  // A failure must explore everything before it; one corrupted read late in the history.
  const history = hotKeyHistory(0);
  const i = history.findIndex((op, j) => j > 3_000 && op.kind === 'get');
  const broken = history.map((op, j) =>
    j === i ? { ...op, output: { value: 'never-written' } } : op,
  ) as Op[];
  assert.equal(checkLinearizable(broken, budget).ok, false);
});

test('step follows the documented model', () => {
  assert.deepEqual(step(undefined, get(1, 'k', undefined, 0, 1)), { ok: true, next: undefined });
  assert.deepEqual(step('a', cas(1, 'k', 'a', 'b', true, 0, 1)), { ok: true, next: 'b' });
  assert.deepEqual(step('a', cas(1, 'k', 'x', 'b', true, 0, 1)), { ok: false, next: 'a' });
  assert.deepEqual(step('a', cas(1, 'k', 'x', 'b', false, 0, 1)), { ok: true, next: 'a' });
  assert.deepEqual(step('a', del(1, 'k', false, 0, 1)), { ok: false, next: undefined });
});

// A linearizability checker for histories of operations on a map of registers, used by the
// simulation and fault tests to judge what clients observed.
//
// The model. Each key is an independent register holding a string or nothing (undefined),
// initially nothing:
//   put(value)            sets the value; output { ok: true }.
//   get()                 returns the current value, or undefined when absent; output { value }.
//   cas(expected, value)  succeeds iff the current value === expected (undefined expects
//                         absence, like prevRevision 0); on success sets the value.
//                         Output { ok: boolean }.
//   delete()              removes the value; output { found } says whether there was one.
// Keys never interact, so the history is partitioned by key and each part is checked alone
// (P-compositionality, Horn & Kroening 2015). A history is linearizable iff each operation can
// be placed at one instant between its call and its return so that the sequence of those
// instants obeys the model.
//
// Outcomes. An operation whose client saw no answer (a timeout) has output undefined and ret
// Infinity: it may have taken effect at any point after its call, or never. Unknown reads
// constrain nothing and are dropped; unknown writes are optional. Operations the client knows
// did not happen (a definite refusal) should be left out of the history. Equal timestamps
// count as overlapping.
//
// Cost. Write a unique value per put (as Jepsen does): a read then names the write it saw, and
// linearizable histories of a few thousand ops per key check in about a hundred milliseconds.
// Proving a history wrong explores every configuration before the violation; with many
// unknown outcomes that can grow steeply, so the search stops at options.configurationsMax
// with a SearchLimitError rather than hang.
//
// The search is Wing & Gong's, with Lowe's memoization as in Porcupine: keep the call/return
// events in time order; the pending operations called before the earliest pending return are
// the ones that may take effect next. Try each (known outcomes first), descend, and undo the
// choice when nothing works from there. A configuration already explored (the same operations
// linearized, reaching the same register value) is skipped, which keeps typical histories near
// linear time; see ExploredSet for how unknown outcomes are kept from blowing it up.

export type Value = string;

interface OpBase {
  /** Who issued the operation; only used in explanations. */
  readonly client: number;
  readonly key: string;
  /** Invocation time, from one monotonic clock shared by all clients. */
  readonly call: number;
  /** Response time; Infinity when the outcome is unknown. */
  readonly ret: number;
}

export interface PutOp extends OpBase {
  readonly kind: 'put';
  readonly input: { readonly value: Value };
  readonly output: { readonly ok: true } | undefined;
}

export interface GetOp extends OpBase {
  readonly kind: 'get';
  readonly input: undefined;
  readonly output: { readonly value: Value | undefined } | undefined;
}

export interface CasOp extends OpBase {
  readonly kind: 'cas';
  readonly input: { readonly expected: Value | undefined; readonly value: Value };
  readonly output: { readonly ok: boolean } | undefined;
}

export interface DeleteOp extends OpBase {
  readonly kind: 'delete';
  readonly input: undefined;
  readonly output: { readonly found: boolean } | undefined;
}

export type Op = PutOp | GetOp | CasOp | DeleteOp;

export type CheckResult =
  | { readonly ok: true }
  | {
      readonly ok: false;
      /** The failing key with the fewest operations. */
      readonly key: string;
      readonly explanation: string;
    };

type State = Value | undefined;

/**
 * One model step: whether `op` may take effect on `state` with its recorded output, and the
 * state after. An unknown-outcome op is allowed only in the outcome that changes something;
 * its no-effect outcome is covered by never linearizing it at all.
 */
export function step(state: State, op: Op): { readonly ok: boolean; readonly next: State } {
  switch (op.kind) {
    case 'put':
      return { ok: true, next: op.input.value };
    case 'get':
      return { ok: op.output === undefined || op.output.value === state, next: state };
    case 'cas': {
      const matches = state === op.input.expected;
      if (op.output === undefined || op.output.ok)
        return { ok: matches, next: matches ? op.input.value : state };
      return { ok: !matches, next: state };
    }
    case 'delete':
      return { ok: op.output === undefined || op.output.found === (state !== undefined), next: undefined };
    default:
      return unreachable(op);
  }
}

export interface CheckOptions {
  /**
   * The most configurations the search may explore for one key before giving up with a
   * SearchLimitError. Linearizable histories and failing histories with few unknown outcomes
   * need about one per operation; a failing history with many unknown outcomes can need far
   * more (the problem is NP-complete), and this turns a hang into a clear error.
   */
  readonly configurationsMax?: number;
}

/** The search gave up: the history is too long or has too many unknown outcomes to decide. */
export class SearchLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SearchLimitError';
  }
}

const configurationsMaxDefault = 2_000_000;

/**
 * Checks the whole history. Throws a RangeError naming the operation when one is malformed,
 * and a SearchLimitError when a key's search exceeds options.configurationsMax.
 */
export function checkLinearizable(history: readonly Op[], options: CheckOptions = {}): CheckResult {
  const configurationsMax = options.configurationsMax ?? configurationsMaxDefault;
  const byKey = new Map<string, Op[]>();
  history.forEach((op, i) => {
    validate(op, i);
    // An unknown read returned nothing to anyone: it cannot witness a violation.
    if (op.kind === 'get' && op.output === undefined) return;
    const part = byKey.get(op.key);
    if (part === undefined) byKey.set(op.key, [op]);
    else part.push(op);
  });
  let worst: { key: string; explanation: string; size: number } | undefined;
  const keys = [...byKey.keys()].sort();
  for (const key of keys) {
    const ops = byKey.get(key)!;
    if (worst !== undefined && ops.length >= worst.size) continue;
    const failure = checkRegister(ops, key, configurationsMax);
    if (failure !== undefined)
      worst = { key, explanation: `key ${JSON.stringify(key)}: ${failure}`, size: ops.length };
  }
  return worst === undefined ? { ok: true } : { ok: false, key: worst.key, explanation: worst.explanation };
}

function validate(op: Op, i: number): void {
  const where = `history[${i}] (${op.kind} on ${JSON.stringify(op.key)})`;
  if (!['put', 'get', 'cas', 'delete'].includes(op.kind)) throw new RangeError(`${where}: unknown kind`);
  if (!Number.isFinite(op.call)) throw new RangeError(`${where}: call must be a finite time, got ${op.call}`);
  if (op.output === undefined && op.ret !== Infinity) {
    throw new RangeError(
      `${where}: an unknown outcome (output undefined) needs ret = Infinity, got ${op.ret}`,
    );
  }
  if (op.output !== undefined && !Number.isFinite(op.ret)) {
    throw new RangeError(`${where}: a known outcome needs a finite ret, got ${op.ret}`);
  }
  if (op.ret < op.call) throw new RangeError(`${where}: ret ${op.ret} is before call ${op.call}`);
}

const nil = -1;

/** One level of the depth-first search: a configuration and the choices left to try from it. */
interface Frame {
  /** Ops that may take effect next here: known ones first, then unknown ones. */
  readonly candidates: readonly number[];
  next: number;
  /** The op whose linearization created this configuration (-1 at the root), and the value before it. */
  readonly lifted: number;
  readonly before: State;
}

/**
 * Set right after an unknown-outcome op takes effect: the value before it. Only ops that could
 * not take effect from that value are offered next (see candidates()).
 */
type Guard = { readonly before: State } | undefined;

/** Checks one register's history; returns why it is not linearizable, or undefined when it is. */
function checkRegister(history: readonly Op[], key: string, configurationsMax: number): string | undefined {
  const ops = abstractValues(history);
  const n = ops.length;
  const isKnown = (i: number): boolean => ops[i]!.output !== undefined;
  // Known and unknown ops are numbered separately: the explored set keys them differently.
  // Unknown ops are numbered in call order, which the symmetry rule in candidates() relies on.
  const slot = new Int32Array(n);
  let knownCount = 0;
  for (let i = 0; i < n; i++) if (isKnown(i)) slot[i] = knownCount++;
  const unknownOps = ops.map((_, i) => i).filter((i) => !isKnown(i));
  unknownOps.sort((a, b) => ops[a]!.call - ops[b]!.call || a - b);
  unknownOps.forEach((i, u) => (slot[i] = u));
  const unknownCount = unknownOps.length;
  const effect = ops.map((op) => JSON.stringify([op.kind, op.input ?? null]));

  // Events: 2i is op i's call, 2i + 1 its return. Unknown ops have no return event: nothing
  // ever forces them to be linearized.
  const events: number[] = [];
  for (let i = 0; i < n; i++) {
    events.push(2 * i);
    if (isKnown(i)) events.push(2 * i + 1);
  }
  const time = (e: number): number => (e % 2 === 0 ? ops[e >> 1]!.call : ops[e >> 1]!.ret);
  // Calls before returns at equal times: simultaneous operations are treated as concurrent.
  events.sort((a, b) => time(a) - time(b) || (a % 2) - (b % 2) || a - b);

  // A doubly linked list over event ids, with a head sentinel at index 2n. Removal keeps the
  // removed node's links, so undoing removals in reverse order restores the list (dancing links).
  const head = 2 * n;
  const next = new Int32Array(2 * n + 1).fill(nil);
  const prev = new Int32Array(2 * n + 1).fill(nil);
  let last = head;
  for (const e of events) {
    next[last] = e;
    prev[e] = last;
    last = e;
  }
  const unlink = (e: number): void => {
    next[prev[e]!] = next[e]!;
    if (next[e] !== nil) prev[next[e]!] = prev[e]!;
  };
  const relink = (e: number): void => {
    next[prev[e]!] = e;
    if (next[e] !== nil) prev[next[e]!] = e;
  };
  /**
   * The pending ops called before the earliest pending return: those may take effect next.
   * Known ones come first, so the search meets configurations with fewer unknown ops used
   * first. Of several pending unknown ops with the same effect only the earliest-called is
   * offered: all are already called and none ever returns, so they are interchangeable, and
   * always using the earliest keeps the used ones a prefix that subsumption can compare.
   *
   * Right after an unknown op u, an op o is offered only if o could not take effect from the
   * value before u: otherwise u can be moved after o (o leaves the value alone) or dropped (o
   * overwrites it, or u changed nothing), so some other order covers it. Unknown ops thus take
   * effect only just before an op that needs them, which keeps them from multiplying states.
   */
  const candidates = (guard: Guard): number[] => {
    const known: number[] = [];
    const unknown: number[] = [];
    const effects = new Set<string>();
    for (let e = next[head]!; e !== nil && e % 2 === 0; e = next[e]!) {
      const i = e >> 1;
      if (guard !== undefined && step(guard.before, ops[i]!).ok) continue;
      if (isKnown(i)) known.push(i);
      else if (!effects.has(effect[i]!)) {
        effects.add(effect[i]!);
        unknown.push(i);
      }
    }
    return known.concat(unknown);
  };
  const firstReturn = (): number => {
    let e = next[head]!;
    while (e !== nil && e % 2 === 0) e = next[e]!;
    return e;
  };

  const knownBits = new Uint32Array(Math.ceil(knownCount / 32));
  const unknownBits = new Uint32Array(Math.ceil(unknownCount / 32));
  const flip = (i: number): void => {
    const bits = isKnown(i) ? knownBits : unknownBits;
    bits[slot[i]! >> 5]! ^= 1 << (slot[i]! & 31);
  };
  const explored = new ExploredSet(knownCount);
  let pendingKnown = knownCount;
  let state: State = undefined;
  const frames: Frame[] = [{ candidates: candidates(undefined), next: 0, lifted: nil, before: undefined }];
  // For the explanation: the deepest partial linearization and the op it could not get past.
  let best: { order: number[]; blocked: number } | undefined;
  let configurations = 0;

  while (pendingKnown > 0) {
    const frame = frames[frames.length - 1]!;
    if (frame.next < frame.candidates.length) {
      const i = frame.candidates[frame.next++]!;
      const result = step(state, ops[i]!);
      if (!result.ok) continue;
      flip(i);
      if (isKnown(i)) explored.toggle(slot[i]!);
      const guard: Guard = isKnown(i) ? undefined : { before: state };
      if (!explored.add(knownBits, unknownBits, result.next, guard)) {
        flip(i);
        if (isKnown(i)) explored.toggle(slot[i]!);
        continue;
      }
      if (++configurations > configurationsMax) {
        throw new SearchLimitError(
          `gave up on key ${JSON.stringify(key)} (${n} ops, ${unknownCount} with unknown outcome) after ${configurationsMax} configurations; check a shorter history or one with fewer timeouts`,
        );
      }
      unlink(2 * i);
      if (isKnown(i)) {
        unlink(2 * i + 1);
        pendingKnown--;
      }
      frames.push({ candidates: candidates(guard), next: 0, lifted: i, before: state });
      state = result.next;
      continue;
    }
    // Every choice from here failed: the earliest pending return cannot be met. Undo one step.
    const depth = frames.length - 1;
    if (best === undefined || depth > best.order.length) {
      best = { order: frames.slice(1).map((f) => f.lifted), blocked: firstReturn() >> 1 };
    }
    if (frames.length === 1) return explain(history, best);
    frames.pop();
    const i = frame.lifted;
    flip(i);
    if (isKnown(i)) {
      explored.toggle(slot[i]!);
      relink(2 * i + 1);
      pendingKnown++;
    }
    relink(2 * i);
    state = frame.before;
  }
  return undefined;
}

/**
 * Replaces every written value that no operation observes (no get returns it, no cas expects
 * it) by one opaque value. Such values behave identically under every operation in the
 * history, so merging them loses nothing and collapses the states the search must tell apart;
 * with unique values per write, as test clients usually choose, most unknown writes become
 * interchangeable.
 */
function abstractValues(history: readonly Op[]): Op[] {
  const observed = new Set<Value>();
  for (const op of history) {
    if (op.kind === 'get' && op.output?.value !== undefined) observed.add(op.output.value);
    if (op.kind === 'cas' && op.input.expected !== undefined) observed.add(op.input.expected);
  }
  let opaque = '\u0000unobserved';
  while (observed.has(opaque)) opaque += '\u0000';
  const abstract = (v: Value): Value => (observed.has(v) ? v : opaque);
  return history.map((op): Op => {
    if (op.kind === 'put') return { ...op, input: { value: abstract(op.input.value) } };
    if (op.kind === 'cas')
      return { ...op, input: { expected: op.input.expected, value: abstract(op.input.value) } };
    return op;
  });
}

/**
 * The configurations already explored, with subsumption for unknown-outcome ops. A
 * configuration is (known ops linearized, unknown ops linearized, register value). Unknown ops
 * are optional and never expire, so having used fewer of them is never worse: a configuration
 * is skipped when one with the same known set and value and a subset of its unknown ops was
 * seen. Without this, each pending unknown op would double the configurations a failing
 * search must exhaust; the search tries known ops first so the smaller sets are seen first.
 *
 * The known set is hashed incrementally (Zobrist: each op owns a random-looking 32-bit word,
 * the hash is the XOR of the members' words); equal hashes are confirmed by comparing sets.
 */
class ExploredSet {
  readonly #words: Uint32Array;
  #hash = 0;
  readonly #buckets = new Map<
    number,
    { known: Uint32Array; state: State; guard: Guard; unknownSets: Uint32Array[] }[]
  >();

  constructor(knownCount: number) {
    this.#words = new Uint32Array(knownCount);
    for (let i = 0; i < knownCount; i++) this.#words[i] = mix32(i + 1);
  }

  /** Flips known op k's membership in the hash (the caller flips the bit itself). */
  toggle(k: number): void {
    this.#hash = (this.#hash ^ this.#words[k]!) >>> 0;
  }

  /**
   * Records the configuration; false when it, or one that subsumes it, was already explored.
   * The guard is part of the configuration: it narrows the next choices (see candidates), so
   * an unguarded configuration also subsumes a guarded one.
   */
  add(known: Uint32Array, unknown: Uint32Array, state: State, guard: Guard): boolean {
    let bucket = this.#buckets.get(this.#hash);
    if (bucket === undefined) {
      bucket = [];
      this.#buckets.set(this.#hash, bucket);
    }
    const same = (b: { known: Uint32Array; state: State }): boolean =>
      b.state === state && equalBits(b.known, known);
    const unguarded = bucket.find((b) => b.guard === undefined && same(b));
    if (guard !== undefined && unguarded?.unknownSets.some((seen) => isSubset(seen, unknown)) === true)
      return false;
    const entry =
      guard === undefined
        ? unguarded
        : bucket.find((b) => b.guard !== undefined && b.guard.before === guard.before && same(b));
    if (entry === undefined) {
      bucket.push({ known: known.slice(), state, guard, unknownSets: [unknown.slice()] });
      return true;
    }
    if (entry.unknownSets.some((seen) => isSubset(seen, unknown))) return false;
    // Sets the new one subsumes can never prune anything it would not: drop them.
    entry.unknownSets = entry.unknownSets.filter((seen) => !isSubset(unknown, seen));
    entry.unknownSets.push(unknown.slice());
    return true;
  }
}

function equalBits(a: Uint32Array, b: Uint32Array): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function isSubset(a: Uint32Array, b: Uint32Array): boolean {
  for (let i = 0; i < a.length; i++) if ((a[i]! & ~b[i]!) !== 0) return false;
  return true;
}

/** A 32-bit integer hash (the finalizer of MurmurHash3): spreads consecutive ids across all bits. */
function mix32(x: number): number {
  let h = x >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

function explain(ops: readonly Op[], best: { order: number[]; blocked: number } | undefined): string {
  if (best === undefined) return `${ops.length} ops; no operation can be linearized first`;
  // Replay on the original ops: the search ran on abstracted values, which show less.
  const value = best.order.reduce<State>((state, i) => step(state, ops[i]!).next, undefined);
  const shown = value === undefined ? '(absent)' : JSON.stringify(value);
  const tail = best.order.slice(-3).map((i) => describeOp(ops[i]!));
  const prefix =
    best.order.length === 0
      ? 'no operation can be linearized before it'
      : `the longest linearizable prefix has ${best.order.length} of them, ending ${tail.join('; ')}, leaving the value ${shown}`;
  return `${ops.length} ops; ${prefix}. Then ${describeOp(ops[best.blocked]!)} returns, but no order of the pending operations lets it take effect`;
}

/** One operation in words, e.g. `client 2 get → "a" [30, 40]`. */
export function describeOp(op: Op): string {
  const show = (v: Value | undefined): string => (v === undefined ? '(absent)' : JSON.stringify(v));
  const when = `[${op.call}, ${op.ret === Infinity ? '?' : op.ret}]`;
  let what: string;
  switch (op.kind) {
    case 'put':
      what = `put ${show(op.input.value)}`;
      break;
    case 'get':
      what = `get → ${op.output === undefined ? '?' : show(op.output.value)}`;
      break;
    case 'cas': {
      const outcome = op.output === undefined ? '?' : op.output.ok ? 'ok' : 'failed';
      what = `cas ${show(op.input.expected)} → ${show(op.input.value)}: ${outcome}`;
      break;
    }
    case 'delete':
      what = `delete: ${op.output === undefined ? '?' : op.output.found ? 'found' : 'not found'}`;
      break;
    default:
      return unreachable(op);
  }
  return `client ${op.client} ${what} ${when}`;
}

function unreachable(x: never): never {
  throw new Error(`unreachable: ${JSON.stringify(x)}`);
}

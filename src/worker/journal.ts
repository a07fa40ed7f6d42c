// The worker agent's journal on the machine's disk: the attempt it is running, the results the
// cluster has not acknowledged yet, and the attempts it has already executed. It is what lets a
// result survive a crash of the agent or of the node it talks to (invariant 3: the worker keeps
// a result until the cluster acknowledges it, and never runs one attempt twice).
//
// Durability: every change rewrites the whole journal (it is small) into a temporary file,
// fsyncs it, renames it over the journal and fsyncs the directory, all before the promise
// resolves. A crash at any point leaves either the old journal or the new one, never a mix.
//
// A reboot, poweroff or kexec action leaves a pending machine effect, journaled with its result
// in one write: the agent performs it once the cluster acknowledges that result, and the boot id
// it records tells a restarted agent whether the machine has gone down since (see agent.ts).
//
// File format: a header line `slipway-worker-journal 1 sha256=HEX`, then one line of JSON. The
// checksum covers the JSON line exactly as written. A journal that fails any check is refused
// with an error naming the file: it may hold results recorded nowhere else, so it is never
// silently replaced.
import { attemptKey } from '../model/records.js';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdir, open, readFile, rename } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { machineEffects, type MachineEffect } from './machine-control.js';

/** Mirrors proto/worker.proto AttemptRef. */
export interface AttemptRef {
  readonly workflowId: string;
  /** The action's position in the workflow's flat list of actions. */
  readonly actionIndex: number;
  readonly attempt: number;
}

/** Mirrors proto/worker.proto ActionResult. */
export interface ActionResult {
  readonly attempt: AttemptRef;
  readonly success: boolean;
  readonly exitStatus: number;
  readonly message: string;
  readonly outputTail: string;
}

/** A machine effect that waits for the cluster to acknowledge the result of `attempt`. */
export interface PendingEffect {
  readonly attempt: AttemptRef;
  readonly effect: MachineEffect;
  /** The machine's boot id when the effect was asked for (MachineControl.bootId). */
  readonly bootId: string;
}

export interface JournalOptions {
  /** Executed attempts remembered, newest kept. Default 1000. */
  readonly executedMax?: number;
  /** Unacknowledged results held; one more is refused. Default 1000. */
  readonly pendingMax?: number;
}

export const journalFileName = 'journal.json';
export const executedMaxDefault = 1000;
export const pendingMaxDefault = 1000;
const formatHeader = 'slipway-worker-journal 1';

/** The journal on disk cannot be read as a journal; it names the file and what is wrong. */
export class JournalCorruptError extends Error {
  readonly file: string;

  constructor(file: string, reason: string) {
    super(
      `worker journal ${file} is corrupted: ${reason}. It may hold results the cluster has not ` +
        'recorded; inspect it, then move it aside to start with an empty journal.',
    );
    this.name = 'JournalCorruptError';
    this.file = file;
  }
}

/** No room for another unacknowledged result: the agent must stop running actions. */
export class JournalFullError extends Error {
  constructor(file: string, pendingMax: number) {
    super(`worker journal ${file} already holds ${pendingMax} unacknowledged results; not accepting more`);
    this.name = 'JournalFullError';
  }
}

const attemptRefSchema = z.strictObject({
  workflowId: z.string().min(1),
  actionIndex: z.number().int().nonnegative(),
  attempt: z.number().int().nonnegative(),
});

const bodySchema = z.strictObject({
  running: attemptRefSchema.nullable(),
  pending: z.array(
    z.strictObject({
      attempt: attemptRefSchema,
      success: z.boolean(),
      exitStatus: z.number().int(),
      message: z.string(),
      outputTail: z.string(),
    }),
  ),
  executed: z.array(attemptRefSchema),
  // Absent in journals without one, which so stay readable by agents that predate effects.
  effect: z
    .strictObject({
      attempt: attemptRefSchema,
      effect: z.enum(machineEffects as [MachineEffect, ...MachineEffect[]]),
      bootId: z.string().min(1),
    })
    .optional(),
});

interface JournalState {
  readonly running: AttemptRef | undefined;
  readonly pending: readonly ActionResult[];
  /** Oldest first, at most executedMax. */
  readonly executed: readonly AttemptRef[];
  readonly effect?: PendingEffect;
}

const emptyState: JournalState = { running: undefined, pending: [], executed: [] };

export function sameAttempt(a: AttemptRef, b: AttemptRef): boolean {
  return a.workflowId === b.workflowId && a.actionIndex === b.actionIndex && a.attempt === b.attempt;
}

export class ResultJournal {
  readonly #dir: string;
  readonly #file: string;
  readonly #executedMax: number;
  readonly #pendingMax: number;
  #state: JournalState;
  /** Keys of state.executed, for hasExecuted in constant time. */
  #executedKeys: Set<string>;
  /** Changes run one after another: each builds on the last one written. */
  #queue: Promise<void> = Promise.resolve();

  private constructor(dir: string, state: JournalState, options: Required<JournalOptions>) {
    this.#dir = dir;
    this.#file = path.join(dir, journalFileName);
    this.#executedMax = options.executedMax;
    this.#pendingMax = options.pendingMax;
    this.#state = state;
    this.#executedKeys = new Set(state.executed.map(attemptKey));
  }

  /** Opens the journal in `dir` (created if missing). Rejects with JournalCorruptError. */
  static async open(dir: string, options: JournalOptions = {}): Promise<ResultJournal> {
    const limits = {
      executedMax: options.executedMax ?? executedMaxDefault,
      pendingMax: options.pendingMax ?? pendingMaxDefault,
    };
    for (const [name, value] of Object.entries(limits)) {
      if (!Number.isSafeInteger(value) || value < 1) {
        throw new RangeError(`ResultJournal option ${name} must be a positive integer, got ${value}`);
      }
    }
    await mkdir(dir, { recursive: true });
    const file = path.join(dir, journalFileName);
    const state = await readJournal(file);
    return new ResultJournal(dir, state, limits);
  }

  get file(): string {
    return this.#file;
  }

  /** The attempt whose process was started and has no result yet. */
  running(): AttemptRef | undefined {
    return this.#state.running;
  }

  /** Results not acknowledged by the cluster, oldest first. */
  pending(): readonly ActionResult[] {
    return this.#state.pending;
  }

  /** The machine effect waiting for its attempt's acknowledgement (or to be performed). */
  effect(): PendingEffect | undefined {
    return this.#state.effect;
  }

  /** The effect was performed, or must not be: forget it. */
  clearEffect(): Promise<void> {
    return this.#change((state) => {
      if (state.effect === undefined) return undefined;
      const { effect: _done, ...rest } = state;
      return rest;
    });
  }

  /** Whether this attempt was ever started here (within the remembered history). */
  hasExecuted(ref: AttemptRef): boolean {
    const { running, pending } = this.#state;
    return (
      this.#executedKeys.has(attemptKey(ref)) ||
      (running !== undefined && sameAttempt(running, ref)) ||
      pending.some((result) => sameAttempt(result.attempt, ref))
    );
  }

  /**
   * Records the attempt about to start (also as executed, so it is never started again), or
   * clears it. Call before spawning: after a crash the agent knows the attempt may have run.
   */
  setRunning(ref: AttemptRef | undefined): Promise<void> {
    if (ref !== undefined) assertAttemptRef(ref);
    return this.#change((state) => {
      if (ref === undefined)
        return state.running === undefined ? undefined : { ...state, running: undefined };
      return { ...state, running: copyRef(ref), executed: this.#withExecuted(state.executed, ref) };
    });
  }

  /**
   * Keeps a result until acknowledge(). Clears `running` if it is this attempt. A second result
   * for an attempt already pending is ignored: the first one is what the cluster will record.
   * `effect`, written in the same change, waits for this result's acknowledgement.
   */
  addResult(result: ActionResult, effect?: PendingEffect): Promise<void> {
    assertAttemptRef(result.attempt);
    assert.equal(typeof result.success, 'boolean');
    assert.ok(Number.isSafeInteger(result.exitStatus), 'exitStatus must be an integer');
    return this.#change((state) => {
      if (state.pending.some((pending) => sameAttempt(pending.attempt, result.attempt))) return undefined;
      if (state.pending.length >= this.#pendingMax) throw new JournalFullError(this.#file, this.#pendingMax);
      const running =
        state.running !== undefined && sameAttempt(state.running, result.attempt) ? undefined : state.running;
      const next = {
        running,
        pending: [...state.pending, copyResult(result)],
        executed: this.#withExecuted(state.executed, result.attempt),
      };
      if (effect !== undefined) {
        return { ...next, effect: { ...effect, attempt: copyRef(effect.attempt) } };
      }
      return state.effect === undefined ? next : { ...next, effect: state.effect };
    });
  }

  /** The cluster recorded (or refused) this attempt's result: forget it. Unknown refs are a no-op. */
  acknowledge(ref: AttemptRef): Promise<void> {
    return this.#change((state) => {
      const pending = state.pending.filter((result) => !sameAttempt(result.attempt, ref));
      return pending.length === state.pending.length ? undefined : { ...state, pending };
    });
  }

  #withExecuted(executed: readonly AttemptRef[], ref: AttemptRef): readonly AttemptRef[] {
    if (executed.some((known) => sameAttempt(known, ref))) return executed;
    const next = [...executed, copyRef(ref)];
    return next.length > this.#executedMax ? next.slice(next.length - this.#executedMax) : next;
  }

  /** Applies `next` to the latest state and makes it durable; `undefined` means no change. */
  #change(next: (state: JournalState) => JournalState | undefined): Promise<void> {
    const run = this.#queue.then(async () => {
      const state = next(this.#state);
      if (state === undefined) return;
      await this.#write(state);
      this.#state = state;
      this.#executedKeys = new Set(state.executed.map(attemptKey));
    });
    // A failed write rejects its caller; the changes queued behind it still run.
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #write(state: JournalState): Promise<void> {
    const temporary = `${this.#file}.tmp`;
    const handle = await open(temporary, 'w', 0o600);
    try {
      await handle.writeFile(encodeJournal(state));
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, this.#file);
    // The rename is durable only once the directory entry is.
    const directory = await open(this.#dir, 'r');
    try {
      await directory.sync();
    } finally {
      await directory.close();
    }
  }
}

function encodeJournal(state: JournalState): string {
  const body = JSON.stringify({
    running: state.running ?? null,
    pending: state.pending,
    executed: state.executed,
    ...(state.effect === undefined ? {} : { effect: state.effect }),
  });
  return `${formatHeader} sha256=${sha256Hex(body)}\n${body}\n`;
}

async function readJournal(file: string): Promise<JournalState> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return emptyState;
    throw error;
  }
  const lines = text.split('\n');
  const header = lines[0] ?? '';
  const body = lines[1] ?? '';
  const checksum = /^slipway-worker-journal (\d+) sha256=([0-9a-f]{64})$/.exec(header);
  if (checksum === null) throw new JournalCorruptError(file, 'the first line is not a journal header');
  if (`slipway-worker-journal ${checksum[1]}` !== formatHeader) {
    throw new JournalCorruptError(file, `unknown format version ${checksum[1]}`);
  }
  if (lines.length !== 3 || lines[2] !== '')
    throw new JournalCorruptError(file, 'the file is truncated or has extra lines');
  if (sha256Hex(body) !== checksum[2]) throw new JournalCorruptError(file, 'checksum mismatch');
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (error) {
    throw new JournalCorruptError(file, `bad JSON (${(error as Error).message})`);
  }
  const checked = bodySchema.safeParse(parsed);
  if (!checked.success) {
    const issue = checked.error.issues[0];
    throw new JournalCorruptError(
      file,
      `unexpected content at ${issue?.path.join('.') ?? '?'}: ${issue?.message ?? ''}`,
    );
  }
  const { running, pending, executed, effect } = checked.data;
  const state = { running: running ?? undefined, pending, executed };
  return effect === undefined ? state : { ...state, effect };
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Copies only the known fields: a proto message may carry more, and the caller may mutate it. */
function copyRef(ref: AttemptRef): AttemptRef {
  return { workflowId: ref.workflowId, actionIndex: ref.actionIndex, attempt: ref.attempt };
}

function copyResult(result: ActionResult): ActionResult {
  return {
    attempt: copyRef(result.attempt),
    success: result.success,
    exitStatus: result.exitStatus,
    message: result.message,
    outputTail: result.outputTail,
  };
}

function assertAttemptRef(ref: AttemptRef): void {
  assert.ok(
    typeof ref.workflowId === 'string' && ref.workflowId !== '',
    'attempt.workflowId must be a non-empty string',
  );
  assert.ok(
    Number.isSafeInteger(ref.actionIndex) && ref.actionIndex >= 0,
    'attempt.actionIndex must be an index',
  );
  assert.ok(
    Number.isSafeInteger(ref.attempt) && ref.attempt >= 0,
    'attempt.attempt must be a non-negative integer',
  );
}

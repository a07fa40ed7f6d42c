// `npm run bench -- write-path [--quick]`
// The CPU cost of each step a replicated write takes inside one slipway process, measured in
// isolation: encoding the command, the raft transport's message codec, the synced LevelDB write
// of a Ready, and apply. Each line reports CPU microseconds (user + system, from
// process.cpuUsage) per operation, which stays comparable on a shared machine where wall-clock
// throughput does not. The end-to-end figures are in `npm run bench -- raft`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Entry, Message } from '../src/raft/index.js';
import { message, LevelLogStore, decodeEnvelopeMessages, encodeMessageFrame } from '../src/raft/index.js';
import type { Command, ControlCommand } from '../src/state/index.js';
import { decodeCommand, decodeResult, encodeCommand, encodeResult, KvStore } from '../src/state/index.js';
import { round } from './stats.js';

interface Options {
  readonly quick: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: { quick: { type: 'boolean', default: false } },
    strict: true,
  });
  return { quick: values.quick };
}

function emit(line: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

interface Cost {
  readonly cpu_us_per_op: number;
  readonly wall_us_per_op: number;
  readonly ops: number;
}

/** Runs `op` `count` times after a warm-up of a tenth as many; CPU and wall time per call. */
async function measure(count: number, op: (i: number) => unknown): Promise<Cost> {
  const warmup = Math.max(1, Math.floor(count / 10));
  // Awaited only when it returns a promise: an await per synchronous call would cost a
  // microtask turn, more than some of the steps measured here.
  const run = async (i: number): Promise<void> => {
    const done = op(i);
    if (done instanceof Promise) await done;
  };
  for (let i = 0; i < warmup; i++) await run(i);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const done = op(warmup + i);
    if (done instanceof Promise) await done;
  }
  const cpu = process.cpuUsage(cpu0);
  const wallMs = performance.now() - t0;
  return {
    cpu_us_per_op: round((cpu.user + cpu.system) / count, 2),
    wall_us_per_op: round((wallMs * 1000) / count, 2),
    ops: count,
  };
}

/** The bench's 256-byte value, shared so that building a command allocates no value. */
const benchValue = new Uint8Array(256).fill(0x76);

/** A put as the Kv API proposes it: the bench's 256-byte value, and a session tag unless
 *  `sessionless` (apply then skips the session table, which has its own bound). */
function putCommand(i: number, sessionless = false): Command {
  const put = {
    type: 'put',
    ns: 'kv',
    key: `bench/key-${i}`,
    value: benchValue,
    stampMs: 1_700_000_000_000 + i,
  } as const;
  return sessionless ? put : { ...put, session: { clientId: 7, seq: i + 1, ackedSeq: i } };
}

/** A worker's result, the most frequent control command on the dispatch path. */
function resultCommand(i: number): Command {
  const command: ControlCommand = {
    type: 'attempt.result',
    workflowId: `b1023a67-8283-4dd7-813b-${String(i).padStart(12, '0')}`,
    actionIndex: 3,
    attempt: 1,
    workerId: `machine-${i % 50}`,
    success: true,
    exitStatus: 0,
    message: 'ok',
    outputTail: 'wrote 4096 blocks\n',
  };
  return { type: 'control', command, stampMs: 1_700_000_000_000 + i };
}

function appendMessage(entries: readonly Entry[]): Message {
  const first = entries[0];
  return message({
    type: 'app',
    from: 'n1',
    to: 'n2',
    term: 3,
    index: (first?.index ?? 1) - 1,
    logTerm: 3,
    commit: (first?.index ?? 1) - 1,
    entries,
  });
}

function entriesOf(data: Uint8Array, firstIndex: number, count: number): Entry[] {
  return Array.from({ length: count }, (_, i) => ({ term: 3, index: firstIndex + i, type: 'normal', data }));
}

async function benchCommands(n: number): Promise<void> {
  const put = encodeCommand(putCommand(1));
  const result = encodeCommand(resultCommand(1));
  emit({
    bench: 'write_path',
    step: 'encode_put_command',
    bytes: put.byteLength,
    ...(await measure(n, (i) => encodeCommand(putCommand(i)))),
  });
  emit({ bench: 'write_path', step: 'decode_put_command', ...(await measure(n, () => decodeCommand(put))) });
  emit({
    bench: 'write_path',
    step: 'encode_control_result_command',
    bytes: result.byteLength,
    ...(await measure(n, (i) => encodeCommand(resultCommand(i)))),
  });
  emit({
    bench: 'write_path',
    step: 'decode_control_result_command',
    ...(await measure(n, () => decodeCommand(result))),
  });
  const putResult = encodeResult({ type: 'put', revision: 12 });
  emit({
    bench: 'write_path',
    step: 'decode_put_result',
    ...(await measure(n, () => decodeResult(putResult))),
  });
}

async function benchTransport(n: number): Promise<void> {
  const data = encodeCommand(putCommand(1));
  for (const count of [0, 1, 8, 64]) {
    const m = appendMessage(entriesOf(data, 100, count));
    const frame = encodeMessageFrame(m);
    const encode = await measure(n, () => encodeMessageFrame(m));
    const decode = await measure(n, () => decodeEnvelopeMessages(frame));
    emit({
      bench: 'write_path',
      step: 'transport_encode_app',
      entries: count,
      bytes: frame.byteLength,
      ...encode,
    });
    emit({ bench: 'write_path', step: 'transport_decode_app', entries: count, ...decode });
  }
}

async function benchStorage(n: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'slipway-write-path-'));
  const store = new LevelLogStore({ dir });
  try {
    await store.load();
    const data = encodeCommand(putCommand(1));
    let next = 1;
    let commit = 0;
    for (const count of [1, 8, 64]) {
      const saves = count === 64 ? Math.max(10, Math.floor(n / 8)) : n;
      const cost = await measure(saves, async () => {
        const entries = entriesOf(data, next, count);
        next += count;
        // Commit trails the log by one batch, as it does on a leader under load.
        commit = Math.max(commit, next - 1 - count);
        await store.save({ hardState: { term: 3, vote: 'n1', commit }, entries, snapshot: null });
      });
      emit({ bench: 'write_path', step: 'storage_save_synced', entries: count, ...cost });
    }
    // A follower's save after a commit-only append: nothing but the commit index moves.
    const commitOnly = await measure(n, async () => {
      commit = Math.min(commit + 1, next - 1);
      await store.save({ hardState: { term: 3, vote: 'n1', commit }, entries: [], snapshot: null });
    });
    emit({ bench: 'write_path', step: 'storage_save_commit_only', ...commitOnly });
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function benchApply(n: number): Promise<void> {
  const store = new KvStore();
  const commands = Array.from({ length: n + Math.floor(n / 10) + 1 }, (_, i) =>
    encodeCommand(putCommand(i, true)),
  );
  emit({
    bench: 'write_path',
    step: 'apply_put',
    ...(await measure(n, (i) => store.apply(i + 1, commands[i]!))),
  });
}

export async function runWritePathBench(argv: readonly string[]): Promise<void> {
  const opts = parseOptions(argv);
  const n = opts.quick ? 2_000 : 20_000;
  emit({
    bench: 'write_path_machine',
    node: process.version,
    quick: opts.quick,
    started: new Date().toISOString(),
  });
  await benchCommands(n * 5);
  await benchTransport(n);
  await benchApply(n * 5);
  await benchStorage(Math.floor(n / 10));
}

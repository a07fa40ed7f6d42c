// The client side of `npm run bench -- tftp`, run inside the lab's client namespace (Node cannot
// enter a namespace in-process, so bench/tftp.ts starts this file there with `ip netns exec`).
// It stays up for the whole benchmark, so tsx's start-up is paid once and not inside any
// measurement. Each stdin line is a WorkerCommand, answered by one stdout line, in three steps:
// - `prepare` forks `clients` shells, each blocked on its stdin before it execs a real client
//   (curl, atftp) that writes the file to its own output file. Forking 50 processes from Node
//   takes 0.3-2 s on the loaded 2-core machine, so without this gate the first clients would be
//   done before the last had started, and the figure would measure fork().
// - `go` opens the gate (one newline to each shell) and waits for every client to exit; each is
//   SIGKILLed at its deadline. The wall time runs from the gate to the last exit.
// - `verify` checks every download of the round (exit status, size, sha256 against the source)
//   and removes the files.
// The orchestrator reads its CPU counters between the steps, so neither forking nor hashing
// 40 MB is charged to a round.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

/** Stands for the client's output file in RoundSpec.argv. */
export const outputPlaceholder = '{out}';
/** A round never starts more client processes than this. */
export const clientsMax = 1000;
/** Failure reasons kept per round, so a broken server cannot flood the report. */
const failureReasonsMax = 5;
/** Stderr kept per client, for the failure reason. */
const stderrCharsMax = 300;
/** All the gated shells must be waiting within this. */
const prepareTimeoutMs = 30_000;
/** The gate: prints one byte to say it is waiting, then execs the client once a line arrives. */
const gateScript = 'printf R >&2; read -r _ && exec "$@"';

export interface RoundSpec {
  /** Echoed in every answer, so an answer can never be taken for another round's. */
  readonly id: number;
  /** One client's command line; outputPlaceholder is replaced by its own output file. */
  readonly argv: readonly string[];
  readonly clients: number;
  /** Where the clients write (a tmpfs, so the disk stays out of the figures). */
  readonly outDir: string;
  readonly expectedBytes: number;
  readonly expectedSha256: string;
  /** Each client is SIGKILLed this long after the gate opens. */
  readonly clientTimeoutMs: number;
}

export type WorkerCommand =
  | { readonly kind: 'prepare'; readonly spec: RoundSpec }
  | { readonly kind: 'go'; readonly id: number }
  | { readonly kind: 'verify'; readonly id: number };

export interface RoundPrepared {
  readonly id: number;
  readonly phase: 'prepared';
  /** How long forking the gated clients took (not part of any measurement). */
  readonly spawnMs: number;
}

export interface RoundTiming {
  readonly id: number;
  readonly phase: 'ran';
  /** From the gate opening to the last client's exit. */
  readonly wallMs: number;
  /** Each client's time from the gate to its exit, ascending. */
  readonly clientMs: readonly number[];
}

export interface RoundVerdict {
  readonly id: number;
  readonly phase: 'verified';
  /** Downloads that exited 0 and delivered exactly the source bytes. */
  readonly verified: number;
  readonly failures: number;
  /** The first few failures, for the log. */
  readonly failureReasons: readonly string[];
}

interface ClientExit {
  readonly index: number;
  readonly elapsedMs: number;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timedOut: boolean;
  readonly stderr: string;
}

/** One gated client: waiting resolves once its shell waits at the gate. */
interface GatedClient {
  readonly index: number;
  readonly child: ChildProcess;
  readonly waiting: Promise<void>;
  /** Opens the gate; resolves when the client has exited. */
  readonly go: (timeoutMs: number) => Promise<ClientExit>;
}

interface Round {
  readonly spec: RoundSpec;
  readonly clients: readonly GatedClient[];
  exits: readonly ClientExit[] | null;
}

/** Client processes still running, so SIGTERM can end them by PID. */
const running = new Set<ChildProcess>();
let current: Round | null = null;

function gatedClient(spec: RoundSpec, index: number): GatedClient {
  const out = path.join(spec.outDir, `client-${index}`);
  const argv = spec.argv.map((arg) => (arg === outputPlaceholder ? out : arg));
  const child = spawn('sh', ['-c', gateScript, 'tftp-client', ...argv], {
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  running.add(child);
  let stderr = '';
  let atGate = false;
  let markWaiting: () => void = () => undefined;
  const waiting = new Promise<void>((resolve) => (markWaiting = resolve));
  child.stderr?.on('data', (chunk: Buffer) => {
    let text = chunk.toString('utf8');
    if (!atGate && text.startsWith('R')) {
      atGate = true;
      markWaiting();
      text = text.slice(1);
    }
    stderr = (stderr + text).slice(-stderrCharsMax);
  });
  child.on('error', (error) => {
    stderr += `\n${error.message}`;
  });
  // 'close' follows 'error' for a failed spawn too, so every client ends exactly once.
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('close', (code, signal) => {
      running.delete(child);
      markWaiting();
      resolve({ code, signal });
    }),
  );
  const go = async (timeoutMs: number): Promise<ClientExit> => {
    const openedAtMs = performance.now();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stdin?.end('\n');
    const { code, signal } = await closed;
    clearTimeout(timer);
    return {
      index,
      elapsedMs: performance.now() - openedAtMs,
      code,
      signal,
      timedOut,
      stderr: stderr.trim(),
    };
  };
  return { index, child, waiting, go };
}

async function prepare(spec: RoundSpec): Promise<RoundPrepared> {
  if (!Number.isSafeInteger(spec.clients) || spec.clients < 1 || spec.clients > clientsMax)
    throw new RangeError(`clients must be 1..${clientsMax}, got ${spec.clients}`);
  if (current !== null) throw new Error(`round ${current.spec.id} is still open`);
  await rm(spec.outDir, { recursive: true, force: true });
  await mkdir(spec.outDir, { recursive: true });
  const t0 = performance.now();
  const clients = Array.from({ length: spec.clients }, (_, i) => gatedClient(spec, i));
  current = { spec, clients, exits: null };
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('clients not waiting at the gate in time')), prepareTimeoutMs);
  });
  try {
    await Promise.race([Promise.all(clients.map((c) => c.waiting)), deadline]);
  } finally {
    clearTimeout(timer);
  }
  return { id: spec.id, phase: 'prepared', spawnMs: performance.now() - t0 };
}

function roundOf(id: number): Round {
  if (current === null || current.spec.id !== id) throw new Error(`round ${id} is not prepared`);
  return current;
}

async function go(id: number): Promise<RoundTiming> {
  const round = roundOf(id);
  const t0 = performance.now();
  const exits = await Promise.all(round.clients.map((c) => c.go(round.spec.clientTimeoutMs)));
  const wallMs = performance.now() - t0;
  round.exits = exits;
  return { id, phase: 'ran', wallMs, clientMs: exits.map((e) => e.elapsedMs).sort((a, b) => a - b) };
}

async function check(spec: RoundSpec, exit: ClientExit): Promise<string | null> {
  const label = `client ${exit.index}`;
  if (exit.timedOut) return `${label}: killed after ${spec.clientTimeoutMs} ms`;
  if (exit.code !== 0)
    return `${label}: exited ${exit.code ?? exit.signal}: ${exit.stderr.replace(/\s*\n\s*/g, ' | ')}`;
  let content: Buffer;
  try {
    content = await readFile(path.join(spec.outDir, `client-${exit.index}`));
  } catch (error) {
    return `${label}: no output file (${error instanceof Error ? error.message : String(error)})`;
  }
  if (content.length !== spec.expectedBytes)
    return `${label}: ${content.length} bytes, expected ${spec.expectedBytes}`;
  const sha256 = createHash('sha256').update(content).digest('hex');
  if (sha256 !== spec.expectedSha256) return `${label}: sha256 ${sha256.slice(0, 12)}… differs`;
  return null;
}

async function verify(id: number): Promise<RoundVerdict> {
  const round = roundOf(id);
  current = null;
  if (round.exits === null) throw new Error(`round ${id} has not run`);
  const reasons: string[] = [];
  for (const exit of round.exits) {
    const reason = await check(round.spec, exit);
    if (reason !== null) reasons.push(reason);
  }
  await rm(round.spec.outDir, { recursive: true, force: true });
  return {
    id,
    phase: 'verified',
    verified: round.spec.clients - reasons.length,
    failures: reasons.length,
    failureReasons: reasons.slice(0, failureReasonsMax),
  };
}

function answer(command: WorkerCommand): Promise<RoundPrepared | RoundTiming | RoundVerdict> {
  switch (command.kind) {
    case 'prepare':
      return prepare(command.spec);
    case 'go':
      return go(command.id);
    case 'verify':
      return verify(command.id);
    default: {
      const unknown: never = command;
      throw new TypeError(`unknown command ${JSON.stringify(unknown)}`);
    }
  }
}

/** The worker loop: one WorkerCommand per stdin line, one answer per stdout line, in order. */
async function serve(): Promise<void> {
  const stop = (): void => {
    for (const child of running) child.kill('SIGKILL');
    process.exit(143);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === '') continue;
    const command = JSON.parse(line) as WorkerCommand;
    const id = command.kind === 'prepare' ? command.spec.id : command.id;
    try {
      process.stdout.write(`${JSON.stringify(await answer(command))}\n`);
    } catch (error) {
      // A failed round is abandoned whole: its clients are killed and the next prepare starts afresh.
      for (const client of current?.clients ?? []) client.child.kill('SIGKILL');
      current = null;
      const message = error instanceof Error ? error.message : String(error);
      process.stdout.write(`${JSON.stringify({ id, error: message })}\n`);
    }
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await serve();
}

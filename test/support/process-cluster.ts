// Real `slipway server` processes on loopback for integration tests: start, SIGKILL,
// SIGSTOP/SIGCONT, restart on the same data directory, and clean up by PID.
import type { ChildProcess } from 'node:child_process';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials, Metadata } from '@grpc/grpc-js';
import type { StatusResponse } from '../../src/gen/kv.js';
import { KvClient } from '../../src/gen/kv.js';
import { waitFor } from './wait.js';

export const slipwayBin = fileURLToPath(new URL('../../bin/slipway.js', import.meta.url));

/** What a `slipway` command run to its end left: its exit code and its output. */
export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `slipway ARGS` (bin/slipway.js) to its end; SIGKILLed after `timeoutMs`. */
export function runSlipway(
  args: readonly string[],
  opts: { env?: Readonly<Record<string, string>>; timeoutMs?: number } = {},
): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [slipwayBin, ...args],
      { env: { ...process.env, ...opts.env }, timeout: opts.timeoutMs ?? 60_000 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

export interface ProcNode {
  readonly id: string;
  readonly raftAddr: string;
  readonly apiAddr: string;
  /** Prometheus /metrics. */
  readonly metricsAddr: string;
  readonly dataDir: string;
  proc: ChildProcess | null;
}

/**
 * Below Linux's ephemeral range (32768-60999): a node restarted on its port must find it free,
 * and the kernel hands ephemeral ports to outgoing connections while the node is down.
 */
let portCursor = 10_000 + (process.pid % 550) * 40;

/** Ports from a per-process range of 40 (a node takes 3), so parallel test files do not collide. */
export function nextPort(): number {
  portCursor += 1;
  return portCursor;
}

/**
 * `slipway cluster up --base-port` for tests: its ports span BASE..BASE+97 (balancer, API, raft,
 * status page, metrics), above every nextPort() range (which end at 32000) and below the
 * ephemeral range. Each test file that runs `cluster up` has its own.
 */
export const clusterUpBasePort = 32_100;
/** test/integration/member-api-addrs.test.ts's: BASE..BASE+97, still below the ephemeral range. */
export const memberAddrsBasePort = 32_200;

export class ProcessCluster {
  readonly dir: string;
  readonly nodes: ProcNode[];
  /** The operator token for status calls, when the nodes require tokens. */
  token: string | undefined;
  /** Flags every node gets; may be extended before the nodes start. */
  readonly extraArgs: string[];
  /** The script node runs for `slipway`: bin/slipway.js, or a compiled build's cli/main.js. */
  readonly bin: string;
  /** Flags for one node only (by id), after extraArgs: e.g. each node's own --http-addr. */
  readonly nodeArgs = new Map<string, string[]>();
  /** The script one node runs (by id) instead of `bin`: e.g. a node upgraded to another build. */
  readonly nodeBins = new Map<string, string>();
  /**
   * One status client per node (by id), made at its first call after the node's start: a client
   * per call, as waitForLeader polls every 50 ms, cost about three times the CPU of each call in
   * the test and twice in the node (a connection and its HTTP/2 handshake each time).
   */
  readonly #statusClients = new Map<string, KvClient>();
  /**
   * Whether the nodes collect coverage (c8's NODE_V8_COVERAGE, which every child inherits), as
   * each starts: a test may turn it on for the one start it stops gracefully. A process writes
   * its coverage only when it exits by itself or on a signal it handles: a node SIGKILLed, as
   * destroy() and most tests stop them, wrote none, yet ran slower all along (0.14 s more to
   * start; kv-crash took 8 % more CPU). So off, unless a test stops a node gracefully or has it
   * exit by itself: kill() with another signal refuses a node started without coverage, and
   * destroy() fails naming a node that exited by itself, so no coverage is lost unawares.
   */
  coverage = false;
  /** Nodes that exited by themselves (not by SIGKILL) while started without coverage. */
  readonly #uncounted: string[] = [];
  /** The node processes started with coverage. */
  readonly #covered = new WeakSet<ChildProcess>();

  constructor(size: number, extraArgs: string[] = [], bin = slipwayBin) {
    this.dir = mkdtempSync(join(tmpdir(), 'slipway-cluster-'));
    this.extraArgs = extraArgs;
    this.bin = bin;
    this.nodes = Array.from({ length: size }, (_, i) => ({
      id: `n${i + 1}`,
      raftAddr: `127.0.0.1:${nextPort()}`,
      apiAddr: `127.0.0.1:${nextPort()}`,
      metricsAddr: `127.0.0.1:${nextPort()}`,
      dataDir: join(this.dir, `n${i + 1}`),
      proc: null,
    }));
  }

  /** Nodes started from now on require operator tokens; `token` is the bootstrap admin's. */
  requireToken(token: string): void {
    const file = join(this.dir, 'admin.token');
    writeFileSync(file, token);
    this.extraArgs.push('--admin-token-file', file);
    this.token = token;
  }

  peers(): string {
    return this.nodes.map((n) => `${n.id}=${n.raftAddr}`).join(',');
  }

  start(node: ProcNode): void {
    const log = openSync(join(this.dir, `${node.id}.log`), 'a');
    const args = [
      this.nodeBins.get(node.id) ?? this.bin,
      'server',
      '--id',
      node.id,
      '--data-dir',
      node.dataDir,
      '--raft-addr',
      node.raftAddr,
    ];
    args.push('--api-addr', node.apiAddr, '--peers', this.peers(), '--metrics-addr', node.metricsAddr);
    // Plaintext unless the test brings its own certificates.
    const own = this.nodeArgs.get(node.id) ?? [];
    const tls = this.extraArgs.includes('--tls-dir') || own.includes('--tls-dir');
    args.push(...(tls ? [] : ['--insecure']), ...this.extraArgs, ...own);
    // Node hands NODE_V8_COVERAGE to every child whose env lacks it; set empty, it is off.
    const env = { ...process.env, ...(this.coverage ? {} : { NODE_V8_COVERAGE: '' }) };
    const proc = spawn(process.execPath, args, { stdio: ['ignore', log, log], env });
    node.proc = proc;
    if (this.coverage) this.#covered.add(proc);
    else {
      proc.once('exit', (code) => {
        // An exit with a code wrote coverage had it been collected; a death by signal writes none.
        if (code !== null) this.#uncounted.push(`${node.id} (exit ${code})`);
      });
    }
    // A channel that saw the previous process die waits out its reconnection backoff: a new one.
    this.#closeStatusClient(node);
  }

  #statusClient(node: ProcNode): KvClient {
    let client = this.#statusClients.get(node.id);
    if (client === undefined) {
      // Reconnect soon after a pause or a lost connection: a poll must not wait out grpc-js's
      // default backoff (1 s, growing to 2 min) once the node answers again.
      client = new KvClient(node.apiAddr, credentials.createInsecure(), {
        'grpc.initial_reconnect_backoff_ms': 100,
        'grpc.max_reconnect_backoff_ms': 1000,
      });
      this.#statusClients.set(node.id, client);
    }
    return client;
  }

  #closeStatusClient(node: ProcNode): void {
    this.#statusClients.get(node.id)?.close();
    this.#statusClients.delete(node.id);
  }

  startAll(): void {
    for (const n of this.nodes) this.start(n);
  }

  /** SIGKILL and wait for the process to be gone. */
  async kill(node: ProcNode, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const p = node.proc;
    if (p === null || p.exitCode !== null || p.signalCode !== null) return;
    if (signal !== 'SIGKILL' && !this.#covered.has(p)) {
      throw new Error(
        `${node.id} is stopped with ${signal}, on which it exits and writes its coverage, but it runs without coverage: set coverage = true before starting it`,
      );
    }
    const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
    p.kill(signal);
    await exited;
    node.proc = null;
    this.#closeStatusClient(node);
  }

  pause(node: ProcNode): void {
    node.proc?.kill('SIGSTOP');
  }

  resume(node: ProcNode): void {
    node.proc?.kill('SIGCONT');
  }

  apiAddrs(): string[] {
    return this.nodes.map((n) => n.apiAddr);
  }

  /** The node's Status, or null when it does not answer; with `digest`, its state digest too. */
  async status(node: ProcNode, timeoutMs = 1000, digest = false): Promise<StatusResponse | null> {
    const c = this.#statusClient(node);
    return await new Promise<StatusResponse | null>((resolve) => {
      const md = new Metadata();
      if (this.token !== undefined) md.set('authorization', `Bearer ${this.token}`);
      c.status({ digest }, md, { deadline: Date.now() + timeoutMs }, (err, res) =>
        resolve(err === null ? res : null),
      );
    });
  }

  /** Waits until a live node reports a leader that every live node agrees on. */
  async waitForLeader(timeoutMs = 20_000): Promise<ProcNode> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const live = this.nodes.filter((n) => n.proc !== null);
      const sts = await Promise.all(live.map((n) => this.status(n)));
      const leaders = new Set(sts.map((s) => s?.leader ?? ''));
      const leaderId = [...leaders][0];
      if (leaders.size === 1 && leaderId !== undefined && leaderId !== '') {
        const leader = this.nodes.find((n) => n.id === leaderId);
        if (leader?.proc !== null && leader !== undefined) return leader;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no agreed leader within ${timeoutMs} ms (logs in ${this.dir})`);
  }

  /**
   * Waits until `node` has applied the cluster version `version`. The leader raises it once, by
   * itself, soon after it is elected: a test that counts the commit index, or needs a feature of
   * that version, waits for that write first.
   */
  async waitForClusterVersion(node: ProcNode, version: number, timeoutMs = 20_000): Promise<void> {
    await waitFor(
      `${node.id} to reach cluster version ${version} (logs in ${this.dir})`,
      async () => ((await this.status(node))?.clusterVersion ?? 0) >= version,
      timeoutMs,
      50,
    );
  }

  async destroy(): Promise<void> {
    for (const n of this.nodes) {
      this.resume(n);
      await this.kill(n);
      this.#closeStatusClient(n);
    }
    // SLIPWAY_KEEP_TEST_DIRS=1 keeps logs and data for a post-mortem.
    if (process.env['SLIPWAY_KEEP_TEST_DIRS'] === '1') process.stderr.write(`kept ${this.dir}\n`);
    else rmSync(this.dir, { recursive: true, force: true });
    if (this.#uncounted.length > 0) {
      throw new Error(
        `nodes exited by themselves while running without coverage, so what they ran is not counted: ${this.#uncounted.join(', ')}; set coverage = true before starting them`,
      );
    }
  }
}

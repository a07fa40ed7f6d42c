// Clusters on 127.0.0.1 for the benchmarks, three members unless asked otherwise: slipway
// (real `slipway server` processes, tokens required when asked) and etcd 3.4 (Debian
// etcd-server, started as in shared/anchors etcd-cluster.sh: default heartbeat 100 ms, election
// 1000 ms). Members are started, killed and restarted by PID on their own data directories;
// stop() ends every process and removes the temp dir.
import type { ChildProcess } from 'node:child_process';
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client } from '@grpc/grpc-js';
import type { EldSample } from './eld-probe.js';
import { slipwayBuild } from './slipway-build.js';
import { sleep } from './stats.js';
import type { System } from './wire.js';
import {
  decodeFields,
  encodePut,
  fieldMessage,
  fieldString,
  fieldVarint,
  openChannel,
  paths,
  unary,
} from './wire.js';

export const repoRoot = fileURLToPath(new URL('..', import.meta.url));

export interface MemberProc {
  readonly index: number;
  readonly name: string;
  readonly apiAddr: string;
  readonly peerAddr: string;
  readonly dataDir: string;
  readonly logPath: string;
  proc: ChildProcess | null;
  /** Set when a process exited without the benchmark asking it to. */
  unexpectedExit: string | null;
}

export interface MemberStatus {
  /** This member's id as the system names it. */
  readonly self: string;
  /** The leader it knows of ('' or '0' when none). */
  readonly leader: string;
}

/** Free loopback ports, found by binding port 0. */
export async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const s = createServer();
          s.once('error', reject);
          s.listen(0, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  const ports = servers.map((s) => {
    const a = s.address();
    if (a === null || typeof a === 'string') throw new Error('no port');
    return a.port;
  });
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  return ports;
}

export abstract class LocalCluster {
  abstract readonly system: System;
  readonly dir: string;
  readonly members: MemberProc[] = [];
  /** The operator token the benchmark's own calls (status, health writes) carry, when tokens are required. */
  protected token: string | undefined;
  private readonly channels = new Map<string, Client>();
  private expectedExit = new Set<number>();

  protected constructor(prefix: string) {
    this.dir = mkdtempSync(join(tmpdir(), prefix));
  }

  protected abstract spawnMember(m: MemberProc, fresh: boolean): ChildProcess;
  protected abstract parseStatus(res: Buffer): MemberStatus;

  get endpoints(): string[] {
    return this.members.map((m) => m.apiAddr);
  }

  pid(i: number): number {
    const p = this.members[i]?.proc?.pid;
    if (p === undefined) throw new Error(`${this.system} member ${i} is not running`);
    return p;
  }

  livePids(): number[] {
    return this.members.flatMap((m) => (m.proc?.pid !== undefined ? [m.proc.pid] : []));
  }

  channel(addr: string): Client {
    let c = this.channels.get(addr);
    if (c === undefined) {
      c = openChannel(addr);
      this.channels.set(addr, c);
    }
    return c;
  }

  async start(): Promise<void> {
    for (const m of this.members) this.launch(m, true);
    await this.waitHealthy(30_000);
  }

  private launch(m: MemberProc, fresh: boolean): void {
    const p = this.spawnMember(m, fresh);
    m.proc = p;
    m.unexpectedExit = null;
    p.once('exit', (code, signal) => {
      if (p.pid !== undefined && this.expectedExit.has(p.pid)) return;
      m.unexpectedExit = `exited with ${signal ?? `code ${code}`}; see ${m.logPath}`;
    });
  }

  async status(i: number, timeoutMs = 500): Promise<MemberStatus | null> {
    const m = this.members[i]!;
    try {
      const res = await unary(
        this.channel(m.apiAddr),
        paths[this.system].status,
        Buffer.alloc(0),
        timeoutMs,
        this.token,
      );
      return this.parseStatus(res);
    } catch {
      return null;
    }
  }

  /** The index of the leader every running member agrees on, or -1. */
  async agreedLeader(): Promise<number> {
    const live = this.members.filter((m) => m.proc !== null);
    const sts = await Promise.all(live.map((m) => this.status(m.index)));
    if (sts.some((s) => s === null)) return -1;
    const leaders = new Set(sts.map((s) => s!.leader));
    if (leaders.size !== 1) return -1;
    const leader = [...leaders][0]!;
    if (leader === '' || leader === '0') return -1;
    const at = sts.findIndex((s) => s!.self === leader);
    return at < 0 ? -1 : live[at]!.index;
  }

  async leaderIndex(timeoutMs = 20_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const i = await this.agreedLeader();
      if (i >= 0) return i;
      await sleep(50);
    }
    throw new Error(`${this.system}: no agreed leader within ${timeoutMs} ms (logs in ${this.dir})`);
  }

  /** A leader is agreed and a write through every running member succeeds. */
  async waitHealthy(timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    const leader = await this.leaderIndex(timeoutMs);
    for (const m of this.members.filter((x) => x.proc !== null)) {
      for (;;) {
        try {
          await unary(
            this.channel(m.apiAddr),
            paths[this.system].put,
            encodePut('bench/health', Buffer.from('x')),
            2000,
            this.token,
          );
          break;
        } catch (err) {
          if (Date.now() > deadline)
            throw new Error(`${this.system}: writes through ${m.name} fail: ${String(err)}`);
          await sleep(100);
        }
      }
    }
    return leader;
  }

  /** Sends `signal` to member i by PID; the returned promise resolves when it has exited. */
  signal(i: number, signal: NodeJS.Signals): Promise<void> {
    const m = this.members[i]!;
    const p = m.proc;
    if (p === null || p.exitCode !== null || p.signalCode !== null || p.pid === undefined)
      return Promise.resolve();
    this.expectedExit.add(p.pid);
    const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
    p.kill(signal);
    return exited.then(() => {
      m.proc = null;
    });
  }

  async restart(i: number): Promise<void> {
    const m = this.members[i]!;
    if (m.proc !== null) throw new Error(`${m.name} is still running`);
    this.launch(m, false);
    await this.waitHealthy(30_000);
  }

  unexpectedExits(): string[] {
    return this.members.flatMap((m) => (m.unexpectedExit !== null ? [`${m.name}: ${m.unexpectedExit}`] : []));
  }

  /** Bytes under each member's data directory. */
  dataBytes(): number[] {
    const du = (p: string): number => {
      let total = 0;
      for (const e of readdirSync(p, { withFileTypes: true })) {
        const q = join(p, e.name);
        total += e.isDirectory() ? du(q) : statSync(q).size;
      }
      return total;
    };
    return this.members.map((m) => {
      try {
        return du(m.dataDir);
      } catch {
        return 0;
      }
    });
  }

  /** SIGTERM every member, SIGKILL what is left after 5 s, remove the temp directory. */
  async stop(keepDir = false): Promise<void> {
    for (const c of this.channels.values()) c.close();
    this.channels.clear();
    const running = this.members.filter((m) => m.proc !== null).map((m) => m.index);
    const exits = running.map((i) => this.signal(i, 'SIGTERM'));
    const all = Promise.all(exits);
    const timedOut = await Promise.race([all.then(() => false), sleep(5000).then(() => true)]);
    if (timedOut) {
      for (const i of running) {
        const p = this.members[i]!.proc;
        if (p !== null) p.kill('SIGKILL');
      }
      await all;
    }
    if (!keepDir) rmSync(this.dir, { recursive: true, force: true });
  }
}

export class SlipwayCluster extends LocalCluster {
  readonly system = 'slipway' as const;
  readonly eldDir: string;
  private readonly peers: string;
  private readonly extraArgs: readonly string[];
  /** How many SIGUSR2s each server pid has been sent: the probe names its files by that count. */
  private readonly eldSeq = new Map<number, number>();

  private constructor(ports: number[], extraArgs: readonly string[], size: number, adminToken?: string) {
    super('slipway-bench-');
    this.eldDir = join(this.dir, 'eld');
    const args = [...extraArgs];
    if (adminToken !== undefined) {
      // Tokens required on every call (a plaintext node with a token file, on loopback).
      const file = join(this.dir, 'admin.token');
      writeFileSync(file, adminToken);
      args.push('--admin-token-file', file);
      this.token = adminToken;
    }
    this.extraArgs = args;
    for (let i = 0; i < size; i++) {
      this.members.push({
        index: i,
        name: `n${i + 1}`,
        apiAddr: `127.0.0.1:${ports[i]!}`,
        peerAddr: `127.0.0.1:${ports[i + size]!}`,
        dataDir: join(this.dir, `n${i + 1}`),
        logPath: join(this.dir, `n${i + 1}.log`),
        proc: null,
        unexpectedExit: null,
      });
    }
    this.peers = this.members.map((m) => `${m.name}=${m.peerAddr}`).join(',');
  }

  /**
   * `size` members (3 by default); with `adminToken`, every call needs a token and that one is
   * the bootstrap admin's (the cluster's own status and health calls carry it).
   */
  static async create(
    extraArgs: readonly string[] = [],
    opts: { size?: number; adminToken?: string } = {},
  ): Promise<SlipwayCluster> {
    const size = opts.size ?? 3;
    const c = new SlipwayCluster(await freePorts(2 * size), extraArgs, size, opts.adminToken);
    spawnSync('mkdir', ['-p', c.eldDir]);
    return c;
  }

  /**
   * Each live server's event-loop delay since the previous call (or its start), from the probe
   * preloaded into it (bench/eld-probe.ts): SIGUSR2 makes it write the histogram and reset it.
   */
  async eventLoopDelay(): Promise<Map<number, EldSample>> {
    const pids = this.livePids();
    for (const pid of pids) {
      this.eldSeq.set(pid, (this.eldSeq.get(pid) ?? 0) + 1);
      process.kill(pid, 'SIGUSR2');
    }
    const out = new Map<number, EldSample>();
    const deadline = Date.now() + 3000;
    while (out.size < pids.length && Date.now() < deadline) {
      for (const pid of pids) {
        const f = join(this.eldDir, `${String(pid)}-${String(this.eldSeq.get(pid) ?? 0)}.json`);
        if (!out.has(pid) && existsSync(f)) {
          try {
            out.set(pid, JSON.parse(readFileSync(f, 'utf8')) as EldSample);
          } catch {
            // partly written; read it again
          }
        }
      }
      if (out.size < pids.length) await sleep(20);
    }
    return out;
  }

  protected spawnMember(m: MemberProc): ChildProcess {
    const log = openSync(m.logPath, 'a');
    // The compiled build with the probe preloaded: the probe measures event-loop delay from
    // inside the process without touching src/ (slipway does not expose it yet).
    // --insecure: plaintext on loopback, as etcd runs here (TLS is on by default).
    const build = slipwayBuild();
    const args = [...build.probeArgs, build.main, 'server', '--insecure', '--id', m.name];
    // SLIPWAY_BENCH_PROFILE_DIR=DIR: each server writes a V8 CPU profile there when it stops
    // (SIGTERM), named by PID; the server log names its PID. See bench/README.md.
    const profileDir = process.env['SLIPWAY_BENCH_PROFILE_DIR'];
    if (profileDir !== undefined && profileDir !== '')
      args.unshift('--cpu-prof', '--cpu-prof-dir', profileDir);
    // SLIPWAY_BENCH_TRACE_GC=1: each server logs its garbage collections (node --trace-gc) into
    // its log, to tell GC pauses from other stalls.
    if (process.env['SLIPWAY_BENCH_TRACE_GC'] === '1') args.unshift('--trace-gc');
    // SLIPWAY_BENCH_NODE_FLAGS="--flag ...": more node flags for every server (experiments).
    const nodeFlags = (process.env['SLIPWAY_BENCH_NODE_FLAGS'] ?? '').split(' ').filter((f) => f !== '');
    args.unshift(...nodeFlags);
    args.push(
      '--data-dir',
      m.dataDir,
      '--raft-addr',
      m.peerAddr,
      '--api-addr',
      m.apiAddr,
      '--peers',
      this.peers,
    );
    args.push(...this.extraArgs);
    const p = spawn(process.execPath, args, {
      cwd: repoRoot,
      stdio: ['ignore', log, log],
      env: { ...process.env, SLIPWAY_BENCH_ELD_DIR: this.eldDir },
    });
    closeSync(log);
    return p;
  }

  protected parseStatus(res: Buffer): MemberStatus {
    const f = decodeFields(res);
    return { self: fieldString(f, 1), leader: fieldString(f, 2) };
  }
}

export class EtcdCluster extends LocalCluster {
  readonly system = 'etcd' as const;
  private readonly initialCluster: string;

  private constructor(ports: number[]) {
    super('etcd-bench-');
    for (let i = 0; i < 3; i++) {
      this.members.push({
        index: i,
        name: `m${i + 1}`,
        apiAddr: `127.0.0.1:${ports[i]!}`,
        peerAddr: `127.0.0.1:${ports[i + 3]!}`,
        dataDir: join(this.dir, `m${i + 1}`),
        logPath: join(this.dir, `m${i + 1}.log`),
        proc: null,
        unexpectedExit: null,
      });
    }
    this.initialCluster = this.members.map((m) => `${m.name}=http://${m.peerAddr}`).join(',');
  }

  static async create(): Promise<EtcdCluster> {
    return new EtcdCluster(await freePorts(6));
  }

  protected spawnMember(m: MemberProc, fresh: boolean): ChildProcess {
    const log = openSync(m.logPath, 'a');
    const args = ['--name', m.name, '--data-dir', m.dataDir];
    args.push(
      '--listen-client-urls',
      `http://${m.apiAddr}`,
      '--advertise-client-urls',
      `http://${m.apiAddr}`,
    );
    args.push(
      '--listen-peer-urls',
      `http://${m.peerAddr}`,
      '--initial-advertise-peer-urls',
      `http://${m.peerAddr}`,
    );
    args.push('--initial-cluster', this.initialCluster, '--initial-cluster-token', 'slipway-bench');
    args.push(
      '--initial-cluster-state',
      fresh ? 'new' : 'existing',
      '--logger',
      'zap',
      '--log-level',
      'warn',
    );
    const p = spawn('etcd', args, { cwd: this.dir, stdio: ['ignore', log, log] });
    closeSync(log);
    return p;
  }

  protected parseStatus(res: Buffer): MemberStatus {
    // StatusResponse: header = 1 (ResponseHeader: member_id = 2), leader = 4.
    const f = decodeFields(res);
    return { self: fieldVarint(fieldMessage(f, 1), 2).toString(), leader: fieldVarint(f, 4).toString() };
  }
}

/** The installed etcd's version, or an error that says how to install it. */
export function etcdVersion(): { ok: true; version: string } | { ok: false; message: string } {
  const r = spawnSync('etcd', ['--version'], { encoding: 'utf8' });
  if (r.error !== undefined || r.status !== 0) {
    return {
      ok: false,
      message:
        'etcd is not installed (no `etcd` on PATH). The raft benchmark runs etcd 3.4 beside slipway for comparison.\n' +
        'Install it with:  apt-get update && apt-get install -y etcd-server etcd-client   (Debian 12: etcd 3.4.23)\n' +
        'or run slipway alone with:  npm run bench -- raft --slipway-only',
    };
  }
  const m = /etcd Version:\s*(\S+)/.exec(r.stdout);
  return { ok: true, version: m?.[1] ?? r.stdout.trim().split('\n')[0] ?? 'unknown' };
}

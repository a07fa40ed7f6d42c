// The local development cluster behind `slipway cluster up|down`: N `slipway server` processes on
// loopback, HAProxy in front when it is installed, and the cluster.json that records their PIDs so
// that `cluster down` stops exactly those processes.
import { spawn } from 'node:child_process';
import { openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runtimeSocketPathMax } from '../../model/balancer-spec.js';
import type { RunningHaproxy } from '../../../lb/index.js';
import { isRunningAs, stopRecordedProcess } from '../../platform/recorded-process.js';
import type { ClusterClient } from '../client.js';
import { packageFile } from '../../platform/package-file.js';

const slipwayBin = fileURLToPath(packageFile('bin/slipway.js'));

export interface LocalNode {
  id: string;
  pid: number;
  raftAddr: string;
  apiAddr: string;
  dataDir: string;
  log: string;
}

/** cluster.json: what `cluster up` started. */
export interface ClusterFile {
  readonly nodes: LocalNode[];
  /** The HAProxy in front of the nodes, when `cluster up` started one. */
  readonly balancer?: LocalBalancer | undefined;
}

export type LocalBalancer = RunningHaproxy & {
  readonly statsAddr: string;
  /** `slipway balancer follow` on HAProxy's runtime socket: `member add|remove` change the balancer. */
  readonly follower?: { readonly pid: number; readonly socket: string; readonly log: string } | undefined;
};

export function readCluster(file: string): ClusterFile {
  return JSON.parse(readFileSync(file, 'utf8')) as ClusterFile;
}

/** Whether any process the cluster file records still runs. */
export async function running(c: ClusterFile): Promise<boolean> {
  const { isHaproxyRunning } = await import('../../../lb/index.js');
  const balancer = c.balancer !== undefined && isHaproxyRunning(c.balancer.pid, c.balancer.configFile);
  const f = c.balancer?.follower;
  const follower = f !== undefined && isRunningAs(f.pid, followerOn(f.socket));
  return balancer || follower || c.nodes.some((x) => isRunningAs(x.pid, nodeOn(x.dataDir)));
}

/**
 * Spawns `n` nodes in `dir` (n1, n2, ...): API ports BASE+1.., raft BASE+11.., metrics BASE+91..,
 * each logging to its own file. Detached unless `foreground`, so that they outlive `cluster up`.
 */
export function startNodes(n: number, base: number, dir: string, foreground: boolean): LocalNode[] {
  const ids = Array.from({ length: n }, (_, i) => `n${i + 1}`);
  const peers = ids.map((id, i) => `${id}=127.0.0.1:${base + 11 + i}`).join(',');
  return ids.map((id, i) => {
    const raftAddr = `127.0.0.1:${base + 11 + i}`;
    const apiAddr = `127.0.0.1:${base + 1 + i}`;
    const dataDir = join(dir, id);
    const log = join(dir, `${id}.log`);
    const fd = openSync(log, 'a');
    // The development cluster on loopback: plaintext and no tokens.
    const args = [
      slipwayBin,
      'server',
      '--insecure',
      '--id',
      id,
      '--data-dir',
      dataDir,
      '--raft-addr',
      raftAddr,
    ];
    args.push('--api-addr', apiAddr, '--peers', peers, '--metrics-addr', `127.0.0.1:${base + 91 + i}`);
    const child = spawn(process.execPath, args, {
      stdio: ['ignore', fd, fd],
      detached: !foreground,
    });
    if (!foreground) child.unref();
    return { id, pid: child.pid ?? 0, raftAddr, apiAddr, dataDir, log };
  });
}

/** The recorded node's process: `slipway server` on its data directory, not a reused PID. */
function nodeOn(dataDir: string): (argv: readonly string[]) => boolean {
  return (argv) => argv.includes('server') && argv.includes(dataDir);
}

export async function waitForLeader(client: ClusterClient): Promise<string> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      const s = await client.call('status', { digest: false });
      if (s.leader !== '') return s.leader;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error('no leader was elected within 20 s; see the node logs');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * HAProxy on BASE in front of the nodes, its status page on BASE+90. Without haproxy installed,
 * or when it does not start, the cluster runs without it: a note says so and why.
 */
export async function startBalancer(
  nodes: readonly { id: string; apiAddr: string }[],
  base: number,
  dir: string,
  detached: boolean,
): Promise<LocalBalancer | undefined> {
  const { findHaproxy, HaproxyError, startHaproxy } = await import('../../../lb/index.js');
  const bin = findHaproxy();
  if (bin === undefined) {
    process.stderr.write(
      'note: haproxy is not installed (apt-get install haproxy); running without the balancer\n',
    );
    return undefined;
  }
  const statsAddr = `127.0.0.1:${base + 90}`;
  const socket = join(dir, 'haproxy.sock');
  const followable = socket.length <= runtimeSocketPathMax;
  if (!followable) {
    process.stderr.write(
      `note: ${socket} is too long for HAProxy's runtime socket; member add|remove will not change the balancer (use a shorter --dir)\n`,
    );
  }
  const spec = {
    listenAddr: `127.0.0.1:${base}`,
    nodes,
    statsAddr,
    ...(followable ? { runtimeSocket: socket } : {}),
  };
  try {
    const haproxy = await startHaproxy({ bin, spec, dir, detached });
    const follower = followable ? startFollower(nodes, socket, dir, detached) : undefined;
    return { ...haproxy, statsAddr, follower };
  } catch (err) {
    if (!(err instanceof HaproxyError)) throw err;
    process.stderr.write(`note: running without the balancer: ${err.message}\n`);
    return undefined;
  }
}

/**
 * `slipway balancer follow` on HAProxy's runtime socket, a process of its own like the nodes, so
 * that it outlives `cluster up` when the cluster does. Its log is balancer-follow.log.
 */
function startFollower(
  nodes: readonly { apiAddr: string }[],
  socket: string,
  dir: string,
  detached: boolean,
): { pid: number; socket: string; log: string } {
  const log = join(dir, 'balancer-follow.log');
  const fd = openSync(log, 'a');
  const args = [slipwayBin, '--server', nodes.map((x) => x.apiAddr).join(','), 'balancer', 'follow'];
  // Streams of a member that left get a short grace: this is a development cluster.
  args.push('--haproxy-socket', socket, '--drain-grace', '5000');
  const child = spawn(process.execPath, args, { stdio: ['ignore', fd, fd], detached });
  if (detached) child.unref();
  return { pid: child.pid ?? 0, socket, log };
}

/** The recorded follower's process: `balancer follow` on that socket, not a reused PID. */
function followerOn(socket: string): (argv: readonly string[]) => boolean {
  return (argv) => argv.includes('follow') && argv.includes(socket);
}

/**
 * The balancer first, so that no call goes through it to a node on its way out; its follower
 * before it, so that it does not report a missing HAProxy.
 */
export async function stopCluster(c: ClusterFile): Promise<{ nodes: number; balancer: boolean }> {
  const f = c.balancer?.follower;
  if (f !== undefined) await stopRecordedProcess(f.pid, followerOn(f.socket), 5000);
  const { stopHaproxy } = await import('../../../lb/index.js');
  const balancer = c.balancer !== undefined && (await stopHaproxy(c.balancer.pid, c.balancer.configFile));
  return { nodes: await stopNodes(c.nodes), balancer };
}

/** SIGTERM each node, then SIGKILL whatever is still running after 5 s; resolves once all are gone. */
async function stopNodes(nodes: ClusterFile['nodes']): Promise<number> {
  const stopped = await Promise.all(nodes.map((x) => stopRecordedProcess(x.pid, nodeOn(x.dataDir), 5000)));
  return stopped.filter(Boolean).length;
}

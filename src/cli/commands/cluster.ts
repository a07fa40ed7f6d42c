// `slipway cluster up|down|status`: a local cluster of N nodes on loopback, each a real
// `slipway server` process, with HAProxy in front when it is installed, for development, tests
// and `npm start`.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from '@commander-js/extra-typings';
import { status } from '@grpc/grpc-js';
import { runtimeSocketPathMax } from '../../../lb/balancer-spec.js';
import type { RunningHaproxy } from '../../../lb/haproxy-process.js';
import {
  findHaproxy,
  HaproxyError,
  isHaproxyRunning,
  startHaproxy,
  stopHaproxy,
} from '../../../lb/haproxy-process.js';
import { Role } from '../../gen/kv.js';
import { isServiceError } from '../../api/wire.js';
import { isRunningAs, stopRecordedProcess } from '../../platform/recorded-process.js';
import { ClusterClient } from '../client.js';
import { packageFile } from '../../platform/package-file.js';
import type { OutputFormat } from '../output.js';
import { render, UsageError } from '../output.js';
import { clusterVersionCommand } from './upgrade.js';

const slipwayBin = fileURLToPath(packageFile('bin/slipway.js'));
/** Answers that refuse the caller rather than say the node is down. */
const callerRefusals = new Set<number>([status.PERMISSION_DENIED, status.UNAUTHENTICATED]);

interface ClusterFile {
  readonly nodes: {
    id: string;
    pid: number;
    raftAddr: string;
    apiAddr: string;
    dataDir: string;
    log: string;
  }[];
  /** The HAProxy in front of the nodes, when `cluster up` started one. */
  readonly balancer?: LocalBalancer | undefined;
}

type LocalBalancer = RunningHaproxy & {
  readonly statsAddr: string;
  /** `slipway balancer follow` on HAProxy's runtime socket: `member add|remove` change the balancer. */
  readonly follower?: { readonly pid: number; readonly socket: string; readonly log: string } | undefined;
};

export interface StatusAccess {
  /** The global --server list (or SLIPWAY_SERVER, or the local cluster). */
  readonly servers: () => string[];
  /** A client for one node, with the global token and CA. */
  readonly clientFor: (server: string) => ClusterClient;
}

export function clusterCommand(program: Command, output: () => OutputFormat, access: StatusAccess): void {
  const cluster = program
    .command('cluster')
    .description('run a local cluster on loopback; the status and versions of any cluster');
  cluster
    .command('up')
    .description(
      'start N nodes on 127.0.0.1 (API ports BASE+1.., raft BASE+11.., metrics BASE+91..) and, when ' +
        'haproxy is installed, the gRPC balancer in front of them on BASE (status page BASE+90)',
    )
    .option('--nodes <n>', 'how many nodes (1-7)', '3')
    .option('--dir <dir>', 'data and log directory', '.data/local-cluster')
    .option('--base-port <n>', 'port base', '7000')
    .option('--no-balancer', 'start the nodes only, without HAProxy in front')
    .option('--foreground', 'stay attached; Ctrl-C stops the cluster and the balancer')
    .action(async (o) => {
      const n = Number(o.nodes);
      const base = Number(o.basePort);
      if (!Number.isInteger(n) || n < 1 || n > 7) throw new UsageError('--nodes must be 1 to 7');
      if (!Number.isInteger(base) || base < 1024 || base > 65_000)
        throw new UsageError('--base-port must be 1024-65000');
      const dir = resolve(o.dir);
      const file = join(dir, 'cluster.json');
      if (existsSync(file) && running(readCluster(file))) {
        throw new UsageError(
          `a cluster is already running from ${dir}; stop it with: slipway cluster down --dir ${o.dir}`,
        );
      }
      mkdirSync(dir, { recursive: true });
      const ids = Array.from({ length: n }, (_, i) => `n${i + 1}`);
      const peers = ids.map((id, i) => `${id}=127.0.0.1:${base + 11 + i}`).join(',');
      const nodes = ids.map((id, i) => {
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
          detached: o.foreground !== true,
        });
        if (o.foreground !== true) child.unref();
        return { id, pid: child.pid ?? 0, raftAddr, apiAddr, dataDir, log };
      });
      writeFileSync(file, JSON.stringify({ nodes }, null, 2));
      const api = nodes.map((x) => x.apiAddr).join(',');
      const client = new ClusterClient(
        nodes.map((x) => x.apiAddr),
        20_000,
      );
      const leader = await waitForLeader(client);
      client.close();
      const balancer = o.balancer
        ? await startBalancer(
            nodes.map(({ id, apiAddr }) => ({ id, apiAddr })),
            base,
            dir,
            o.foreground !== true,
          )
        : undefined;
      writeFileSync(file, JSON.stringify({ nodes, balancer }, null, 2));
      const rows = nodes.map((x) => ({ id: x.id, pid: x.pid, api: x.apiAddr, raft: x.raftAddr, log: x.log }));
      const doc = { nodes: rows, leader, server: api, balancer };
      process.stdout.write(`${render(output(), doc, rows)}\n\nleader: ${leader}\n`);
      if (balancer === undefined) process.stdout.write(`use: export SLIPWAY_SERVER=${api}\n`);
      else {
        process.stdout.write(
          `balancer: ${balancer.listenAddr} (HAProxy, pid ${balancer.pid}; status http://${balancer.statsAddr}/)\n` +
            (balancer.follower === undefined
              ? ''
              : `  following the membership (pid ${balancer.follower.pid}, log ${balancer.follower.log})\n`) +
            `use: export SLIPWAY_SERVER=${balancer.listenAddr}\n` +
            `  or the nodes directly: export SLIPWAY_SERVER=${api}\n`,
        );
      }
      if (o.foreground === true) {
        process.stdout.write('press Ctrl-C to stop the cluster\n');
        await new Promise<void>((done) => {
          const stop = (): void => {
            void stopCluster({ nodes, balancer }).then(() => done());
          };
          process.once('SIGINT', stop);
          process.once('SIGTERM', stop);
        });
        process.stdout.write('cluster stopped\n');
      }
    });
  cluster
    .command('down')
    .description('stop a local cluster started with `cluster up`: its nodes and its balancer')
    .option('--dir <dir>', 'the directory given to `cluster up`', '.data/local-cluster')
    .action(async (o) => {
      const file = join(resolve(o.dir), 'cluster.json');
      if (!existsSync(file)) throw new UsageError(`no cluster in ${o.dir} (no cluster.json)`);
      const { nodes, balancer } = await stopCluster(readCluster(file));
      process.stdout.write(`stopped ${nodes} node(s)${balancer ? ' and the balancer' : ''}\n`);
    });
  cluster
    .command('status')
    .description(
      'members, leader, term, commit and applied index, health, whether drained and the open worker streams of each node in --server',
    )
    .option(
      '--digest',
      "also each node's state digest (SHA-256 of its replicated state at its applied index): nodes " +
        'at the same applied index must show the same digest. Encodes the whole state on each node, ' +
        'so it needs an operator token',
    )
    .action(async (o) => {
      const digest = o.digest === true;
      const rows = await Promise.all(
        access.servers().map(async (addr) => {
          const c = access.clientFor(addr);
          try {
            const s = await c.call('status', { digest });
            return {
              node: s.id,
              api: addr,
              role: roleName(s.role),
              leader: s.leader,
              term: s.term,
              commit: s.commit,
              applied: s.applied,
              health: s.leader !== '' ? 'ok' : 'no leader',
              drained: s.drained,
              workers: s.workerStreams,
              // Builds before 0.2.0 ignore the question and answer without a digest.
              ...(digest ? { digest: s.stateDigest === '' ? 'not supported' : s.stateDigest } : {}),
            };
          } catch (err) {
            // A refusal of the caller (a viewer asking for --digest) is not a node down.
            if (isServiceError(err) && callerRefusals.has(err.code)) throw err;
            return {
              node: '?',
              api: addr,
              role: '-',
              leader: '-',
              term: 0,
              commit: 0,
              applied: 0,
              health: `down: ${(err as Error).message}`,
              drained: false,
              workers: 0,
              ...(digest ? { digest: '-' } : {}),
            };
          } finally {
            c.close();
          }
        }),
      );
      process.stdout.write(`${render(output(), { nodes: rows }, rows)}\n`);
      if (rows.every((r) => r.health !== 'ok')) process.exitCode = 1;
    });
  clusterVersionCommand(cluster, output, access);
}

function roleName(r: Role): string {
  switch (r) {
    case Role.ROLE_LEADER:
      return 'leader';
    case Role.ROLE_CANDIDATE:
      return 'candidate';
    case Role.ROLE_PRE_CANDIDATE:
      return 'pre-candidate';
    case Role.ROLE_FOLLOWER:
      return 'follower';
    default:
      return 'unknown';
  }
}

function readCluster(file: string): ClusterFile {
  return JSON.parse(readFileSync(file, 'utf8')) as ClusterFile;
}

function running(c: ClusterFile): boolean {
  const balancer = c.balancer !== undefined && isHaproxyRunning(c.balancer.pid, c.balancer.configFile);
  const f = c.balancer?.follower;
  const follower = f !== undefined && isRunningAs(f.pid, followerOn(f.socket));
  return balancer || follower || c.nodes.some((x) => isRunningAs(x.pid, nodeOn(x.dataDir)));
}

/** The recorded node's process: `slipway server` on its data directory, not a reused PID. */
function nodeOn(dataDir: string): (argv: readonly string[]) => boolean {
  return (argv) => argv.includes('server') && argv.includes(dataDir);
}

async function waitForLeader(client: ClusterClient): Promise<string> {
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
async function startBalancer(
  nodes: readonly { id: string; apiAddr: string }[],
  base: number,
  dir: string,
  detached: boolean,
): Promise<LocalBalancer | undefined> {
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
async function stopCluster(c: ClusterFile): Promise<{ nodes: number; balancer: boolean }> {
  const f = c.balancer?.follower;
  if (f !== undefined) await stopRecordedProcess(f.pid, followerOn(f.socket), 5000);
  const balancer = c.balancer !== undefined && (await stopHaproxy(c.balancer.pid, c.balancer.configFile));
  return { nodes: await stopNodes(c.nodes), balancer };
}

/** SIGTERM each node, then SIGKILL whatever is still running after 5 s; resolves once all are gone. */
async function stopNodes(nodes: ClusterFile['nodes']): Promise<number> {
  const stopped = await Promise.all(nodes.map((x) => stopRecordedProcess(x.pid, nodeOn(x.dataDir), 5000)));
  return stopped.filter(Boolean).length;
}

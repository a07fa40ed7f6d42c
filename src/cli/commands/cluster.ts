// `slipway cluster up|down|status`: a local cluster of N nodes on loopback, each a real
// `slipway server` process, for development, tests and `npm start`.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from '@commander-js/extra-typings';
import { Role } from '../../gen/kv.js';
import { ClusterClient } from '../client.js';
import type { OutputFormat } from '../output.js';
import { render, UsageError } from '../output.js';

const slipwayBin = fileURLToPath(new URL('../../../bin/slipway.js', import.meta.url));

interface ClusterFile {
  readonly nodes: {
    id: string;
    pid: number;
    raftAddr: string;
    apiAddr: string;
    dataDir: string;
    log: string;
  }[];
}

export interface StatusAccess {
  /** The global --server list (or SLIPWAY_SERVER, or the local cluster). */
  readonly servers: () => string[];
  /** A client for one node, with the global token and CA. */
  readonly clientFor: (server: string) => ClusterClient;
}

export function clusterCommand(program: Command, output: () => OutputFormat, access: StatusAccess): void {
  const cluster = program.command('cluster').description('run a local cluster on loopback');
  cluster
    .command('up')
    .description('start N nodes on 127.0.0.1 (API ports BASE+1.., raft BASE+11.., metrics BASE+91..)')
    .option('--nodes <n>', 'how many nodes (1-7)', '3')
    .option('--dir <dir>', 'data and log directory', '.data/local-cluster')
    .option('--base-port <n>', 'port base', '7000')
    .option('--foreground', 'stay attached; Ctrl-C stops the cluster')
    .action(async (o) => {
      const n = Number(o.nodes);
      const base = Number(o.basePort);
      if (!Number.isInteger(n) || n < 1 || n > 7) throw new UsageError('--nodes must be 1 to 7');
      if (!Number.isInteger(base) || base < 1024 || base > 65_000)
        throw new UsageError('--base-port must be 1024-65000');
      const dir = resolve(o.dir);
      const file = join(dir, 'cluster.json');
      if (existsSync(file) && readCluster(file).nodes.some((x) => alive(x.pid))) {
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
      const rows = nodes.map((x) => ({ id: x.id, pid: x.pid, api: x.apiAddr, raft: x.raftAddr, log: x.log }));
      process.stdout.write(`${render(output(), { nodes: rows, leader, server: api }, rows)}\n`);
      process.stdout.write(`\nleader: ${leader}\nuse: export SLIPWAY_SERVER=${api}\n`);
      if (o.foreground === true) {
        process.stdout.write('press Ctrl-C to stop the cluster\n');
        await new Promise<void>((done) => {
          const stop = (): void => {
            void stopNodes(nodes).then(() => done());
          };
          process.once('SIGINT', stop);
          process.once('SIGTERM', stop);
        });
        process.stdout.write('cluster stopped\n');
      }
    });
  cluster
    .command('down')
    .description('stop a local cluster started with `cluster up`')
    .option('--dir <dir>', 'the directory given to `cluster up`', '.data/local-cluster')
    .action(async (o) => {
      const file = join(resolve(o.dir), 'cluster.json');
      if (!existsSync(file)) throw new UsageError(`no cluster in ${o.dir} (no cluster.json)`);
      const stopped = await stopNodes(readCluster(file).nodes);
      process.stdout.write(`stopped ${stopped} node(s)\n`);
    });
  cluster
    .command('status')
    .description('members, leader, term, commit and applied index, health of each node in --server')
    .action(async () => {
      const rows = await Promise.all(
        access.servers().map(async (addr) => {
          const c = access.clientFor(addr);
          try {
            const s = await c.call('status', {});
            return {
              node: s.id,
              api: addr,
              role: roleName(s.role),
              leader: s.leader,
              term: s.term,
              commit: s.commit,
              applied: s.applied,
              health: s.leader !== '' ? 'ok' : 'no leader',
            };
          } catch (err) {
            return {
              node: '?',
              api: addr,
              role: '-',
              leader: '-',
              term: 0,
              commit: 0,
              applied: 0,
              health: `down: ${(err as Error).message}`,
            };
          } finally {
            c.close();
          }
        }),
      );
      process.stdout.write(`${render(output(), { nodes: rows }, rows)}\n`);
      if (rows.every((r) => r.health !== 'ok')) process.exitCode = 1;
    });
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

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitForLeader(client: ClusterClient): Promise<string> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      const s = await client.call('status', {});
      if (s.leader !== '') return s.leader;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error('no leader was elected within 20 s; see the node logs');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** SIGTERM each node, then SIGKILL whatever is still alive after 5 s. */
async function stopNodes(nodes: ClusterFile['nodes']): Promise<number> {
  const live = nodes.filter((x) => alive(x.pid));
  for (const x of live) process.kill(x.pid, 'SIGTERM');
  const deadline = Date.now() + 5000;
  while (live.some((x) => alive(x.pid)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  for (const x of live) if (alive(x.pid)) process.kill(x.pid, 'SIGKILL');
  return live.length;
}

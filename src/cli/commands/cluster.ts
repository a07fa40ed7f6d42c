// `slipway cluster up|down|status`: a local cluster of N nodes on loopback, each a real
// `slipway server` process, with HAProxy in front when it is installed, for development, tests
// and `npm start` (local-cluster.ts starts and stops it); the status of any cluster.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from '@commander-js/extra-typings';
import { status } from '@grpc/grpc-js';
import { BootServiceState, Role, type BootServiceStatus } from '../../gen/kv.js';
import { isServiceError } from '../../wire/contract.js';
import { ClusterClient } from '../client.js';
import type { OutputFormat } from '../output.js';
import { render, UsageError } from '../output.js';
import {
  readCluster,
  running,
  startBalancer,
  startNodes,
  stopCluster,
  waitForLeader,
  type LocalBalancer,
  type LocalNode,
} from './local-cluster.js';
import { clusterVersionCommand } from './upgrade.js';
import type { StatusAccess } from '../status-access.js';

/** Answers that refuse the caller rather than say the node is down. */
const callerRefusals = new Set<number>([status.PERMISSION_DENIED, status.UNAUTHENTICATED]);

interface UpOptions {
  readonly nodes: string;
  readonly dir: string;
  readonly basePort: string;
  readonly balancer: boolean;
  readonly foreground?: true | undefined;
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
    .action((o) => clusterUp(o, output));
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
      'every member: role, leader, term, commit and applied index, health (ok while a leader is known ' +
        'and every configured boot service serves; the reason in -o wide, json or yaml), the boot ' +
        'services, whether drained and its open worker streams. Each --server is asked directly; the ' +
        'members it does not reach (all but one through a balancer) are asked through a node that ' +
        'answered, which reaches them over their raft addresses, so an unreachable member is shown as such',
    )
    .option(
      '--digest',
      "also each node's state digest (SHA-256 of its replicated state at its applied index): nodes " +
        'at the same applied index must show the same digest. Encodes the whole state on each node, ' +
        'so it needs an operator token',
    )
    .action(async (o) => {
      const digest = o.digest === true;
      // One client per address, the relayed asks included (an xds:/// client is set up once).
      const servers = access.servers().map((addr) => ({ addr, client: access.clientFor(addr) }));
      try {
        const asked = await Promise.all(servers.map((s) => nodeStatus(s.client, s.addr, digest)));
        const { paired, others } = await otherMembers(servers, asked, digest);
        const rows = [...uniqueNodes(paired), ...others];
        const table = rows.map(({ reason: _reason, ...row }) => row);
        process.stdout.write(`${render(output(), { nodes: rows }, table, rows)}\n`);
        if (rows.every((r) => r.health !== 'ok')) process.exitCode = 1;
      } finally {
        for (const s of servers) s.client.close();
      }
    });
  clusterVersionCommand(cluster, output, access);
}

/** `cluster up`: starts the nodes, waits for a leader, starts the balancer and says how to reach them. */
async function clusterUp(o: UpOptions, output: () => OutputFormat): Promise<void> {
  const n = Number(o.nodes);
  const base = Number(o.basePort);
  if (!Number.isInteger(n) || n < 1 || n > 7) throw new UsageError('--nodes must be 1 to 7');
  if (!Number.isInteger(base) || base < 1024 || base > 65_000)
    throw new UsageError('--base-port must be 1024-65000');
  const dir = resolve(o.dir);
  const file = join(dir, 'cluster.json');
  if (existsSync(file) && (await running(readCluster(file)))) {
    throw new UsageError(
      `a cluster is already running from ${dir}; stop it with: slipway cluster down --dir ${o.dir}`,
    );
  }
  mkdirSync(dir, { recursive: true });
  const foreground = o.foreground === true;
  const nodes = startNodes(n, base, dir, foreground);
  writeFileSync(file, JSON.stringify({ nodes }, null, 2));
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
        !foreground,
      )
    : undefined;
  writeFileSync(file, JSON.stringify({ nodes, balancer }, null, 2));
  printClusterUp(output(), nodes, leader, balancer);
  if (foreground) {
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
}

/** The nodes, the leader and the SLIPWAY_SERVER to use: the balancer when there is one. */
function printClusterUp(
  format: OutputFormat,
  nodes: readonly LocalNode[],
  leader: string,
  balancer: LocalBalancer | undefined,
): void {
  const api = nodes.map((x) => x.apiAddr).join(',');
  const rows = nodes.map((x) => ({ id: x.id, pid: x.pid, api: x.apiAddr, raft: x.raftAddr, log: x.log }));
  const doc = { nodes: rows, leader, server: api, balancer };
  process.stdout.write(`${render(format, doc, rows)}\n\nleader: ${leader}\n`);
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
}

/** One row of `cluster status`: a member's answer, or why none came. */
type StatusRow = {
  readonly node: string;
  readonly api: string;
  readonly role: string;
  readonly leader: string;
  readonly term: number;
  readonly commit: number;
  readonly applied: number;
  /** One word: ok, degraded, no-leader, stopped, down (asked directly) or unreachable. */
  readonly health: string;
  /** What the word stands for ("" when ok). */
  readonly reason: string;
  readonly boot: string;
  readonly drained: boolean;
  readonly workers: number;
  readonly digest?: string;
};

/** The row of the node `c` reaches at `addr` (its own, or `member`'s relayed by it). */
async function nodeStatus(c: ClusterClient, addr: string, digest: boolean, member = ''): Promise<StatusRow> {
  try {
    const s = await c.call('status', { digest, member });
    const { health, reason } = healthOf(s);
    return {
      node: s.id,
      // The member's own API address: `addr` may be a balancer, or the node that relayed.
      api: s.members.find((m) => m.id === s.id)?.apiAddr || (member === '' ? addr : '-'),
      role: roleName(s.role),
      leader: s.leader,
      term: s.term,
      commit: s.commit,
      applied: s.applied,
      health,
      reason,
      boot: bootSummary(s.bootServices),
      drained: s.drained,
      workers: s.workerStreams,
      // Builds before 0.2.0 ignore the question and answer without a digest.
      ...(digest ? { digest: s.stateDigest === '' ? 'not supported' : s.stateDigest } : {}),
    };
  } catch (err) {
    // A refusal of the caller (a viewer asking for --digest) is not a node down.
    if (isServiceError(err) && callerRefusals.has(err.code)) throw err;
    return member === ''
      ? unanswered('?', addr, 'down', err, digest)
      : unanswered(member, '-', 'unreachable', err, digest);
  }
}

function unanswered(node: string, api: string, health: string, err: unknown, digest: boolean): StatusRow {
  const reason = isServiceError(err) ? err.details : (err as Error).message;
  return {
    ...{ node, api, role: '-', leader: '-', term: 0, commit: 0, applied: 0, health, reason },
    ...{ boot: '-', drained: false, workers: 0 },
    ...(digest ? { digest: '-' } : {}),
  };
}

/** The answers, each node once (two addresses may reach one node, as a balancer's do). */
function uniqueNodes(rows: readonly StatusRow[]): StatusRow[] {
  const seen = new Set<string>();
  return rows.filter((r) => r.node === '?' || (!seen.has(r.node) && seen.add(r.node) !== undefined));
}

/**
 * The members no --server reached, asked through the first node that answered (as etcdctl's
 * `endpoint status --cluster` does): that node reads their Status over their raft addresses.
 * Its membership is read without a quorum, so a cluster that lost its quorum still shows it.
 * A --server that did not answer is paired with the member serving its API there (the
 * replicated state holds every member's API address, docs/decisions/0038): its row is named
 * after that member, which is not asked again, so a member that is down is listed once.
 */
async function otherMembers(
  servers: readonly { readonly addr: string; readonly client: ClusterClient }[],
  asked: readonly StatusRow[],
  digest: boolean,
): Promise<{ paired: StatusRow[]; others: StatusRow[] }> {
  const relay = servers[asked.findIndex((r) => r.node !== '?')];
  if (relay === undefined) return { paired: [...asked], others: [] };
  let members: { id: string; apiAddr: string }[];
  try {
    members = (await relay.client.call('memberList', { local: true })).members;
  } catch {
    // The node answered its Status a moment ago; its own row says what it knows.
    return { paired: [...asked], others: [] };
  }
  const memberAt = new Map(members.filter((m) => m.apiAddr !== '').map((m) => [m.apiAddr, m.id]));
  const paired = asked.map((r) => (r.node === '?' ? { ...r, node: memberAt.get(r.api) ?? '?' } : r));
  const known = new Set(paired.map((r) => r.node));
  const downAddrs = new Set(paired.filter((r) => r.health === 'down').map((r) => r.api));
  const others = members.filter((m) => !known.has(m.id) && !downAddrs.has(m.apiAddr));
  const rows = await Promise.all(others.map((m) => nodeStatus(relay.client, relay.addr, digest, m.id)));
  return {
    paired,
    others: rows.map((r, i) => (r.api === '-' ? { ...r, api: others[i]?.apiAddr || '-' } : r)),
  };
}

/**
 * "ok" only while the node applies, knows a leader and every boot service it is configured with
 * serves; otherwise one word for what is wrong, the worst first, with the reason.
 */
function healthOf(s: {
  readonly leader: string;
  readonly stopped: string;
  readonly bootServices: readonly BootServiceStatus[];
}): { health: string; reason: string } {
  if (s.stopped !== '') return { health: 'stopped', reason: s.stopped };
  if (s.leader === '') return { health: 'no-leader', reason: 'this node knows no leader' };
  const notServing = s.bootServices.filter((b) => b.state !== BootServiceState.BOOT_SERVICE_STATE_SERVING);
  if (notServing.length === 0) return { health: 'ok', reason: '' };
  const reason = notServing.map((b) => `${b.name} ${bootStateName(b.state)}: ${b.reason}`).join('; ');
  return { health: 'degraded', reason };
}

/** Each configured boot service and its state ("dhcp serving, tftp waiting"); "-" for none. */
function bootSummary(boot: readonly BootServiceStatus[]): string {
  if (boot.length === 0) return '-';
  return boot.map((b) => `${b.name} ${bootStateName(b.state)}`).join(', ');
}

function bootStateName(state: BootServiceState): string {
  switch (state) {
    case BootServiceState.BOOT_SERVICE_STATE_SERVING:
      return 'serving';
    case BootServiceState.BOOT_SERVICE_STATE_WAITING:
      return 'waiting';
    case BootServiceState.BOOT_SERVICE_STATE_FAILED:
      return 'failed';
    default:
      return 'unknown';
  }
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

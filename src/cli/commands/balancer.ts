// `slipway balancer config`: the balancer configuration for a production cluster, printed for
// the operator to install on each node: HAProxy's (run by Debian's haproxy service) or an Envoy
// bootstrap. The same renderers `cluster up` uses (lb/haproxy.ts, lb/envoy.ts, loaded through
// lb/index.ts).
// `slipway balancer follow`: keeps a running HAProxy's servers in step with the membership
// (./balancer-follow.ts, loaded only for it).
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Option, type Command } from '@commander-js/extra-typings';
import { BalancerSpecError, defaultHealthCheck } from '../../model/balancer-spec.js';
import type { BalancerSpec, BalancerTls } from '../../model/balancer-spec.js';
import { duration, idAddressList, wholeNumber } from '../flags.js';
import { UsageError } from '../output.js';
import type { StatusAccess } from '../status-access.js';

/** Where Debian's haproxy package puts the runtime socket. */
const debianRuntimeSocket = '/run/haproxy/admin.sock';

/** `follow` talks to the cluster: this loads the client first (`config` does without it). */
export type FollowAccess = () => Promise<StatusAccess>;

export function balancerCommand(program: Command, followAccess: FollowAccess): void {
  const balancer = program.command('balancer').description('the gRPC balancer in front of the nodes');
  configCommand(balancer);
  followCommand(balancer, followAccess);
}

/** `balancer config`: the HAProxy configuration or Envoy bootstrap for the nodes. */
function configCommand(balancer: Command): void {
  balancer
    .command('config')
    .description(
      'print the balancer configuration: calls spread over the nodes, each worker kept on one node ' +
        '(x-worker-id, consistent hash), nodes without a leader taken out by a grpc.health.v1 check',
    )
    .requiredOption('--listen <host:port>', 'where the balancer serves gRPC, e.g. 0.0.0.0:7000')
    .requiredOption('--nodes <list>', "the nodes' API addresses: ID=HOST:PORT,... (ids as in --peers)")
    .option('--proxy <name>', 'haproxy (a haproxy.cfg) or envoy (an Envoy bootstrap, JSON)', 'haproxy')
    .option(
      '--static',
      "envoy: the nodes as a fixed list instead of the nodes' xDS server (which follows the membership)",
    )
    .option('--stats <host:port>', 'a read-only status page (HAProxy stats, Envoy admin)')
    .option(
      '--tls-dir <dir>',
      "TLS on both sides with the files of `slipway bootstrap`: clients get node --id's certificate, nodes are verified against ca.crt",
    )
    .option('--id <id>', 'with --tls-dir: the node this balancer runs on (its ID.crt and ID.key)')
    .option(
      '--check-interval <duration>',
      'health check interval: 2s, or a bare number of milliseconds',
      String(defaultHealthCheck.intervalMs),
    )
    .option('--fall <n>', 'failed checks in a row that take a node out', String(defaultHealthCheck.fall))
    .option('--rise <n>', 'passed checks in a row that bring it back', String(defaultHealthCheck.rise))
    .option(
      '--haproxy-socket <path>',
      'haproxy: the admin runtime socket `slipway balancer follow` changes the servers through',
      debianRuntimeSocket,
    )
    // The name before there was one name for the socket in both commands.
    .addOption(new Option('--runtime-socket <path>').hideHelp())
    .action(async (o) => {
      const spec: BalancerSpec = {
        listenAddr: o.listen,
        nodes: idAddressList(o.nodes, '--nodes').map(({ id, addr }) => ({ id, apiAddr: addr })),
        healthCheck: {
          intervalMs: duration(o.checkInterval, '--check-interval', 'ms'),
          fall: wholeNumber(o.fall, '--fall'),
          rise: wholeNumber(o.rise, '--rise'),
        },
        ...(o.stats === undefined ? {} : { statsAddr: o.stats }),
        ...(o.tlsDir === undefined ? {} : { tls: tlsFiles(o.tlsDir, o.id) }),
      };
      if (o.tlsDir === undefined && o.id !== undefined) throw new UsageError('--id goes with --tls-dir');
      const { renderEnvoyBootstrap, renderEnvoyXdsBootstrap, renderHaproxyConfig } =
        await import('../../../lb/index.js');
      let text: string;
      try {
        if (o.proxy === 'haproxy')
          text = renderHaproxyConfig({ ...spec, runtimeSocket: o.runtimeSocket ?? o.haproxySocket });
        else if (o.proxy === 'envoy') {
          const bootstrap = o.static === true ? renderEnvoyBootstrap(spec) : renderEnvoyXdsBootstrap(spec);
          text = `${JSON.stringify(bootstrap, null, 2)}\n`;
        } else throw new UsageError(`--proxy must be haproxy or envoy, got "${o.proxy}"`);
      } catch (err) {
        if (err instanceof BalancerSpecError) throw new UsageError(err.message);
        throw err;
      }
      process.stdout.write(text);
    });
}

/** `balancer follow`: a running HAProxy's servers kept in step with the membership. */
function followCommand(balancer: Command, followAccess: FollowAccess): void {
  balancer
    .command('follow')
    .description(
      "keep a running HAProxy's servers in step with the membership through its runtime socket: " +
        'a new voter is added, a member that left is drained and then deleted; runs until Ctrl-C',
    )
    .option('--haproxy-socket <path>', "HAProxy's admin runtime socket", debianRuntimeSocket)
    .option('--backend <name>', 'the backend that holds the nodes', 'slipway_nodes')
    .option(
      '--interval <duration>',
      'how often to compare the membership with HAProxy: 1s, or a bare number of milliseconds',
      '1000',
    )
    .option(
      '--drain-grace <duration>',
      "how long a leaving member's streams may run before they are cut (their clients reconnect elsewhere): 30s, or a bare number of milliseconds",
      '30000',
    )
    .option(
      '--check-interval <duration>',
      'added servers: health check interval: 2s, or a bare number of milliseconds',
      String(defaultHealthCheck.intervalMs),
    )
    .option(
      '--fall <n>',
      'added servers: failed checks that take a node out',
      String(defaultHealthCheck.fall),
    )
    .option('--rise <n>', 'added servers: passed checks that bring it back', String(defaultHealthCheck.rise))
    .option('--tls-dir <dir>', 'added servers: TLS to the nodes, verified against ca.crt there')
    .action(async (o) => {
      const { runFollow } = await import('./balancer-follow.js');
      await runFollow(
        {
          socketPath: o.haproxySocket,
          backend: o.backend,
          intervalMs: duration(o.interval, '--interval', 'ms'),
          drainGraceMs: duration(o.drainGrace, '--drain-grace', 'ms'),
          healthCheck: {
            intervalMs: duration(o.checkInterval, '--check-interval', 'ms'),
            fall: wholeNumber(o.fall, '--fall'),
            rise: wholeNumber(o.rise, '--rise'),
          },
          tlsDir: o.tlsDir,
        },
        await followAccess(),
      );
    });
}

/** The files `slipway bootstrap` wrote for node `id`, which must exist: HAProxy reads them at start. */
function tlsFiles(dir: string, id: string | undefined): BalancerTls {
  if (id === undefined) throw new UsageError('--tls-dir needs --id: the node whose certificate clients get');
  const abs = resolve(dir);
  const files = {
    certFile: join(abs, `${id}.crt`),
    pemFile: join(abs, `${id}.pem`),
    keyFile: join(abs, `${id}.key`),
    caFile: join(abs, 'ca.crt'),
  };
  for (const file of Object.values(files)) {
    if (!existsSync(file))
      throw new UsageError(`--tls-dir: no ${file} (made by \`slipway bootstrap --dir ${dir}\`)`);
  }
  return files;
}

// `slipway server`: runs one provisioner node until SIGTERM/SIGINT. A leader hands its
// leadership to the most caught-up follower before exiting, so writes barely pause.
import type { Command, OptionValues } from '@commander-js/extra-typings';
import type { ServerConfig } from '../../node/index.js';
import { ConfigError } from '../../platform/config-error.js';
import { duration, durationSeconds, idAddressList, wholeNumber } from '../flags.js';
import { insecureNetworkFlag } from '../../platform/plaintext-policy.js';
import { configDocument, flagSpecsOf, flagValuesOfFile, type FlagSpec } from './server-config.js';

export function serverCommand(program: Command): void {
  const server = serverFlags(program);
  server.action(async (local, command) => {
    // --insecure-allow-network is also a global flag (for the CLI), and commander hands a flag
    // both define to the program: read both.
    const given: typeof local = command.optsWithGlobals();
    await runServer(given, flagSpecsOf(server.options));
  });
}

/** The command and its flags, in the order --help lists them. */
function serverFlags(program: Command) {
  const server = program
    .command('server')
    .description('run a provisioner node (raft member, replicated store, client API)');
  return limitFlags(securityFlags(bootServiceFlags(nodeFlags(server))));
}

type ServerFlags = ReturnType<ReturnType<typeof serverFlags>['opts']>;

/** The member, its raft timing, its logs and metrics. */
function nodeFlags<A extends unknown[], O extends OptionValues, G extends OptionValues>(c: Command<A, O, G>) {
  return c
    .option(
      '--config <file>',
      'YAML or JSON file of settings keyed by these flags without the dashes (data-dir: /var/lib/slipway); flags given as well override it (examples/server.yaml)',
    )
    .option(
      '--print-config',
      'print the effective configuration (file, flags and defaults) in that form and exit',
    )
    .option('--id <id>', "this member's id, e.g. n1")
    .option('--data-dir <dir>', 'where the raft log and snapshots live')
    .option('--raft-addr <host:port>', 'address for peer traffic')
    .option('--api-addr <host:port>', 'address for the CLI and worker API')
    .option('--peers <list>', 'initial members as ID=HOST:PORT,... (raft addresses, this node included)')
    .option(
      '--join',
      'join an existing cluster: start empty, reach the members named by --peers, and wait for `slipway member add`',
    )
    .option(
      '--force-new-cluster',
      'DISASTER RECOVERY: restart this existing member as a one-node cluster, its stored membership rewritten to itself alone (when a majority is lost for good); grow it again with `slipway member add`',
    )
    .option('--tick-ms <duration>', 'raft tick: 50ms, or a bare number of milliseconds (default 50ms)')
    .option('--election-ticks <n>', 'ticks of leader silence before an election (default 6)')
    .option(
      '--heartbeat-ticks <n>',
      "ticks between the leader's heartbeats, fewer than --election-ticks (default 1)",
    )
    .option('--snapshot-entries <n>', 'snapshot after this many applied entries (default 10000)')
    .option('--log-level <level>', 'trace|debug|info|warn|error (default info)')
    .option('--metrics-addr <host:port>', 'serve Prometheus metrics at http://HOST:PORT/metrics')
    .option(
      '--workflow-archive <path>',
      'while leading, append finished workflows past the retention (`slipway workflow retention`) to PATH as JSON lines, fsynced, before removing them: a file, or a directory (existing, or ending in /) with one workflows-YYYY-MM-DD.jsonl a day; give every node one',
    );
}

/** DHCP, TFTP, HTTP and the VIP machines boot from. */
function bootServiceFlags<A extends unknown[], O extends OptionValues, G extends OptionValues>(
  c: Command<A, O, G>,
) {
  return c
    .option('--vip <ip>', "the address machines are told to use (default: the API address's host)")
    .option(
      '--vip-interface <name>',
      'hold the VIP on this interface while this node is the leader (ip addr add, then gratuitous ARP)',
    )
    .option('--dhcp-interface <name>', 'serve DHCP on this interface, broadcasts included')
    .option('--dhcp-addr <host:port>', 'serve DHCP on this address only (relayed and unicast requests)')
    .option(
      '--dhcp-mode <mode>',
      'reservation (known machines only, the default), dynamic (also pool addresses, committed through raft) or proxy (boot info only)',
    )
    .option(
      '--dhcp-pool <spec...>',
      'dynamic mode: START-END/PREFIX[,router=IP][,dns=IP+IP], e.g. 10.0.0.100-10.0.0.199/24,router=10.0.0.1 (repeatable)',
    )
    .option(
      '--dhcp-lease-time <duration>',
      'dynamic mode: lease time of pool addresses: 1h, 30m, or a bare number of seconds (default 1h)',
    )
    .option(
      '--discovery',
      'dynamic or proxy mode: a machine whose MAC no machine has boots the boot OS in inventory mode, reports its inventory and is enrolled (`hardware list --state enrolled`, then `hardware accept ID`)',
    )
    .option('--tftp-addr <host:port>', 'serve TFTP here, e.g. 0.0.0.0:69')
    .option('--tftp-root <dir>', "TFTP root (default: Debian's iPXE binaries, copied into the data dir)")
    .option('--tftp-transfers-max <n>', 'TFTP transfers at once; more requests wait for a slot (default 256)')
    .option('--http-addr <host:port>', 'serve iPXE scripts and boot artifacts here, e.g. 0.0.0.0:8080')
    .option('--artifacts-dir <dir>', 'other boot files served under /artifacts/')
    .option(
      '--bootos-dir <dir>',
      'the boot OS served under /boot/ and booted by the default iPXE script (`slipway bootos build --out DIR`; default DATA_DIR/bootos)',
    )
    .option(
      '--worker-server <host:port>',
      "what booted machines' workers dial, e.g. the balancer on the VIP (default: --vip with this node's API port)",
    )
    .option('--kernel-arg <arg...>', 'extra kernel argument for the generated iPXE scripts (repeatable)');
}

/** TLS and tokens, or a development cluster without them. */
function securityFlags<A extends unknown[], O extends OptionValues, G extends OptionValues>(
  c: Command<A, O, G>,
) {
  return c
    .option(
      '--tls-dir <dir>',
      "this node's directory from `slipway bootstrap` (TLS on the API, mTLS between nodes; tokens always required)",
    )
    .option('--insecure', 'no TLS and no tokens: a development cluster, on loopback addresses only')
    .option(
      insecureNetworkFlag,
      'DANGER: with --insecure, listen beyond loopback too; tokens and credentials cross the network in the clear (labs on a private network only)',
    )
    .option(
      '--admin-token-file <file>',
      'the bootstrap admin token (default: admin.token in --tls-dir); without TLS it turns tokens on',
    );
}

/** What one client, machine or address may hold, and how the node stops. */
function limitFlags<A extends unknown[], O extends OptionValues, G extends OptionValues>(
  c: Command<A, O, G>,
) {
  return c
    .option('--api-message-bytes-max <n>', 'largest API message accepted, in bytes (default 4194304)')
    .option(
      '--api-streams-per-connection-max <n>',
      'calls one client connection may hold open at once (default 100)',
    )
    .option(
      '--worker-sessions-max <n>',
      'worker streams one machine may hold on this node; another closes its oldest (default 4)',
    )
    .option(
      '--drain-grace <duration>',
      'on SIGTERM, drain first for at most this long: answer health checks NOT_SERVING, end worker streams so they move to other nodes, wait for them (e.g. 5s, 500ms, or a bare number of milliseconds; 0 stops at once; default 5s)',
    )
    .option(
      '--auth-failures-max <n>',
      'failed authentications one address may make before its calls are refused (default 10)',
    )
    .option(
      '--auth-failure-window <duration>',
      'the time in which an address earns back --auth-failures-max failures: 60s, 5m, or a bare number of seconds (default 60s)',
    );
}

/** Loads the node, builds its configuration and runs it until SIGTERM or SIGINT. */
async function runServer(given: ServerFlags, specs: readonly FlagSpec[]): Promise<void> {
  // The node loads here, not with the module: other commands and --help start without it.
  const [{ startNode, readConfigFile, validateServerConfig }, { createLogger }, { applyServerHeapProfile }] =
    await Promise.all([
      import('../../node/index.js'),
      import('../../platform/logger.js'),
      import('../../platform/heap-profile.js'),
    ]);
  const fromFile =
    given.config === undefined ? {} : flagValuesOfFile(readConfigFile(given.config), specs, given.config);
  // Flags given on the command line win over the file; commander leaves the others undefined.
  const definedFlags = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined));
  const o = { ...fromFile, ...definedFlags } as ServerFlags;
  const cfg: ServerConfig = validateServerConfig(withFlags({}, o));
  if (o.printConfig === true) {
    const { stringify } = await import('yaml');
    process.stdout.write(stringify(configDocument(cfg)));
    return;
  }
  applyServerHeapProfile();
  const logger = createLogger({ node: cfg.id }, cfg.logLevel);
  let running: Awaited<ReturnType<typeof startNode>>;
  try {
    running = await startNode(cfg, logger);
  } catch (err) {
    // startNode released what it had taken; nothing may keep a half-started node alive.
    exitAfterFailedStart(err, logger, ConfigError);
  }
  await new Promise<void>((resolve) => {
    const onSignal = (sig: string): void => {
      logger.info({ signal: sig }, 'stopping');
      running.stop().then(resolve, resolve);
    };
    process.once('SIGTERM', () => onSignal('SIGTERM'));
    process.once('SIGINT', () => onSignal('SIGINT'));
  });
  logger.flush();
}

/**
 * Ends the process at once after a start that failed: the reason on stderr and in the log, exit 2
 * for a configuration this host refuses, 1 for anything else (an address taken).
 */
function exitAfterFailedStart(
  err: unknown,
  logger: import('pino').Logger,
  configError: new (...args: never[]) => Error,
): never {
  const message = err instanceof Error ? err.message : String(err);
  logger.fatal({ err }, 'the node could not start; everything it had started is stopped');
  logger.flush();
  process.stderr.write(`slipway: the node could not start: ${message}\n`);
  process.exit(err instanceof configError ? 2 : 1);
}

/** The configuration file's settings (`raw`, changed in place) with the flags given over them. */
function withFlags(raw: Record<string, unknown>, o: ServerFlags): Record<string, unknown> {
  const set = (k: string, v: unknown): void => {
    if (v !== undefined) raw[k] = v;
  };
  set('id', o.id);
  set('dataDir', o.dataDir);
  set('raftAddr', o.raftAddr);
  set('apiAddr', o.apiAddr);
  if (o.peers !== undefined) raw['peers'] = idAddressList(o.peers, '--peers');
  if (o.join === true) raw['join'] = true;
  if (o.forceNewCluster === true) raw['forceNewCluster'] = true;
  set('tickMs', o.tickMs === undefined ? undefined : duration(o.tickMs, '--tick-ms', 'ms'));
  set('electionTicks', toInt(o.electionTicks, '--election-ticks'));
  set('heartbeatTicks', toInt(o.heartbeatTicks, '--heartbeat-ticks'));
  set('snapshotEntries', toInt(o.snapshotEntries, '--snapshot-entries'));
  set('logLevel', o.logLevel);
  set('adminTokenFile', o.adminTokenFile);
  set('tlsDir', o.tlsDir);
  if (o.insecure === true) raw['insecure'] = true;
  if (o.insecureAllowNetwork === true) raw['insecureAllowNetwork'] = true;
  set('metricsAddr', o.metricsAddr);
  set('workflowArchive', o.workflowArchive);
  set('vip', o.vip);
  set('vipInterface', o.vipInterface);
  set('dhcpInterface', o.dhcpInterface);
  set('dhcpAddr', o.dhcpAddr);
  set('dhcpMode', o.dhcpMode);
  set('dhcpPools', o.dhcpPool);
  set(
    'dhcpLeaseTimeS',
    o.dhcpLeaseTime === undefined ? undefined : durationSeconds(o.dhcpLeaseTime, '--dhcp-lease-time'),
  );
  if (o.discovery === true) raw['discovery'] = true;
  set('tftpAddr', o.tftpAddr);
  set('tftpRoot', o.tftpRoot);
  set('tftpTransfersMax', toInt(o.tftpTransfersMax, '--tftp-transfers-max'));
  set('httpAddr', o.httpAddr);
  set('artifactsDir', o.artifactsDir);
  set('bootOsDir', o.bootosDir);
  set('workerServer', o.workerServer);
  set('kernelArgs', o.kernelArg);
  set('apiMessageBytesMax', toInt(o.apiMessageBytesMax, '--api-message-bytes-max'));
  set('apiStreamsPerConnectionMax', toInt(o.apiStreamsPerConnectionMax, '--api-streams-per-connection-max'));
  set('workerSessionsMax', toInt(o.workerSessionsMax, '--worker-sessions-max'));
  set('authFailuresMax', toInt(o.authFailuresMax, '--auth-failures-max'));
  set(
    'authFailureWindowS',
    o.authFailureWindow === undefined
      ? undefined
      : durationSeconds(o.authFailureWindow, '--auth-failure-window'),
  );
  set('drainGraceMs', o.drainGrace === undefined ? undefined : duration(o.drainGrace, '--drain-grace', 'ms'));
  return raw;
}

function toInt(v: string | undefined, flag: string): number | undefined {
  return v === undefined ? undefined : wholeNumber(v, flag);
}

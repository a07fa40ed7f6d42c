// The `slipway` command. Exit codes: 0 success, 1 the operation failed, 2 bad usage or input.
import { Command, CommanderError, Option } from '@commander-js/extra-typings';
import { status } from '@grpc/grpc-js';
import { ConfigError } from '../api/server-config.js';
import { isServiceError } from '../api/errors.js';
import { ClusterClient, clusterCa, parseServers } from './client.js';
import { messageLimitRefusal } from './errors.js';
import { readFileSync } from 'node:fs';
import { artifactCommand } from './commands/artifact.js';
import { auditCommand } from './commands/audit.js';
import { balancerCommand } from './commands/balancer.js';
import { bootosCommand } from './commands/bootos.js';
import { bootstrapCommand } from './commands/bootstrap.js';
import { clusterCommand, type StatusAccess } from './commands/cluster.js';
import { upgradeCommand } from './commands/upgrade.js';
import { hardwareCommand } from './commands/hardware.js';
import { labCommand } from './commands/lab.js';
import { leaseCommand } from './commands/lease.js';
import { kvCommand } from './commands/kv.js';
import { memberCommand } from './commands/member.js';
import { powerCommand } from './commands/power.js';
import { serverCommand } from './commands/server.js';
import { snapshotCommand } from './commands/snapshot.js';
import { templateCommand } from './commands/template.js';
import { tokenCommand } from './commands/token.js';
import { workerCommand } from './commands/worker.js';
import { workflowCommand } from './commands/workflow.js';
import { outputFormats, parseOutputFormat, UsageError } from './output.js';
import { packageFile } from './package-file.js';
import { insecureNetworkFlag } from '../platform/plaintext-policy.js';

function packageVersion(): string {
  const text = readFileSync(packageFile('package.json'), 'utf8');
  const parsed = JSON.parse(text) as { version?: unknown };
  return typeof parsed.version === 'string' ? parsed.version : 'unknown';
}

const program = new Command()
  .name('slipway')
  .description('Slipway: a highly available bare-metal provisioner')
  .version(packageVersion(), '-V, --version', 'print the version and exit')
  .option(
    '--server <list>',
    'node API addresses HOST:PORT,... (env SLIPWAY_SERVER; default the local cluster)',
  )
  .addOption(
    new Option('-o, --output <format>', 'output format').choices(outputFormats).default('table' as const),
  )
  .option('--timeout <ms>', 'give up on a command after this long', '10000')
  .option('--token-file <file>', 'file holding your operator token (env SLIPWAY_TOKEN)')
  .option('--ca <file>', 'the cluster CA certificate (ca.crt from `slipway bootstrap`): TLS (env SLIPWAY_CA)')
  .option(
    insecureNetworkFlag,
    'DANGER: without --ca, send your token in plaintext to servers beyond loopback all the same (labs only)',
  )
  .exitOverride()
  .showHelpAfterError();

const clients: ClusterClient[] = [];
/** `waitMs`: a command that waits server-side (power) gets at least that long plus a margin. */
function connect(opts: { waitMs?: number } = {}): {
  client: ClusterClient;
  output: ReturnType<typeof parseOutputFormat>;
} {
  const o = program.opts();
  const timeout = Number(o.timeout);
  if (!Number.isInteger(timeout) || timeout <= 0)
    throw new UsageError('--timeout must be a positive number of ms');
  const client = new ClusterClient(parseServers(o.server), {
    timeoutMs: Math.max(timeout, (opts.waitMs ?? 0) + 5000),
    token: operatorToken(o.tokenFile),
    ca: clusterCa(o.ca),
    insecureAllowNetwork: o.insecureAllowNetwork,
  });
  clients.push(client);
  return { client, output: parseOutputFormat(o.output) };
}

serverCommand(program);
bootstrapCommand(program);
bootosCommand(program);
labCommand(program);
balancerCommand(program);
kvCommand(program, connect);
memberCommand(program, connect);
hardwareCommand(program, connect);
leaseCommand(program, connect);
templateCommand(program, connect);
workflowCommand(program, connect);
powerCommand(program, connect);
artifactCommand(program, connect);
tokenCommand(program, connect);
auditCommand(program, connect);
snapshotCommand(program, connect, () => parseOutputFormat(program.opts().output));
workerCommand(program, () => program.opts());
const statusAccess: StatusAccess = {
  servers: () => parseServers(program.opts().server),
  clientFor: (server) => {
    const o = program.opts();
    const c = new ClusterClient([server], {
      timeoutMs: 3000,
      token: operatorToken(o.tokenFile),
      ca: clusterCa(o.ca),
      insecureAllowNetwork: o.insecureAllowNetwork,
    });
    clients.push(c);
    return c;
  },
};
clusterCommand(program, () => parseOutputFormat(program.opts().output), statusAccess);
upgradeCommand(program, () => parseOutputFormat(program.opts().output), statusAccess);

function operatorToken(file: string | undefined): string | undefined {
  if (file === undefined) return process.env['SLIPWAY_TOKEN'];
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new UsageError(`cannot read --token-file ${file}: ${(err as Error).message}`);
  }
}

const usageStatuses = new Set<number>([status.INVALID_ARGUMENT, status.NOT_FOUND, status.ALREADY_EXISTS]);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  process.exitCode = exitCodeFor(err);
} finally {
  for (const c of clients) c.close();
}

function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) {
    // Help and version are not failures; commander already printed its message.
    return err.exitCode === 0 ? 0 : 2;
  }
  if (err instanceof UsageError || err instanceof ConfigError) {
    process.stderr.write(`slipway: ${err.message}\n`);
    return 2;
  }
  if (isServiceError(err)) {
    // A request over the node's message limit is bad input: exit 2, naming the setting.
    const tooLarge = messageLimitRefusal(err);
    if (tooLarge !== undefined) {
      process.stderr.write(`slipway: ${tooLarge}\n`);
      return 2;
    }
    process.stderr.write(`slipway: ${err.details || err.message}\n`);
    return usageStatuses.has(err.code) ? 2 : 1;
  }
  process.stderr.write(`slipway: ${err instanceof Error ? err.message : String(err)}\n`);
  return 1;
}

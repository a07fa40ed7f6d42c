// The `slipway` command. Exit codes: 0 success, 1 the operation failed, 2 bad usage or input.
// It starts at once: a command group's module (src/cli/commands/) is imported only when the
// command line names one of its commands, the gRPC client only before the action of a group that
// talks to the cluster, and `--version` loads no group at all. `--help`, a bare `slipway` and an
// unknown command load every group, so the help lists them all.
import { Command, CommanderError, Option } from '@commander-js/extra-typings';
import { ConfigError } from '../platform/config-error.js';
import type { ClusterClient } from './client.js';
import { readFileSync } from 'node:fs';
import type { StatusAccess } from './status-access.js';
import type { TreeCommand } from './help.js';
import { outputFormats, parseOutputFormat, UsageError } from './output.js';
import { packageFile } from '../platform/package-file.js';
import { insecureNetworkFlag } from '../platform/plaintext-policy.js';

function packageVersion(): string {
  const text = readFileSync(packageFile('package.json'), 'utf8');
  const parsed = JSON.parse(text) as { version?: unknown };
  return typeof parsed.version === 'string' ? parsed.version : 'unknown';
}

/** The program with its global options, before any command group is added. */
function newProgram() {
  return new Command()
    .name('slipway')
    .description('Slipway: a highly available bare-metal provisioner')
    .version(packageVersion(), '-V, --version', 'print the version and exit')
    .option(
      '--server <list>',
      'node API addresses HOST:PORT,..., or xds:///slipway (env SLIPWAY_SERVER; default the local cluster)',
    )
    .option(
      '--xds-server <list>',
      'with --server xds:///slipway: nodes to ask for the members, HOST:PORT,... (env SLIPWAY_XDS_SERVER)',
    )
    .addOption(
      new Option('-o, --output <format>', 'output format').choices(outputFormats).default('table' as const),
    )
    .option(
      '--timeout <duration>',
      'give up on a command after this long: 30s, 2m, or a bare number of milliseconds; `node drain` waits this long (default 60s)',
      '10000',
    )
    .option('--token-file <file>', 'file holding your operator token (env SLIPWAY_TOKEN)')
    .option(
      '--ca <file>',
      'the cluster CA certificate (ca.crt from `slipway bootstrap`): TLS (env SLIPWAY_CA)',
    )
    .option(
      insecureNetworkFlag,
      'DANGER: without --ca, send your token in plaintext to servers beyond loopback all the same (labs only)',
    )
    .configureHelp({ showGlobalOptions: true })
    .addHelpText('after', `\n${exitCodesHelp}`)
    .exitOverride()
    .showHelpAfterError();
}

/** The exit codes of every command (src/cli/help.ts repeats them where the tests read them). */
const exitCodesHelp = `Exit codes:
  0  done
  1  the operation failed (a node refused it, a workflow did not succeed, nothing answered)
  2  bad usage or input (a flag, an argument, a file), or what it names does not exist`;
type Program = ReturnType<typeof newProgram>;

const program = newProgram();

/** The client module, loaded before the action of any group that talks to the cluster. */
let clientModule: typeof import('./client.js') | undefined;
async function loadClient(): Promise<void> {
  clientModule ??= await import('./client.js');
}
function clientApi(): typeof import('./client.js') {
  if (clientModule === undefined) throw new Error('the cluster client was not loaded before the action');
  return clientModule;
}

const clients: ClusterClient[] = [];
/** `waitMs`: a command that waits server-side (power) gets at least that long plus a margin. */
function connect(opts: { waitMs?: number } = {}): {
  client: ClusterClient;
  output: ReturnType<typeof parseOutputFormat>;
} {
  const o = program.opts();
  const timeout = timeoutMs(o.timeout);
  const { ClusterClient, clusterCa, parseServers } = clientApi();
  const client = new ClusterClient(parseServers(o.server), {
    timeoutMs: Math.max(timeout, (opts.waitMs ?? 0) + 5000),
    token: operatorToken(o.tokenFile),
    ca: clusterCa(o.ca),
    insecureAllowNetwork: o.insecureAllowNetwork,
    xdsServer: o.xdsServer,
  });
  clients.push(client);
  return { client, output: parseOutputFormat(o.output) };
}

const statusAccess: StatusAccess = {
  servers: () => clientApi().parseServers(program.opts().server),
  clientFor: (server) => {
    const o = program.opts();
    const { ClusterClient, clusterCa } = clientApi();
    const c = new ClusterClient([server], {
      timeoutMs: 3000,
      token: operatorToken(o.tokenFile),
      ca: clusterCa(o.ca),
      insecureAllowNetwork: o.insecureAllowNetwork,
      xdsServer: o.xdsServer,
    });
    clients.push(c);
    return c;
  },
};
const output = (): ReturnType<typeof parseOutputFormat> => parseOutputFormat(program.opts().output);

/** --timeout: whole ms (as always), or a duration with its unit (flags.ts's, kept here: --version loads no more). */
function timeoutMs(text: string): number {
  const m = /^(\d+)(ms|s|m|h)?$/.exec(text);
  const unitMs: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const ms = m === null ? NaN : Number(m[1]) * (unitMs[m[2] ?? 'ms'] ?? NaN);
  if (!Number.isSafeInteger(ms) || ms <= 0)
    throw new UsageError(`--timeout must be a positive number of ms or a duration (30s, 2m), got "${text}"`);
  return ms;
}

/** --timeout when the command line gives it, for commands that wait longer by default. */
const givenTimeoutMs = (): number | undefined =>
  program.getOptionValueSource('timeout') === 'default' ? undefined : timeoutMs(program.opts().timeout);

interface Group {
  /** The top-level commands its module adds, in order. */
  readonly commands: readonly string[];
  /** Its actions talk to the cluster: the client module loads before them. */
  readonly client: boolean;
  /** Imports the module and adds its commands to the program. */
  readonly register: (p: Program) => Promise<void>;
}

/** Every command group, in the order the help lists them. */
const groups: readonly Group[] = [
  {
    commands: ['server'],
    client: false,
    register: async (p) => (await import('./commands/server.js')).serverCommand(p),
  },
  {
    commands: ['bootstrap'],
    client: false,
    register: async (p) => (await import('./commands/bootstrap.js')).bootstrapCommand(p),
  },
  {
    commands: ['bootos'],
    client: false,
    register: async (p) => (await import('./commands/bootos.js')).bootosCommand(p),
  },
  {
    commands: ['lab'],
    client: false,
    register: async (p) => (await import('./commands/lab.js')).labCommand(p),
  },
  {
    commands: ['balancer'],
    client: false,
    register: async (p) =>
      (await import('./commands/balancer.js')).balancerCommand(p, async () => {
        await loadClient();
        return statusAccess;
      }),
  },
  {
    commands: ['kv'],
    client: true,
    register: async (p) => (await import('./commands/kv.js')).kvCommand(p, connect),
  },
  {
    commands: ['member', 'leader'],
    client: true,
    register: async (p) => (await import('./commands/member.js')).memberCommand(p, connect),
  },
  {
    commands: ['node'],
    client: true,
    register: async (p) => (await import('./commands/node.js')).nodeCommand(p, connect, givenTimeoutMs),
  },
  {
    commands: ['hardware'],
    client: true,
    register: async (p) => (await import('./commands/hardware.js')).hardwareCommand(p, connect),
  },
  {
    commands: ['lease'],
    client: true,
    register: async (p) => (await import('./commands/lease.js')).leaseCommand(p, connect),
  },
  {
    commands: ['template'],
    client: true,
    register: async (p) => (await import('./commands/template.js')).templateCommand(p, connect),
  },
  {
    commands: ['workflow'],
    client: true,
    register: async (p) => (await import('./commands/workflow.js')).workflowCommand(p, connect),
  },
  {
    commands: ['import'],
    client: true,
    register: async (p) => (await import('./commands/import.js')).importCommand(p, connect),
  },
  {
    commands: ['pool'],
    client: true,
    register: async (p) => (await import('./commands/pool.js')).poolCommand(p, connect),
  },
  {
    commands: ['power'],
    client: true,
    register: async (p) => (await import('./commands/power.js')).powerCommand(p, connect),
  },
  {
    commands: ['artifact'],
    client: true,
    register: async (p) => (await import('./commands/artifact.js')).artifactCommand(p, connect),
  },
  {
    commands: ['token'],
    client: true,
    register: async (p) => (await import('./commands/token.js')).tokenCommand(p, connect),
  },
  {
    commands: ['audit'],
    client: true,
    register: async (p) => (await import('./commands/audit.js')).auditCommand(p, connect),
  },
  {
    commands: ['snapshot'],
    client: true,
    register: async (p) => (await import('./commands/snapshot.js')).snapshotCommand(p, connect, output),
  },
  {
    commands: ['worker'],
    client: false,
    register: async (p) => (await import('./commands/worker.js')).workerCommand(p, () => p.opts()),
  },
  {
    commands: ['cluster'],
    client: true,
    register: async (p) => (await import('./commands/cluster.js')).clusterCommand(p, output, statusAccess),
  },
  {
    commands: ['upgrade'],
    client: true,
    register: async (p) => (await import('./commands/upgrade.js')).upgradeCommand(p, output, statusAccess),
  },
  {
    commands: ['completion', '__complete'],
    client: false,
    register: async (p) => (await import('./commands/completion.js')).completionCommand(p, fullProgram),
  },
  {
    commands: ['__manual'],
    client: false,
    register: async (p) => (await import('./commands/manual.js')).manualCommand(p, fullProgram),
  },
];

/** A program with every group, for what needs the whole tree (completion, the manual). */
async function fullProgram(): Promise<Command> {
  const full = newProgram();
  for (const group of groups) await register(group, full);
  return full;
}

async function register(group: Group, p: Program = program): Promise<void> {
  const before = p.commands.length;
  await group.register(p);
  const added = p.commands.slice(before);
  const names = added.map((c) => c.name());
  if (names.join(',') !== group.commands.join(','))
    throw new Error(`a command module added ${names.join(', ')}, not ${group.commands.join(', ')}`);
  if (group.client) for (const command of added) command.hook('preAction', loadClient);
  const { addExamples } = await import('./help.js');
  for (const command of added) addExamples(command as unknown as TreeCommand, command.name());
}

/**
 * The command the command line names: its first operand, skipping the global options and the
 * values of those that take one (`--server LIST kv get` names kv). Undefined when there is none,
 * and when help is asked for before it (`--help kv` shows the program's help).
 */
function namedCommand(args: readonly string[]): string | undefined {
  const takesValue = new Set(
    program.options.filter((o) => o.required || o.optional).flatMap((o) => [o.short, o.long]),
  );
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') return args[i + 1];
    if (arg === '-h' || arg === '--help') return undefined;
    if (!arg.startsWith('-') || arg === '-') return arg;
    if (takesValue.has(arg)) i++;
  }
  return undefined;
}

const args = process.argv.slice(2);
const named = namedCommand(args);
// A reader that stopped reading (`slipway --help | head`, `... | grep -m1`) is not a failure
// of a command: it ends quietly, as the shell's own tools do, instead of a stack trace for
// EPIPE. A node or an agent that loses its output still fails loudly, for its supervisor.
if (named !== 'server' && named !== 'worker') {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err;
      process.exit();
    });
  }
}
const namedGroup = named === undefined ? undefined : groups.find((g) => g.commands.includes(named));
const versionOnly =
  named === undefined &&
  args.some((a) => a === '-V' || a === '--version') &&
  !args.some((a) => a === '-h' || a === '--help');
/** Set when the program itself, not a command, refused the command line. */
let programRefused = false;
if (namedGroup !== undefined) {
  await register(namedGroup);
  // A bad global option shows the program's help, which lists every command: printed after the
  // error (exitCodeFor) from a program with all groups. The program's commands keep their own
  // help after an error and the exit handler they were made with, so this one hears only the
  // program's own refusals.
  program.showHelpAfterError(false).exitOverride((err) => {
    programRefused = true;
    throw err;
  });
} else if (!versionOnly) for (const group of groups) await register(group);

function operatorToken(file: string | undefined): string | undefined {
  if (file === undefined) return process.env['SLIPWAY_TOKEN'];
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new UsageError(`cannot read --token-file ${file}: ${(err as Error).message}`);
  }
}

try {
  await program.parseAsync(process.argv);
} catch (err) {
  process.exitCode = await exitCodeFor(err);
} finally {
  for (const c of clients) c.close();
  // grpc-js-xds holds the process open (src/platform/xds-target.ts): end it once output is out.
  if (clientModule?.xdsEnabled() === true) process.stdout.write('', () => process.exit());
}

async function exitCodeFor(err: unknown): Promise<number> {
  if (err instanceof CommanderError) {
    // Help and version are not failures; commander already printed its message.
    if (err.exitCode === 0) return 0;
    if (programRefused) {
      const full = await fullProgram();
      process.stderr.write('\n');
      full.outputHelp({ error: true });
    }
    return 2;
  }
  if (err instanceof UsageError || err instanceof ConfigError) {
    process.stderr.write(`slipway: ${err.message}\n`);
    return 2;
  }
  // Any other failure, most often a failed call: grpc-js is loaded already, so this costs little.
  const { failureExit } = await import('./errors.js');
  const { message, exitCode } = failureExit(err);
  process.stderr.write(`slipway: ${message}\n`);
  return exitCode;
}

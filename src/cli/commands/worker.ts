// `slipway worker`: the agent that runs on a machine being provisioned.
import { readFileSync } from 'node:fs';
import type { Command } from '@commander-js/extra-typings';
import type { Logger } from 'pino';
import type { CredentialSource, MachineControl } from '../../worker/index.js';
import { insecureNetworkFlag, plaintextSecretRefusal } from '../../platform/plaintext-policy.js';
import { UsageError } from '../output.js';

/** Global flags the worker shares with the other commands (commander parses them anywhere). */
export interface GlobalFlags {
  readonly server?: string | undefined;
  /** With --server xds:///NAME: the xDS servers (src/platform/xds-target.ts). */
  readonly xdsServer?: string | undefined;
  readonly tokenFile?: string | undefined;
  readonly ca?: string | undefined;
  readonly insecureAllowNetwork?: boolean | undefined;
}

export function workerCommand(program: Command, globals: () => GlobalFlags): void {
  program
    .command('worker')
    .description("run a machine's worker agent: receive its actions, run them, report results")
    .requiredOption('--id <hardware-id>', "this machine's hardware id")
    .option('--token-file <file>', "file holding this machine's worker token (`slipway hardware token ID`)")
    .option(
      '--claim-url <url>',
      'claim a per-boot credential here instead of a token (the boot OS: http://VIP:PORT/credential)',
    )
    .option('--mac <mac>', 'with --claim-url: the MAC of the interface this machine booted from')
    .option(
      '--credential-file <file>',
      'with --claim-url: where the claimed credential is kept across restarts',
    )
    .option(
      '--journal-dir <dir>',
      'where unacknowledged results are kept across restarts',
      '/var/lib/slipway/worker',
    )
    .option('--work-dir <dir>', 'working directory of the actions')
    .option(
      '--inventory',
      "inventory mode (the boot OS's slipway.mode=inventory): collect this machine's inventory, report it with an inventory-boot credential (needs --claim-url and --mac), exit",
    )
    .option('--inventory-root <dir>', "with --inventory: where the system's /proc, /sys and /dev are", '/')
    .option(
      insecureNetworkFlag,
      'DANGER: without --ca, present the token or credential in plaintext to servers beyond loopback (labs only)',
    )
    .option('--log-level <level>', 'trace|debug|info|warn|error', 'info')
    .action((o) => runWorker(o, globals()));
}

interface WorkerFlags {
  readonly id: string;
  readonly tokenFile?: string | undefined;
  readonly claimUrl?: string | undefined;
  readonly mac?: string | undefined;
  readonly credentialFile?: string | undefined;
  readonly journalDir: string;
  readonly workDir?: string | undefined;
  readonly inventory?: true | undefined;
  readonly inventoryRoot: string;
  readonly insecureAllowNetwork?: true | undefined;
  readonly logLevel: string;
}

/** Checks the flags, then runs the agent until SIGTERM or SIGINT stops it. */
async function runWorker(o: WorkerFlags, g: GlobalFlags): Promise<void> {
  // The agent loads here, not with the module: other commands and --help start without it.
  const [
    { createLogger },
    { Agent, ClaimedCredential, machineControlFrom, machineControlVariable },
    { clusterCa, parseServers, usage },
    { enableXds, isXdsTarget, parseXdsServers, releaseXds },
  ] = await Promise.all([
    import('../../platform/logger.js'),
    import('../../worker/index.js'),
    import('../client.js'),
    import('../../platform/xds-target.js'),
  ]);
  // The agent's own --server list, falling back to the global flag and SLIPWAY_SERVER.
  const servers = parseServers(g.server);
  const xds = servers.some(isXdsTarget);
  const xdsServers = xds ? usage(() => parseXdsServers(g.xdsServer)) : [];
  // `--token-file` is also a global flag, so commander may hand it to either.
  const token = workerToken(o.tokenFile ?? g.tokenFile);
  const levels = ['trace', 'debug', 'info', 'warn', 'error'];
  if (!levels.includes(o.logLevel)) throw new UsageError(`--log-level must be one of ${levels.join(', ')}`);
  let machineControl: MachineControl;
  try {
    // For tests: record:FILE notes reboots and poweroffs instead of doing them.
    machineControl = machineControlFrom(process.env[machineControlVariable]);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const logger = createLogger({ worker: o.id }, o.logLevel);
  checkClaimFlags(o, token);
  const ca = clusterCa(g.ca);
  // Through xDS the nodes are the members the xDS servers name: as near as those servers.
  refusePlaintextSecret(o, g, token, ca, xds ? xdsServers : servers);
  const credential =
    o.claimUrl === undefined || o.mac === undefined
      ? undefined
      : new ClaimedCredential({
          url: o.claimUrl,
          workerId: o.id,
          mac: o.mac,
          ...(o.credentialFile === undefined ? {} : { file: o.credentialFile }),
          ...(o.inventory === true ? { mode: 'inventory' as const } : {}),
          logger,
        });
  if (o.inventory === true && credential === undefined) {
    throw new UsageError('--inventory needs --claim-url and --mac: an inventory boot claims its credential');
  }
  // The worker's stream then goes to the member its id hashes to (x-worker-id, ring hash). With
  // the CA, xDS goes over TLS: a server that refuses TLS stops the worker at once (a wrong CA
  // or address); one that does not answer yet is tried again, as the nodes are.
  const xdsTls =
    ca === undefined
      ? undefined
      : {
          ca,
          onError: (err: Error) => logger.warn({ err: err.message }, 'no xDS server over TLS; trying again'),
        };
  if (xds) await usage(() => enableXds(xdsServers, `slipway-worker/${o.id}`, xdsTls));
  if (o.inventory === true && credential !== undefined) {
    process.exitCode = await runInventoryMode(o, servers, credential, ca, logger);
    logger.flush();
    if (xds) {
      await releaseXds();
      process.exit();
    }
    return;
  }
  const agent = new Agent({
    workerId: o.id,
    servers,
    ...(token === undefined ? {} : { token }),
    ...(credential === undefined ? {} : { credential }),
    ca,
    journalDir: o.journalDir,
    ...(o.workDir === undefined ? {} : { workDir: o.workDir }),
    logger,
    machineControl,
  });
  await agent.start();
  const stop = (): void => {
    agent.stop().catch(() => undefined);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await agent.done;
  logger.flush();
  // grpc-js-xds holds the process open (src/platform/xds-target.ts).
  if (xds) {
    await releaseXds();
    process.exit();
  }
}

/**
 * Inventory mode: collect, report, and say what became of the report. 0 when recorded, 1 when
 * refused (the message says why).
 */
async function runInventoryMode(
  o: WorkerFlags,
  servers: readonly string[],
  credential: CredentialSource,
  ca: Buffer | undefined,
  logger: Logger,
): Promise<number> {
  const { collectInventory, reportInventory } = await import('../../worker/index.js');
  const { inventory, notes } = await collectInventory({ root: o.inventoryRoot });
  for (const note of notes) logger.info({ note }, 'inventory');
  const answer = await reportInventory({ workerId: o.id, servers, credential, ca, inventory, logger });
  if (answer.accepted) {
    logger.info({ hardwareId: answer.hardwareId }, 'inventory recorded');
    process.stdout.write(`${answer.hardwareId}\n`);
    return 0;
  }
  logger.error({ reason: answer.message }, 'inventory report refused');
  process.stderr.write(`inventory report refused: ${answer.message}\n`);
  return 1;
}

/** The machine's worker token: from the token file when one is named, else SLIPWAY_WORKER_TOKEN. */
function workerToken(tokenFile: string | undefined): string | undefined {
  if (tokenFile === undefined) return process.env['SLIPWAY_WORKER_TOKEN'];
  try {
    return readFileSync(tokenFile, 'utf8').trim();
  } catch (err) {
    throw new UsageError(`cannot read --token-file ${tokenFile}: ${(err as Error).message}`);
  }
}

/** --claim-url takes the place of a token, needs --mac, and must be an http(s) URL. */
function checkClaimFlags(o: WorkerFlags, token: string | undefined): void {
  if (o.claimUrl !== undefined && (token !== undefined || o.mac === undefined)) {
    throw new UsageError('--claim-url needs --mac and takes the place of --token-file');
  }
  if (o.claimUrl !== undefined && !/^https?:\/\/[^/\s]+\//.test(o.claimUrl)) {
    throw new UsageError(
      `--claim-url must be an http(s) URL such as http://10.0.0.100:8080/credential, got ${o.claimUrl}`,
    );
  }
}

/**
 * A token or credential in the clear lets anyone on the path act as this machine: without a CA,
 * refused toward servers beyond loopback unless --insecure-allow-network says so.
 */
function refusePlaintextSecret(
  o: WorkerFlags,
  g: GlobalFlags,
  token: string | undefined,
  ca: Buffer | undefined,
  servers: readonly string[],
): void {
  const insecureAllowNetwork = o.insecureAllowNetwork === true || g.insecureAllowNetwork === true;
  if ((token !== undefined || o.claimUrl !== undefined) && ca === undefined && !insecureAllowNetwork) {
    const secret = token !== undefined ? "the machine's worker token" : "the machine's per-boot credential";
    const refusal = plaintextSecretRefusal(servers, secret);
    if (refusal !== undefined) throw new UsageError(refusal);
  }
}

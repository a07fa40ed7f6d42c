// `slipway server`: runs one provisioner node until SIGTERM/SIGINT. A leader hands its
// leadership to the most caught-up follower before exiting, so writes barely pause.
import type { Command } from '@commander-js/extra-typings';
import { startNode } from '../../api/node-server.js';
import type { ServerConfig } from '../../api/server-config.js';
import { parsePeers, readConfigFile, validateServerConfig } from '../../api/server-config.js';
import { createLogger } from '../../platform/logger.js';

export function serverCommand(program: Command): void {
  program
    .command('server')
    .description('run a provisioner node (raft member, replicated store, client API)')
    .option('--config <file>', 'YAML or JSON file with the settings below (flags override it)')
    .option('--id <id>', "this member's id, e.g. n1")
    .option('--data-dir <dir>', 'where the raft log and snapshots live')
    .option('--raft-addr <host:port>', 'address for peer traffic')
    .option('--api-addr <host:port>', 'address for the CLI and worker API')
    .option('--peers <list>', 'initial members as ID=HOST:PORT,... (raft addresses, this node included)')
    .option(
      '--join',
      'join an existing cluster: start empty, reach the members named by --peers, and wait for `slipway member add`',
    )
    .option('--tick-ms <n>', 'raft tick in milliseconds (default 50)')
    .option('--election-ticks <n>', 'ticks of leader silence before an election (default 6)')
    .option('--snapshot-entries <n>', 'snapshot after this many applied entries (default 10000)')
    .option('--log-level <level>', 'trace|debug|info|warn|error (default info)')
    .action(async (o) => {
      const raw: Record<string, unknown> = o.config !== undefined ? readConfigFile(o.config) : {};
      const set = (k: string, v: unknown): void => {
        if (v !== undefined) raw[k] = v;
      };
      set('id', o.id);
      set('dataDir', o.dataDir);
      set('raftAddr', o.raftAddr);
      set('apiAddr', o.apiAddr);
      if (o.peers !== undefined) raw['peers'] = parsePeers(o.peers);
      if (o.join === true) raw['join'] = true;
      set('tickMs', toInt(o.tickMs, '--tick-ms'));
      set('electionTicks', toInt(o.electionTicks, '--election-ticks'));
      set('snapshotEntries', toInt(o.snapshotEntries, '--snapshot-entries'));
      set('logLevel', o.logLevel);
      const cfg: ServerConfig = validateServerConfig(raw);
      const logger = createLogger({ node: cfg.id }, cfg.logLevel);
      const running = await startNode(cfg, logger);
      await new Promise<void>((resolve) => {
        const onSignal = (sig: string): void => {
          logger.info({ signal: sig }, 'stopping');
          running.stop().then(resolve, resolve);
        };
        process.once('SIGTERM', () => onSignal('SIGTERM'));
        process.once('SIGINT', () => onSignal('SIGINT'));
      });
      logger.flush();
    });
}

function toInt(v: string | undefined, flag: string): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new Error(`${flag} must be a whole number, got "${v}"`);
  return Number(v);
}

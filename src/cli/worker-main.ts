// The worker agent as the boot OS runs it: `node worker.mjs worker --id ... --server ...`. The
// same `worker` command as `slipway worker`, without the rest of the CLI, so that the bundle
// holds only what the agent loads (no LevelDB, no server).
import { Command, CommanderError } from '@commander-js/extra-typings';
import { workerCommand } from './commands/worker.js';
import { UsageError } from './output.js';

const program = new Command()
  .name('slipway-worker')
  .description("Slipway's worker agent, as the boot OS runs it")
  .option('--server <list>', 'node API addresses HOST:PORT,... (env SLIPWAY_SERVER)')
  .option('--token-file <file>', "file holding this machine's worker token")
  .option('--ca <file>', 'the cluster CA certificate: TLS to the nodes')
  .exitOverride();
workerCommand(program, () => program.opts());

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) process.exitCode = err.exitCode === 0 ? 0 : 2;
  else {
    process.stderr.write(`slipway worker: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  }
}

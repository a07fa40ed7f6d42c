// `slipway power on|off|cycle|status|netboot ID` and `power job get ID` / `power job list`: power
// control through the machine's BMC. Each change is a job in the replicated state that the
// leader carries out; the command waits for it and exits 0 when it succeeded, 1 when it failed
// or did not finish in time (the message says which and what to do).
import type { Command } from '@commander-js/extra-typings';
import type { PowerJobRecord } from '../../gen/control.js';
import type { ClusterClient } from '../client.js';
import { duration } from '../flags.js';
import type { OutputFormat, Row } from '../output.js';
import { render } from '../output.js';
import { continueHelp, limitHelp, localHelp, printList, readList } from '../pages.js';

type Connect = (opts: { waitMs?: number }) => { client: ClusterClient; output: OutputFormat };

const waitMsDefault = 60_000;

const changes = {
  on: 'power the machine on (nothing to do when it is on)',
  off: 'power the machine off (nothing to do when it is off)',
  cycle: 'power the machine off, then on',
  netboot: 'make the next boot a network (PXE) boot, then power cycle (or on)',
} as const;

export function powerCommand(program: Command, connect: Connect): void {
  const power = program.command('power').description("control machines' power through their BMC (IPMI)");
  for (const [op, description] of Object.entries(changes)) {
    power
      .command(op)
      .description(description)
      .argument('<id>', 'hardware id')
      .option(
        '--wait <duration>',
        'how long to wait for the job to finish: 30s, 2m, or a bare number of milliseconds',
        String(waitMsDefault),
      )
      .action(async (id, o) => {
        const waitMs = duration(o.wait, '--wait', 'ms');
        const { client, output } = connect({ waitMs });
        const res = await client.control('powerChange', { hardwareId: id, op, waitMs });
        finish(output, res.job, res.finished, waitMs);
      });
  }
  power
    .command('status')
    .description('ask the BMC whether the machine is on or off')
    .argument('<id>', 'hardware id')
    .option(
      '--wait <duration>',
      'how long to wait for the answer: 30s, 2m, or a bare number of milliseconds',
      String(waitMsDefault),
    )
    .action(async (id, o) => {
      const waitMs = duration(o.wait, '--wait', 'ms');
      const { client, output } = connect({ waitMs });
      const res = await client.control('powerStatus', { hardwareId: id, waitMs });
      finish(output, res.job, res.finished, waitMs);
    });
  powerJobCommands(power, connect);
}

/**
 * `power job get JOB-ID` and `power job list [--hardware ID]`. The forms before them stay: `power
 * job JOB-ID` (get is job's default) and `power jobs [HARDWARE-ID]` (hidden).
 */
function powerJobCommands(power: Command, connect: Connect): void {
  const job = power
    .command('job')
    .description('power jobs: each change or status query the leader carries out');
  job
    .command('get', { isDefault: true })
    .description('show a power job')
    .argument('<job-id>')
    .option('--local', localHelp)
    .action(async (id, o) => {
      const { client, output } = connect({});
      const res = await client.control('powerJobGet', { id, local: o.local === true });
      const found = res.job;
      process.stdout.write(`${render(output, found ?? {}, found === undefined ? [] : [row(found)])}\n`);
    });
  const list = async (
    hardwareId: string | undefined,
    o: { local?: true; limit?: string; continue?: string },
  ): Promise<void> => {
    const { pages, next, output } = await readList(
      o,
      () => connect({}),
      (client, req) => client.control('powerJobList', { hardwareId: hardwareId ?? '', ...req }),
      (p) => p.jobs.length,
    );
    const jobs = pages.flatMap((p) => p.jobs);
    printList(output, { doc: { jobs }, rows: jobs.map(row) }, next, 'power jobs');
  };
  job
    .command('list')
    .description('list power jobs, oldest first')
    .option('--hardware <id>', "only this machine's jobs")
    .option('--local', localHelp)
    .option('--limit <n>', limitHelp)
    .option('--continue <token>', continueHelp)
    .action((o) => list(o.hardware, o));
  power
    .command('jobs', { hidden: true })
    .description('the form before `power job list`: list power jobs, oldest first')
    .argument('[hardware-id]', "only this machine's jobs")
    .option('--local', localHelp)
    .option('--limit <n>', limitHelp)
    .option('--continue <token>', continueHelp)
    .action((hardwareId, o) => list(hardwareId, o));
}

/** Prints the job and sets the exit code: 0 only for a job that succeeded. */
function finish(
  output: OutputFormat,
  job: PowerJobRecord | undefined,
  finished: boolean,
  waitMs: number,
): void {
  if (job === undefined) throw new Error('the server answered without the job');
  if (output === 'table') {
    const state = job.powerState === '' ? '' : `power ${job.powerState}; `;
    process.stdout.write(`${job.hardwareId}: ${state}${job.op} ${job.state}: ${job.message}\n`);
  } else process.stdout.write(`${render(output, { ...job, finished }, [])}\n`);
  if (job.state === 'SUCCEEDED') return;
  process.exitCode = 1;
  const why = finished
    ? `power ${job.op} of "${job.hardwareId}" failed: ${job.message}`
    : `power job ${job.id} is still ${job.state} after ${String(waitMs)} ms; follow it with \`slipway power job ${job.id}\``;
  process.stderr.write(`slipway: ${why}\n`);
}

function row(job: PowerJobRecord): Row {
  return {
    id: job.id,
    hardware: job.hardwareId,
    op: job.op,
    state: job.state,
    step: `${String(Math.min(job.stepIndex + 1, job.steps.length))}/${String(job.steps.length)}`,
    attempt: job.attempt,
    power: job.powerState,
    message: job.message,
  };
}

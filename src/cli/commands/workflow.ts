// `slipway workflow create|get|list|events|wait|state|cancel|retry|delete|retention`.
import type { Command } from '@commander-js/extra-typings';
import type { WorkflowEvent, WorkflowRecord } from '../../gen/control.js';
import type { ClusterClient } from '../client.js';
import type { OutputFormat, Row } from '../output.js';
import { wholeNumber } from '../flags.js';
import { render, UsageError } from '../output.js';
import { continueHelp, limitHelp, localHelp, printList, readList } from '../pages.js';
import { selectorFlag, selectorHelp } from './selector-flag.js';
import { addRetentionFlags, retentionGiven, type RetentionFlags } from '../retention-flags.js';
import {
  alternateAttemptsDefault,
  alternateAttemptsMax,
  raceAttemptsDefault,
  workflowFinishedDaysDefault,
  workflowFinishedMaxDefault,
  workflowRetentionDaysMax,
  workflowsMax,
} from '../../model/limits.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

export function workflowCommand(program: Command, connect: Connect): void {
  const wf = program.command('workflow').description('run and follow provisioning workflows');
  workflowCreateCommand(wf, connect);
  workflowReadCommands(wf, connect);
  workflowChangeCommands(wf, connect);
  workflowRetentionCommand(wf, connect);
}

/** `workflow create`: renders a template for a machine and starts the workflow. */
function workflowCreateCommand(wf: Command, connect: Connect): void {
  wf.command('create')
    .description(
      'render a template for a machine and start a workflow; prints its id. The workflow owns the ' +
        'machine until it ends (provisioning): refused, exit 1, while another workflow owns it or ' +
        'while the machine is inspecting, releasing, quarantined, drained or retired',
    )
    .requiredOption('--template <name>', 'template name')
    .option('--hardware <id>', 'the machine the workflow is for')
    .option(
      '--selector <selector>',
      'instead of --hardware: one ready machine the selector matches, allocated by the cluster ' +
        '(never one another workflow owns); refused, exit 1, when none is ready, saying how many ' +
        `matched but were not ready (see hardware explain). ${selectorHelp}`,
    )
    .option('--map <k=v...>', 'extra template variables, e.g. device_1=aa:bb:cc:dd:ee:ff (repeatable)')
    .option(
      '--netboot',
      'start by netbooting the machine through its BMC (next boot from the network, power cycle); on success its next boot is set to the disk',
    )
    .option(
      '--on-failure <policy>',
      'retry (default: each action its own retries, on the same machine), alternate (with --selector: ' +
        'the failed machine stays failed with its reason and the workflow runs again on another ready ' +
        'machine the selector matches, never one tried before) or race (with --selector: start on two ' +
        'such machines at once, keep the first to succeed, cancel the other and release its machine; ' +
        'a failed lane alternates onward while --attempts allows). Both need --selector, not --hardware',
    )
    .option(
      '--attempts <n>',
      `with --on-failure alternate: at most this many machines, the first included (1-${alternateAttemptsMax}, default ${alternateAttemptsDefault}); with race: both lanes included (2-${alternateAttemptsMax}, default ${raceAttemptsDefault})`,
    )
    .addHelpText(
      'after',
      "\nExamples:\n  slipway workflow create --template ubuntu --hardware m1\n  slipway workflow create --template ubuntu --selector 'rack=a,memory>=64Gi'\n  slipway workflow create --template ubuntu --selector 'rack=a' --on-failure alternate --attempts 3\n  slipway workflow create --template ubuntu --selector 'rack=a' --on-failure race --attempts 4",
    )
    .action(async (o) => {
      if ((o.hardware === undefined) === (o.selector === undefined))
        throw new UsageError('name the machine (--hardware ID) or give a --selector, one of them');
      const hardwareMap: Record<string, string> = {};
      for (const kv of o.map ?? []) {
        const eq = kv.indexOf('=');
        if (eq <= 0) throw new UsageError(`--map: "${kv}" must be KEY=VALUE`);
        hardwareMap[kv.slice(0, eq)] = kv.slice(eq + 1);
      }
      const { client, output } = connect();
      const res = await client.control('workflowCreate', {
        template: o.template,
        hardwareId: o.hardware ?? '',
        ...(o.selector === undefined ? {} : { selector: await selectorFlag(o.selector) }),
        ...failurePolicy(o),
        hardwareMap,
        netboot: o.netboot === true,
      });
      const rec = must(res.workflow);
      if (output === 'table') process.stdout.write(`${rec.id}\n`);
      else {
        const doc = { id: rec.id, state: rec.state, hardwareId: rec.hardwareId };
        process.stdout.write(`${render(output, doc, [])}\n`);
      }
    });
}

/** --on-failure and --attempts, checked here: exit 2 on a bad value or combination. */
export function failurePolicy(o: {
  onFailure?: string;
  attempts?: string;
  selector?: string;
  hardware?: string;
}): {
  onFailure?: string;
  attempts?: number;
} {
  const policy = o.onFailure ?? 'retry';
  if (policy !== 'retry' && policy !== 'alternate' && policy !== 'race')
    throw new UsageError(`--on-failure must be retry, alternate or race, got "${policy}"`);
  if (policy === 'retry') {
    if (o.attempts !== undefined)
      throw new UsageError('--attempts counts machines: it goes with --on-failure alternate or race');
    return o.onFailure === undefined ? {} : { onFailure: policy };
  }
  if (o.selector === undefined) {
    // A named machine has no equivalents to try (docs/decisions/0037): say what to give instead.
    const named = o.hardware === undefined ? '' : ` instead of --hardware ${o.hardware}`;
    throw new UsageError(
      `--on-failure ${policy} needs --selector${named}: the machines to try are those it matches ` +
        `(e.g. --selector 'rack=a'; \`slipway hardware explain SELECTOR\` shows which); ` +
        'to stay on one machine, use --on-failure retry (the default)',
    );
  }
  const race = policy === 'race';
  const least = race ? 2 : 1;
  const fallback = race ? raceAttemptsDefault : alternateAttemptsDefault;
  const attempts = o.attempts === undefined ? fallback : wholeNumber(o.attempts, '--attempts');
  if (attempts < least || attempts > alternateAttemptsMax) {
    const why = race ? ' (a race starts on two machines)' : '';
    throw new UsageError(`--attempts must be ${least}-${alternateAttemptsMax}${why}, got ${attempts}`);
  }
  return { onFailure: policy, attempts };
}

/** `workflow get|list|state|events`: what the workflows are doing. */
function workflowReadCommands(wf: Command, connect: Connect): void {
  wf.command('get')
    .description('show a workflow: state, and per action its state and attempts')
    .argument('<id>')
    .option('--local', localHelp)
    .action(async (id, o) => {
      const { client, output } = connect();
      const rec = must((await client.control('workflowGet', { id, local: o.local === true })).workflow);
      if (output === 'table') {
        process.stdout.write(
          `workflow ${rec.id}  ${rec.state}  template=${rec.template} hardware=${rec.hardwareId}${rec.selector === '' ? '' : ` selector=${rec.selector}`}\n`,
        );
        if (rec.onFailure === 'alternate') process.stdout.write(`${alternateLines(rec)}\n`);
        if (rec.onFailure === 'race') process.stdout.write(`${raceLines(rec)}\n`);
        process.stdout.write(`${render(output, rec, rec.actions.map(actionRow))}\n`);
      } else process.stdout.write(`${render(output, rec, [])}\n`);
    });
  wf.command('list')
    .description('list workflows')
    .option('--hardware <id>', 'only workflows on this machine')
    .option('--local', localHelp)
    .option('--limit <n>', limitHelp)
    .option('--continue <token>', continueHelp)
    .action(async (o) => {
      const { pages, next, output } = await readList(
        o,
        connect,
        (client, req) => client.control('workflowList', { hardwareId: o.hardware ?? '', ...req }),
        (p) => p.workflows.length,
      );
      const rows = pages.flatMap((p) => p.workflows).map(stateRow);
      printList(output, { doc: { workflows: rows }, rows }, next, 'workflows');
    });
  wf.command('state')
    .description("a workflow's state and progress")
    .argument('<id>')
    .action(async (id) => {
      const { client, output } = connect();
      const rec = must((await client.control('workflowGet', { id, local: false })).workflow);
      const r = stateRow(rec);
      process.stdout.write(`${render(output, r, [r])}\n`);
    });
  wf.command('events')
    .description(
      'print the events of a workflow; --follow streams new ones until it finishes (under --on-failure alternate, on its last machine)',
    )
    .argument('<id>')
    .option('--follow', 'keep streaming (survives the loss of the node serving it)')
    .option('--from <seq>', 'start at this event sequence number (resume after a break)', '0')
    .action(async (id, o) => {
      const from = wholeNumber(o.from, '--from');
      const { client, output } = connect();
      let final: string | undefined;
      await client.events(id, from, o.follow === true, (e) => {
        final = finalStateOf(e.type) ?? final;
        if (output === 'table') process.stdout.write(`${eventLine(e)}\n`);
        else if (output === 'json') process.stdout.write(`${JSON.stringify(e)}\n`);
        else process.stdout.write(`---\n${render(output, e, [])}\n`);
      });
      // Followed to its end, the exit code is `workflow wait`'s.
      if (o.follow === true && final !== 'SUCCESS') process.exitCode = 1;
    });
  workflowWaitCommand(wf, connect);
}

/** The state a workflow event finishes the workflow in, or undefined for any other event. */
function finalStateOf(type: string): string | undefined {
  const finals: Readonly<Record<string, string>> = {
    'workflow.succeeded': 'SUCCESS',
    'workflow.failed': 'FAILED',
    'workflow.timeout': 'TIMEOUT',
    'workflow.cancelled': 'CANCELLED',
  };
  return finals[type];
}

/** `workflow wait`: blocks until the workflow finishes; the exit code says how. */
function workflowWaitCommand(wf: Command, connect: Connect): void {
  wf.command('wait')
    .description(
      'wait until a workflow finishes and print its final state: exit 0 on SUCCESS, 1 on FAILED, ' +
        'TIMEOUT or CANCELLED (as `workflow events --follow`). Survives the loss of the node serving it.\n\n' +
        'A race (--on-failure race) is waited for whole: exit 0 once a lane won, 1 once both lanes failed. ' +
        'An alternate workflow (--on-failure alternate) is waited for across its machines: a failure on one it moves on from is not the end.\n\n' +
        'Examples:\n' +
        '  id=$(slipway workflow create --template ubuntu --hardware m1) && slipway workflow wait "$id"',
    )
    .argument('<id>')
    .action(async (id) => {
      const { client, output } = connect();
      const rec = must((await client.control('workflowGet', { id, local: false })).workflow);
      if (rec.onFailure === 'race' && rec.raceRequest === rec.id) {
        await waitForRace(client, output, rec);
        return;
      }
      let final: string | undefined;
      let last: WorkflowEvent | undefined;
      await client.events(id, 0, true, (e) => {
        final = finalStateOf(e.type) ?? final;
        last = e;
      });
      const doc = { id, state: final ?? 'UNKNOWN', message: last?.message ?? '' };
      process.stdout.write(
        `${output === 'table' ? `${doc.state}${doc.message === '' ? '' : `: ${doc.message}`}` : render(output, doc, [doc])}\n`,
      );
      if (final !== 'SUCCESS') process.exitCode = 1;
    });
}

/** How often `workflow wait` reads a race's record, which no single lane's events end. */
const raceWaitIntervalMs = 500;

/** `workflow wait` of a race's request: until a lane won (exit 0) or both failed (exit 1). */
async function waitForRace(
  client: ClusterClient,
  output: OutputFormat,
  first: WorkflowRecord,
): Promise<void> {
  let rec = first;
  while (rec.raceOutcome === 'running') {
    await new Promise((resolve) => setTimeout(resolve, raceWaitIntervalMs));
    rec = must((await client.control('workflowGet', { id: rec.id, local: false })).workflow);
  }
  const won = rec.raceOutcome === 'won';
  const doc = {
    id: rec.id,
    state: won ? 'SUCCESS' : 'FAILED',
    message: won
      ? `race won by workflow ${rec.raceWinner} on ${rec.raceWinnerHardwareId}`
      : `race lost on every machine: ${rec.machinesTried.join(', ')}`,
  };
  process.stdout.write(
    `${output === 'table' ? `${doc.state}: ${doc.message}` : render(output, doc, [doc])}\n`,
  );
  if (!won) process.exitCode = 1;
}

/** `workflow cancel|retry|delete`: stop, rerun or forget one workflow. */
function workflowChangeCommands(wf: Command, connect: Connect): void {
  wf.command('cancel')
    .description('cancel a workflow; the running action is stopped on its machine')
    .argument('<id>')
    .action(async (id) => {
      const { client, output } = connect();
      const rec = must((await client.control('workflowCancel', { id })).workflow);
      const r = stateRow(rec);
      process.stdout.write(`${render(output, r, [r])}\n`);
    });
  wf.command('retry')
    .description('run a failed, timed-out or cancelled workflow again from the action that stopped it')
    .argument('<id>')
    .option('--from-start', 'run every action again')
    .action(async (id, o) => {
      const { client, output } = connect();
      const rec = must(
        (await client.control('workflowRetry', { id, fromStart: o.fromStart === true })).workflow,
      );
      const r = stateRow(rec);
      process.stdout.write(`${render(output, r, [r])}\n`);
    });
  wf.command('delete')
    .description('delete a finished workflow and its events')
    .argument('<id>')
    .action(async (id) => {
      const { client, output } = connect();
      await client.control('workflowDelete', { id });
      process.stdout.write(`${render(output, { id, deleted: true }, [{ id, deleted: true }])}\n`);
    });
}

/** `workflow retention`: how long finished workflows stay in the replicated state. */
function workflowRetentionCommand(wf: Command, connect: Connect): void {
  const retention = wf
    .command('retention')
    .description(
      'show how long finished workflows stay in the state, or set it (admin); the leader removes those past it, archiving them first when it runs with --workflow-archive',
    );
  addRetentionFlags(retention, workflowRetentionFlags).action(async () => {
    // Checked here first, so that a bad value exits 2 naming the flag without a call.
    const given = retentionGiven(retention.opts(), workflowRetentionFlags);
    const finishedMax = given.keep;
    const finishedDays = given.days;
    const { client, output } = connect();
    // A flag left out keeps its current value (the server fills it in).
    const res = await client.control('workflowRetention', {
      ...(finishedMax === undefined ? {} : { finishedMax }),
      ...(finishedDays === undefined ? {} : { finishedDays }),
      show: finishedMax === undefined && finishedDays === undefined,
    });
    const startsAt =
      res.defaultStartsMs === undefined ? undefined : new Date(res.defaultStartsMs).toISOString();
    const doc = {
      finishedMax: res.finishedMax,
      finishedDays: res.finishedDays,
      ...(startsAt === undefined ? {} : { defaultStartsAt: startsAt }),
    };
    process.stdout.write(`${render(output, doc, [doc])}\n`);
    if (startsAt !== undefined) {
      process.stderr.write(
        `note: this is the default, which no admin has set; it removes nothing before ${startsAt} ` +
          '(a grace after the upgrade to state version 2). Set a retention to keep more, or to ' +
          'apply it at once\n',
      );
    }
  });
}

const workflowRetentionFlags: RetentionFlags = {
  what: 'finished workflows',
  aged: 'workflows finished longer ago than this',
  keepMax: workflowsMax,
  keepDefault: workflowFinishedMaxDefault,
  daysMax: workflowRetentionDaysMax,
  daysDefault: workflowFinishedDaysDefault,
  oldKeep: '--finished-max',
  oldDays: '--finished-days',
};

function must(rec: WorkflowRecord | undefined): WorkflowRecord {
  if (rec === undefined) throw new Error('the server returned no workflow');
  return rec;
}

function stateRow(w: WorkflowRecord): Row {
  const done = w.actions.filter((a) => a.state === 'SUCCESS').length;
  const current = w.actions.find((a) => a.state !== 'SUCCESS');
  return {
    id: w.id,
    hardware: w.hardwareId,
    template: w.template,
    state: w.state,
    progress: `${String(done)}/${String(w.actions.length)}`,
    current: current === undefined ? '' : `${current.task}/${current.name} (${current.state})`,
  };
}

/** The alternate policy's lines: the machines tried, in order, and why it gave up. */
function alternateLines(rec: WorkflowRecord): string {
  const tried = rec.machinesTried.join(' → ');
  const lines = [
    `on failure: alternate, machines tried ${rec.machinesTried.length} of ${rec.attempts}: ${tried}`,
  ];
  if (rec.gaveUp !== '') lines.push(`gave up: ${rec.gaveUp}`);
  return lines.join('\n');
}

/** The race policy's lines: the lanes, the machines either took in order, and who won. */
function raceLines(rec: WorkflowRecord): string {
  const lanes =
    rec.raceRequest === rec.id ? `rival lane ${rec.raceRival}` : `lane of request ${rec.raceRequest}`;
  const tried =
    rec.raceRequest === rec.id
      ? `, machines tried ${rec.machinesTried.length} of ${rec.attempts}: ${rec.machinesTried.join(' → ')}`
      : '';
  const lines = [`on failure: race (${lanes})${tried}`];
  const won = rec.raceWinner === '' ? '' : `: workflow ${rec.raceWinner} on ${rec.raceWinnerHardwareId}`;
  lines.push(`race: ${rec.raceOutcome}${won}`);
  if (rec.gaveUp !== '') lines.push(`this lane gave up: ${rec.gaveUp}`);
  return lines.join('\n');
}

function actionRow(a: WorkflowRecord['actions'][number]): Row {
  return {
    task: a.task,
    action: a.name,
    state: a.state,
    attempt: a.attempt,
    retries: a.retries,
    exit: a.exitStatus === undefined ? '' : a.exitStatus,
    worker: a.workerId,
    message: a.message.split('\n')[0] ?? '',
  };
}

function eventLine(e: WorkflowEvent): string {
  const at = new Date(e.stampMs).toISOString();
  const what = e.action === '' ? '' : ` ${e.task}/${e.action}`;
  const attempt = e.attempt > 0 ? ` attempt=${String(e.attempt)}` : '';
  const exit = e.exitStatus === undefined ? '' : ` exit=${String(e.exitStatus)}`;
  const msg = e.message === '' ? '' : ` ${e.message}`;
  return `${String(e.seq).padStart(6)} ${at} ${e.type}${what}${attempt}${exit}${msg}`;
}

// `slipway hardware inspect|drain|undrain|retire|quarantine|release|accept ID --reason TEXT`,
// `hardware label ID k=v k2-`, `hardware history ID`, `hardware quarantine-policy` and
// `hardware accept-rule`: a machine's lifecycle
// (docs/decisions/0028-machine-lifecycle.md).
import type { Command } from '@commander-js/extra-typings';
import type { MachineEvent } from '../../gen/control.js';
import type { ClusterClient } from '../client.js';
import type { OutputFormat, Row } from '../output.js';
import { render, UsageError } from '../output.js';
import { durationSeconds, wholeNumber } from '../flags.js';
import { labelKeyProblem, labelValueProblem } from '../../model/labels.js';
import type { OperatorVerb } from '../../model/machine-lifecycle.js';
import { lifecycleTimeoutSMax, quarantineFailuresMax, quarantineWindowSMax } from '../../model/limits.js';
import { quarantinePolicyDefault, windowText } from '../../model/quarantine-policy.js';
import { acceptRuleCommand } from './accept-rule.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

/** What each verb does, for its help: in the list of commands, then in its own. */
const verbs: readonly { verb: OperatorVerb; summary: string; does: string; example: string }[] = [
  {
    verb: 'inspect',
    summary: 'inspect the machine (inspecting, until its inventory is reported or --deadline passes)',
    does:
      'inspect the machine: it is inspecting until its inventory is reported, and failed if --deadline ' +
      'passes first (the inventory boot comes with discovery; until then the deadline ends every inspection)',
    example: 'slipway hardware inspect m1 --reason "new disks" --deadline 20m',
  },
  {
    verb: 'drain',
    summary: 'take the machine out of service (maintenance)',
    does:
      'take the machine out of service (maintenance): no new workflow; one that runs finishes, or ' +
      'with --now is cancelled',
    example: 'slipway hardware drain m1 --reason "rack 4 power work" --now',
  },
  {
    verb: 'undrain',
    summary: 'bring a drained machine back',
    does: 'bring a drained machine back to where the drain found it (or to where its workflow left it meanwhile)',
    example: 'slipway hardware undrain m1 --reason "power work done"',
  },
  {
    verb: 'retire',
    summary: 'retire the machine for good',
    does: 'retire the machine for good: nothing moves it again; `hardware delete` forgets it',
    example: 'slipway hardware retire m1 --reason "end of life"',
  },
  {
    verb: 'quarantine',
    summary: 'keep the machine out of every selection until an operator acts',
    does: 'keep the machine out of every selection until an operator accepts, inspects or releases it',
    example: 'slipway hardware quarantine m1 --reason "failed 3 deployments in a row"',
  },
  {
    verb: 'release',
    summary: "run the machine's release step and make it ready",
    does:
      "run the machine's release step (e.g. a disk wipe) and make it ready; with no release " +
      'template known yet it is ready at once',
    example: 'slipway hardware release m1 --reason "tenant left"',
  },
  {
    verb: 'accept',
    summary: 'accept the machine as ready for work',
    does: 'accept an enrolled, quarantined or drained machine as ready for work',
    example: 'slipway hardware accept m1 --reason "racked and cabled"',
  },
];

const exitCodes =
  'Exit 0 when the machine moved; 1 when the move is refused (the transition table has no such move from ' +
  "the machine's state, a workflow still owns it, or the cluster runs below state version 3): the " +
  'message names the state and the moves it may make; 2 on bad input (no --reason, an unknown machine).';

export function hardwareLifecycleCommands(hw: Command, connect: Connect): void {
  for (const { verb, summary, does, example } of verbs) {
    const c = hw
      .command(verb)
      .summary(summary)
      .description(`${does}. ${exitCodes}`)
      .argument('<id>', 'the machine')
      .requiredOption('--reason <text>', 'why: kept with the machine and in its history and the audit trail');
    if (verb === 'drain')
      c.option('--now', 'cancel the workflow that owns the machine instead of letting it finish');
    if (verb === 'inspect' || verb === 'release') {
      c.option(
        '--deadline <duration>',
        `how long it may stay ${verb}ing (1s to 7d, e.g. 90s, 20m; default 30m)`,
      );
    }
    c.addHelpText('after', `\nExample:\n  ${example}`);
    c.action(async (id: string, o: { reason: string; now?: true; deadline?: string }) => {
      if (o.reason.trim() === '') throw new UsageError('--reason must say why');
      const timeoutS = o.deadline === undefined ? 0 : deadlineSeconds(o.deadline);
      const { client, output } = connect();
      const res = await client.control('hardwareTransition', {
        id,
        verb,
        reason: o.reason,
        now: o.now === true,
        timeoutS,
      });
      const doc = JSON.parse(res.hardwareJson) as LifecycleDoc;
      process.stdout.write(`${render(output, doc, [stateRow(doc)])}\n`);
    });
  }
  labelCommand(hw, connect);
  historyCommand(hw, connect);
  quarantinePolicyCommand(hw, connect);
  acceptRuleCommand(hw, connect);
}

/** `hardware quarantine-policy`: when repeated failures quarantine a machine. */
function quarantinePolicyCommand(hw: Command, connect: Connect): void {
  const { failures, windowS } = quarantinePolicyDefault;
  hw.command('quarantine-policy')
    .summary('show or set when repeated failures quarantine a machine (admin)')
    .description(
      'show when repeated failures quarantine a machine, or set it (admin): a machine whose workflows ' +
        'fail (or time out) --failures times within --window goes to quarantined instead of failed, ' +
        'and is not selected until `slipway hardware accept`, which clears its failures. A flag left ' +
        'out keeps its value. Exit 0 when shown or set; 1 below state version 3 or without the admin ' +
        'role; 2 on a bad value',
    )
    .option(
      '--failures <k>',
      `quarantine at this many failures within the window (1 to ${quarantineFailuresMax}; default ${failures})`,
    )
    .option(
      '--window <duration>',
      `the window failures are counted in: 90m, 24h, 7d (1s to 90d; default ${windowText(windowS)})`,
    )
    .addHelpText(
      'after',
      '\nExamples:\n  slipway hardware quarantine-policy\n  slipway hardware quarantine-policy --failures 3 --window 12h',
    )
    .action(async (o: { failures?: string; window?: string }) => {
      // Checked here first, so that a bad value exits 2 naming the flag without a call.
      const k = o.failures === undefined ? undefined : wholeNumber(o.failures, '--failures');
      if (k !== undefined && (k < 1 || k > quarantineFailuresMax)) {
        throw new UsageError(`--failures must be 1 to ${quarantineFailuresMax}, got ${o.failures ?? ''}`);
      }
      const w = o.window === undefined ? undefined : durationSeconds(o.window, '--window');
      if (w !== undefined && (w < 1 || w > quarantineWindowSMax)) {
        throw new UsageError(
          `--window must be from 1s to 90d, such as 90m, 24h or 7d; got "${o.window ?? ''}"`,
        );
      }
      const { client, output } = connect();
      const res = await client.control('hardwareQuarantinePolicy', {
        ...(k === undefined ? {} : { failures: k }),
        ...(w === undefined ? {} : { windowS: w }),
        show: k === undefined && w === undefined,
      });
      const doc = { failures: res.failures, window: windowText(res.windowS), windowS: res.windowS };
      process.stdout.write(`${render(output, doc, [{ failures: res.failures, window: doc.window }])}\n`);
    });
}

/** --deadline: a duration (90s, 20m, 2h, 1d, or bare seconds) from 1 second to 7 days. */
export function deadlineSeconds(text: string): number {
  const s = durationSeconds(text, '--deadline');
  if (s < 1 || s > lifecycleTimeoutSMax) {
    throw new UsageError(`--deadline must be from 1s to 7d, such as 90s, 20m, 2h or 1d; got "${text}"`);
  }
  return s;
}

function labelCommand(hw: Command, connect: Connect): void {
  hw.command('label')
    .summary('set and remove labels: k=v k2-')
    .description(
      'set labels (k=v) and remove them (k-), as kubectl does; keys and values as Kubernetes labels. ' +
        'Exit 0 when set; 1 below state version 3; 2 on a bad label or an unknown machine',
    )
    .argument('<id>', 'the machine')
    .argument('<labels...>', 'k=v to set, k- to remove')
    .addHelpText('after', '\nExample:\n  slipway hardware label m1 rack=a4 zone=west gpu-')
    .action(async (id: string, args: string[]) => {
      const set: Record<string, string> = {};
      const remove: string[] = [];
      for (const arg of args) {
        const eq = arg.indexOf('=');
        if (eq < 0 && arg.endsWith('-')) remove.push(arg.slice(0, -1));
        else if (eq > 0) set[arg.slice(0, eq)] = arg.slice(eq + 1);
        else throw new UsageError(`"${arg}" must be KEY=VALUE to set a label or KEY- to remove one`);
      }
      for (const key of [...Object.keys(set), ...remove]) {
        const problem = labelKeyProblem(key) ?? labelValueProblem(set[key] ?? '');
        if (problem !== undefined) throw new UsageError(problem);
      }
      const { client, output } = connect();
      const res = await client.control('hardwareLabel', { id, set, remove });
      const doc = JSON.parse(res.hardwareJson) as LifecycleDoc;
      const labels = Object.entries(doc.labels ?? {}).map(([k, v]) => `${k}=${v}`);
      const text =
        output === 'table' ? `${id}: ${labels.join(' ') || '(no labels)'}` : render(output, doc, []);
      process.stdout.write(`${text}\n`);
    });
}

function historyCommand(hw: Command, connect: Connect): void {
  hw.command('history')
    .summary("a machine's lifecycle transitions; --follow streams new ones")
    .description(
      "a machine's lifecycle transitions, oldest first: when, from and to which state, what moved it, who and why (the newest 32 are kept); --follow streams new ones",
    )
    .argument('<id>', 'the machine')
    .option('--follow', 'keep streaming new transitions (survives the loss of the node serving it)')
    .option('--from <seq>', 'start at this sequence number (resume after a break)', '0')
    .addHelpText(
      'after',
      '\nExamples:\n  slipway hardware history m1\n  slipway -o json hardware history m1 --follow',
    )
    .action(async (id: string, o: { follow?: true; from: string }) => {
      const from = wholeNumber(o.from, '--from');
      const { client, output } = connect();
      if (o.follow !== true) {
        const events: MachineEvent[] = [];
        await client.hardwareHistory(id, from, false, (e) => events.push(e));
        process.stdout.write(`${render(output, { hardware: id, events }, events.map(historyRow))}\n`);
        return;
      }
      await client.hardwareHistory(id, from, true, (e) => {
        if (output === 'json') process.stdout.write(`${JSON.stringify(e)}\n`);
        else if (output === 'yaml') process.stdout.write(`---\n${render(output, e, [])}\n`);
        else process.stdout.write(`${historyLine(e)}\n`);
      });
    });
}

/** The lifecycle fields of a machine as the API gives them (hardware_json). */
export interface LifecycleDoc {
  id: string;
  lifecycle?: {
    state: string;
    sinceMs: number;
    reason?: string;
    step?: string;
    deadlineMs?: number;
    owner?: string;
    drainedFrom?: string;
  };
  labels?: Record<string, string>;
}

function stateRow(doc: LifecycleDoc): Row {
  const lc = doc.lifecycle;
  return { id: doc.id, state: lc?.state ?? '', owner: lc?.owner ?? '', reason: lc?.reason ?? '' };
}

function historyRow(e: MachineEvent): Row {
  return {
    seq: e.seq,
    time: new Date(e.stampMs).toISOString(),
    from: e.from === '' ? '-' : e.from,
    to: e.to,
    trigger: e.trigger,
    by: e.by,
    reason: [e.reason, e.step === '' ? '' : `(step ${e.step})`].filter((x) => x !== '').join(' '),
  };
}

/** One transition on one line, for --follow. */
function historyLine(e: MachineEvent): string {
  const why = [e.reason, e.step === '' ? '' : `(step ${e.step})`].filter((x) => x !== '').join(' ');
  const from = e.from === '' ? '-' : e.from;
  return `${String(e.seq).padStart(4)} ${new Date(e.stampMs).toISOString()} ${from} → ${e.to} (${e.trigger}) by ${e.by}${why === '' ? '' : `: ${why}`}`;
}

/** `hardware get`'s lines about the machine's life, under its row. */
export function lifecycleLines(doc: LifecycleDoc, nowMs: number): string {
  const lc = doc.lifecycle;
  const labels = Object.entries(doc.labels ?? {}).map(([k, v]) => `${k}=${v}`);
  if (lc === undefined)
    return `state:     (not tracked before cluster state version 3)\nlabels:    ${labels.join(' ') || '-'}`;
  const at = (ms: number): string => `${new Date(ms).toISOString()} (${ago(ms, nowMs)})`;
  return [
    `state:     ${lc.state}${lc.drainedFrom === undefined ? '' : ` (undrain returns it to ${lc.drainedFrom})`}`,
    `since:     ${at(lc.sinceMs)}`,
    `reason:    ${lc.reason ?? '-'}${lc.step === undefined ? '' : ` (step ${lc.step})`}`,
    `deadline:  ${lc.deadlineMs === undefined ? '-' : at(lc.deadlineMs)}`,
    `owner:     ${lc.owner === undefined ? '-' : `workflow ${lc.owner}`}`,
    `labels:    ${labels.join(' ') || '-'}`,
  ].join('\n');
}

function ago(ms: number, nowMs: number): string {
  const s = Math.round((nowMs - ms) / 1000);
  const span = (x: number): string =>
    x < 120 ? `${x}s` : x < 7200 ? `${Math.round(x / 60)}m` : `${Math.round(x / 3600)}h`;
  return s >= 0 ? `${span(s)} ago` : `in ${span(-s)}`;
}

// `slipway hardware explain SELECTOR`: why a machine is or is not selected, by the rules
// allocation applies (docs/decisions/0030), in the one selector language (docs/decisions/0027;
// the --selector flags are in selector-flag.ts).
import type { Command } from '@commander-js/extra-typings';
import type { HardwareExplainResponse, MachineExplanation } from '../../gen/control.js';
import type { ClusterClient } from '../client.js';
import type { OutputFormat, Row } from '../output.js';
import { render } from '../output.js';
import { continueHelp, limitHelp, localHelp, paging, printMore, readList, withContinue } from '../pages.js';
import { selectorFlag, selectorHelp } from './selector-flag.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

export function explainCommand(hw: Command, connect: Connect): void {
  hw.command('explain')
    .summary('why each machine is or is not selected by a selector')
    .description(
      'for each machine: selected (a workflow create --selector may take it), the first term of the ' +
        'selector it fails and why (the value it has against what the term needs), or, when it ' +
        'matches every term, why it is not ready (its state, or the workflow that owns it). Exit 0; ' +
        '2 when the selector does not parse (the error points at the term)',
    )
    .argument('<selector>', selectorHelp)
    .option('--local', localHelp)
    .option('--limit <n>', limitHelp)
    .option('--continue <token>', continueHelp)
    .addHelpText(
      'after',
      "\nExamples:\n  slipway hardware explain 'rack in (a,b),memory>=64Gi'\n  slipway -o json hardware explain '!gpu'",
    )
    .action(async (selector: string, o) => {
      paging(o);
      const text = await selectorFlag(selector);
      const { pages, next, output } = await readList(
        o,
        connect,
        (client, req) => client.control('hardwareExplain', { selector: text, ...req }),
        (p) => p.machines.length,
      );
      const machines = pages.flatMap((p) => p.machines);
      const last = pages[pages.length - 1];
      const doc = withContinue({ ...summaryOf(last), machines }, next);
      process.stdout.write(`${render(output, doc, machines.map(explainRow))}\n`);
      if (output === 'table' && last !== undefined) process.stdout.write(`${summaryLine(last)}\n`);
      printMore(output, next, 'machines');
    });
}

function summaryOf(res: HardwareExplainResponse | undefined): object {
  if (res === undefined) return {};
  const { selector, total, selected, notReady, failing } = res;
  return { selector, total, selected, notReady, failing };
}

function explainRow(m: MachineExplanation): Row {
  return {
    id: m.id,
    state: m.state,
    verdict: m.verdict,
    term: m.term,
    reason: m.verdict === 'selected' ? '' : m.reason,
  };
}

function summaryLine(res: HardwareExplainResponse): string {
  return (
    `selector ${res.selector || '(empty: every machine)'}: ${res.selected} selected, ` +
    `${res.notReady} match but are not ready, ${res.failing} fail a term, of ${res.total}`
  );
}

// `slipway hardware accept-rule set SELECTOR | get | clear` (docs/decisions/0037): the auto-accept
// rule, replicated: an enrolled machine whose inventory report matches is made ready at once.
import type { Command } from '@commander-js/extra-typings';
import type { ClusterClient } from '../client.js';
import type { OutputFormat } from '../output.js';
import { render } from '../output.js';
import { selectorFlag, selectorHelp } from './selector-flag.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

/** The rule's answer, as every subcommand prints it. */
function printRule(output: OutputFormat, selector: string): void {
  const doc = { selector: selector === '' ? null : selector };
  process.stdout.write(`${render(output, doc, [{ selector: selector === '' ? '(none)' : selector }])}\n`);
}

export function acceptRuleCommand(hw: Command, connect: Connect): void {
  const rule = hw
    .command('accept-rule')
    .summary('show, set or clear the rule that accepts enrolled machines by their inventory (admin)')
    .description(
      'the auto-accept rule (admin): an enrolled machine whose inventory report matches the selector ' +
        'is made ready when the report is applied, its history saying "accepted by rule SELECTOR"; ' +
        'machines already enrolled are left to `slipway hardware accept`. Exit 0 when shown, set or ' +
        'cleared; 1 below state version 3 or without the admin role; 2 on a selector that does not parse',
    )
    .addHelpText(
      'after',
      "\nExamples:\n  slipway hardware accept-rule get\n  slipway hardware accept-rule set 'memory>=64Gi,firmware=uefi'\n  slipway hardware accept-rule clear",
    );
  rule
    .command('set')
    .description(`accept every enrolled machine whose inventory report matches SELECTOR: ${selectorHelp}`)
    .argument('<selector>')
    .addHelpText('after', "\nExamples:\n  slipway hardware accept-rule set 'memory>=64Gi,disks.count>=2'")
    .action(async (selector: string) => {
      const text = await selectorFlag(selector);
      const { client, output } = connect();
      printRule(
        output,
        (await client.control('hardwareAcceptRule', { selector: text, clear: false })).selector,
      );
    });
  rule
    .command('get')
    .description('show the rule in force ((none) when no rule is set)')
    .addHelpText('after', '\nExamples:\n  slipway -o json hardware accept-rule get')
    .action(async () => {
      const { client, output } = connect();
      printRule(output, (await client.control('hardwareAcceptRule', { clear: false })).selector);
    });
  rule
    .command('clear')
    .description('clear the rule: enrolled machines wait for `slipway hardware accept` again')
    .addHelpText('after', '\nExamples:\n  slipway hardware accept-rule clear')
    .action(async () => {
      const { client, output } = connect();
      printRule(output, (await client.control('hardwareAcceptRule', { clear: true })).selector);
    });
}

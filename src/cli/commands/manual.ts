// `slipway __manual`: every command's help in one document, for the man page made at build time
// (packaging/build-deb.sh, `--format man`) and for the test that holds every help to the same
// rules (test/unit/cli-help.test.ts, `--format json`). Hidden: operators read --help or man.
import type { Command } from '@commander-js/extra-typings';
import type { TreeCommand } from '../help.js';
import { everyCommand } from '../help.js';
import { UsageError } from '../output.js';

export function manualCommand(program: Command, fullProgram: () => Promise<Command>): void {
  program
    .command('__manual', { hidden: true })
    .description("every command's help: json (path, help) or a man page (roff)")
    .option('--format <format>', 'json or man', 'json')
    .action(async (o) => {
      if (o.format !== 'json' && o.format !== 'man') throw new UsageError('--format must be json or man');
      const root = (await fullProgram()) as unknown as TreeCommand;
      const pages = everyCommand(root).map(({ path, command }) => ({
        path,
        help: fullHelp(command),
        options: command.options.flatMap((x) => [x.long, x.short].filter((f) => f !== undefined)),
        valueOptions: command.options
          .filter((x) => x.required || x.optional)
          .flatMap((x) => [x.long, x.short].filter((f) => f !== undefined)),
        commands: command.commands.flatMap((c) => [c.name(), ...c.aliases()]),
      }));
      process.stdout.write(o.format === 'json' ? `${JSON.stringify(pages)}\n` : manPage(pages));
    });
}

/** The help `--help` prints, with the text added after it (examples, exit codes). */
function fullHelp(command: TreeCommand): string {
  let text = '';
  command.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) });
  command.outputHelp();
  return text.trimEnd();
}

/** A man page: each command's help as a preformatted section, in the order of the help. */
function manPage(pages: readonly { path: string; help: string }[]): string {
  const escape = (text: string): string =>
    text
      .replace(/\\/g, '\\e')
      .split('\n')
      .map((l) => (/^[.']/.test(l) ? `\\&${l}` : l))
      .join('\n');
  const [top, ...commands] = pages;
  return [
    '.TH SLIPWAY 1 "" "slipway" "User Commands"',
    '.SH NAME',
    'slipway \\- a highly available bare-metal provisioner',
    '.SH SYNOPSIS',
    '.B slipway',
    '[global options] command [options]',
    '.SH DESCRIPTION',
    '.nf',
    escape(top?.help ?? ''),
    '.fi',
    '.SH COMMANDS',
    ...commands.flatMap((p) => ['.SS', `slipway ${p.path}`, '.nf', escape(p.help), '.fi']),
    '',
  ].join('\n');
}

// `slipway template create|get|list|delete`: workflow templates (Tinkerbell's YAML format).
import type { Command } from '@commander-js/extra-typings';
import type { TemplateRecord } from '../../gen/control.js';
import type { ClusterClient } from '../client.js';
import type { OutputFormat, Row } from '../output.js';
import { render, UsageError } from '../output.js';
import { parseOrUsage, readInput } from './hardware.js';
import { continueHelp, limitHelp, localHelp, printList, readList } from '../pages.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

export function templateCommand(program: Command, connect: Connect): void {
  const t = program.command('template').description('manage workflow templates');
  t.command('create')
    .description('store a template from a YAML file; its `name` field names it')
    .requiredOption('-f, --file <file>', 'template YAML; "-" reads stdin')
    .option('--replace', 'replace a template with the same name (running workflows keep their copy)')
    .action(async (o) => {
      const source = readInput(o.file);
      // Checked here too, so a typo is reported with its line before anything is sent. The
      // template code loads here, not with the module: other commands start without it.
      const { validateTemplateSource } = await import('../../workflow/index.js');
      parseOrUsage(() => validateTemplateSource(source));
      const { client, output } = connect();
      const res = await client.control('templateCreate', { source, replace: o.replace === true });
      const rec = res.template;
      if (rec === undefined) throw new Error('the server returned no template');
      process.stdout.write(`${render(output, summary(rec), [summary(rec)])}\n`);
    });
  t.command('get')
    .description('show a template (the YAML source with -o table)')
    .argument('<name>')
    .option('--local', localHelp)
    .action(async (name, o) => {
      const { client, output } = connect();
      const res = await client.control('templateGet', { name, local: o.local === true });
      const rec = res.template;
      if (rec === undefined) throw new UsageError(`template "${name}" not found`);
      if (output === 'table')
        process.stdout.write(rec.source.endsWith('\n') ? rec.source : `${rec.source}\n`);
      else process.stdout.write(`${render(output, rec, [])}\n`);
    });
  t.command('list')
    .description('list templates')
    .option('--local', localHelp)
    .option('--limit <n>', limitHelp)
    .option('--continue <token>', continueHelp)
    .action(async (o) => {
      const { pages, next, output } = await readList(
        o,
        connect,
        (client, req) => client.control('templateList', req),
        (p) => p.templates.length,
      );
      const rows = pages.flatMap((p) => p.templates).map(summary);
      printList(output, { doc: { templates: rows }, rows }, next, 'templates');
    });
  t.command('delete')
    .description('delete a template (workflows already created keep their copy)')
    .argument('<name>')
    .action(async (name) => {
      const { client, output } = connect();
      await client.control('templateDelete', { name });
      process.stdout.write(`${render(output, { name, deleted: true }, [{ name, deleted: true }])}\n`);
    });
}

function summary(t: TemplateRecord): Row {
  return { name: t.name, version: t.version, updated: new Date(t.updatedMs).toISOString() };
}

// `slipway token create|list|delete`: operator tokens with roles admin, operator and viewer.
import type { Command } from '@commander-js/extra-typings';
import type { ClusterClient } from '../client.js';
import type { OutputFormat } from '../output.js';
import { render } from '../output.js';
import { continueHelp, limitHelp, localHelp, printList, readList } from '../pages.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

export function tokenCommand(program: Command, connect: Connect): void {
  const t = program.command('token').description('manage operator tokens (admin only)');
  t.command('create')
    .description('create a token and print it once; the cluster keeps only its hash')
    .requiredOption('--name <name>', 'who or what the token is for')
    .requiredOption('--role <role>', 'admin, operator (create and run workflows) or viewer (read only)')
    .action(async (o) => {
      const { client, output } = connect();
      const res = await client.control('tokenCreate', { name: o.name, role: o.role });
      if (output === 'table') process.stdout.write(`${res.token}\n`);
      else process.stdout.write(`${render(output, { name: o.name, role: o.role, token: res.token }, [])}\n`);
    });
  t.command('list')
    .description('list the operator tokens: name, role and when each was made (never the token)')
    .option('--local', localHelp)
    .option('--limit <n>', limitHelp)
    .option('--continue <token>', continueHelp)
    .action(async (o) => {
      const { pages, next, output } = await readList(
        o,
        connect,
        (client, req) => client.control('tokenList', req),
        (p) => p.tokens.length,
      );
      const rows = pages
        .flatMap((p) => p.tokens)
        .map((x) => ({ name: x.name, role: x.role, created: new Date(x.createdMs).toISOString() }));
      printList(output, { doc: { tokens: rows }, rows }, next, 'tokens');
    });
  t.command('delete')
    .description('revoke a token')
    .argument('<name>')
    .action(async (name) => {
      const { client, output } = connect();
      await client.control('tokenDelete', { name });
      process.stdout.write(`${render(output, { name, deleted: true }, [{ name, deleted: true }])}\n`);
    });
}

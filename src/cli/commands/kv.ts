// `slipway kv put|get|delete|list`: the replicated store for operators and scripts. `del` and
// `range`, the names before delete and list, stay as their aliases.
import type { Command } from '@commander-js/extra-typings';
import type { ClusterClient } from '../client.js';
import type { OutputFormat } from '../output.js';
import { wholeNumber } from '../flags.js';
import { render } from '../output.js';
import { localHelp } from '../pages.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

export function kvCommand(program: Command, connect: Connect): void {
  const kv = program.command('kv').description('read and write the replicated key-value store');
  kv.command('put')
    .description('write KEY=VALUE; exits 0 only once the write is committed and applied')
    .argument('<key>')
    .argument('<value>')
    .option('--prev-revision <n>', 'write only if the key is at this revision (0: only if absent)')
    .action(async (key, value, o) => {
      const { client, output } = connect();
      const req = {
        key,
        value: Buffer.from(value, 'utf8'),
        prevRevision:
          o.prevRevision === undefined ? undefined : wholeNumber(o.prevRevision, '--prev-revision'),
      };
      const res = await client.call('put', req);
      print(output, { key, revision: res.revision });
    });
  kv.command('get')
    .description('read a key (linearizable unless --local)')
    .argument('<key>')
    .option('--local', localHelp)
    .action(async (key, o) => {
      const { client, output } = connect();
      const res = await client.call('get', { key, local: o.local === true });
      if (!res.found) {
        process.exitCode = 1;
        process.stderr.write(`key "${key}" not found\n`);
        return;
      }
      const doc = {
        key,
        value: res.value.toString('utf8'),
        revision: res.revision,
        createRevision: res.createRevision,
      };
      if (output === 'table') process.stdout.write(`${doc.value}\n`);
      else print(output, doc);
    });
  kv.command('delete')
    .alias('del')
    .description('delete a key (exit 1 when there is none)')
    .argument('<key>')
    .action(async (key) => {
      const { client, output } = connect();
      const res = await client.call('delete', { key });
      if (!res.deleted) {
        process.exitCode = 1;
        process.stderr.write(`key "${key}" not found\n`);
        return;
      }
      print(output, { key, deleted: true, revision: res.revision });
    });
  kv.command('list')
    .alias('range')
    .description('list keys starting with PREFIX, with their values')
    .argument('[prefix]', 'key prefix', '')
    .option('--limit <n>', 'at most this many keys', '0')
    .option('--local', localHelp)
    .action(async (prefix, o) => {
      const { client, output } = connect();
      const res = await client.call('range', {
        prefix,
        limit: wholeNumber(o.limit, '--limit'),
        local: o.local === true,
      });
      const kvs = res.kvs.map((k) => ({ key: k.key, value: k.value.toString('utf8'), revision: k.revision }));
      process.stdout.write(`${render(output, { kvs, more: res.more }, kvs)}\n`);
    });
}

function print(output: OutputFormat, doc: Record<string, string | number | boolean>): void {
  process.stdout.write(`${render(output, doc, [doc])}\n`);
}

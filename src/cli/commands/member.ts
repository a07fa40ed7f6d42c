// `slipway member add|remove|list` and `slipway leader transfer ID` (`--to ID` before, kept hidden).
import { Option, type Command } from '@commander-js/extra-typings';
import type { MemberInfo } from '../../gen/kv.js';
import { Suffrage } from '../../gen/kv.js';
import type { ClusterClient } from '../client.js';
import type { OutputFormat } from '../output.js';
import { render, UsageError } from '../output.js';
import { oneTarget } from '../flags.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

export function memberCommand(program: Command, connect: Connect): void {
  const member = program.command('member').description('change or list the cluster membership');
  member
    .command('add')
    .description('add a node: it joins as a learner, catches up, then becomes a voter')
    .argument('<id>', "the new member's id (never reuse a removed id)")
    .argument('<raft-addr>', 'its raft address, HOST:PORT')
    .option('--api-addr <host:port>', 'its API address', '')
    .option('--learner', 'keep it a non-voting learner')
    .action(async (id, raftAddr, o) => {
      const { client, output } = connect();
      const res = await client.call('memberAdd', {
        id,
        raftAddr,
        apiAddr: o.apiAddr,
        learner: o.learner === true,
      });
      printMembers(output, res.members);
    });
  member
    .command('remove')
    .description('remove a member (a removed leader steps down)')
    .argument('<id>')
    .action(async (id) => {
      const { client, output } = connect();
      const res = await client.call('memberRemove', { id });
      printMembers(output, res.members);
    });
  member
    .command('list')
    .description('list members')
    .option('--local', "this node's view without confirming leadership")
    .action(async (o) => {
      const { client, output } = connect();
      const res = await client.call('memberList', { local: o.local === true });
      printMembers(output, res.members);
    });
  program
    .command('leader')
    .description('leadership')
    .command('transfer')
    .description('hand leadership to another voter')
    .argument('[id]', 'the member to lead')
    .addOption(new Option('--to <id>', 'the member to lead (the form before the ID argument)').hideHelp())
    .action(async (id, o) => {
      const to = oneTarget(id, o.to, '--to');
      if (to === undefined) throw new UsageError('name the member to lead: slipway leader transfer ID');
      const { client, output } = connect();
      const res = await client.call('leaderTransfer', { to });
      const doc = { leader: res.leader, term: res.term };
      process.stdout.write(`${render(output, doc, [doc])}\n`);
    });
}

export function printMembers(output: OutputFormat, members: readonly MemberInfo[]): void {
  const rows = members.map((m) => ({
    id: m.id,
    raftAddr: m.raftAddr,
    apiAddr: m.apiAddr,
    role: m.suffrage === Suffrage.SUFFRAGE_LEARNER ? 'learner' : 'voter',
  }));
  process.stdout.write(`${render(output, { members: rows }, rows)}\n`);
}

// `slipway lease list`: the dynamic DHCP leases (--dhcp-mode dynamic) in the replicated state.
import type { Command } from '@commander-js/extra-typings';
import type { ClusterClient } from '../client.js';
import type { OutputFormat, Row } from '../output.js';
import { continueHelp, limitHelp, localHelp, printList, readList } from '../pages.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

interface LeaseDoc {
  ip: string;
  mac: string;
  state: 'bound' | 'declined';
  expiresMs: number;
  grantedMs: number;
  updatedMs: number;
}

export function leaseCommand(program: Command, connect: Connect): void {
  const lease = program.command('lease').description('dynamic DHCP leases');
  lease
    .command('list')
    .description('list leases: bound (active or expired) and declined addresses')
    .option('--local', localHelp)
    .option('--active', 'only leases that have not expired (of those listed, with --limit)')
    .option('--limit <n>', limitHelp)
    .option('--continue <token>', continueHelp)
    .action(async (o) => {
      const { pages, next, output } = await readList(
        o,
        connect,
        (client, req) => client.control('leaseList', req),
        (p) => p.leaseJson.length,
      );
      const now = pages.at(-1)?.nowMs ?? Date.now();
      const docs = pages
        .flatMap((p) => p.leaseJson)
        .map((j) => JSON.parse(j) as LeaseDoc)
        .map((l) => ({ ...l, active: l.expiresMs > now }))
        .filter((l) => o.active !== true || l.active);
      printList(output, { doc: { leases: docs }, rows: docs.map((l) => row(l, now)) }, next, 'leases');
    });
}

function row(l: LeaseDoc & { active: boolean }, now: number): Row {
  const left = Math.round((l.expiresMs - now) / 1000);
  return {
    ip: l.ip,
    mac: l.mac === '' ? '-' : l.mac,
    state: l.state === 'declined' ? 'declined' : l.active ? 'bound' : 'expired',
    expires: new Date(l.expiresMs).toISOString(),
    remaining: l.active ? `${String(left)}s` : '-',
  };
}

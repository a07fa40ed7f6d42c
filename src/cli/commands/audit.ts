// `slipway audit list|retention`: the audit trail of operator and admin calls (admin only).
import type { Command } from '@commander-js/extra-typings';
import type { AuditEntry, AuditListRequest } from '../../gen/audit.js';
import type { ClusterClient } from '../client.js';
import { pointInTime, wholeNumber } from '../flags.js';
import { addRetentionFlags, retentionGiven, type RetentionFlags } from '../retention-flags.js';
import { auditEntriesDefault, auditEntriesMax, auditRetentionDaysMax } from '../../model/limits.js';
import type { OutputFormat, Row } from '../output.js';
import { render, UsageError } from '../output.js';
import { printMore } from '../pages.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

/** Entries asked for per call: the server's most per page. */
const pageMax = 1_000;

export function auditCommand(program: Command, connect: Connect): void {
  const a = program
    .command('audit')
    .description('the audit trail: who changed what, when, from where, with what outcome (admin only)');
  a.command('list')
    .description('list audit entries, newest first')
    .option('--user <name>', "only this user's calls (a token's name)")
    .option('--kind <kind>', 'only this kind, e.g. hardware.put, token.put, member.add')
    .option('--since <time>', 'only from this time: ISO 8601 or a duration ago (1h, 7d)')
    .option('--until <time>', 'only up to this time: ISO 8601 or a duration ago')
    .option('--limit <n>', 'at most this many entries', '100')
    .option('--continue <token>', "carry on after a previous listing's last entry")
    .action(async (o) => {
      const now = Date.now();
      const limit = wholeNumber(o.limit, '--limit');
      if (limit < 1) throw new UsageError('--limit must be at least 1');
      const sinceMs = o.since === undefined ? 0 : pointInTime(o.since, '--since', now);
      const untilMs = o.until === undefined ? 0 : pointInTime(o.until, '--until', now);
      if (sinceMs > 0 && untilMs > 0 && sinceMs > untilMs)
        throw new UsageError('--since must not be after --until');
      const { client, output } = connect();
      const entries: AuditEntry[] = [];
      let next = o.continue ?? '';
      do {
        const req: AuditListRequest = {
          user: o.user ?? '',
          kind: o.kind ?? '',
          sinceMs,
          untilMs,
          limit: Math.min(limit - entries.length, pageMax),
          continue: next,
          local: false,
        };
        const res = await client.audit('auditList', req);
        entries.push(...res.entries);
        next = res.continue;
      } while (next !== '' && entries.length < limit);
      const doc = { entries: entries.map(entryDocument), ...(next === '' ? {} : { continue: next }) };
      process.stdout.write(`${render(output, doc, entries.map(entryRow))}\n`);
      printMore(output, next, 'entries');
    });
  const retention = a
    .command('retention')
    .description('show the retention, or set it with --keep and --max-age (every node keeps the same)');
  addRetentionFlags(retention, auditRetentionFlags).action(async () => {
    const given = retentionGiven(retention.opts(), auditRetentionFlags);
    const { client, output } = connect();
    // A flag left out keeps its current value.
    const current = await client.audit('auditRetention', { entries: 0, days: 0, show: true });
    const res =
      given.keep === undefined && given.days === undefined
        ? current
        : await client.audit('auditRetention', {
            entries: given.keep ?? current.entries,
            days: given.days ?? current.days,
            show: false,
          });
    process.stdout.write(`${render(output, res, [{ entries: res.entries, days: res.days }])}\n`);
  });
}

const auditRetentionFlags: RetentionFlags = {
  what: 'entries',
  aged: 'entries older than this',
  keepMax: auditEntriesMax,
  keepDefault: auditEntriesDefault,
  daysMax: auditRetentionDaysMax,
  daysDefault: 0,
  oldKeep: '--entries',
  oldDays: '--days',
};

function entryDocument(e: AuditEntry): Record<string, string | number> {
  return {
    seq: e.seq,
    time: new Date(e.stampMs).toISOString(),
    stampMs: e.stampMs,
    user: e.user,
    role: e.role,
    address: e.address,
    method: e.method,
    kind: e.kind,
    target: e.target,
    outcome: e.outcome,
    ...(e.message === '' ? {} : { message: e.message }),
  };
}

function entryRow(e: AuditEntry): Row {
  return {
    time: new Date(e.stampMs).toISOString(),
    user: e.user,
    role: e.role,
    address: e.address,
    kind: e.kind,
    target: e.target,
    outcome: e.outcome,
  };
}

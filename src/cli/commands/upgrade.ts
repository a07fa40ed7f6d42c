// `slipway cluster version` and `slipway upgrade check`: what each member runs, the cluster's
// effective state version, and whether the next node may be restarted in a rolling upgrade
// (docs/decisions/0019-version-gates.md).
import { Option, type Command } from '@commander-js/extra-typings';
import { Suffrage, type StatusResponse } from '../../gen/kv.js';
import type { OutputFormat } from '../output.js';
import { render } from '../output.js';
import { oneTarget } from '../flags.js';
import { buildName, upgradeChecks, versionSummary, type MemberReport } from '../upgrade-check.js';
import type { StatusAccess } from '../status-access.js';
import { advertisedStateVersion } from '../../model/versions.js';

/**
 * Every member's Status: each --server is asked, the membership comes from the first that
 * answers, and a member no --server turned out to be is asked at the API address it advertises.
 */
async function memberReports(access: StatusAccess): Promise<MemberReport[]> {
  const ask = async (addr: string): Promise<StatusResponse> => {
    const c = access.clientFor(addr);
    try {
      return await c.call('status', {});
    } finally {
      c.close();
    }
  };
  const byId = new Map<string, StatusResponse>();
  const errors: string[] = [];
  let first: StatusResponse | undefined;
  await Promise.all(
    access.servers().map(async (addr) => {
      try {
        const status = await ask(addr);
        byId.set(status.id, status);
        first ??= status;
      } catch (err) {
        errors.push(`${addr}: ${(err as Error).message}`);
      }
    }),
  );
  if (first === undefined) throw new Error(`no server answered (${errors.join('; ')})`);
  return Promise.all(
    first.members.map(async (m): Promise<MemberReport> => {
      const voter = m.suffrage !== Suffrage.SUFFRAGE_LEARNER;
      let status = byId.get(m.id);
      if (status === undefined) {
        if (m.apiAddr === '') {
          return {
            id: m.id,
            voter,
            error: 'not answering at any --server, and it advertises no API address',
          };
        }
        try {
          status = await ask(m.apiAddr);
        } catch (err) {
          return { id: m.id, voter, error: (err as Error).message };
        }
      }
      return {
        id: m.id,
        voter,
        status: {
          build: status.build,
          stateVersion: status.stateVersion,
          clusterVersion: status.clusterVersion,
          leader: status.leader,
          commit: status.commit,
          applied: status.applied,
          stopped: status.stopped,
          leaderTransferee: status.leaderTransferee,
        },
      };
    }),
  );
}

export function clusterVersionCommand(
  cluster: Command,
  output: () => OutputFormat,
  access: StatusAccess,
): void {
  cluster
    .command('version')
    .description(
      "each member's build and the state version it applies, and the cluster's effective version: " +
        'what may be proposed (the lowest version every voter supports, raised by the leader)',
    )
    .action(async () => {
      const members = await memberReports(access);
      const summary = versionSummary(members);
      const rows = members.map((m) => ({
        member: m.id,
        suffrage: m.voter ? 'voter' : 'learner',
        build: m.status === undefined ? '?' : buildName(m.status.build),
        stateVersion: m.status === undefined ? 0 : advertisedStateVersion(m.status.stateVersion),
        applied: m.status?.clusterVersion ?? 0,
        note:
          m.status === undefined
            ? `not answering: ${m.error ?? ''}`
            : m.status.stopped === ''
              ? ''
              : `stopped: ${m.status.stopped}`,
      }));
      const doc = {
        clusterVersion: summary.effective,
        votersSupport: summary.votersSupport ?? null,
        members: rows,
      };
      const format = output();
      if (format !== 'table') {
        process.stdout.write(`${render(format, doc, rows)}\n`);
        return;
      }
      process.stdout.write(`${render(format, doc, rows)}\n`);
      const support =
        summary.votersSupport === undefined
          ? 'unknown until every voter answers'
          : summary.votersSupport > summary.effective
            ? `${summary.votersSupport} (the leader raises the cluster to it within seconds)`
            : String(summary.votersSupport);
      process.stdout.write(`cluster version: ${summary.effective}; every voter supports: ${support}\n`);
    });
}

export function upgradeCommand(program: Command, output: () => OutputFormat, access: StatusAccess): void {
  const upgrade = program.command('upgrade').description('rolling upgrades, one node at a time');
  upgrade
    .command('check')
    .description(
      'whether a node may be restarted now (on a new build, say): every voter answers, one leader ' +
        'agreed, nobody stopped, caught up, no leadership transfer under way. Exits 0 when it may, 1 when not',
    )
    .argument('[member]', 'the member about to be restarted (default: any one voter)')
    .addOption(
      new Option(
        '--member <id>',
        'the member about to be restarted (the form before the argument)',
      ).hideHelp(),
    )
    .action(async (id, o) => {
      const member = oneTarget(id, o.member, '--member');
      const members = await memberReports(access);
      const checks = upgradeChecks(members, member);
      const ok = checks.every((c) => c.ok);
      const who = member ?? 'one voter';
      const verdict = ok ? `${who} may be restarted now` : `wait: ${who} should not be restarted yet`;
      const format = output();
      if (format !== 'table') {
        process.stdout.write(
          `${render(
            format,
            { ok, member: member ?? null, checks, verdict },
            checks.map((c) => ({ ...c })),
          )}\n`,
        );
      } else {
        for (const c of checks) process.stdout.write(`${c.ok ? 'ok ' : 'NO '} ${c.what}\n`);
        process.stdout.write(`${verdict}\n`);
      }
      if (!ok) process.exitCode = 1;
    });
}

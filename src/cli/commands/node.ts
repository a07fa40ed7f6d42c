// `slipway node drain|undrain ID` (docs/decisions/0022-node-drain.md): drain proposes the drain
// through any node, then follows the drained node's Status (read through any node) until it
// leads no more and holds no worker stream, or the deadline passes, and reports what moved.
import type { Command } from '@commander-js/extra-typings';
import type { StatusResponse } from '../../gen/kv.js';
import { Role } from '../../gen/kv.js';
import { memberIdProblem } from '../../model/member-id.js';
import type { ClusterClient } from '../client.js';
import type { OutputFormat } from '../output.js';
import { render, UsageError } from '../output.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

/** How long `node drain` waits when --timeout is not given. */
export const drainTimeoutMsDefault = 60_000;
const pollMs = 250;

/** What `node drain` found: printed as a table, or as JSON with -o json. */
export interface DrainReport {
  readonly id: string;
  readonly drained: true;
  /** Every worker stream gone and leadership elsewhere: the drain is complete. */
  readonly complete: boolean;
  /** The node led before the drain. */
  readonly wasLeader: boolean;
  /** The leader when the drain began and when the report was made ("" when unknown). */
  readonly leaderBefore: string;
  readonly leaderAfter: string;
  readonly workerStreamsBefore: number;
  /** Streams that ended on the node and moved elsewhere (as far as its counts tell). */
  readonly workerStreamsMoved: number;
  /** Streams still open at the end: more than 0 only when the deadline passed. */
  readonly workerStreamsLeft: number;
  readonly waitedMs: number;
  /** Why the node's state is not known at the end (it did not answer), or "". */
  readonly unreachable: string;
}

/**
 * The drain is done once the node says it is drained, holds no worker stream, and knows another
 * node as leader (not merely that it stepped down: the election may still be under way).
 */
export function drainComplete(s: StatusResponse | undefined): boolean {
  return (
    s !== undefined &&
    s.drained &&
    s.workerStreams === 0 &&
    s.role !== Role.ROLE_LEADER &&
    s.leader !== '' &&
    s.leader !== s.id
  );
}

/** The report from the node's Status before the drain and at the end (undefined: not answered). */
export function drainReport(
  id: string,
  before: StatusResponse | undefined,
  after: StatusResponse | undefined,
  waitedMs: number,
  unreachable: string,
): DrainReport {
  const streamsBefore = before?.workerStreams ?? 0;
  const left = after?.workerStreams ?? 0;
  return {
    id,
    drained: true,
    complete: drainComplete(after),
    wasLeader: before?.role === Role.ROLE_LEADER,
    leaderBefore: before?.leader ?? '',
    leaderAfter: after?.leader ?? '',
    workerStreamsBefore: streamsBefore,
    workerStreamsMoved: Math.max(0, streamsBefore - left),
    workerStreamsLeft: left,
    waitedMs,
    unreachable,
  };
}

/** The report in an operator's words, a line per fact. */
export function describeDrain(r: DrainReport): string {
  const leadership = !r.wasLeader
    ? `${r.id} did not lead (leader: ${r.leaderAfter || 'unknown'})`
    : r.leaderAfter !== '' && r.leaderAfter !== r.id
      ? `moved from ${r.id} to ${r.leaderAfter}`
      : `still on ${r.id}`;
  const lines = [
    `node ${r.id}: drained${r.complete ? '' : ' (not complete)'}`,
    `leadership: ${leadership}`,
    `worker streams: ${r.workerStreamsMoved} moved, ${r.workerStreamsLeft} left (after ${(r.waitedMs / 1000).toFixed(1)} s)`,
  ];
  if (r.unreachable !== '') lines.push(`status: ${r.unreachable}`);
  return lines.join('\n');
}

function checkId(id: string): void {
  const problem = memberIdProblem(id);
  if (problem !== undefined) throw new UsageError(`${problem}; \`slipway member list\` shows the members`);
}

/** The member's Status through whichever node answers; refuses an answer for another node. */
async function memberStatus(client: ClusterClient, id: string, timeoutMs: number): Promise<StatusResponse> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no status from ${id} within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    const s = await Promise.race([client.call('status', { member: id }), timeout]);
    if (s.id !== id) {
      throw new Error(
        `the node answering (${s.id}) cannot read another member's status (a build before node drain); ` +
          `point --server at ${id} or at an upgraded node`,
      );
    }
    return s;
  } finally {
    clearTimeout(timer);
  }
}

async function drain(client: ClusterClient, id: string, timeoutMs: number): Promise<DrainReport> {
  const started = Date.now();
  const deadline = started + timeoutMs;
  const before = await memberStatus(client, id, timeoutMs).catch(() => undefined);
  await client.control('nodeDrain', { id, drained: true });
  let last: StatusResponse | undefined;
  let unreachable = '';
  for (;;) {
    const remaining = deadline - Date.now();
    try {
      last = await memberStatus(client, id, Math.max(1, Math.min(remaining, 5000)));
      unreachable = '';
    } catch (err) {
      last = undefined;
      unreachable = (err as Error).message;
    }
    if (drainComplete(last) || Date.now() >= deadline) break;
    await new Promise((r) => setTimeout(r, Math.max(1, Math.min(pollMs, deadline - Date.now()))));
  }
  return drainReport(id, before, last, Date.now() - started, unreachable);
}

export function nodeCommand(
  program: Command,
  connect: Connect,
  waitTimeoutMs: () => number | undefined,
): void {
  const node = program
    .command('node')
    .description('drain a node before maintenance (no new worker streams, no leadership), or undrain it');
  node
    .command('drain')
    .description(
      'drain a member: it answers health checks NOT_SERVING (balancers stop sending it new streams), ' +
        'ends its worker streams so the workers reconnect to other nodes, and hands leadership to ' +
        'another voter. Replicated: it lasts across restarts until `node undrain`. Waits until the ' +
        'node leads no more and holds no worker stream, for at most the global --timeout (a ' +
        'duration such as 90s or 5m, default 60s here), and reports leadership and worker streams ' +
        'moved and left (-o json for scripts). Exit 0 when drained, 1 when the deadline passed first ' +
        '(the node stays drained), 2 on bad usage or an unknown member',
    )
    .argument('<id>', 'the member to drain (`slipway member list`)')
    .addHelpText(
      'after',
      '\nExamples:\n  slipway node drain n2\n  slipway node drain n2 --timeout 5m -o json\n  slipway node undrain n2',
    )
    .action(async (id) => {
      checkId(id);
      const { client, output } = connect();
      const report = await drain(client, id, waitTimeoutMs() ?? drainTimeoutMsDefault);
      process.stdout.write(`${output === 'table' ? describeDrain(report) : render(output, report, [])}\n`);
      if (!report.complete) {
        process.stderr.write(
          `slipway: ${id} is drained, but the drain did not complete within the deadline ` +
            `(${report.workerStreamsLeft} worker stream(s) left${report.unreachable === '' ? '' : `; ${report.unreachable}`}); ` +
            `it stays drained: run \`slipway node drain ${id}\` again to wait longer, or \`slipway node undrain ${id}\`\n`,
        );
        process.exitCode = 1;
      }
    });
  node
    .command('undrain')
    .description('serve again: the member answers SERVING and takes worker streams and leadership as before')
    .argument('<id>', 'the drained member')
    .action(async (id) => {
      checkId(id);
      const { client, output } = connect();
      const res = await client.control('nodeDrain', { id, drained: false });
      const doc = { id: res.id, drained: res.drained, drainedMembers: res.drainedMembers };
      const text =
        output === 'table'
          ? `node ${id}: serving (drained members: ${res.drainedMembers.join(', ') || 'none'})`
          : render(output, doc, []);
      process.stdout.write(`${text}\n`);
    });
}

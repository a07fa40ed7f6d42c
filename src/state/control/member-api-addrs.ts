// Every member's API address, as each member says it (docs/decisions/0038-member-api-addresses.md):
// a sorted list of {id, apiAddr} in the replicated state, so that `member list` and `cluster
// status` show every address whichever node answers. The raft membership records an address only
// for members added with `member add --api-addr`; the initial members' bootstrap entry holds each
// node's own alone. Each member proposes its own (member.apiAddr) when the list lacks it or names
// another, with the ids of the membership it sees: apply keeps only those members' addresses, so
// the list follows the membership without reading it (apply cannot see the raft membership).
import { memberApiAddrsMax } from '../../model/limits.js';
import { memberIdProblem } from '../../model/member-id.js';
import { memberIdsProblem } from './drained-members.js';

export interface MemberApiAddr {
  readonly id: string;
  readonly apiAddr: string;
}

/** The longest API address, in bytes: a DNS name (253), brackets, a colon and a port. */
export const memberApiAddrBytesMax = 261;

const hostPortPattern = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*|[0-9.]+):(\d{1,5})$/;

/** What is wrong with an API address, or undefined: HOST:PORT (an IPv6 host in brackets). */
export function memberApiAddrProblem(apiAddr: string): string | undefined {
  const port = hostPortPattern.exec(apiAddr)?.[1];
  if (
    apiAddr.length > memberApiAddrBytesMax ||
    port === undefined ||
    Number(port) < 1 ||
    Number(port) > 65535
  )
    return `API address ${JSON.stringify(apiAddr.slice(0, 80))} must be HOST:PORT (at most ${memberApiAddrBytesMax} bytes)`;
  return undefined;
}

/**
 * The list after `id` says it serves on `apiAddr`, seen by a proposer whose membership is
 * `members` (sorted ids): the addresses of members outside it are dropped. The same list when
 * nothing changes; a string says why the command is refused.
 */
export function memberApiAddrsAfter(
  current: readonly MemberApiAddr[],
  command: { readonly id: string; readonly apiAddr: string; readonly members: readonly string[] },
): readonly MemberApiAddr[] | string {
  const problem =
    memberIdProblem(command.id) ??
    memberApiAddrProblem(command.apiAddr) ??
    membersProblem(command.members) ??
    (command.members.includes(command.id)
      ? undefined
      : `member ${command.id} is not among the members named`);
  if (problem !== undefined) return problem;
  const kept = current.filter((m) => m.id !== command.id && command.members.includes(m.id));
  const after = [...kept, { id: command.id, apiAddr: command.apiAddr }].sort((a, b) =>
    a.id < b.id ? -1 : a.id > b.id ? 1 : 0,
  );
  const same =
    after.length === current.length &&
    after.every((m, i) => m.id === current[i]?.id && m.apiAddr === current[i]?.apiAddr);
  return same ? current : after;
}

function membersProblem(ids: readonly string[]): string | undefined {
  if (ids.length > memberApiAddrsMax)
    return `members: ${ids.length} ids, over the limit of ${memberApiAddrsMax}`;
  const problem = memberIdsProblem(ids);
  return problem === undefined ? undefined : `members: ${problem}`;
}

/** What is wrong with a snapshot's list, or undefined: valid ids and addresses, sorted by id, no repeats. */
export function memberApiAddrsProblem(list: readonly MemberApiAddr[]): string | undefined {
  const ids = membersProblem(list.map((m) => m.id));
  if (ids !== undefined) return `memberApiAddrs: ${ids.replace(/^members: /, '')}`;
  const bad = list.map((m) => memberApiAddrProblem(m.apiAddr)).find((p) => p !== undefined);
  return bad === undefined ? undefined : `memberApiAddrs: ${bad}`;
}

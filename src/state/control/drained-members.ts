// The members drained by `slipway node drain` (docs/decisions/0022-node-drain.md): a sorted set
// of ids in the replicated state. Apply cannot see the raft membership, so the proposer checks
// that an id names a member; apply checks only the id's form and the bound on the set.
import { drainedMembersMax } from '../../model/limits.js';
import { memberIdProblem } from '../../model/member-id.js';

/**
 * The drained set after draining (or undraining) `id`: sorted, without repeats. Draining a
 * drained member or undraining one that is not changes nothing. A string says why it is refused.
 */
export function drainedAfter(
  current: readonly string[],
  id: string,
  drained: boolean,
): readonly string[] | string {
  const problem = memberIdProblem(id);
  if (problem !== undefined) return problem;
  const has = current.includes(id);
  if (!drained) return has ? current.filter((m) => m !== id) : current;
  if (has) return current;
  if (current.length >= drainedMembersMax) {
    return `${current.length} members are drained already, the most at once (${drainedMembersMax}): undrain one first`;
  }
  return [...current, id].sort();
}

/** What is wrong with a snapshot's drained set, or undefined: member ids, sorted, no repeats. */
export function drainedSetProblem(ids: readonly string[]): string | undefined {
  const problem = memberIdsProblem(ids);
  return problem === undefined ? undefined : `drainedMembers: ${problem}`;
}

/** What is wrong with a list of member ids, or undefined: each well formed, sorted, no repeats. */
export function memberIdsProblem(ids: readonly string[]): string | undefined {
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] ?? '';
    const problem = memberIdProblem(id);
    if (problem !== undefined) return problem;
    if (i > 0 && !((ids[i - 1] ?? '') < id)) return `${JSON.stringify(id)} is out of order or repeated`;
  }
  return undefined;
}

// Safety properties checked after every scenario command, whatever the scenario is about:
// election safety (at most one leader per term, over every state any node was seen in), log
// matching on committed entries (no two nodes ever commit different entries at an index),
// and state machine safety (every node applies the same sequence, each a prefix of the others).
import type { RaftCore } from '../../src/raft/core/raft.js';
import type { Entry } from '../../src/raft/core/types.js';
import { fmtEntry } from './format.js';

export interface CheckedNode {
  readonly id: string;
  readonly core: RaftCore | null;
  readonly applied: readonly Entry[];
  /** A received snapshot the core counts as handed out, not yet restored into the state machine. */
  readonly restoringTo: number | null;
}

function sameEntry(a: Entry, b: Entry): boolean {
  if (a.index !== b.index || a.term !== b.term || a.type !== b.type) return false;
  if (a.data.byteLength !== b.data.byteLength) return false;
  return a.data.every((byte, i) => byte === b.data[i]);
}

export class InvariantChecker {
  private readonly leaders = new Map<number, string>();
  /** Every entry any node has reported committed, by index: the single committed history. */
  private readonly committed = new Map<number, Entry>();

  noteLeader(term: number, id: string): void {
    const prev = this.leaders.get(term);
    if (prev !== undefined && prev !== id)
      throw new Error(`election safety: both ${prev} and ${id} were leader at term ${term}`);
    this.leaders.set(term, id);
  }

  check(nodes: Iterable<CheckedNode>): void {
    for (const n of nodes) {
      if (n.core === null) continue;
      const role = n.core.softState();
      if (role.role === 'leader') this.noteLeader(role.term, n.id);
      const log = n.core.log;
      for (let i = log.firstIndex(); i <= log.committed; i++) {
        const e = log.entry(i);
        if (e === undefined) throw new Error(`node ${n.id}: committed index ${i} is missing from its log`);
        this.record(n.id, 'committed', e);
      }
      n.applied.forEach((e, k) => {
        if (e.index !== k + 1) throw new Error(`node ${n.id}: applied entry ${k + 1} has index ${e.index}`);
        this.record(n.id, 'applied', e);
      });
      const lastApplied = n.applied.length;
      if (lastApplied !== log.applying && n.restoringTo !== log.applying)
        throw new Error(
          `node ${n.id}: state machine applied ${lastApplied} but core handed out ${log.applying}`,
        );
      if (lastApplied > log.committed)
        throw new Error(`node ${n.id}: applied ${lastApplied} beyond commit ${log.committed}`);
    }
  }

  private record(id: string, what: string, e: Entry): void {
    const known = this.committed.get(e.index);
    if (known === undefined) this.committed.set(e.index, e);
    else if (!sameEntry(known, e))
      throw new Error(
        `node ${id}: ${what} entry ${fmtEntry(e)} differs from committed entry ${fmtEntry(known)}`,
      );
  }
}

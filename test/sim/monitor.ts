// The safety invariants of Raft, checked as the simulation runs. The monitor sees what every
// node's driver sees (each Ready, each durable write, each applied entry) and keeps a global
// record against which every observation is compared at once, so a violation is reported at
// the step that caused it:
// - election safety: at most one leader per term, ever (a restarted node counts as another);
// - no double vote: a node grants its vote in a term to one candidate only, across restarts;
// - log matching: an (index, term) pair names one entry with one predecessor term, on every
//   node, so logs that share an entry share the whole prefix before it;
// - committed prefixes: every node that commits index i commits the same entry there;
// - leader completeness: a new leader of term T holds every entry committed in a term < T;
// - state machine safety: every node applies, at each index, the committed entry, and
//   replicas' states agree at equal applied indexes (checked at snapshots and at the end);
// - no committed entry lost: the highest committed entry stays durable on enough voters of
//   the committed configuration that every quorum of it includes a holder, whatever crashed.
import type { Entry, EntryType, Membership, SnapshotMeta } from '../../src/raft/core/types.js';
import { applyConfChange, decodeConfChange, emptyMembership } from '../../src/raft/core/membership.js';
import { crc32c, crc32cUpdate } from '../../src/platform/crc32c.js';

export type ViolationKind =
  | 'election-safety'
  | 'double-vote'
  | 'log-matching'
  | 'committed-mismatch'
  | 'leader-completeness'
  | 'state-machine-safety'
  | 'snapshot-mismatch'
  | 'committed-entry-lost'
  | 'storage-contract'
  | 'core-assert'
  | 'liveness'
  | 'convergence'
  | 'linearizability'
  | 'control-plane'
  | 'power'
  | 'driver';

export class SimViolation extends Error {
  readonly kind: ViolationKind;
  constructor(kind: ViolationKind, message: string) {
    super(`${kind}: ${message}`);
    this.name = 'SimViolation';
    this.kind = kind;
  }
}

export function violation(kind: ViolationKind, message: string): never {
  throw new SimViolation(kind, message);
}

const typeCode: Record<EntryType, number> = { normal: 1, conf: 2, noop: 3 };

/** A digest of an entry's type and data (the index and term are compared separately). */
export function entryHash(e: Entry): number {
  return crc32cUpdate(crc32c(Uint8Array.of(typeCode[e.type])), e.data, 0, e.data.length);
}

interface CommitRecord {
  readonly term: number;
  readonly hash: number;
  readonly entry: Entry;
  /** The lowest term of a node seen holding it committed: it was committed in this term or before. */
  commitTerm: number;
  /** The initial configuration, which every initial voter writes for itself. */
  readonly bootstrap: boolean;
}

/** What the monitor needs of a node's disk to judge durability. */
export interface DurableLog {
  /** The disk durably holds the entry (index, term), as a log record or inside its snapshot. */
  covers(index: number, term: number): boolean;
}

const termKeyBase = 1_000_000;

export class Monitor {
  private readonly leaders = new Map<number, string>();
  private readonly votes = new Map<string, string>();
  /** (index, term) → the entry's hash and the term of the entry before it. */
  private readonly registry = new Map<number, { hash: number; prevTerm: number }>();
  private readonly committed: (CommitRecord | undefined)[] = [];
  /** The highest index any node has reported committed (with the entry known). */
  maxCommit = 0;
  /** Committed configurations in index order, replayed from committed conf entries. */
  private readonly configs: { index: number; membership: Membership }[] = [
    { index: 0, membership: emptyMembership },
  ];
  private confCursor = 0;
  private readonly digests = new Map<number, number>();
  readonly stats = { leaders: 0, maxTerm: 0, commitGaps: 0, snapshots: 0 };

  // ------------------------------------------------------------ elections

  onLeader(node: string, incarnation: number, term: number): void {
    const who = `${node}#${incarnation}`;
    const prev = this.leaders.get(term);
    if (prev !== undefined && prev !== who)
      violation('election-safety', `two leaders in term ${term}: ${prev} and ${who}`);
    if (prev === undefined) {
      this.leaders.set(term, who);
      this.stats.leaders++;
    }
    this.stats.maxTerm = Math.max(this.stats.maxTerm, term);
  }

  onVoteGranted(voter: string, term: number, candidate: string): void {
    const key = `${voter}:${term}`;
    const prev = this.votes.get(key);
    if (prev !== undefined && prev !== candidate)
      violation('double-vote', `${voter} granted its term-${term} vote to ${prev} and then to ${candidate}`);
    this.votes.set(key, candidate);
  }

  /**
   * A new leader of `term` must hold every entry committed in an earlier term. Entries at or
   * below its snapshot are covered by the snapshot (checked against the record separately).
   */
  checkLeaderCompleteness(
    node: string,
    term: number,
    snapshotIndex: number,
    termAt: (i: number) => number | undefined,
  ): void {
    for (let i = snapshotIndex + 1; i <= this.maxCommit; i++) {
      const rec = this.committed[i];
      if (rec === undefined || rec.commitTerm >= term) continue;
      const t = termAt(i);
      if (t !== rec.term) {
        violation(
          'leader-completeness',
          `${node} became leader of term ${term} with ${t === undefined ? 'no entry' : `term ${t}`} at ` +
            `index ${i}, but the entry of term ${rec.term} there was committed by term ${rec.commitTerm}`,
        );
      }
    }
  }

  // ------------------------------------------------------------ logs

  /** Entries a node is about to persist (every entry enters a log this way). */
  onEntries(node: string, entries: readonly Entry[], termBefore: number | undefined): void {
    let prevTerm = termBefore;
    for (const e of entries) {
      if (e.term >= termKeyBase) violation('driver', `term ${e.term} too large for the registry key`);
      const key = e.index * termKeyBase + e.term;
      const hash = entryHash(e);
      const rec = this.registry.get(key);
      if (rec === undefined) {
        if (prevTerm !== undefined) this.registry.set(key, { hash, prevTerm });
      } else if (rec.hash !== hash) {
        violation('log-matching', `${node} holds a different entry at (index ${e.index}, term ${e.term})`);
      } else if (prevTerm !== undefined && rec.prevTerm !== prevTerm) {
        violation(
          'log-matching',
          `${node} holds (index ${e.index}, term ${e.term}) after an entry of term ${prevTerm}; ` +
            `elsewhere it follows term ${rec.prevTerm}`,
        );
      }
      prevTerm = e.term;
    }
  }

  /** A node's commit index reached `entry.index` while the node was in `nodeTerm`. */
  onCommitted(node: string, entry: Entry, nodeTerm: number): void {
    const i = entry.index;
    const rec = this.committed[i];
    const hash = entryHash(entry);
    if (rec === undefined) {
      const bootstrap = entry.type === 'conf' && decodeConfChange(entry.data).type === 'bootstrap';
      this.committed[i] = { term: entry.term, hash, entry, commitTerm: nodeTerm, bootstrap };
      if (i > this.maxCommit) this.maxCommit = i;
      this.advanceConfigs();
      return;
    }
    if (rec.term !== entry.term || rec.hash !== hash) {
      violation(
        'committed-mismatch',
        `${node} committed (index ${i}, term ${entry.term}) but (index ${i}, term ${rec.term}) ` +
          `was committed before${rec.term === entry.term ? ' with different data' : ''}`,
      );
    }
    if (nodeTerm < rec.commitTerm) rec.commitTerm = nodeTerm;
  }

  committedAt(index: number): { readonly term: number; readonly hash: number } | undefined {
    return this.committed[index];
  }

  /** A node applies entry e: it must be the committed entry at that index. */
  onApply(node: string, e: Entry): void {
    const rec = this.committed[e.index];
    if (rec === undefined)
      violation('state-machine-safety', `${node} applied index ${e.index}, which no node reported committed`);
    if (rec.term !== e.term || rec.hash !== entryHash(e)) {
      violation(
        'state-machine-safety',
        `${node} applied (index ${e.index}, term ${e.term}) but the committed entry there has term ${rec.term}` +
          (rec.term === e.term ? ' and different data' : ''),
      );
    }
  }

  /** A snapshot was taken or installed: its term, configuration and state must match the record. */
  onSnapshot(node: string, meta: SnapshotMeta, digest: number): void {
    this.stats.snapshots++;
    const rec = this.committed[meta.index];
    if (meta.index > 0 && rec !== undefined && rec.term !== meta.term) {
      violation(
        'snapshot-mismatch',
        `${node} has a snapshot at (index ${meta.index}, term ${meta.term}) but the committed entry there has term ${rec.term}`,
      );
    }
    const prev = this.digests.get(meta.index);
    if (prev !== undefined && prev !== digest)
      violation(
        'state-machine-safety',
        `${node}'s state at index ${meta.index} differs from another replica's`,
      );
    this.digests.set(meta.index, digest);
    const conf = this.configAt(meta.index);
    if (conf !== undefined && !sameMembership(conf, meta.membership)) {
      violation(
        'snapshot-mismatch',
        `${node}'s snapshot at ${meta.index} records membership ${describeMembership(meta.membership)} ` +
          `but the committed log gives ${describeMembership(conf)}`,
      );
    }
  }

  // ------------------------------------------------------------ configuration

  /** The newest committed configuration known so far. */
  committedConfig(): Membership {
    return this.configs.at(-1)!.membership;
  }

  /** The configuration in force after applying through index, if the record reaches it. */
  configAt(index: number): Membership | undefined {
    if (index > this.confCursor) return undefined;
    let m: Membership = emptyMembership;
    for (const c of this.configs) {
      if (c.index > index) break;
      m = c.membership;
    }
    return m;
  }

  private advanceConfigs(): void {
    for (;;) {
      const rec = this.committed[this.confCursor + 1];
      if (rec === undefined) return;
      this.confCursor++;
      if (rec.entry.type === 'conf') {
        const membership = applyConfChange(this.committedConfig(), decodeConfChange(rec.entry.data));
        this.configs.push({ index: this.confCursor, membership });
      }
    }
  }

  // ------------------------------------------------------------ durability

  /**
   * The highest committed entry must survive any crash: enough voters of the committed
   * configuration hold it durably that every quorum of that configuration contains one.
   * (With single-server changes this holds across the change too.)
   */
  checkDurability(disks: ReadonlyMap<string, DurableLog>): void {
    const m = this.maxCommit;
    const rec = this.committed[m];
    if (rec === undefined) return;
    // Every initial voter writes the bootstrap configuration itself, and writes it again if a
    // crash took it: it is never lost.
    if (rec.bootstrap) return;
    const voters = this.committedConfig().voters;
    if (voters.length === 0) return;
    let held = 0;
    for (const v of voters) if (disks.get(v.id)?.covers(m, rec.term) === true) held++;
    const need = voters.length - (Math.floor(voters.length / 2) + 1) + 1;
    if (held < need) {
      const missing = voters.filter((v) => disks.get(v.id)?.covers(m, rec.term) !== true).map((v) => v.id);
      violation(
        'committed-entry-lost',
        `committed entry (index ${m}, term ${rec.term}) is durable on only ${held} of ${voters.length} voters ` +
          `(need ${need}); missing on ${missing.join(', ')}`,
      );
    }
  }
}

function sameMembership(a: Membership, b: Membership): boolean {
  const ids = (m: readonly { id: string }[]): string =>
    m
      .map((x) => x.id)
      .sort()
      .join(',');
  return ids(a.voters) === ids(b.voters) && ids(a.learners) === ids(b.learners);
}

export function describeMembership(m: Membership): string {
  const ids = (xs: readonly { id: string }[]): string => xs.map((x) => x.id).join(',');
  return `{voters ${ids(m.voters)}${m.learners.length > 0 ? `; learners ${ids(m.learners)}` : ''}}`;
}

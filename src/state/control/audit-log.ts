// The audit trail: who changed what, when, from where, and how it ended. Entries are appended by
// apply (the same raft entry as the change they describe) and kept in a bounded ring. Retention
// is replicated state, and age is judged by the stamp of the entry being appended, never by a
// clock, so every node keeps and drops exactly the same entries (invariant 2).
import { auditEntriesDefault } from '../../model/limits.js';
import type { Role } from '../../model/records.js';

/** Who asked for a command, attached by the node that served the operator's call. */
export interface AuditTag {
  /** The token's name ('bootstrap-admin' for the bootstrap token, 'local' with auth off). */
  readonly user: string;
  readonly role: Role;
  /** The caller's address as gRPC saw it (e.g. ipv4:10.0.0.5:51234). */
  readonly address: string;
  /** The API method called, e.g. Control/HardwareCreate. */
  readonly method: string;
}

/** How a call ended: absent error means it changed the state as asked. */
export interface AuditError {
  /** A control error code (E_NOT_FOUND...) or a gRPC status name (PERMISSION_DENIED...). */
  readonly code: string;
  readonly message: string;
}

export interface AuditEntry {
  /** Dense from 1 across the whole trail, the same on every node; the list's page position. */
  readonly seq: number;
  /** The leader's stamp of the raft entry. */
  readonly stampMs: number;
  readonly user: string;
  readonly role: Role;
  readonly address: string;
  readonly method: string;
  /** The command's type (hardware.put, token.put...) or the admin operation (member.add...). */
  readonly kind: string;
  /** What it acted on, by id or name; never a secret. */
  readonly target: string;
  readonly error?: AuditError;
}

/** How much of the trail is kept. Replicated: a per-node setting would make states diverge. */
export interface AuditRetention {
  readonly entries: number;
  /** Entries older than this many days (by the newest entry's stamp) are dropped; 0: never. */
  readonly days: number;
}

export const auditRetentionDefault: AuditRetention = Object.freeze({ entries: auditEntriesDefault, days: 0 });

const dayMs = 24 * 3600 * 1000;

export function isDefaultRetention(r: AuditRetention): boolean {
  return r.entries === auditRetentionDefault.entries && r.days === auditRetentionDefault.days;
}

/** What a listing asks for; every field narrows it. */
export interface AuditQuery {
  readonly user?: string;
  readonly kind?: string;
  readonly sinceMs?: number;
  readonly untilMs?: number;
  /** Only entries older than this seq (the previous page's continue point). */
  readonly beforeSeq?: number;
  readonly limit: number;
}

export interface AuditPage {
  /** Newest first. */
  readonly entries: readonly AuditEntry[];
  /** The seq to pass as beforeSeq for the next page, when more may match. */
  readonly continueBefore?: number;
}

export class AuditLog {
  #retention: AuditRetention;
  #lastSeq: number;
  #items: AuditEntry[];
  /** Items before this index were dropped; compacted once they are half the array. */
  #head = 0;

  constructor(retention = auditRetentionDefault, lastSeq = 0, entries: readonly AuditEntry[] = []) {
    this.#retention = retention;
    this.#lastSeq = lastSeq;
    this.#items = [...entries];
  }

  get retention(): AuditRetention {
    return this.#retention;
  }

  get lastSeq(): number {
    return this.#lastSeq;
  }

  get size(): number {
    return this.#items.length - this.#head;
  }

  /** Appends an entry at `stampMs` and drops what retention no longer keeps. */
  append(draft: Omit<AuditEntry, 'seq' | 'stampMs'>, stampMs: number): AuditEntry {
    const entry: AuditEntry = Object.freeze({ seq: ++this.#lastSeq, stampMs, ...draft });
    this.#items.push(entry);
    this.#trim(stampMs);
    return entry;
  }

  /** A new retention applies at once, judged by the stamp of the command that set it. */
  setRetention(retention: AuditRetention, stampMs: number): void {
    this.#retention = Object.freeze({ ...retention });
    this.#trim(stampMs);
  }

  /** Every kept entry, oldest first (for snapshots). */
  all(): AuditEntry[] {
    return this.#items.slice(this.#head);
  }

  /** A page of the entries that match, newest first. */
  query(q: AuditQuery): AuditPage {
    const out: AuditEntry[] = [];
    for (let i = this.#items.length - 1; i >= this.#head; i--) {
      const e = this.#items[i];
      if (e === undefined) continue;
      if (q.beforeSeq !== undefined && e.seq >= q.beforeSeq) continue;
      if (!matches(e, q)) continue;
      if (out.length === q.limit) return { entries: out, continueBefore: out[out.length - 1]?.seq ?? 0 };
      out.push(e);
    }
    return { entries: out };
  }

  #trim(stampMs: number): void {
    const oldestMs = this.#retention.days === 0 ? -Infinity : stampMs - this.#retention.days * dayMs;
    while (
      this.size > this.#retention.entries ||
      (this.size > 0 && (this.#items[this.#head]?.stampMs ?? 0) < oldestMs)
    ) {
      this.#head++;
    }
    if (this.#head > 0 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
  }
}

function matches(e: AuditEntry, q: AuditQuery): boolean {
  return (
    (q.user === undefined || e.user === q.user) &&
    (q.kind === undefined || e.kind === q.kind) &&
    // Not a stop condition: stamps come from successive leaders' clocks, so they may step back.
    (q.sinceMs === undefined || e.stampMs >= q.sinceMs) &&
    (q.untilMs === undefined || e.stampMs <= q.untilMs)
  );
}

// Client sessions for exactly-once commands (Ongaro's dissertation §6.3). Raft alone is
// at-least-once: a client that retries after a leader crash may get its command committed
// twice. Each session caches the encoded result of every command it has not yet acknowledged,
// so a duplicate (clientId, seq) returns the first result instead of applying again.
//
// Expiry is deterministic: the only clock is the machine's, which advances to the leader's
// stamp on each command and never goes back. Sessions are kept in least-recently-active order
// (a Map keeps insertion order; activity re-inserts), so expiry and eviction pop from the front
// in amortized O(1).
import { BinaryReader, BinaryWriter, DecodeError } from './binary.js';
import type { SessionTag } from './store-command.js';
import { resultBytesMax } from '../model/limits.js';

export interface SessionLimits {
  /** A session expires when the clock passes its last activity by more than this. */
  readonly sessionTtlMs: number;
  /** Registering beyond this many sessions evicts the least recently active one. */
  readonly sessionsMax: number;
  /** Unacknowledged results a session may hold; more commands are refused until it acknowledges. */
  readonly sessionResultsMax: number;
}

interface Session {
  lastActiveMs: number;
  /** The client has every result up to here; none at or below it is kept. */
  ackedSeq: number;
  readonly results: Map<number, Uint8Array>;
}

/** What to do with a command that carries a session tag. */
export type Admission =
  | { readonly type: 'fresh' }
  | { readonly type: 'duplicate'; readonly result: Uint8Array }
  | { readonly type: 'expired' }
  | { readonly type: 'refused'; readonly message: string };

export class SessionTable {
  readonly #limits: SessionLimits;
  /** Least recently active first; lastActiveMs is non-decreasing along this order. */
  #sessions = new Map<number, Session>();

  constructor(limits: SessionLimits) {
    this.#limits = limits;
  }

  get size(): number {
    return this.#sessions.size;
  }

  has(clientId: number): boolean {
    return this.#sessions.has(clientId);
  }

  /** Opens a session, evicting the least recently active ones beyond sessionsMax. */
  register(clientId: number, nowMs: number): void {
    if (this.#sessions.has(clientId)) throw new Error(`session ${clientId} registered twice`);
    while (this.#sessions.size >= this.#limits.sessionsMax) {
      const oldest = this.#sessions.keys().next();
      if (oldest.done === true) break;
      this.#sessions.delete(oldest.value);
    }
    this.#sessions.set(clientId, { lastActiveMs: nowMs, ackedSeq: 0, results: new Map() });
  }

  /** Drops every session idle for longer than the TTL at `nowMs`. */
  expire(nowMs: number): void {
    for (const [clientId, session] of this.#sessions) {
      if (nowMs - session.lastActiveMs <= this.#limits.sessionTtlMs) break;
      this.#sessions.delete(clientId);
    }
  }

  /**
   * Classifies a command from a session and records the client's activity and acknowledgement.
   * A 'fresh' command must be executed and its result passed to record().
   */
  admit(tag: SessionTag, nowMs: number): Admission {
    const session = this.#sessions.get(tag.clientId);
    if (session === undefined) return { type: 'expired' };
    this.#sessions.delete(tag.clientId);
    session.lastActiveMs = nowMs;
    this.#sessions.set(tag.clientId, session);
    if (tag.ackedSeq > session.ackedSeq) {
      session.ackedSeq = tag.ackedSeq;
      for (const seq of session.results.keys()) if (seq <= tag.ackedSeq) session.results.delete(seq);
    }
    const cached = session.results.get(tag.seq);
    if (cached !== undefined) return { type: 'duplicate', result: cached.slice() };
    if (tag.seq <= session.ackedSeq) {
      return {
        type: 'refused',
        message: `seq ${tag.seq} of client ${tag.clientId} was already acknowledged (acked up to ${session.ackedSeq}); its result is gone`,
      };
    }
    if (session.results.size >= this.#limits.sessionResultsMax) {
      return {
        type: 'refused',
        message: `client ${tag.clientId} holds ${session.results.size} unacknowledged results (limit ${this.#limits.sessionResultsMax}); acknowledge results with ackedSeq before sending more`,
      };
    }
    return { type: 'fresh' };
  }

  /** Caches the result of a command admit() called fresh. */
  record(tag: SessionTag, result: Uint8Array): void {
    const session = this.#sessions.get(tag.clientId);
    if (session === undefined) throw new Error(`record for unknown session ${tag.clientId}`);
    session.results.set(tag.seq, result.slice());
  }

  /** Sessions in activity order, each with its results sorted by seq (a canonical form). */
  write(w: BinaryWriter): void {
    w.uvarint(this.#sessions.size);
    for (const [clientId, session] of this.#sessions) {
      w.uvarint(clientId)
        .uvarint(session.lastActiveMs)
        .uvarint(session.ackedSeq)
        .uvarint(session.results.size);
      const seqs = [...session.results.keys()].sort((a, b) => a - b);
      for (const seq of seqs) w.uvarint(seq).bytes(session.results.get(seq)!);
    }
  }

  /** Reads what write() wrote, checking it against the snapshot's clock and applied index. */
  static read(r: BinaryReader, limits: SessionLimits, nowMs: number, appliedIndex: number): SessionTable {
    const table = new SessionTable(limits);
    const count = r.uvarint('session count');
    let previousActiveMs = 0;
    for (let i = 0; i < count; i++) {
      const clientId = r.uvarint('session clientId');
      const lastActiveMs = r.uvarint('session lastActiveMs');
      const ackedSeq = r.uvarint('session ackedSeq');
      if (clientId < 1 || clientId > appliedIndex) {
        throw new DecodeError(`session clientId ${clientId} is outside [1, appliedIndex ${appliedIndex}]`);
      }
      if (table.#sessions.has(clientId)) throw new DecodeError(`session ${clientId} appears twice`);
      if (lastActiveMs < previousActiveMs || lastActiveMs > nowMs) {
        throw new DecodeError(
          `session ${clientId} lastActiveMs ${lastActiveMs} is out of order or after the clock`,
        );
      }
      previousActiveMs = lastActiveMs;
      const results = new Map<number, Uint8Array>();
      const resultCount = r.uvarint('session result count');
      let previousSeq = ackedSeq;
      for (let j = 0; j < resultCount; j++) {
        const seq = r.uvarint('session result seq');
        if (seq <= previousSeq) {
          throw new DecodeError(`session ${clientId} result seq ${seq} is not above ${previousSeq}`);
        }
        previousSeq = seq;
        results.set(seq, r.bytes('session result', resultBytesMax));
      }
      table.#sessions.set(clientId, { lastActiveMs, ackedSeq, results });
    }
    return table;
  }
}

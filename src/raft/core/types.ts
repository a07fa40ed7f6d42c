// The vocabulary of the consensus core. Everything here is plain data so that the
// core stays pure: messages and ticks go in, a Ready value comes out.

/** A member's id: a short operator-chosen name such as "n1". Never reused after removal. */
export type NodeId = string;

export type EntryType = 'normal' | 'conf' | 'noop';

export interface Entry {
  readonly term: number;
  readonly index: number;
  readonly type: EntryType;
  /** Opaque command bytes for 'normal'; an encoded ConfChange for 'conf'; empty for 'noop'. */
  readonly data: Uint8Array;
}

/** Persistent state that must be durable before any message that depends on it is sent. */
export interface HardState {
  readonly term: number;
  /** The candidate voted for in `term`, or the empty string. */
  readonly vote: NodeId;
  readonly commit: number;
}

export interface Member {
  readonly id: NodeId;
  /** Raft (peer) address, host:port. */
  readonly addr: string;
  /** Client API address, host:port; empty when unknown. */
  readonly apiAddr: string;
}

/** The cluster configuration: voters decide elections and commits; learners only receive the log. */
export interface Membership {
  readonly voters: readonly Member[];
  readonly learners: readonly Member[];
}

/**
 * A membership change, carried in a 'conf' entry and taking effect when applied. 'bootstrap'
 * is entry 1 of every initial member's log, so that a member added later learns the initial
 * configuration from the log itself.
 */
export type ConfChange =
  | {
      readonly type: 'addLearner' | 'promote' | 'remove';
      readonly member: Member;
      /**
       * Opaque bytes the state machine applies at the entry's index, with the change: the
       * change's audit record (docs/decisions/0018). Raft itself ignores them.
       */
      readonly context?: Uint8Array;
    }
  | { readonly type: 'bootstrap'; readonly voters: readonly Member[] };

export interface SnapshotMeta {
  readonly index: number;
  readonly term: number;
  readonly membership: Membership;
}

export type MessageType =
  | 'app'
  | 'appResp'
  | 'vote'
  | 'voteResp'
  | 'preVote'
  | 'preVoteResp'
  | 'heartbeat'
  | 'heartbeatResp'
  | 'snap'
  | 'timeoutNow'
  | 'readIndex'
  | 'readIndexResp';

/**
 * One message between peers. A single flat shape keeps encoding trivial; each type uses the
 * fields its comment names and leaves the others at zero.
 */
export interface Message {
  readonly type: MessageType;
  readonly from: NodeId;
  readonly to: NodeId;
  readonly term: number;
  /** app: prevLogIndex. appResp: the index acknowledged, or on reject the index rejected.
   *  vote/preVote: candidate's lastIndex. snap: snapshot index. */
  readonly index: number;
  /** app: prevLogTerm. vote/preVote: candidate's lastTerm. appResp on reject: the conflict term hint. */
  readonly logTerm: number;
  /** app and heartbeat: the leader's commit index (heartbeat: bounded by the follower's match). */
  readonly commit: number;
  readonly entries: readonly Entry[];
  /** appResp, voteResp, preVoteResp, readIndexResp: the request was refused. */
  readonly reject: boolean;
  /** appResp on reject: the follower's last index, so the leader can jump back. */
  readonly rejectHint: number;
  /** heartbeat/heartbeatResp/readIndex/readIndexResp: the read-confirmation round id (0 = none). */
  readonly context: number;
  /** snap: the snapshot's metadata (the data travels separately on the snapshot stream). */
  readonly snapshot: SnapshotMeta | null;
  /** vote/preVote sent because of a leadership transfer: bypasses leader stickiness. */
  readonly transfer: boolean;
}

export function message(fields: Partial<Message> & Pick<Message, 'type' | 'from' | 'to' | 'term'>): Message {
  // Every field named, not spread over defaults: one object shape for every message keeps the
  // core and the codec on monomorphic property access, and a spread costs more per message.
  return {
    type: fields.type,
    from: fields.from,
    to: fields.to,
    term: fields.term,
    index: fields.index ?? 0,
    logTerm: fields.logTerm ?? 0,
    commit: fields.commit ?? 0,
    entries: fields.entries ?? [],
    reject: fields.reject ?? false,
    rejectHint: fields.rejectHint ?? 0,
    context: fields.context ?? 0,
    snapshot: fields.snapshot ?? null,
    transfer: fields.transfer ?? false,
  };
}

export type Role = 'follower' | 'preCandidate' | 'candidate' | 'leader';

export interface SoftState {
  readonly role: Role;
  readonly leader: NodeId;
  readonly term: number;
}

/** A linearizable read is safe to serve once the state machine has applied `index`. */
export interface ReadState {
  readonly requestId: number;
  readonly index: number;
}

/** A read that could not be confirmed (not leader, no leader known, leadership lost). */
export interface ReadFailure {
  readonly requestId: number;
  readonly reason: string;
}

/**
 * The core's output: what the driver must persist, send and apply. Order of handling:
 * 1. `messages` may be sent at once (they do not depend on unpersisted local state).
 * 2. `entries` (replacing any stored entries from `entries[0].index` on), `hardState` and
 *    `snapshot` are written in one synced batch
 *    (a batch that only moves the commit index need not be synced: raft can recompute it).
 * 3. Only after that write completes are `messagesAfterPersist` sent, and `advance()` called.
 * 4. `committedEntries` are durable locally and committed: apply them in order.
 */
export interface Ready {
  readonly softState: SoftState | null;
  readonly hardState: HardState | null;
  /** Entries to append; any stored entries with an index >= entries[0].index are replaced. */
  readonly entries: readonly Entry[];
  /** A snapshot received from the leader, to install before the entries. */
  readonly snapshot: SnapshotMeta | null;
  readonly committedEntries: readonly Entry[];
  readonly messages: readonly Message[];
  readonly messagesAfterPersist: readonly Message[];
  readonly readStates: readonly ReadState[];
  readonly readFailures: readonly ReadFailure[];
  /** Entries that need a durable write: hardState, entries or snapshot is set. */
  readonly mustPersist: boolean;
}

/** The state a node starts from, as read back from durable storage. */
export interface InitialState {
  readonly hardState: HardState;
  /** The latest snapshot, or a zero snapshot (index 0) with the bootstrap membership. */
  readonly snapshot: SnapshotMeta;
  /** Entries after snapshot.index, contiguous. */
  readonly entries: readonly Entry[];
}

/** Randomness is injected so that elections are reproducible from a seed. */
export interface Random {
  /** An integer in [0, n). */
  int(n: number): number;
}

export interface RaftConfig {
  readonly id: NodeId;
  /** Ticks without hearing from a leader before a follower campaigns; randomised in [e, 2e). */
  readonly electionTicks: number;
  readonly heartbeatTicks: number;
  readonly preVote: boolean;
  readonly checkQuorum: boolean;
  /** Bound on the bytes of entries in one append message. */
  readonly maxMsgBytes: number;
  /** Bound on append messages in flight to one follower in replicate state. */
  readonly maxInflightMsgs: number;
  /** Bound on bytes in flight to one follower. */
  readonly maxInflightBytes: number;
  /** Past this many bytes of uncommitted entries the leader refuses proposals. */
  readonly maxUncommittedBytes: number;
  /** Bound on the bytes of committed entries handed out in one Ready. */
  readonly maxApplyBytes: number;
}

export const defaultRaftConfig: Omit<RaftConfig, 'id'> = {
  electionTicks: 10,
  heartbeatTicks: 1,
  preVote: true,
  checkQuorum: true,
  maxMsgBytes: 1 << 20,
  maxInflightMsgs: 64,
  maxInflightBytes: 8 << 20,
  maxUncommittedBytes: 64 << 20,
  maxApplyBytes: 16 << 20,
};

export type RaftErrorCode =
  | 'E_NOT_LEADER'
  | 'E_PROPOSAL_DROPPED'
  | 'E_BACKPRESSURE'
  | 'E_CONF_CHANGE_PENDING'
  | 'E_TRANSFER_IN_PROGRESS'
  | 'E_UNKNOWN_MEMBER'
  | 'E_BAD_REQUEST';

/** An operating error: the caller can act on `code` (retry elsewhere, back off, fix input). */
export class RaftError extends Error {
  readonly code: RaftErrorCode;
  /** For E_NOT_LEADER: the leader this node knows of, or ''. */
  readonly leader: NodeId;
  constructor(code: RaftErrorCode, message: string, leader: NodeId = '') {
    super(message);
    this.name = 'RaftError';
    this.code = code;
    this.leader = leader;
  }
}

export function entryBytes(e: Entry): number {
  return e.data.byteLength + 24;
}

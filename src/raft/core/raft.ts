// The consensus core: a deterministic state machine in the style of etcd raft. Ticks,
// peer messages and client requests go in; a Ready value of entries to persist, messages
// to send and entries to apply comes out. No timers, sockets, disk, clock or randomness.
import assert from './assert.js';
import { RaftLog } from './log.js';
import {
  allMembers,
  applyConfChange,
  decodeConfChange,
  encodeConfChange,
  isLearner,
  isVoter,
  validateConfChange,
} from './membership.js';
import { Progress } from './progress.js';
import type {
  ConfChange,
  Entry,
  HardState,
  InitialState,
  Membership,
  Message,
  NodeId,
  Random,
  RaftConfig,
  Ready,
  ReadFailure,
  ReadState,
  Role,
  SnapshotMeta,
  SoftState,
} from './types.js';
import { entryBytes, message, RaftError } from './types.js';

type CampaignKind = 'preElection' | 'election' | 'transfer';

interface PendingRead {
  /** The node that asked: this node, or a follower that forwarded the read. */
  readonly from: NodeId;
  readonly requestId: number;
}

interface ReadRound {
  readonly round: number;
  readonly index: number;
  readonly reads: readonly PendingRead[];
}

interface PersistInFlight {
  readonly lastIndex: number;
  readonly lastTerm: number;
  readonly hardState: HardState;
  readonly snapshot: SnapshotMeta | null;
}

export interface ProgressStatus {
  readonly id: NodeId;
  readonly match: number;
  readonly next: number;
  readonly state: string;
  readonly learner: boolean;
  readonly recentActive: boolean;
}

export interface RaftStatus {
  readonly id: NodeId;
  readonly role: Role;
  readonly term: number;
  readonly leader: NodeId;
  readonly commit: number;
  readonly applied: number;
  readonly lastIndex: number;
  readonly snapshotIndex: number;
  readonly membership: Membership;
  readonly progress: readonly ProgressStatus[];
  readonly transferee: NodeId;
}

export interface ProposalResult {
  readonly term: number;
  readonly firstIndex: number;
  readonly lastIndex: number;
}

export class RaftCore {
  readonly id: NodeId;
  readonly #cfg: RaftConfig;
  readonly #rand: Random;

  #term: number;
  #vote: NodeId;
  #leader: NodeId = '';
  #role: Role = 'follower';
  readonly log: RaftLog;
  #membership: Membership;

  #progress = new Map<NodeId, Progress>();
  #votes = new Map<NodeId, boolean>();
  /**
   * Members this node has seen removed by a change it applied (and not added again since): a
   * removed node that never learned it (its leader stopped sending once the removal applied) is
   * told so by its peers' transports (wasRemoved).
   */
  readonly #removedIds = new Set<NodeId>();
  #electionElapsed = 0;
  #heartbeatElapsed = 0;
  #randomizedElectionTimeout = 0;
  #leadTransferee: NodeId = '';
  /** What the current (or last) campaign is: a transfer-won election starts its followers pipelined. */
  #campaignKind: CampaignKind = 'election';
  #transferElapsed = 0;
  /** Elections are held back by the driver (see holdCampaigns). */
  #campaignsHeld = false;
  #pendingConfIndex = 0;
  #uncommittedBytes = 0;
  #needBroadcast = false;

  #msgs: Message[] = [];
  #msgsAfterPersist: Message[] = [];

  #readRoundSeq = 0;
  #readsAwaitingCommit: PendingRead[] = [];
  #readsWaiting: PendingRead[] = [];
  #readRounds: ReadRound[] = [];
  #readStates: ReadState[] = [];
  #readFailures: ReadFailure[] = [];

  #persistInFlight: PersistInFlight | null = null;
  #persistedHardState: HardState;
  #pendingSnapshot: SnapshotMeta | null = null;
  #prevSoftState: SoftState;

  constructor(cfg: RaftConfig, initial: InitialState, rand: Random) {
    assert(
      cfg.electionTicks > cfg.heartbeatTicks && cfg.heartbeatTicks > 0,
      'election ticks must exceed heartbeat',
    );
    this.id = cfg.id;
    this.#cfg = cfg;
    this.#rand = rand;
    this.#term = initial.hardState.term;
    this.#vote = initial.hardState.vote;
    this.log = new RaftLog(initial.snapshot, initial.entries, initial.hardState.commit);
    this.#membership = initial.snapshot.membership;
    this.#persistedHardState = initial.hardState;
    this.#prevSoftState = this.softState();
    this.#resetRandomizedElectionTimeout();
  }

  // ---------------------------------------------------------------- inputs

  /** One unit of logical time. The driver calls it on a fixed interval. */
  tick(): void {
    if (this.#role === 'leader') this.#tickLeader();
    else this.#tickElection();
  }

  /** A message from a peer. */
  step(m: Message): void {
    if (m.term > this.#term) {
      if ((m.type === 'vote' || m.type === 'preVote') && !m.transfer && this.#inLeaderLease()) {
        // Leader stickiness (§4.2.3): a live leader is known, so this candidate is disruptive.
        return;
      }
      if (m.type === 'preVote' || (m.type === 'preVoteResp' && !m.reject)) {
        // Pre-votes carry the term the candidate would use; they never change ours.
      } else if (m.type === 'app' || m.type === 'heartbeat' || m.type === 'snap') {
        this.#becomeFollower(m.term, m.from);
      } else {
        this.#becomeFollower(m.term, '');
      }
    } else if (m.term < this.#term) {
      if (m.type === 'app' || m.type === 'heartbeat') {
        // A stale leader: answer with our term so that it steps down.
        this.#send(message({ type: 'appResp', from: this.id, to: m.from, term: this.#term }));
      } else if (m.type === 'preVote') {
        this.#send(
          message({ type: 'preVoteResp', from: this.id, to: m.from, term: this.#term, reject: true }),
        );
      } else if (m.type === 'readIndexResp' && m.reject) {
        // A deposed leader fails forwarded reads with its old term, and the requester has
        // usually moved on to the new term already; dropping the answer would leave the read
        // unanswered for good. A failure is always safe (read-index-leader-change.txt).
        this.#readFailures.push({ requestId: m.context, reason: 'the leader could not confirm the read' });
      }
      return;
    }

    if (m.type === 'vote' || m.type === 'preVote') {
      this.#handleVoteRequest(m);
      return;
    }
    switch (this.#role) {
      case 'leader':
        this.#stepLeader(m);
        return;
      case 'candidate':
      case 'preCandidate':
        this.#stepCandidate(m);
        return;
      case 'follower':
        this.#stepFollower(m);
        return;
    }
  }

  /** Appends commands to the log. Only the leader accepts proposals. */
  propose(commands: readonly Uint8Array[]): ProposalResult {
    this.#assertCanPropose();
    const bytes = commands.reduce((n, c) => n + c.byteLength + 24, 0);
    if (this.#uncommittedBytes > 0 && this.#uncommittedBytes + bytes > this.#cfg.maxUncommittedBytes) {
      throw new RaftError(
        'E_BACKPRESSURE',
        `too many uncommitted bytes (${this.#uncommittedBytes}); retry after outstanding writes commit`,
      );
    }
    const first = this.log.lastIndex() + 1;
    const entries = commands.map((data, i) => ({
      term: this.#term,
      index: first + i,
      type: 'normal' as const,
      data,
    }));
    this.#appendEntries(entries);
    return { term: this.#term, firstIndex: first, lastIndex: this.log.lastIndex() };
  }

  /** Proposes one membership change. One at a time, and only once the leader owns its term. */
  proposeConfChange(cc: ConfChange): ProposalResult {
    this.#assertCanPropose();
    if (!this.#committedInCurrentTerm() || this.#pendingConfIndex > this.log.applying) {
      throw new RaftError('E_CONF_CHANGE_PENDING', 'another membership change is in progress; retry shortly');
    }
    validateConfChange(this.#membership, cc);
    const index = this.log.lastIndex() + 1;
    this.#appendEntries([{ term: this.#term, index, type: 'conf', data: encodeConfChange(cc) }]);
    this.#pendingConfIndex = index;
    return { term: this.#term, firstIndex: index, lastIndex: index };
  }

  /**
   * Asks for a linearizable read point (ReadIndex, §6.4). The answer arrives in a later
   * Ready as a ReadState (serve the read once applied >= index) or a ReadFailure.
   * requestId must be unique for this node's lifetime.
   */
  readIndex(requestId: number): void {
    if (this.#role === 'leader') {
      this.#acceptRead({ from: this.id, requestId });
    } else if (this.#leader !== '') {
      this.#send(
        message({ type: 'readIndex', from: this.id, to: this.#leader, term: this.#term, context: requestId }),
      );
    } else {
      this.#readFailures.push({ requestId, reason: 'no leader is known; retry shortly' });
    }
  }

  transferLeadership(to: NodeId): void {
    if (this.#role !== 'leader') throw this.#notLeader();
    if (to === this.id) return;
    if (!isVoter(this.#membership, to))
      throw new RaftError('E_UNKNOWN_MEMBER', `${to} is not a voting member`);
    this.#leadTransferee = to;
    this.#transferElapsed = 0;
    const pr = this.#progress.get(to)!;
    if (pr.match === this.log.lastIndex()) this.#sendTimeoutNow(to);
    else this.#sendAppend(to, true);
  }

  /** The driver finished (or failed) streaming a snapshot to a follower. */
  reportSnapshot(to: NodeId, ok: boolean): void {
    const pr = this.#progress.get(to);
    if (this.#role !== 'leader' || pr === undefined || pr.state !== 'snapshot') return;
    if (!ok) pr.pendingSnapshot = 0;
    pr.becomeProbe();
    // Wait for the follower's answer (or the next heartbeat) before probing again.
    pr.probeSent = true;
  }

  /**
   * The transport lost its stream to a peer. A transfer to it is abandoned now rather than after
   * an election timeout: until then the leader refuses every proposal for a target that is gone.
   */
  reportUnreachable(to: NodeId): void {
    const pr = this.#progress.get(to);
    if (this.#role !== 'leader') return;
    if (pr?.state === 'replicate') pr.becomeProbe();
    if (this.#leadTransferee === to) this.#leadTransferee = '';
  }

  /**
   * While held, this node starts no election when its election timeout passes (it still votes,
   * and still campaigns when a leader hands it leadership with TimeoutNow). The driver holds
   * elections of a node that should not lead while a better one can: the node's boot services
   * are not serving and a peer's are (docs/decisions/0033).
   */
  holdCampaigns(held: boolean): void {
    this.#campaignsHeld = held;
  }

  get campaignsHeld(): boolean {
    return this.#campaignsHeld;
  }

  /** Starts an election now (used by tests and by a single-node bootstrap). */
  campaignNow(): void {
    if (this.#role !== 'leader') this.#campaign(this.#cfg.preVote ? 'preElection' : 'election');
  }

  /**
   * Records a snapshot the state machine took at `index` (which must be applied) and drops
   * log entries through `compactTo`, keeping a tail for slow followers. Returns its metadata.
   */
  compact(index: number, compactTo: number): SnapshotMeta {
    const meta = this.snapshotMeta(index);
    this.compactAt(meta, compactTo);
    return meta;
  }

  /**
   * What a snapshot of the state at the applied index `index` is: its term and membership.
   * Taken when the state is captured, so a snapshot encoded later still names the right ones.
   */
  snapshotMeta(index: number): SnapshotMeta {
    const term = this.log.term(index);
    assert(term !== undefined, `cannot snapshot at unknown index ${index}`);
    assert(index === this.log.applying, 'snapshots are taken at the applied index');
    return { index, term, membership: this.#membership };
  }

  /**
   * Records a snapshot described by snapshotMeta (possibly some entries ago: committed entries
   * never change) and drops the log through `compactTo`. The caller makes sure no newer
   * snapshot has been installed since.
   */
  compactAt(meta: SnapshotMeta, compactTo: number): void {
    assert(this.log.term(meta.index) === meta.term, `snapshot at ${meta.index} no longer matches the log`);
    this.log.compact(meta, Math.min(compactTo, meta.index));
  }

  // ---------------------------------------------------------------- outputs

  hasReady(): boolean {
    return (
      this.#msgs.length > 0 ||
      (this.#persistInFlight === null &&
        (this.#msgsAfterPersist.length > 0 ||
          this.log.unstableFrom <= this.log.lastIndex() ||
          this.#pendingSnapshot !== null ||
          this.#hardStateChanged())) ||
      this.log.applicableTo() > this.log.applying ||
      this.#readStates.length > 0 ||
      this.#readFailures.length > 0 ||
      this.#readsWaiting.length > 0 ||
      this.#needBroadcast ||
      !sameSoftState(this.#prevSoftState, this.softState())
    );
  }

  /**
   * Takes everything the driver must act on. Immediate messages and committed entries are
   * handed over at once; persistence work is handed over only when no earlier write is in
   * flight, and must be acknowledged with advance().
   */
  ready(): Ready {
    if (this.#needBroadcast) {
      this.#needBroadcast = false;
      this.#broadcastAppend();
    }
    this.#flushReads();

    const soft = this.softState();
    const softState = sameSoftState(soft, this.#prevSoftState) ? null : soft;
    this.#prevSoftState = soft;

    let entries: Entry[] = [];
    let hardState: HardState | null = null;
    let snapshot: SnapshotMeta | null = null;
    let after: Message[] = [];
    if (this.#persistInFlight === null) {
      snapshot = this.#pendingSnapshot;
      this.#pendingSnapshot = null;
      entries = this.log.takeUnstable();
      if (entries.length > 0 || snapshot !== null || this.#hardStateChanged()) {
        hardState = { term: this.#term, vote: this.#vote, commit: this.log.committed };
        const last = entries[entries.length - 1];
        this.#persistInFlight = {
          lastIndex: last?.index ?? 0,
          lastTerm: last?.term ?? 0,
          hardState,
          snapshot,
        };
      }
      after = this.#msgsAfterPersist;
      this.#msgsAfterPersist = [];
    }

    const committedEntries = this.#takeCommitted();
    const messages = this.#msgs;
    this.#msgs = [];
    const readStates = this.#readStates;
    this.#readStates = [];
    const readFailures = this.#readFailures;
    this.#readFailures = [];
    return {
      softState,
      hardState,
      entries,
      snapshot,
      committedEntries,
      messages,
      messagesAfterPersist: after,
      readStates,
      readFailures,
      mustPersist: hardState !== null,
    };
  }

  /** The driver durably wrote the persistence part of `rd`. */
  advance(rd: Ready): void {
    if (!rd.mustPersist) return;
    const p = this.#persistInFlight;
    assert(p !== null, 'advance without a write in flight');
    this.#persistInFlight = null;
    this.#persistedHardState = p.hardState;
    if (p.snapshot !== null) this.log.stableTo(p.snapshot.index, p.snapshot.term);
    if (p.lastIndex > 0) this.log.stableTo(p.lastIndex, p.lastTerm);
    if (
      this.#role === 'candidate' &&
      p.hardState.term === this.#term &&
      p.hardState.vote === this.id &&
      !this.#votes.has(this.id)
    ) {
      // The candidate's own vote is durable now (see #campaign).
      this.#votes.set(this.id, true);
      if (this.#tally() === 'won') this.#onElectionWon(this.#campaignKind);
    }
    if (this.#role === 'leader') {
      // The leader counts itself only for what is on its own disk (§10.2.1).
      this.#progress.get(this.id)?.maybeUpdate(this.log.stableIndex);
      if (this.#maybeCommit()) this.#needBroadcast = true;
    }
  }

  status(): RaftStatus {
    const progress: ProgressStatus[] = [];
    for (const [id, pr] of this.#progress) {
      progress.push({
        id,
        match: pr.match,
        next: pr.next,
        state: pr.state,
        learner: pr.isLearner,
        recentActive: pr.recentActive,
      });
    }
    return {
      id: this.id,
      role: this.#role,
      term: this.#term,
      leader: this.#leader,
      commit: this.log.committed,
      applied: this.log.applying,
      lastIndex: this.log.lastIndex(),
      snapshotIndex: this.log.snapshot.index,
      membership: this.#membership,
      progress,
      transferee: this.#leadTransferee,
    };
  }

  softState(): SoftState {
    return { role: this.#role, leader: this.#leader, term: this.#term };
  }

  /** Whether `id` was removed by a membership change this node applied, and is not a member now. */
  wasRemoved(id: NodeId): boolean {
    return this.#removedIds.has(id) && !allMembers(this.#membership).some((m) => m.id === id);
  }

  getMembership(): Membership {
    return this.#membership;
  }

  // ---------------------------------------------------------------- roles

  #becomeFollower(term: number, leader: NodeId): void {
    if (this.#role === 'leader') this.#failReads('leadership lost; retry');
    if (term > this.#term) {
      this.#term = term;
      this.#vote = '';
    }
    this.#role = 'follower';
    this.#leader = leader;
    this.#reset();
  }

  #becomePreCandidate(): void {
    // Forget the leader: we time out on it, so we must not refuse others' pre-votes on its
    // behalf (the PreVote + CheckQuorum interaction, etcd's ForgetLeader).
    this.#role = 'preCandidate';
    this.#leader = '';
    this.#votes = new Map();
    this.#resetTimers();
  }

  #becomeCandidate(): void {
    this.#term += 1;
    this.#vote = this.id;
    this.#role = 'candidate';
    this.#leader = '';
    this.#reset();
  }

  /**
   * `handedOver`: won through TimeoutNow, from a leader that sent it once this node had its whole
   * log, and whose followers hold that log or lack part of its tail: they start pipelined
   * (replicate) instead of one probe each, and the proposals that waited out the handover travel
   * right behind the no-op instead of a round trip later. A follower that does not match rejects
   * the first append and drops back to probing from its hint, as after any rejection.
   */
  #becomeLeader(handedOver: boolean): void {
    this.#role = 'leader';
    this.#leader = this.id;
    this.#reset();
    for (const m of allMembers(this.#membership)) {
      const pr = new Progress(this.log.lastIndex() + 1, isLearner(this.#membership, m.id));
      if (handedOver && m.id !== this.id) pr.replicateOptimistically();
      if (m.id === this.id) pr.match = this.log.stableIndex;
      pr.recentActive = true;
      this.#progress.set(m.id, pr);
    }
    // Any uncommitted tail may hold a conf change; allow no other until it is applied.
    this.#pendingConfIndex = this.log.lastIndex();
    this.#uncommittedBytes = 0;
    // The no-op commits the leader's term promptly and with it all earlier entries (§3.6.2).
    this.#appendEntries([
      { term: this.#term, index: this.log.lastIndex() + 1, type: 'noop', data: new Uint8Array() },
    ]);
  }

  #reset(): void {
    this.#votes = new Map();
    this.#progress = new Map();
    this.#leadTransferee = '';
    this.#needBroadcast = false;
    this.#readsAwaitingCommit = [];
    this.#readsWaiting = [];
    this.#readRounds = [];
    this.#resetTimers();
  }

  #resetTimers(): void {
    this.#electionElapsed = 0;
    this.#heartbeatElapsed = 0;
    this.#resetRandomizedElectionTimeout();
  }

  #resetRandomizedElectionTimeout(): void {
    this.#randomizedElectionTimeout = this.#cfg.electionTicks + this.#rand.int(this.#cfg.electionTicks);
  }

  #promotable(): boolean {
    return isVoter(this.#membership, this.id);
  }

  #inLeaderLease(): boolean {
    return this.#cfg.checkQuorum && this.#leader !== '' && this.#electionElapsed < this.#cfg.electionTicks;
  }

  // ---------------------------------------------------------------- ticks

  #tickElection(): void {
    this.#electionElapsed++;
    // Held: the timeout stays passed, so the election starts on the first tick after release.
    if (this.#campaignsHeld) return;
    if (this.#promotable() && this.#electionElapsed >= this.#randomizedElectionTimeout) {
      this.#electionElapsed = 0;
      this.#campaign(this.#cfg.preVote ? 'preElection' : 'election');
    }
  }

  #tickLeader(): void {
    this.#heartbeatElapsed++;
    this.#electionElapsed++;
    if (this.#electionElapsed >= this.#cfg.electionTicks) {
      this.#electionElapsed = 0;
      if (this.#cfg.checkQuorum && !this.#quorumActive()) {
        this.#becomeFollower(this.#term, '');
        return;
      }
    }
    if (this.#leadTransferee !== '' && ++this.#transferElapsed >= this.#cfg.electionTicks) {
      this.#leadTransferee = '';
    }
    if (this.#heartbeatElapsed >= this.#cfg.heartbeatTicks) {
      this.#heartbeatElapsed = 0;
      this.#broadcastHeartbeat(0);
    }
  }

  #quorumActive(): boolean {
    let active = 0;
    for (const v of this.#membership.voters) {
      const pr = this.#progress.get(v.id);
      if (v.id === this.id || pr?.recentActive === true) active++;
    }
    for (const [id, pr] of this.#progress) if (id !== this.id) pr.recentActive = false;
    return active >= this.#quorum();
  }

  #quorum(): number {
    return Math.floor(this.#membership.voters.length / 2) + 1;
  }

  // ---------------------------------------------------------------- elections

  #campaign(kind: CampaignKind): void {
    if (!this.#promotable()) return;
    this.#campaignKind = kind;
    let voteTerm: number;
    if (kind === 'preElection') {
      this.#becomePreCandidate();
      voteTerm = this.#term + 1;
      // A pre-vote changes nothing durable: it counts at once.
      this.#votes.set(this.id, true);
      if (this.#tally() === 'won') {
        this.#onElectionWon(kind);
        return;
      }
    } else {
      this.#becomeCandidate();
      voteTerm = this.#term;
      // This node's own vote counts once its new term and vote are on disk (advance), so it
      // never leads a term it could forget; the requests go out meanwhile (a voter persists
      // its own vote before it answers), saving a disk write on the election's path. The only
      // voter leads at once, as before: no one else can hold an entry of a term it forgets,
      // and its term, vote and first entries are written in one batch. (Waiting for that write
      // would also make it campaign again whenever a write takes longer than an election
      // timeout, and never count its vote.)
      if (this.#membership.voters.length === 1) {
        this.#votes.set(this.id, true);
        if (this.#tally() === 'won') {
          this.#onElectionWon(kind);
          return;
        }
      }
    }
    const type = kind === 'preElection' ? 'preVote' : 'vote';
    for (const v of this.#membership.voters) {
      if (v.id === this.id) continue;
      this.#send(
        message({
          type,
          from: this.id,
          to: v.id,
          term: voteTerm,
          index: this.log.lastIndex(),
          logTerm: this.log.lastTerm(),
          transfer: kind === 'transfer',
        }),
      );
    }
  }

  #onElectionWon(kind: CampaignKind): void {
    if (kind === 'preElection') this.#campaign('election');
    else this.#becomeLeader(kind === 'transfer');
  }

  #tally(): 'won' | 'lost' | 'pending' {
    let granted = 0;
    let rejected = 0;
    for (const v of this.#membership.voters) {
      const g = this.#votes.get(v.id);
      if (g === true) granted++;
      else if (g === false) rejected++;
    }
    // Never won before this node's own vote is durable, even by the others' votes alone: a node
    // that led a term it then forgot could lead it again, with other entries at the same indexes.
    if (granted >= this.#quorum() && this.#votes.get(this.id) === true) return 'won';
    if (rejected > this.#membership.voters.length - this.#quorum()) return 'lost';
    return 'pending';
  }

  #handleVoteRequest(m: Message): void {
    const respType = m.type === 'vote' ? 'voteResp' : 'preVoteResp';
    const canVote =
      this.#vote === m.from ||
      (this.#vote === '' && this.#leader === '') ||
      (m.type === 'preVote' && m.term > this.#term && !this.#inLeaderLease());
    if (canVote && this.log.isUpToDate(m.index, m.logTerm)) {
      this.#msgsAfterPersist.push(message({ type: respType, from: this.id, to: m.from, term: m.term }));
      if (m.type === 'vote') {
        this.#electionElapsed = 0;
        this.#vote = m.from;
      }
    } else {
      this.#msgsAfterPersist.push(
        message({ type: respType, from: this.id, to: m.from, term: this.#term, reject: true }),
      );
    }
  }

  #stepCandidate(m: Message): void {
    switch (m.type) {
      case 'app':
      case 'heartbeat':
      case 'snap':
        this.#becomeFollower(m.term, m.from);
        this.#stepFollower(m);
        return;
      case 'voteResp':
      case 'preVoteResp': {
        if ((m.type === 'voteResp') !== (this.#role === 'candidate')) return;
        if (!this.#votes.has(m.from)) this.#votes.set(m.from, !m.reject);
        const result = this.#tally();
        if (result === 'won') this.#onElectionWon(this.#campaignKind);
        else if (result === 'lost') this.#becomeFollower(this.#term, '');
        return;
      }
      case 'readIndex':
        this.#refuseRead(m.from, m.context);
        return;
      default:
        return;
    }
  }

  // ---------------------------------------------------------------- follower

  #stepFollower(m: Message): void {
    switch (m.type) {
      case 'app':
        this.#electionElapsed = 0;
        this.#leader = m.from;
        this.#handleAppend(m);
        return;
      case 'heartbeat':
        this.#electionElapsed = 0;
        this.#leader = m.from;
        this.log.commitTo(Math.min(m.commit, this.log.lastIndex()));
        this.#send(
          message({ type: 'heartbeatResp', from: this.id, to: m.from, term: this.#term, context: m.context }),
        );
        return;
      case 'snap':
        this.#electionElapsed = 0;
        this.#leader = m.from;
        this.#handleSnapshot(m);
        return;
      case 'timeoutNow':
        this.#campaign('transfer');
        return;
      case 'readIndexResp':
        if (m.reject)
          this.#readFailures.push({ requestId: m.context, reason: 'the leader could not confirm the read' });
        else this.#readStates.push({ requestId: m.context, index: m.index });
        return;
      case 'readIndex':
        // Forwarded to us by a node with an older view of the leader.
        this.#refuseRead(m.from, m.context);
        return;
      default:
        return;
    }
  }

  #handleAppend(m: Message): void {
    if (m.index < this.log.committed) {
      this.#msgsAfterPersist.push(
        message({ type: 'appResp', from: this.id, to: m.from, term: this.#term, index: this.log.committed }),
      );
      return;
    }
    const lastNew = this.log.maybeAppend(m.index, m.logTerm, m.entries);
    if (lastNew !== null) {
      this.log.commitTo(Math.min(m.commit, lastNew));
      this.#msgsAfterPersist.push(
        message({ type: 'appResp', from: this.id, to: m.from, term: this.#term, index: lastNew }),
      );
      return;
    }
    const hint = this.log.findConflictByTerm(Math.min(m.index, this.log.lastIndex()), m.logTerm);
    this.#msgsAfterPersist.push(
      message({
        type: 'appResp',
        from: this.id,
        to: m.from,
        term: this.#term,
        index: m.index,
        reject: true,
        rejectHint: hint,
        logTerm: this.log.term(hint) ?? 0,
      }),
    );
  }

  #handleSnapshot(m: Message): void {
    const meta = m.snapshot;
    assert(meta !== null, 'snap message without metadata');
    if (meta.index <= this.log.committed) {
      this.#msgsAfterPersist.push(
        message({ type: 'appResp', from: this.id, to: m.from, term: this.#term, index: this.log.committed }),
      );
      return;
    }
    if (this.log.matchTerm(meta.index, meta.term)) {
      // We already hold the entries the snapshot covers: just learn that they are committed.
      this.log.commitTo(meta.index);
    } else {
      this.log.restore(meta);
      this.#membership = meta.membership;
      this.#pendingSnapshot = meta;
    }
    this.#msgsAfterPersist.push(
      message({ type: 'appResp', from: this.id, to: m.from, term: this.#term, index: meta.index }),
    );
  }

  // ---------------------------------------------------------------- leader

  #stepLeader(m: Message): void {
    if (m.type === 'readIndex') {
      if (this.#progress.has(m.from)) this.#acceptRead({ from: m.from, requestId: m.context });
      return;
    }
    const pr = this.#progress.get(m.from);
    if (pr === undefined) return;
    switch (m.type) {
      case 'appResp':
        pr.recentActive = true;
        this.#handleAppendResponse(m, pr);
        return;
      case 'heartbeatResp':
        pr.recentActive = true;
        pr.probeSent = false;
        // A full window whose appends were all lost would never drain; free one slot so that
        // this follower gets an append (replication-window-stall.txt).
        if (pr.state === 'replicate' && pr.isPaused(this.#cfg.maxInflightMsgs, this.#cfg.maxInflightBytes))
          pr.freeFirstOne();
        if (pr.match < this.log.lastIndex()) this.#sendAppend(m.from, true);
        if (m.context > pr.ackedReadRound) {
          pr.ackedReadRound = m.context;
          this.#confirmReadRounds();
        }
        return;
      default:
        return;
    }
  }

  #handleAppendResponse(m: Message, pr: Progress): void {
    if (m.reject) {
      let nextProbe = m.rejectHint;
      if (m.logTerm > 0) nextProbe = this.log.findConflictByTerm(m.rejectHint, m.logTerm);
      if (pr.maybeDecrTo(m.index, nextProbe)) this.#sendAppend(m.from, true);
      return;
    }
    const wasPaused = pr.isPaused(this.#cfg.maxInflightMsgs, this.#cfg.maxInflightBytes);
    if (!pr.maybeUpdate(m.index)) {
      if (wasPaused && pr.state === 'probe') pr.probeSent = false;
      return;
    }
    if (pr.state === 'probe') pr.becomeReplicate();
    else if (pr.state === 'snapshot' && pr.match >= pr.pendingSnapshot) {
      pr.becomeProbe();
      pr.becomeReplicate();
    } else if (pr.state === 'replicate') pr.freeTo(m.index);

    // The new commit index goes out once in the next Ready, however many acknowledgements in
    // this batch advanced it (one empty append per follower per acknowledgement before).
    if (this.#maybeCommit()) this.#needBroadcast = true;
    // Keep a pipelined follower busy up to its in-flight bound.
    while (this.#sendAppend(m.from, false));

    if (m.from === this.#leadTransferee && pr.match === this.log.lastIndex()) this.#sendTimeoutNow(m.from);
  }

  #appendEntries(entries: Entry[]): void {
    this.log.append(entries);
    for (const e of entries) this.#uncommittedBytes += entryBytes(e);
    // Sent once per Ready, so that proposals arriving together travel in one append.
    this.#needBroadcast = true;
  }

  /** Advances the commit index to the highest index stored on a quorum in this term. */
  #maybeCommit(): boolean {
    const matches: number[] = [];
    for (const v of this.#membership.voters) {
      const pr = this.#progress.get(v.id);
      matches.push(pr?.match ?? 0);
    }
    if (matches.length === 0) return false;
    matches.sort((a, b) => b - a);
    const index = matches[this.#quorum() - 1]!;
    // §3.6.2: only an entry of the current term is committed by counting replicas.
    if (index <= this.log.committed || this.log.term(index) !== this.#term) return false;
    for (let i = this.log.committed + 1; i <= index; i++) {
      const e = this.log.entry(i);
      if (e !== undefined && e.term === this.#term) this.#uncommittedBytes -= entryBytes(e);
    }
    this.#uncommittedBytes = Math.max(0, this.#uncommittedBytes);
    this.log.commitTo(index);
    this.#releaseReadsAwaitingCommit();
    return true;
  }

  #broadcastAppend(): void {
    for (const id of this.#progress.keys()) if (id !== this.id) this.#sendAppend(id, true);
  }

  #broadcastHeartbeat(context: number): void {
    for (const [id, pr] of this.#progress) {
      if (id === this.id) continue;
      this.#send(
        message({
          type: 'heartbeat',
          from: this.id,
          to: id,
          term: this.#term,
          commit: Math.min(pr.match, this.log.committed),
          context,
        }),
      );
    }
  }

  /** Sends entries (or a snapshot) to a follower. Returns whether anything was sent. */
  #sendAppend(to: NodeId, sendIfEmpty: boolean): boolean {
    const pr = this.#progress.get(to);
    if (pr === undefined || pr.isPaused(this.#cfg.maxInflightMsgs, this.#cfg.maxInflightBytes)) return false;
    const prevIndex = pr.next - 1;
    const prevTerm = this.log.term(prevIndex);
    if (prevTerm === undefined) {
      // The entries it needs are compacted: send the latest snapshot instead.
      const snap = this.log.snapshot;
      pr.becomeSnapshot(snap.index);
      this.#send(
        message({ type: 'snap', from: this.id, to, term: this.#term, index: snap.index, snapshot: snap }),
      );
      return true;
    }
    const entries =
      pr.next <= this.log.lastIndex()
        ? this.log.slice(pr.next, this.log.lastIndex(), this.#cfg.maxMsgBytes)
        : [];
    if (entries.length === 0 && !sendIfEmpty) return false;
    this.#send(
      message({
        type: 'app',
        from: this.id,
        to,
        term: this.#term,
        index: prevIndex,
        logTerm: prevTerm,
        entries,
        commit: this.log.committed,
      }),
    );
    const last = entries[entries.length - 1];
    if (last !== undefined)
      pr.sentEntries(
        last.index,
        entries.reduce((n, e) => n + entryBytes(e), 0),
      );
    else if (pr.state === 'probe') pr.probeSent = true;
    return true;
  }

  #sendTimeoutNow(to: NodeId): void {
    this.#send(message({ type: 'timeoutNow', from: this.id, to, term: this.#term }));
  }

  #assertCanPropose(): void {
    if (this.#role !== 'leader') throw this.#notLeader();
    if (this.#leadTransferee !== '') {
      throw new RaftError(
        'E_TRANSFER_IN_PROGRESS',
        `leadership is moving to ${this.#leadTransferee}; retry there`,
      );
    }
  }

  #notLeader(): RaftError {
    const hint = this.#leader === '' ? 'no leader is known yet' : `the leader is ${this.#leader}`;
    return new RaftError('E_NOT_LEADER', `${this.id} is not the leader (${hint})`, this.#leader);
  }

  #committedInCurrentTerm(): boolean {
    return this.log.term(this.log.committed) === this.#term;
  }

  // ---------------------------------------------------------------- reads

  #acceptRead(read: PendingRead): void {
    if (!this.#committedInCurrentTerm()) {
      // §6.4 step 1: until our no-op commits, our commit index may be behind the last leader's.
      this.#readsAwaitingCommit.push(read);
    } else if (this.#membership.voters.length === 1) {
      this.#resolveRead(read, this.log.committed);
    } else {
      this.#readsWaiting.push(read);
    }
  }

  #releaseReadsAwaitingCommit(): void {
    if (this.#readsAwaitingCommit.length === 0 || !this.#committedInCurrentTerm()) return;
    const reads = this.#readsAwaitingCommit;
    this.#readsAwaitingCommit = [];
    for (const r of reads) this.#acceptRead(r);
  }

  /** Starts one confirmation round for every read that arrived since the last round. */
  #flushReads(): void {
    if (this.#role !== 'leader' || this.#readsWaiting.length === 0) return;
    const round = ++this.#readRoundSeq;
    this.#readRounds.push({ round, index: this.log.committed, reads: this.#readsWaiting });
    this.#readsWaiting = [];
    this.#broadcastHeartbeat(round);
  }

  #confirmReadRounds(): void {
    while (this.#readRounds.length > 0) {
      const first = this.#readRounds[0]!;
      let acks = 0;
      for (const v of this.#membership.voters) {
        if (v.id === this.id || (this.#progress.get(v.id)?.ackedReadRound ?? 0) >= first.round) acks++;
      }
      if (acks < this.#quorum()) return;
      this.#readRounds.shift();
      for (const r of first.reads) this.#resolveRead(r, first.index);
    }
  }

  #resolveRead(read: PendingRead, index: number): void {
    if (read.from === this.id) this.#readStates.push({ requestId: read.requestId, index });
    else
      this.#send(
        message({
          type: 'readIndexResp',
          from: this.id,
          to: read.from,
          term: this.#term,
          index,
          context: read.requestId,
        }),
      );
  }

  /** Tells a node that forwarded a read that this node cannot confirm it. */
  #refuseRead(to: NodeId, requestId: number): void {
    this.#send(
      message({
        type: 'readIndexResp',
        from: this.id,
        to,
        term: this.#term,
        reject: true,
        context: requestId,
      }),
    );
  }

  #failReads(reason: string): void {
    const all = [
      ...this.#readsAwaitingCommit,
      ...this.#readsWaiting,
      ...this.#readRounds.flatMap((r) => r.reads),
    ];
    for (const r of all) {
      if (r.from === this.id) this.#readFailures.push({ requestId: r.requestId, reason });
      else this.#refuseRead(r.from, r.requestId);
    }
  }

  // ---------------------------------------------------------------- apply

  #takeCommitted(): Entry[] {
    const hi = this.log.applicableTo();
    if (hi <= this.log.applying) return [];
    const entries = this.log.slice(this.log.applying + 1, hi, this.#cfg.maxApplyBytes);
    for (const e of entries) {
      if (e.type === 'conf') this.#applyConf(decodeConfChange(e.data));
    }
    this.log.applying = entries[entries.length - 1]!.index;
    return entries;
  }

  #applyConf(cc: ConfChange): void {
    this.#membership = applyConfChange(this.#membership, cc);
    if (cc.type === 'remove') this.#removedIds.add(cc.member.id);
    else if (cc.type === 'bootstrap') for (const v of cc.voters) this.#removedIds.delete(v.id);
    else this.#removedIds.delete(cc.member.id);
    if (this.#role !== 'leader') return;
    if (!isVoter(this.#membership, this.id)) {
      // A leader removed from the configuration steps down once the removal is applied.
      this.#becomeFollower(this.#term, '');
      return;
    }
    for (const m of allMembers(this.#membership)) {
      const old = this.#progress.get(m.id);
      const learner = isLearner(this.#membership, m.id);
      if (old !== undefined && old.isLearner === learner) continue;
      const pr = new Progress(old?.next ?? this.log.lastIndex() + 1, learner);
      pr.match = old?.match ?? 0;
      pr.recentActive = true;
      this.#progress.set(m.id, pr);
    }
    for (const id of [...this.#progress.keys()]) {
      if (!allMembers(this.#membership).some((m) => m.id === id)) this.#progress.delete(id);
    }
    if (this.#leadTransferee !== '' && !isVoter(this.#membership, this.#leadTransferee))
      this.#leadTransferee = '';
    if (this.#maybeCommit()) this.#needBroadcast = true;
  }

  // ---------------------------------------------------------------- helpers

  #send(m: Message): void {
    this.#msgs.push(m);
  }

  #hardStateChanged(): boolean {
    const p = this.#persistedHardState;
    return p.term !== this.#term || p.vote !== this.#vote;
  }
}

function sameSoftState(a: SoftState, b: SoftState): boolean {
  return a.role === b.role && a.leader === b.leader && a.term === b.term;
}

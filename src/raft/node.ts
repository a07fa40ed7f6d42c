// The raft driver (etcd's Ready loop): owns the timers, persists what the core asks for in
// one write (synced, unless only the commit index moved: see LogStore.save), sends messages,
// applies committed entries to the state machine, and turns proposals and reads into
// promises. All I/O of consensus lives here.
import type { Logger } from 'pino';
import type { StateMachine } from './state-machine.js';
import type { Clock } from '../platform/clock.js';
import { realClock, sleep } from '../platform/clock.js';
import { realRandom } from './clock.js';
import { allMembers, decodeConfChange, encodeConfChange, isVoter } from './core/membership.js';
import type { ProposalResult, RaftStatus } from './core/raft.js';
import { RaftCore } from './core/raft.js';
import type {
  ConfChange,
  Entry,
  InitialState,
  Member,
  Membership,
  Message,
  NodeId,
  RaftConfig,
  Random,
  Ready,
  SnapshotMeta,
  SoftState,
} from './core/types.js';
import { defaultRaftConfig, message, RaftError } from './core/types.js';
import type { LogStore, Snapshot } from './storage/log-store.js';
import type { Transport } from './transport/transport.js';

export interface RaftNodeOptions {
  readonly id: NodeId;
  readonly store: LogStore;
  readonly transport: Transport;
  readonly stateMachine: StateMachine;
  readonly logger: Logger;
  /** The initial voters, used only when the data directory is new. */
  readonly bootstrapPeers: readonly Member[];
  /**
   * Where to reach existing members while this node knows no membership yet (a node that
   * joins an existing cluster): it must be able to answer the leader before it has the log.
   */
  readonly contactPeers?: readonly Member[];
  readonly tickMs?: number;
  /** Timers and deadlines; Node's own by default (the simulation passes its virtual clock). */
  readonly clock?: Clock;
  /** The election timeouts' randomness; crypto by default (the simulation passes a seeded one). */
  readonly random?: Random;
  readonly raft?: Partial<Omit<RaftConfig, 'id'>>;
  /** Take a snapshot after this many applied entries (0 disables). */
  readonly snapshotEntries?: number;
  /** Entries kept behind a snapshot for followers that lag a little. */
  readonly trailingEntries?: number;
  /**
   * Disaster recovery: before raft runs, append a configuration entry naming only this member
   * and commit the whole log locally, so that the node starts as a one-node cluster. Refused
   * on an empty log.
   */
  readonly forceNewCluster?: Member;
  /** Called after every applied entry, for changefeeds and metrics. */
  readonly onApplied?: (entry: Entry) => void;
  readonly onSoftState?: (s: SoftState) => void;
}

export const defaultTickMs = 50;
/** Election timeouts a read may wait for its leader's confirmation before it is refused. */
const readTimeoutElections = 4;
/**
 * Election timeouts a node that a peer says was removed (or that applied its own removal) waits
 * to hear from a leader before it stops: one that was added again (a new data directory, the
 * same id) hears from its leader all along, whatever a member that lags behind says.
 */
const removedAfterElections = 10;
/** 50 ms ticks: heartbeats every 50 ms, elections after 300-600 ms of silence. */
export const defaultTimingConfig = { electionTicks: 6, heartbeatTicks: 1 } as const;

interface ProposalWaiter {
  readonly term: number;
  readonly resolve: (result: Uint8Array) => void;
  readonly reject: (err: Error) => void;
}

interface ReadWaiter {
  readonly resolve: () => void;
  readonly reject: (err: Error) => void;
  index: number;
  /** The tick count when the read was asked for: a read whose answer was lost must not wait forever. */
  readonly askedAtTick: number;
}

interface QueuedProposal {
  readonly command: Uint8Array;
  readonly resolve: (result: Uint8Array) => void;
  readonly reject: (err: Error) => void;
}

export class RaftNode {
  readonly id: NodeId;
  readonly #opts: RaftNodeOptions;
  readonly #log: Logger;
  #core!: RaftCore;
  #applied = 0;
  #lastSnapshot: Snapshot | null = null;
  readonly #received = new Map<number, Uint8Array>();
  readonly #proposals = new Map<number, ProposalWaiter>();
  #proposalQueue: QueuedProposal[] = [];
  readonly #reads = new Map<number, ReadWaiter>();
  #ticks = 0;
  /** The tick at which a leader last sent this node an append, a heartbeat or a snapshot. */
  #leaderContactTick = 0;
  /** A peer's notice that this node was removed (src/raft/transport/removed-notice.ts). */
  #removedNotice: string | undefined;
  #lastLeader = '';
  readonly #readsAwaitingApply: ReadWaiter[] = [];
  #readSeq = 0;
  #scheduled = false;
  #writing = false;
  /** A snapshot's state is being encoded in slices (see maybeSnapshot). */
  #encodingSnapshot = false;
  /** Encoded, waiting for the log to be compacted to it. */
  #encodedSnapshot: Snapshot | null = null;
  #storeQueue: Promise<void> = Promise.resolve();
  #stopTicker: (() => void) | null = null;
  readonly #clock: Clock;
  #stopped = false;
  /** Resolved at the next role or leader change (see softStateChange). */
  #softStateWaiters: (() => void)[] = [];
  #softStateChanges = 0;
  /** Resolved when no proposal is waiting for its outcome (see proposalsSettled). */
  #settledWaiters: (() => void)[] = [];
  #membershipKey = '';
  #fatal: Error | null = null;

  constructor(opts: RaftNodeOptions) {
    this.id = opts.id;
    this.#opts = opts;
    this.#log = opts.logger.child({ subsystem: 'raft' });
    this.#clock = opts.clock ?? realClock;
  }

  /** Lets timers and I/O run between slices of a long computation. */
  readonly #nextTurn = (): Promise<void> =>
    new Promise((resolve) => {
      this.#clock.defer(resolve);
    });

  /** Loads (or bootstraps) durable state, starts the transport and the tick timer. */
  async start(): Promise<void> {
    const loaded = await this.#opts.store.load();
    if (loaded.truncatedTornTailAt !== null) {
      this.#log.warn(
        { index: loaded.truncatedTornTailAt },
        'truncated a torn write at the tail of the raft log',
      );
    }
    let initial: InitialState = loaded;
    const fresh = loaded.snapshot.index === 0 && loaded.entries.length === 0 && loaded.hardState.term === 0;
    if (fresh && this.#opts.bootstrapPeers.length > 0) {
      initial = bootstrapState(this.#opts.bootstrapPeers);
      await this.#opts.store.save({ hardState: initial.hardState, entries: initial.entries, snapshot: null });
      this.#log.info(
        { voters: this.#opts.bootstrapPeers.map((p) => p.id) },
        'bootstrapped a new cluster member',
      );
    }
    if (this.#opts.forceNewCluster !== undefined) {
      if (fresh) {
        throw new RaftError(
          'E_BAD_REQUEST',
          "force-new-cluster needs an existing member's raft log; this data directory holds none",
        );
      }
      initial = await this.#forceNewCluster(loaded, this.#opts.forceNewCluster);
    }
    if (loaded.snapshotData !== null && loaded.snapshot.index > 0) {
      await this.#restoreMachine(loaded.snapshotData);
      this.#lastSnapshot = { meta: loaded.snapshot, data: loaded.snapshotData };
    }
    this.#applied = initial.snapshot.index;
    const cfg: RaftConfig = { ...defaultRaftConfig, ...defaultTimingConfig, ...this.#opts.raft, id: this.id };
    this.#core = new RaftCore(cfg, initial, this.#opts.random ?? realRandom);
    await this.#opts.transport.start({
      onMessage: (m) => {
        this.#stepSafely(m);
      },
      onSnapshot: (from, snap) => this.#receiveSnapshot(from, snap),
      isRemoved: (from) => this.#core.wasRemoved(from),
    });
    this.#syncPeers();
    this.#stopTicker = this.#clock.every(this.#opts.tickMs ?? defaultTickMs, () => {
      this.#tick();
    });
    this.#kick();
  }

  /**
   * Rewrites the stored membership to `self` alone: a bootstrap configuration entry at the next
   * index in the current term, with the commit index moved to it. Every entry in the log is
   * thereby committed, including any the lost majority never committed (as etcd's
   * --force-new-cluster does); the core adopts the new membership when it applies the entry.
   */
  async #forceNewCluster(loaded: InitialState, self: Member): Promise<InitialState> {
    const last = loaded.snapshot.index + loaded.entries.length;
    const entry: Entry = {
      term: loaded.hardState.term,
      index: last + 1,
      type: 'conf',
      data: encodeConfChange({ type: 'bootstrap', voters: [self] }),
    };
    const hardState = { term: loaded.hardState.term, vote: loaded.hardState.vote, commit: entry.index };
    await this.#opts.store.save({ hardState, entries: [entry], snapshot: null });
    this.#log.warn(
      {
        id: self.id,
        index: entry.index,
        term: entry.term,
        previousCommit: loaded.hardState.commit,
        committedUncommitted: last - Math.max(loaded.hardState.commit, loaded.snapshot.index),
      },
      'FORCE NEW CLUSTER: the stored membership is rewritten to this member alone and every entry in its log is committed; ' +
        'the other members must not be started again with their old data (add new ones with `slipway member add`)',
    );
    return { hardState, snapshot: loaded.snapshot, entries: [...loaded.entries, entry] };
  }

  // ------------------------------------------------------------- public API

  /** Proposes a command; resolves with the state machine's result once it is applied here. */
  propose(command: Uint8Array): Promise<Uint8Array> {
    this.#checkUsable();
    const s = this.#core.softState();
    if (s.role !== 'leader') return Promise.reject(this.#notLeader());
    return new Promise((resolve, reject) => {
      this.#proposalQueue.push({ command, resolve, reject });
      this.#kick();
    });
  }

  /**
   * What a snapshot of the state machine as it is now would be: the applied index, its term and
   * the membership there. Undefined while the core has handed out committed entries this node
   * has not applied yet (ask again on a later turn of the event loop). Capture the state in the
   * same turn, so that the two describe the same index.
   */
  appliedSnapshotMeta(): SnapshotMeta | undefined {
    this.#checkUsable();
    if (this.#core.status().applied !== this.#applied) return undefined;
    return this.#core.snapshotMeta(this.#applied);
  }

  /** Resolves once this node's state machine reflects every write committed before the call. */
  linearizableRead(): Promise<void> {
    this.#checkUsable();
    const requestId = ++this.#readSeq;
    return new Promise((resolve, reject) => {
      this.#reads.set(requestId, { resolve, reject, index: 0, askedAtTick: this.#ticks });
      this.#core.readIndex(requestId);
      this.#kick();
    });
  }

  async proposeConfChange(cc: ConfChange): Promise<void> {
    this.#checkUsable();
    const r = this.#core.proposeConfChange(cc);
    await new Promise<Uint8Array>((resolve, reject) => {
      this.#proposals.set(r.firstIndex, { term: r.term, resolve, reject });
      this.#kick();
    });
  }

  /**
   * Adds a member as a learner, waits until it has caught up, then promotes it to voter.
   * `context` goes with the promotion, the change that completes the addition.
   */
  async addMember(member: Member, catchUpTimeoutMs = 30_000, context?: Uint8Array): Promise<void> {
    await this.proposeConfChange({ type: 'addLearner', member });
    await this.promoteWhenCaughtUp(member, catchUpTimeoutMs, context);
  }

  /** Waits until a learner's log reaches the commit index (§4.2.1), then makes it a voter. */
  async promoteWhenCaughtUp(member: Member, catchUpTimeoutMs = 30_000, context?: Uint8Array): Promise<void> {
    const deadline = this.#clock.now() + catchUpTimeoutMs;
    for (;;) {
      const st = this.#core.status();
      const pr = st.progress.find((p) => p.id === member.id);
      if (pr !== undefined && pr.match >= st.commit) break;
      if (this.#clock.now() > deadline) {
        throw new RaftError(
          'E_BAD_REQUEST',
          `member ${member.id} was added as a learner but did not catch up within ${catchUpTimeoutMs} ms; ` +
            `start it with --join and run 'member add' again to promote it`,
        );
      }
      await sleep(this.#clock, this.#opts.tickMs ?? defaultTickMs);
    }
    await this.proposeConfChange(
      context === undefined ? { type: 'promote', member } : { type: 'promote', member, context },
    );
  }

  async removeMember(id: NodeId, context?: Uint8Array): Promise<void> {
    const m = this.#core.getMembership();
    const member = allMembers(m).find((x) => x.id === id);
    if (member === undefined) throw new RaftError('E_UNKNOWN_MEMBER', `no member ${id}`);
    await this.proposeConfChange(
      context === undefined ? { type: 'remove', member } : { type: 'remove', member, context },
    );
  }

  /** Hands leadership to `to` and resolves once it is leader (or rejects after a timeout). */
  async transferLeadership(to: NodeId, timeoutMs = 3000): Promise<void> {
    this.#checkUsable();
    this.#core.transferLeadership(to);
    this.#kick();
    const deadline = this.#clock.now() + timeoutMs;
    while (this.#core.softState().leader !== to) {
      if (this.#clock.now() > deadline)
        throw new RaftError('E_BAD_REQUEST', `leadership did not move to ${to} in time`);
      await sleep(this.#clock, 5);
      const { role, transferee } = this.#core.status();
      // The core gave up: the target's stream broke, or it did not take over within an election timeout.
      if (role === 'leader' && transferee === '')
        throw new RaftError(
          'E_BAD_REQUEST',
          `leadership transfer to ${to} was abandoned: ${to} is unreachable or did not take over in time`,
        );
    }
  }

  /**
   * Holds this node's elections while `held` (it still votes and takes a handed-over leadership):
   * for a node that should not lead while a better one can (RaftCore.holdCampaigns).
   */
  holdCampaigns(held: boolean): void {
    this.#core.holdCampaigns(held);
  }

  get campaignsHeld(): boolean {
    return this.#core.campaignsHeld;
  }

  /** The voter most caught up, for a graceful handover (transferTargetOf); `skip` passes over some. */
  bestTransferTarget(skip: (id: NodeId) => boolean = () => false): NodeId | null {
    return transferTargetOf(this.#core.status().progress, this.id, skip);
  }

  status(): RaftStatus & { appliedToStateMachine: number } {
    return { ...this.#core.status(), appliedToStateMachine: this.#applied };
  }

  /**
   * How many changes of role, term or leader this node has seen: a caller that notes it before
   * a call can tell whether leadership moved while the call was out (retryRefusals).
   */
  get softStateChanges(): number {
    return this.#softStateChanges;
  }

  /** Resolves at the next change of role, term or leader, or after `timeoutMs`. */
  softStateChange(timeoutMs: number): Promise<void> {
    return wakeOrTimeout(this.#clock, this.#softStateWaiters, timeoutMs);
  }

  /**
   * Resolves once every proposal accepted here has its outcome (applied, or dropped because
   * another leader's entry took its index), or after `timeoutMs`. A leader that has handed
   * leadership over calls it before stopping: its last proposals commit under the new leader
   * within a round trip or two, and their callers (forwarding followers among them) get answers
   * instead of a lost connection.
   */
  proposalsSettled(timeoutMs: number): Promise<void> {
    if (this.#proposals.size === 0 && this.#proposalQueue.length === 0) return Promise.resolve();
    return wakeOrTimeout(this.#clock, this.#settledWaiters, timeoutMs);
  }

  softState(): SoftState {
    return this.#core.softState();
  }

  /**
   * The term of the entry at `index` in this node's log as the core holds it (written or not),
   * or undefined when the log does not hold it: for observers, such as the simulation's check
   * that a new leader holds every committed entry.
   */
  logTermAt(index: number): number | undefined {
    return this.#core.log.term(index);
  }

  membership(): Membership {
    return this.#core.getMembership();
  }

  leaderMember(): Member | null {
    const leader = this.#core.softState().leader;
    if (leader === '') return null;
    const m = this.#core.getMembership();
    return allMembers(m).find((x) => x.id === leader) ?? null;
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#stopTicker?.();
    const err = new RaftError('E_PROPOSAL_DROPPED', 'the node is shutting down; retry on another node');
    for (const p of this.#proposalQueue) p.reject(err);
    for (const w of this.#proposals.values()) w.reject(err);
    for (const r of this.#reads.values()) r.reject(err);
    for (const r of this.#readsAwaitingApply) r.reject(err);
    this.#proposalQueue = [];
    this.#proposals.clear();
    this.#reads.clear();
    await this.#opts.transport.stop();
    await this.#storeQueue.catch(() => undefined);
    await this.#opts.store.close();
  }

  // ------------------------------------------------------------- the loop

  #tick(): void {
    if (this.#stopped) return;
    this.#ticks++;
    for (const id of this.#opts.transport.takeUnreachable()) this.#core.reportUnreachable(id);
    this.#core.tick();
    this.#expireReads();
    if (this.#stopIfRemoved()) return;
    this.#kick();
  }

  /**
   * A removed member that is still running hears from no leader any more; it would otherwise run
   * on for ever, campaigning and answering that it knows no leader. Once a peer says it removed
   * this node (or this node applied its own removal) and no leader has contacted it for a few
   * election timeouts, it stops, saying why in its log and its status.
   */
  #stopIfRemoved(): boolean {
    this.#removedNotice = this.#opts.transport.takeRemovedNotice?.() ?? this.#removedNotice;
    const m = this.#core.getMembership();
    const removedHere = m.voters.length > 0 && !allMembers(m).some((x) => x.id === this.id);
    if (this.#removedNotice === undefined && !removedHere) return false;
    const electionTicks = this.#opts.raft?.electionTicks ?? defaultTimingConfig.electionTicks;
    if (this.#ticks - this.#leaderContactTick < removedAfterElections * electionTicks) return false;
    const why = this.#removedNotice ?? 'the membership in its own log leaves it out';
    this.#failFatally(
      new Error(
        `this node (${this.id}) was removed from the cluster (${why}) and no leader contacts it. To bring it back, clear its data directory, add it with \`slipway member add\` and start it with --join`,
      ),
      'this node was removed from the cluster; it stops serving',
    );
    return true;
  }

  /**
   * A read forwarded to a leader that then died (or whose answer was lost) gets no reply; after
   * a few election timeouts its caller is told to retry rather than left waiting.
   */
  #expireReads(): void {
    const limit =
      readTimeoutElections * (this.#opts.raft?.electionTicks ?? defaultTimingConfig.electionTicks);
    for (const [id, w] of this.#reads) {
      if (this.#ticks - w.askedAtTick < limit) continue;
      this.#reads.delete(id);
      w.reject(new RaftError('E_PROPOSAL_DROPPED', 'the read was not confirmed by a leader in time; retry'));
    }
  }

  #stepSafely(m: Message): void {
    if (this.#stopped) return;
    if (m.type === 'app' || m.type === 'heartbeat') {
      this.#leaderContactTick = this.#ticks;
      this.#removedNotice = undefined;
    }
    this.#core.step(m);
    this.#kick();
  }

  #kick(): void {
    if (this.#scheduled || this.#stopped) return;
    this.#scheduled = true;
    this.#clock.defer(() => {
      this.#scheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    if (this.#stopped || this.#fatal !== null) return;
    this.#flushProposals();
    const rd = this.#core.ready();
    if (rd.softState !== null) this.#onSoftState(rd.softState);
    this.#sendMessages(rd.messages);
    this.#applyEntries(rd.committedEntries);
    if (this.#fatal !== null) return;
    for (const rs of rd.readStates) {
      const w = this.#reads.get(rs.requestId);
      if (w === undefined) continue;
      this.#reads.delete(rs.requestId);
      w.index = rs.index;
      if (this.#applied >= rs.index) w.resolve();
      else this.#readsAwaitingApply.push(w);
    }
    for (const rf of rd.readFailures) {
      const w = this.#reads.get(rf.requestId);
      this.#reads.delete(rf.requestId);
      w?.reject(new RaftError('E_NOT_LEADER', rf.reason, this.#core.softState().leader));
    }
    if (rd.mustPersist) this.#persist(rd);
    else if (rd.messagesAfterPersist.length > 0) this.#sendMessages(rd.messagesAfterPersist);
    this.#maybeSnapshot();
    // Proposals end when applied or refused; both happen in this loop.
    if (this.#settledWaiters.length > 0 && this.#proposals.size === 0 && this.#proposalQueue.length === 0) {
      for (const done of [...this.#settledWaiters]) done();
    }
  }

  #persist(rd: Ready): void {
    this.#writing = true;
    let snapshot: Snapshot | null = null;
    if (rd.snapshot !== null) {
      const data = this.#received.get(rd.snapshot.index);
      if (data === undefined) throw new Error(`snapshot data for index ${rd.snapshot.index} is missing`);
      snapshot = { meta: rd.snapshot, data };
    }
    this.#enqueueStore(async () => {
      await this.#opts.store.save({ hardState: rd.hardState, entries: rd.entries, snapshot });
      if (this.#stopped) return;
      if (snapshot !== null) {
        // In slices: heartbeats and requests go on meanwhile. Nothing is applied until
        // advance() below (the core hands out no entry past a snapshot it is installing).
        await this.#restoreMachine(snapshot.data);
        if (this.#stopped) return;
        this.#applied = snapshot.meta.index;
        this.#lastSnapshot = snapshot;
        // Only what this snapshot covers: a newer one may have arrived while this one was
        // written, and the core hands it out in the next Ready.
        for (const index of [...this.#received.keys()])
          if (index <= snapshot.meta.index) this.#received.delete(index);
        this.#log.info({ index: snapshot.meta.index }, 'installed a snapshot from the leader');
        this.#dropProposalsThrough(snapshot.meta.index);
        this.#dropProposalsOlderThan(snapshot.meta.term);
        this.#releaseReadsApplied();
      }
      this.#sendMessages(rd.messagesAfterPersist);
      this.#core.advance(rd);
      this.#writing = false;
      // The next write (what queued up during this one) starts in this turn, not after the
      // turn's other I/O callbacks: under load that wait was a large part of each commit round.
      queueMicrotask(() => {
        this.#pump();
      });
    });
  }

  async #restoreMachine(data: Uint8Array): Promise<void> {
    const machine = this.#opts.stateMachine;
    if (machine.restoreInSlices === undefined) machine.restore(data);
    else await machine.restoreInSlices(data, this.#nextTurn);
  }

  #enqueueStore(work: () => Promise<void>): void {
    this.#storeQueue = this.#storeQueue.then(work).catch((err: unknown) => {
      // A failed fsync leaves the disk state unknown (fsyncgate): stop rather than guess.
      this.#failFatally(err, 'raft storage write failed; the node stops serving');
    });
  }

  /** Why this node stopped (a failed storage write, an entry it cannot apply), or null. */
  get stoppedBy(): Error | null {
    return this.#fatal;
  }

  #failFatally(err: unknown, msg: string): void {
    this.#fatal = err instanceof Error ? err : new Error(String(err));
    this.#log.fatal({ err: this.#fatal }, msg);
    void this.stop();
  }

  #flushProposals(): void {
    if (this.#proposalQueue.length === 0) return;
    const queue = this.#proposalQueue;
    this.#proposalQueue = [];
    let r: ProposalResult;
    try {
      r = this.#core.propose(queue.map((q) => q.command));
    } catch (err) {
      for (const q of queue) q.reject(err as Error);
      return;
    }
    queue.forEach((q, i) =>
      this.#proposals.set(r.firstIndex + i, { term: r.term, resolve: q.resolve, reject: q.reject }),
    );
  }

  /**
   * Settles the proposals this node made as an earlier leader at indexes up to `index`, which a
   * snapshot from the leader now covers: no entry there is applied here one by one any more, so
   * nothing else would settle them, and their callers (the power executor holding a machine
   * busy, a forwarded write) would wait for ever. Whether each committed is unknown: the
   * snapshot may hold it or another leader's entry at its index.
   */
  #dropProposalsThrough(index: number): void {
    for (const [i, w] of this.#proposals) {
      if (i > index) continue;
      this.#proposals.delete(i);
      w.reject(
        new RaftError(
          'E_PROPOSAL_DROPPED',
          'leadership changed and a snapshot from the new leader replaced the write before it applied here; it may or may not have committed',
        ),
      );
    }
  }

  /**
   * Settles the proposals of an earlier term than `term`, the term of an entry just applied (or
   * of the snapshot just installed). A log's terms never go down, so every entry after that one
   * is of `term` or later: a proposal of an older term at a later index can never commit. Left
   * for its own index, it would wait until the new leader's log grows that far, which may be
   * never on a quiet cluster.
   */
  #dropProposalsOlderThan(term: number): void {
    const oldest = this.#proposals.values().next();
    // Proposals go in in the order they were made, terms never going down, so the first is of
    // the oldest term; a leader's own proposals are all of its term and pass without a scan.
    if (oldest.done === true || oldest.value.term >= term) return;
    for (const [i, w] of this.#proposals) {
      if (w.term >= term) continue;
      this.#proposals.delete(i);
      w.reject(new RaftError('E_PROPOSAL_DROPPED', 'leadership changed before the write committed; retry'));
    }
  }

  /** Releases the confirmed reads whose index this node has now applied. */
  #releaseReadsApplied(): void {
    for (let i = this.#readsAwaitingApply.length - 1; i >= 0; i--) {
      const w = this.#readsAwaitingApply[i]!;
      if (this.#applied >= w.index) {
        this.#readsAwaitingApply.splice(i, 1);
        w.resolve();
      }
    }
  }

  #sendMessages(msgs: readonly Message[]): void {
    if (msgs.length === 0) return;
    const wire: Message[] = [];
    for (const m of msgs) {
      if (m.type === 'snap') this.#sendSnapshot(m.to);
      else wire.push(m);
    }
    if (wire.length > 0) this.#opts.transport.send(wire);
  }

  #sendSnapshot(to: NodeId): void {
    const snap = this.#lastSnapshot;
    if (snap === null) {
      this.#core.reportSnapshot(to, false);
      return;
    }
    this.#log.info({ to, index: snap.meta.index }, 'sending a snapshot to a lagging follower');
    this.#opts.transport.sendSnapshot(to, snap).then(
      () => {
        this.#core.reportSnapshot(to, true);
        this.#kick();
      },
      (err: unknown) => {
        this.#log.warn({ to, err }, 'snapshot send failed');
        this.#core.reportSnapshot(to, false);
        this.#kick();
      },
    );
  }

  #receiveSnapshot(from: NodeId, snap: Snapshot): Promise<void> {
    if (!this.#stopped) {
      this.#leaderContactTick = this.#ticks;
      this.#received.set(snap.meta.index, snap.data);
      const term = this.#core.softState().term;
      this.#core.step(
        message({ type: 'snap', from, to: this.id, term, index: snap.meta.index, snapshot: snap.meta }),
      );
      this.#kick();
    }
    return Promise.resolve();
  }

  #applyEntries(entries: readonly Entry[]): void {
    for (const e of entries) {
      let result: Uint8Array = new Uint8Array();
      if (e.index <= this.#applied) continue;
      // A configuration entry's context is applied by the machine at its index, with the change.
      const data = e.type === 'normal' ? e.data : e.type === 'conf' ? confContext(e.data) : undefined;
      if (data !== undefined) {
        try {
          result = this.#opts.stateMachine.apply(e.index, data);
        } catch (err) {
          // An entry this build cannot apply (one written by a newer build, or a bug): applying
          // past it, or answering it with an error the other members did not give, would make
          // this node's state differ from theirs. Stop here, say why, and keep the log intact.
          this.#failFatally(err, `entry ${e.index} cannot be applied; this node stops applying`);
          return;
        }
      }
      this.#applied = e.index;
      if (e.type === 'conf') this.#syncPeers();
      const w = this.#proposals.get(e.index);
      if (w !== undefined) {
        this.#proposals.delete(e.index);
        if (w.term === e.term) w.resolve(result);
        else
          w.reject(
            new RaftError('E_PROPOSAL_DROPPED', 'leadership changed before the write committed; retry'),
          );
      }
      this.#opts.onApplied?.(e);
    }
    const last = entries.at(-1);
    if (last === undefined) return;
    this.#dropProposalsOlderThan(last.term);
    this.#releaseReadsApplied();
  }

  #maybeSnapshot(): void {
    if (this.#encodedSnapshot !== null) {
      this.#compactToEncodedSnapshot();
      return;
    }
    const every = this.#opts.snapshotEntries ?? 10_000;
    const last = this.#lastSnapshot?.meta.index ?? 0;
    if (every <= 0 || this.#applied - last < every || this.#writing || this.#encodingSnapshot) return;
    if (this.#core.status().applied !== this.#applied) return;
    const machine = this.#opts.stateMachine;
    if (machine.captureSnapshot === undefined) {
      const data = machine.snapshot();
      this.#compactTo({ meta: this.#core.snapshotMeta(this.#applied), data });
      return;
    }
    // Capture now (cheap), encode in slices while entries keep being applied: a snapshot of a
    // few megabytes encoded at once would stall heartbeats and requests for tens of ms.
    const meta = this.#core.snapshotMeta(this.#applied);
    // The machine's own index may be lower: raft's no-op and configuration entries skip it.
    const capture = machine.captureSnapshot();
    this.#encodingSnapshot = true;
    capture.encode(this.#nextTurn).then(
      (data) => {
        // Its bytes are written beside the log's appends; only naming them waits in line.
        const staged = this.#opts.store.stageSnapshot?.({ meta, data }) ?? Promise.resolve();
        staged.then(
          () => {
            this.#encodingSnapshot = false;
            this.#encodedSnapshot = { meta, data };
            this.#kick();
          },
          (err: unknown) => {
            this.#encodingSnapshot = false;
            if (this.#stopped) return;
            this.#failFatally(
              err,
              `writing the snapshot at index ${meta.index} failed; the node stops serving`,
            );
          },
        );
      },
      (err: unknown) => {
        // A programmer error (the state cannot encode itself): trying again would fail again.
        this.#encodingSnapshot = false;
        this.#failFatally(err, `encoding the snapshot at index ${meta.index} failed; the node stops serving`);
      },
    );
  }

  /** Compacts to a snapshot encoded in slices, once no log write is in flight. */
  #compactToEncodedSnapshot(): void {
    const snap = this.#encodedSnapshot;
    if (snap === null || this.#writing || this.#stopped) return;
    this.#encodedSnapshot = null;
    // A snapshot from the leader may have been installed while this one was being encoded.
    if ((this.#lastSnapshot?.meta.index ?? 0) >= snap.meta.index) return;
    this.#compactTo(snap);
  }

  #compactTo(snap: Snapshot): void {
    const trailing = this.#opts.trailingEntries ?? 5_000;
    this.#core.compactAt(snap.meta, snap.meta.index - trailing);
    this.#lastSnapshot = snap;
    const compactTo = Math.max(0, snap.meta.index - trailing);
    this.#enqueueStore(() => this.#opts.store.saveLocalSnapshot(snap, compactTo));
    this.#log.info(
      { index: snap.meta.index, bytes: snap.data.byteLength },
      'took a snapshot and compacted the log',
    );
  }

  #onSoftState(s: SoftState): void {
    this.#softStateChanges++;
    this.#log.info({ role: s.role, term: s.term, leader: s.leader }, 'raft state changed');
    this.#opts.onSoftState?.(s);
    const waiters = this.#softStateWaiters;
    this.#softStateWaiters = [];
    for (const wake of waiters) wake();
    if (s.leader !== this.#lastLeader) {
      // Reads still waiting for the old leader's confirmation will never get it.
      for (const w of this.#reads.values()) {
        w.reject(
          new RaftError('E_NOT_LEADER', 'leadership changed before the read was confirmed; retry', s.leader),
        );
      }
      this.#reads.clear();
      this.#lastLeader = s.leader;
    }
    if (s.role !== 'leader') {
      // Queued proposals were never appended; tell their callers to go to the new leader.
      for (const q of this.#proposalQueue) q.reject(this.#notLeader());
      this.#proposalQueue = [];
    }
  }

  #syncPeers(): void {
    const m = this.#core.getMembership();
    const key = JSON.stringify(m);
    if (key === this.#membershipKey) return;
    this.#membershipKey = key;
    const known = m.voters.length > 0 ? allMembers(m) : (this.#opts.contactPeers ?? []);
    this.#opts.transport.setPeers(known.filter((x) => x.id !== this.id));
    if (!isVoter(m, this.id) && m.voters.length > 0)
      this.#log.info('this node is not a voter in the current membership');
  }

  #notLeader(): RaftError {
    const leader = this.#core.softState().leader;
    return new RaftError('E_NOT_LEADER', `${this.id} is not the leader`, leader);
  }

  #checkUsable(): void {
    if (this.#fatal !== null)
      throw new RaftError('E_PROPOSAL_DROPPED', `the node has stopped: ${this.#fatal.message}`);
    // Nothing was appended: a definite refusal, which a forwarding node may retry elsewhere.
    if (this.#stopped) throw new RaftError('E_NOT_LEADER', `${this.id} is shutting down`);
  }
}

/** Entry 1 of every initial member's log names the initial voters. */
export function bootstrapState(peers: readonly Member[]): InitialState {
  const data = encodeConfChange({ type: 'bootstrap', voters: peers });
  return {
    hardState: { term: 1, vote: '', commit: 1 },
    snapshot: { index: 0, term: 0, membership: { voters: [], learners: [] } },
    entries: [{ term: 1, index: 1, type: 'conf', data }],
  };
}

/** Resolves when `waiters` is woken (each entry is called) or after `timeoutMs`, whichever is first. */
function wakeOrTimeout(clock: Clock, waiters: (() => void)[], timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const cancel = clock.after(timeoutMs, done);
    function done(): void {
      cancel();
      const i = waiters.indexOf(done);
      if (i >= 0) waiters.splice(i, 1);
      resolve();
    }
    waiters.push(done);
  });
}

/** The context a configuration entry carries for the state machine, if any. */
function confContext(data: Uint8Array): Uint8Array | undefined {
  const cc = decodeConfChange(data);
  return cc.type === 'bootstrap' ? undefined : cc.context;
}

/** What transferTargetOf reads of each member's progress (the core's status). */
export interface TransferCandidate {
  readonly id: NodeId;
  readonly learner: boolean;
  readonly recentActive: boolean;
  readonly match: number;
}

/**
 * The voter to hand leadership to: the most caught up among those heard from since the last
 * quorum check, else among all. The core clears that mark at every check (each election
 * timeout) and a voter regains it at its next answer, so for a few ms of each timeout no voter
 * has it: a leader stopping then handed over to nobody, and its followers waited out an
 * election timeout while writes failed. A transfer to a voter that is really gone is abandoned
 * once the transport says so, or at its timeout.
 */
export function transferTargetOf(
  progress: readonly TransferCandidate[],
  self: NodeId,
  skip: (id: NodeId) => boolean = () => false,
): NodeId | null {
  let best: TransferCandidate | null = null;
  for (const p of progress) {
    if (p.id === self || p.learner || skip(p.id)) continue;
    const better =
      best === null ||
      (p.recentActive && !best.recentActive) ||
      (p.recentActive === best.recentActive && p.match > best.match);
    if (better) best = p;
  }
  return best?.id ?? null;
}

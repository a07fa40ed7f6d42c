// Gets a store command applied from any node. The leader stamps its clock into the command
// (the state machine's only time source) and proposes it; a follower hands the encoded command
// to the leader over the Internal service on the raft address and relays the result. What a
// follower forwards within one event-loop turn goes as one request on its ProposeStream to the
// leader; a leader that predates it gets the same batch as one ProposeBatch call (or, older
// still, each command by the unary Propose).
import { Metadata, status } from '@grpc/grpc-js';
import type {
  ClientDuplexStream,
  sendUnaryData,
  ServerDuplexStream,
  ServerUnaryCall,
  ServiceError,
} from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type {
  InternalServer,
  ProposeBatchRequest,
  ProposeBatchResponse,
  ProposeOutcome,
  ProposeRequest,
  ProposeResponse,
  ProposeStreamRequest,
  ProposeStreamResponse,
} from '../gen/internal.js';
import { InternalClient } from '../gen/internal.js';
import type { Member } from '../raft/core/types.js';
import { RaftError } from '../raft/core/types.js';
import type { RaftNode } from '../raft/node.js';
import { peerStreamCallOptions } from '../raft/transport/grpc-config.js';
import { peerChannelCredentials, type PeerTls } from '../platform/peer-tls.js';
import type { Command, CommandResult } from '../state/store-command.js';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import { DecodeError } from '../state/binary.js';
import { decodeCommand, decodeResult, encodeCommand } from '../state/store-command.js';
import {
  ApiError,
  isServiceError,
  leaderHintKey,
  raftCodeKey,
  refusedBeforeAppend,
  refusedBeforeAppendCodes,
  toServiceError,
} from './errors.js';

const leaderWaitMs = 2000;
/** How long definite refusals are retried: a few election timeouts at the default ticks. */
const refusalRetryMs = 2000;

function refusalPauseMs(attempt: number): number {
  return Math.min(10 * 2 ** attempt, 100);
}

/**
 * A command another node forwarded, decoded. Bytes that do not decode are the caller's error
 * (another build's format, or not a node at all), not this node's: INVALID_ARGUMENT.
 */
function forwardedCommand(bytes: Uint8Array): Command {
  try {
    return decodeCommand(bytes);
  } catch (err) {
    if (!(err instanceof DecodeError)) throw err;
    throw new ApiError(status.INVALID_ARGUMENT, `the forwarded command does not decode: ${err.message}`);
  }
}

/** True when `err` proves the command was not appended to any log. */
function neverAppended(err: unknown): boolean {
  if (err instanceof RaftError) return refusedBeforeAppendCodes.has(err.code);
  return isServiceError(err) && refusedBeforeAppend(err);
}
const forwardDeadlineMs = 10_000;
/** Bounds on one forwarded batch (a stream request or a ProposeBatch call), well inside gRPC's default 4 MiB message limit. */
const batchCommandsMax = 512;
const batchBytesMax = 1024 * 1024;

/** A command's result and when the leader had it, the command applied (ms since the epoch, its clock). */
export interface Applied<R> {
  readonly result: R;
  /** 0 when an older leader did not say. */
  readonly resultAtMs: number;
}

/** A command waiting to be forwarded with the others of its event-loop turn. */
interface PendingForward {
  readonly command: Uint8Array;
  readonly resolve: (applied: Applied<CommandResult>) => void;
  readonly reject: (err: unknown) => void;
}

/** A batch sent on a ProposeStream, waiting for the response with its id. */
interface StreamedBatch {
  readonly items: readonly PendingForward[];
  readonly timer: NodeJS.Timeout;
}

/** This node's ProposeStream to one leader, and the batches it has sent that are not answered. */
interface ForwardStream {
  readonly call: ClientDuplexStream<ProposeStreamRequest, ProposeStreamResponse>;
  readonly waiting: Map<number, StreamedBatch>;
}

/** How much this node has forwarded to leaders, for /metrics. */
export interface ForwardingStats {
  /** Commands forwarded. */
  readonly commands: number;
  /** Calls that carried them (one unary Propose, one ProposeBatch or one ProposeStream request each). */
  readonly calls: number;
}

/** What retryRefusals needs of the node: its changes of role, term or leader. */
export interface LeadershipChanges {
  readonly softStateChanges: number;
  softStateChange(timeoutMs: number): Promise<void>;
}

/**
 * Runs `attempt` (a write proposed here or forwarded to the leader) and runs it again after a
 * refusal that proves the write was never appended (neverAppended), as leadership settles: at
 * once when the role or leader changed while the attempt was out (the refusal is news of a
 * handover this node already knows the end of), else at the next change or after a short
 * pause, for up to refusalRetryMs. Anything ambiguous (sent, then lost) goes back to the caller.
 */
export async function retryRefusals<T>(node: LeadershipChanges, attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + refusalRetryMs;
  for (let n = 0; ; n++) {
    const changesBefore = node.softStateChanges;
    try {
      return await attempt();
    } catch (err) {
      if (!neverAppended(err) || Date.now() >= deadline) throw err;
      if (node.softStateChanges === changesBefore) await node.softStateChange(refusalPauseMs(n));
    }
  }
}

/**
 * Waits (briefly) for a known leader; UNAVAILABLE when the cluster has none. It wakes at the
 * node's next change of role, term or leader, not on a timer: during a handover the new leader
 * is known within milliseconds, and polling every 20 ms had added up to that to every write
 * that waited.
 */
export async function awaitLeader(
  node: Pick<RaftNode, 'leaderMember' | 'softStateChange'>,
  waitMs = leaderWaitMs,
): Promise<Member> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const leader = node.leaderMember();
    if (leader !== null) return leader;
    const left = deadline - Date.now();
    if (left <= 0) throw new ApiError(status.UNAVAILABLE, 'no leader is elected; retry shortly');
    await node.softStateChange(Math.min(left, 100));
  }
}

/** What a Proposer needs of its raft node. */
export type ProposerNode = Pick<
  RaftNode,
  'id' | 'softState' | 'leaderMember' | 'softStateChanges' | 'softStateChange' | 'propose'
>;

export class Proposer {
  readonly #node: ProposerNode;
  readonly #logger: Logger;
  readonly #clients = new Map<string, InternalClient>();
  readonly #tls: PeerTls | undefined;
  /** Commands to forward at the end of this turn, by leader address. */
  readonly #pending = new Map<string, { leader: Member; items: PendingForward[] }>();
  /** Leaders that answered ProposeBatch with UNIMPLEMENTED (an older version, mid-upgrade). */
  readonly #unbatched = new Set<string>();
  /** Open ProposeStreams, by leader address. */
  readonly #streams = new Map<string, ForwardStream>();
  /** Leaders that answered ProposeStream with UNIMPLEMENTED: they get ProposeBatch calls. */
  readonly #unstreamed = new Set<string>();
  #streamRequestId = 0;
  #forwardedCommands = 0;
  #forwardCalls = 0;

  /** Why a command may not be proposed yet (a state version the cluster does not run), if so. */
  readonly #gate: (command: Command) => string | undefined;

  /**
   * `tls`: the node's identity, for mutual TLS to the leader's raft address. `gate`: the version
   * gate (src/state/versions.ts), checked where a command enters and again by the leader.
   */
  constructor(
    node: ProposerNode,
    logger: Logger,
    tls?: PeerTls,
    gate: (command: Command) => string | undefined = () => undefined,
  ) {
    this.#node = node;
    this.#logger = logger;
    this.#tls = tls;
    this.#gate = gate;
  }

  /**
   * Applies `command` through the leader and returns its result (errors as results, not throws).
   * A refusal that proves the command never entered a log (no leader there, a leadership
   * transfer under way, the leader's port closed) is retried as leadership settles, for up to
   * an election's worth of time, so a graceful handover does not fail the caller. Anything
   * ambiguous (sent, then lost) is the caller's to resolve.
   */
  async propose(command: Command): Promise<CommandResult> {
    return (await this.proposeApplied(command)).result;
  }

  /** As propose, with when the leader applied the command. */
  proposeApplied(command: Command): Promise<Applied<CommandResult>> {
    const refusal = this.#gate(command);
    if (refusal !== undefined) return Promise.reject(new ApiError(status.FAILED_PRECONDITION, refusal));
    return retryRefusals(this.#node, () => this.#proposeOnce(command));
  }

  async #proposeOnce(command: Command): Promise<Applied<CommandResult>> {
    if (this.#node.softState().role === 'leader') return this.#proposeHere(command);
    const leader = await awaitLeader(this.#node);
    if (leader.id === this.#node.id) return this.#proposeHere(command);
    return this.#forward(leader, command);
  }

  /** Applies a control-plane command; refusals come back as an error result, not a throw. */
  async proposeControl(command: ControlCommand): Promise<ControlResult> {
    return (await this.proposeControlApplied(command)).result;
  }

  /** As proposeControl, with when the leader applied the command. */
  async proposeControlApplied(command: ControlCommand): Promise<Applied<ControlResult>> {
    const { result, resultAtMs } = await this.proposeApplied({ type: 'control', stampMs: 0, command });
    if (result.type !== 'control') throw new ApiError(status.INTERNAL, `unexpected result ${result.type}`);
    return { result: result.result, resultAtMs };
  }

  get forwarding(): ForwardingStats {
    return { commands: this.#forwardedCommands, calls: this.#forwardCalls };
  }

  /**
   * The Internal service's proposals, served on the raft address for followers' forwarded
   * proposals (ArtifactRead is src/api/artifact-peer-service.ts's).
   */
  handlers(): Pick<InternalServer, 'propose' | 'proposeBatch' | 'proposeStream'> {
    return {
      proposeBatch: (
        call: ServerUnaryCall<ProposeBatchRequest, ProposeBatchResponse>,
        cb: sendUnaryData<ProposeBatchResponse>,
      ) => {
        const refusal = this.#notLeader();
        if (refusal !== null) {
          cb(toServiceError(refusal), null);
          return;
        }
        // Proposed in this turn, so the raft node appends them as one batch.
        const outcomes = call.request.commands.map((bytes) => this.#proposeOutcome(bytes));
        Promise.all(outcomes).then(
          (all) => cb(null, { outcomes: all }),
          (err: unknown) => cb(toServiceError(err) as ServiceError, null),
        );
      },
      proposeStream: (call: ServerDuplexStream<ProposeStreamRequest, ProposeStreamResponse>) => {
        this.#serveStream(call);
      },
      propose: (
        call: ServerUnaryCall<ProposeRequest, ProposeResponse>,
        cb: sendUnaryData<ProposeResponse>,
      ) => {
        const run = async (): Promise<ProposeResponse> => {
          const refusal = this.#notLeader();
          if (refusal !== null) throw refusal;
          const result = await this.#proposeRaw(forwardedCommand(call.request.command));
          return {
            result: Buffer.from(result.buffer, result.byteOffset, result.byteLength),
            resultAtMs: Date.now(),
          };
        };
        run().then(
          (res) => cb(null, res),
          (err: unknown) => cb(toServiceError(err) as ServiceError, null),
        );
      },
    };
  }

  /**
   * The refusal of a forwarded proposal on a node that does not lead. Never forward again: two
   * nodes that each think the other leads would loop.
   */
  #notLeader(): RaftError | null {
    const { role, leader } = this.#node.softState();
    return role === 'leader'
      ? null
      : new RaftError('E_NOT_LEADER', `${this.#node.id} is not the leader`, leader);
  }

  close(): void {
    for (const s of this.#streams.values()) s.call.cancel();
    this.#streams.clear();
    for (const c of this.#clients.values()) c.close();
    this.#clients.clear();
  }

  /**
   * A follower's ProposeStream: each request's commands are proposed in the turn it arrives (one
   * batch for the raft node), and answered together once each has its outcome. The stream ends
   * when the follower ends it and every request is answered.
   */
  #serveStream(call: ServerDuplexStream<ProposeStreamRequest, ProposeStreamResponse>): void {
    let unanswered = 0;
    let ended = false;
    const endIfDone = (): void => {
      if (ended && unanswered === 0 && !call.cancelled) call.end();
    };
    call.on('data', (req: ProposeStreamRequest) => {
      const refusal = this.#notLeader();
      const outcomes =
        refusal === null
          ? req.commands.map((bytes) => this.#proposeOutcome(bytes))
          : req.commands.map(() => Promise.resolve(outcomeOfError(refusal)));
      unanswered++;
      // #proposeOutcome turns every failure into an outcome: this never rejects.
      void Promise.all(outcomes).then((all) => {
        unanswered--;
        if (!call.cancelled && !call.writableEnded) call.write({ id: req.id, outcomes: all });
        endIfDone();
      });
    });
    call.on('end', () => {
      ended = true;
      endIfDone();
    });
    // A follower that goes away cancels the stream; what it had sent is still proposed.
    call.on('error', () => undefined);
  }

  /** One command of a batch, proposed here; a failure becomes its outcome, not the call's. */
  async #proposeOutcome(bytes: Uint8Array): Promise<ProposeOutcome> {
    try {
      const result = await this.#proposeRaw(forwardedCommand(bytes));
      return {
        result: Buffer.from(result.buffer, result.byteOffset, result.byteLength),
        code: status.OK,
        details: '',
        raftCode: '',
        leader: '',
        resultAtMs: Date.now(),
      };
    } catch (err) {
      return outcomeOfError(err);
    }
  }

  async #proposeHere(command: Command): Promise<Applied<CommandResult>> {
    const result = decodeResult(await this.#proposeRaw(command));
    return { result, resultAtMs: Date.now() };
  }

  #proposeRaw(command: Command): Promise<Uint8Array> {
    // Again here, on the leader: a follower's applied state may be behind or ahead of ours.
    const refusal = this.#gate(command);
    if (refusal !== undefined) return Promise.reject(new ApiError(status.FAILED_PRECONDITION, refusal));
    return this.#node.propose(encodeCommand({ ...command, stampMs: Date.now() }));
  }

  #forward(leader: Member, command: Command): Promise<Applied<CommandResult>> {
    return new Promise((resolve, reject) => {
      let batch = this.#pending.get(leader.addr);
      if (batch === undefined) {
        batch = { leader, items: [] };
        this.#pending.set(leader.addr, batch);
        // After the I/O of this turn: every result and request that arrived with it joins.
        setImmediate(() => this.#flush(leader.addr));
      }
      batch.items.push({ command: encodeCommand(command), resolve, reject });
    });
  }

  #flush(addr: string): void {
    const batch = this.#pending.get(addr);
    this.#pending.delete(addr);
    if (batch === undefined) return;
    let chunk: PendingForward[] = [];
    let bytes = 0;
    for (const item of batch.items) {
      if (
        chunk.length > 0 &&
        (chunk.length >= batchCommandsMax || bytes + item.command.length > batchBytesMax)
      ) {
        this.#send(batch.leader, chunk);
        chunk = [];
        bytes = 0;
      }
      chunk.push(item);
      bytes += item.command.length;
    }
    if (chunk.length > 0) this.#send(batch.leader, chunk);
  }

  #send(leader: Member, items: readonly PendingForward[]): void {
    if (!this.#unstreamed.has(leader.addr)) {
      this.#sendOnStream(leader, items);
      return;
    }
    if (items.length === 1 || this.#unbatched.has(leader.addr)) {
      for (const item of items) this.#sendOne(leader, item);
      return;
    }
    this.#client(leader).proposeBatch(
      { commands: items.map((item) => Buffer.from(item.command)) },
      forwardMetadata(this.#node.id),
      { deadline: Date.now() + forwardDeadlineMs },
      (err, res) => {
        if (err !== null && err.code === status.UNIMPLEMENTED) {
          // The leader predates ProposeBatch and did nothing: send them one by one.
          this.#unbatched.add(leader.addr);
          for (const item of items) this.#sendOne(leader, item);
          return;
        }
        this.#forwardedCommands += items.length;
        this.#forwardCalls += 1;
        if (err !== null) {
          this.#logger.debug(
            { err, leader: leader.id, commands: items.length },
            'forwarded proposals failed',
          );
          for (const item of items) item.reject(err);
          return;
        }
        settleOutcomes(items, res.outcomes);
      },
    );
  }

  #sendOnStream(leader: Member, items: readonly PendingForward[]): void {
    const s = this.#stream(leader);
    const id = ++this.#streamRequestId;
    const timer = setTimeout(() => {
      if (!s.waiting.delete(id)) return;
      const err = new ApiError(
        status.DEADLINE_EXCEEDED,
        `the leader ${leader.id} did not answer forwarded proposals within ${forwardDeadlineMs} ms; they may or may not have been applied`,
      );
      for (const item of items) item.reject(err);
      // A stream that leaves a request unanswered this long is not trusted with the next ones:
      // they go on a new one (what it still holds is rejected as it ends).
      s.call.cancel();
    }, forwardDeadlineMs);
    s.waiting.set(id, { items, timer });
    this.#forwardedCommands += items.length;
    this.#forwardCalls += 1;
    s.call.write({ id, commands: items.map((item) => Buffer.from(item.command)) });
  }

  /** The open ProposeStream to `leader`, opened now if there is none. */
  #stream(leader: Member): ForwardStream {
    const open = this.#streams.get(leader.addr);
    if (open !== undefined) return open;
    const call = this.#client(leader).proposeStream(forwardMetadata(this.#node.id));
    const s: ForwardStream = { call, waiting: new Map() };
    this.#streams.set(leader.addr, s);
    const unanswered = (): StreamedBatch[] => {
      if (this.#streams.get(leader.addr) === s) this.#streams.delete(leader.addr);
      const batches = [...s.waiting.values()];
      s.waiting.clear();
      for (const b of batches) clearTimeout(b.timer);
      return batches;
    };
    call.on('data', (res: ProposeStreamResponse) => {
      const batch = s.waiting.get(res.id);
      if (batch === undefined) return;
      s.waiting.delete(res.id);
      clearTimeout(batch.timer);
      settleOutcomes(batch.items, res.outcomes);
    });
    call.on('error', (err: ServiceError) => {
      const batches = unanswered();
      if (err.code === status.UNIMPLEMENTED) {
        // A leader that predates the stream did nothing with them: the batch call instead.
        this.#unstreamed.add(leader.addr);
        for (const b of batches) this.#send(leader, b.items);
        return;
      }
      this.#logger.debug({ err, leader: leader.id }, 'the stream of forwarded proposals failed');
      for (const b of batches) for (const item of b.items) item.reject(err);
    });
    call.on('end', () => {
      // The leader ended the stream without an error: whatever it had not answered is unknown.
      const err = new ApiError(
        status.UNAVAILABLE,
        `the leader ${leader.id} ended the stream of forwarded proposals; they may or may not have been applied`,
      );
      for (const b of unanswered()) for (const item of b.items) item.reject(err);
    });
    return s;
  }

  #sendOne(leader: Member, item: PendingForward): void {
    this.#forwardedCommands += 1;
    this.#forwardCalls += 1;
    this.#client(leader).propose(
      { command: Buffer.from(item.command) },
      forwardMetadata(this.#node.id),
      { deadline: Date.now() + forwardDeadlineMs },
      (err, res) => {
        if (err !== null) {
          this.#logger.debug({ err, leader: leader.id }, 'forwarded proposal failed');
          item.reject(err);
        } else settle(item, res.result, res.resultAtMs);
      },
    );
  }

  #client(leader: Member): InternalClient {
    let client = this.#clients.get(leader.addr);
    if (client === undefined) {
      client = new InternalClient(leader.addr, peerChannelCredentials(this.#tls), peerStreamCallOptions());
      this.#clients.set(leader.addr, client);
    }
    return client;
  }
}

/** Settles each item by the leader's outcome for it, in order. */
function settleOutcomes(items: readonly PendingForward[], outcomes: readonly ProposeOutcome[]): void {
  items.forEach((item, i) => {
    const outcome = outcomes[i];
    if (outcome === undefined) {
      item.reject(
        new ApiError(status.INTERNAL, `the leader answered ${outcomes.length} of ${items.length} commands`),
      );
    } else if (outcome.code === okCode) {
      settle(item, outcome.result, outcome.resultAtMs);
    } else {
      item.reject(outcomeError(outcome));
    }
  });
}

/** A failure to propose a forwarded command, as its outcome (what the unary Propose would fail with). */
function outcomeOfError(err: unknown): ProposeOutcome {
  const se = toServiceError(err);
  const first = (key: string): string => {
    const value = se.metadata?.get(key)[0];
    return typeof value === 'string' ? value : '';
  };
  return {
    result: Buffer.alloc(0),
    code: se.code ?? status.INTERNAL,
    details: se.details ?? '',
    raftCode: first(raftCodeKey),
    leader: first(leaderHintKey),
    resultAtMs: 0,
  };
}

/** Resolves `item` with the leader's encoded result; bytes that do not decode reject it instead. */
function settle(item: PendingForward, result: Uint8Array, resultAtMs: number): void {
  let decoded: CommandResult;
  try {
    decoded = decodeResult(result);
  } catch (err) {
    item.reject(err);
    return;
  }
  item.resolve({ result: decoded, resultAtMs });
}

function forwardMetadata(from: string): Metadata {
  const md = new Metadata();
  md.set('x-slipway-forwarded', from);
  return md;
}

const okCode: number = status.OK;

const knownStatus = new Map<number, status>(
  Object.values(status)
    .filter((value): value is status => typeof value === 'number')
    .map((value) => [value, value]),
);

/** A gRPC status code from the wire; anything this version does not know is UNKNOWN. */
function statusOf(code: number): status {
  return knownStatus.get(code) ?? status.UNKNOWN;
}

/** A batch outcome as the error the unary Propose would have failed with. */
function outcomeError(outcome: ProposeOutcome): ServiceError {
  const metadata = new Metadata();
  if (outcome.raftCode !== '') metadata.set(raftCodeKey, outcome.raftCode);
  if (outcome.leader !== '') metadata.set(leaderHintKey, outcome.leader);
  const name = (status as Record<number, string | undefined>)[outcome.code] ?? 'UNKNOWN';
  return Object.assign(new Error(`${outcome.code} ${name}: ${outcome.details}`), {
    code: statusOf(outcome.code),
    details: outcome.details,
    metadata,
  });
}

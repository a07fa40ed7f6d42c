// Gets a store command applied from any node. The leader stamps its clock into the command
// (the state machine's only time source) and proposes it; a follower hands the encoded command
// to the leader over the Internal service on the raft address and relays the result.
import { Metadata, status } from '@grpc/grpc-js';
import type { sendUnaryData, ServerUnaryCall, ServiceError } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { InternalServer, ProposeRequest, ProposeResponse } from '../gen/internal.js';
import { InternalClient } from '../gen/internal.js';
import type { Member } from '../raft/core/types.js';
import { RaftError } from '../raft/core/types.js';
import type { RaftNode } from '../raft/node.js';
import { peerChannelCredentials, type PeerTls } from '../raft/transport/grpc-config.js';
import type { Command, CommandResult } from '../state/command.js';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import { decodeCommand, decodeResult, encodeCommand } from '../state/command.js';
import { ApiError, isServiceError, raftCodeKey, toServiceError } from './errors.js';

const leaderWaitMs = 2000;
/** How long definite refusals are retried: a few election timeouts at the default ticks. */
const refusalRetryMs = 2000;
const refusedCodes: ReadonlySet<string> = new Set(['E_NOT_LEADER', 'E_TRANSFER_IN_PROGRESS']);

function refusalPauseMs(attempt: number): number {
  return Math.min(10 * 2 ** attempt, 100);
}

/** True when `err` proves the command was not appended to any log. */
function neverAppended(err: unknown): boolean {
  if (err instanceof RaftError) return refusedCodes.has(err.code);
  if (!isServiceError(err) || err.code !== status.UNAVAILABLE) return false;
  const raftCode = err.metadata.get(raftCodeKey)[0];
  if (typeof raftCode === 'string') return refusedCodes.has(raftCode);
  // The leader's port refused the connection: the request never left this node.
  return /No connection established|ECONNREFUSED/.test(err.details);
}
const forwardDeadlineMs = 10_000;

/**
 * Runs `attempt` (a write proposed here or forwarded to the leader) and runs it again after a
 * refusal that proves the write was never appended (neverAppended), as leadership settles:
 * once the role or leader changes, or after a short pause, for up to refusalRetryMs. Anything
 * ambiguous (sent, then lost) goes back to the caller.
 */
export async function retryRefusals<T>(node: RaftNode, attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + refusalRetryMs;
  for (let n = 0; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      if (!neverAppended(err) || Date.now() >= deadline) throw err;
      await node.softStateChange(refusalPauseMs(n));
    }
  }
}

/** Waits (briefly) for a known leader; UNAVAILABLE when the cluster has none. */
export async function awaitLeader(node: RaftNode, waitMs = leaderWaitMs): Promise<Member> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const leader = node.leaderMember();
    if (leader !== null) return leader;
    if (Date.now() > deadline) throw new ApiError(status.UNAVAILABLE, 'no leader is elected; retry shortly');
    await new Promise((r) => setTimeout(r, 20));
  }
}

export class Proposer {
  readonly #node: RaftNode;
  readonly #logger: Logger;
  readonly #clients = new Map<string, InternalClient>();
  readonly #tls: PeerTls | undefined;

  /** `tls`: the node's identity, for mutual TLS to the leader's raft address. */
  constructor(node: RaftNode, logger: Logger, tls?: PeerTls) {
    this.#node = node;
    this.#logger = logger;
    this.#tls = tls;
  }

  /**
   * Applies `command` through the leader and returns its result (errors as results, not throws).
   * A refusal that proves the command never entered a log (no leader there, a leadership
   * transfer under way, the leader's port closed) is retried as leadership settles, for up to
   * an election's worth of time, so a graceful handover does not fail the caller. Anything
   * ambiguous (sent, then lost) is the caller's to resolve.
   */
  propose(command: Command): Promise<CommandResult> {
    return retryRefusals(this.#node, () => this.#proposeOnce(command));
  }

  async #proposeOnce(command: Command): Promise<CommandResult> {
    if (this.#node.softState().role === 'leader') return this.#proposeHere(command);
    const leader = await awaitLeader(this.#node);
    if (leader.id === this.#node.id) return this.#proposeHere(command);
    return this.#forward(leader, command);
  }

  /** Applies a control-plane command; refusals come back as an error result, not a throw. */
  async proposeControl(command: ControlCommand): Promise<ControlResult> {
    const res = await this.propose({ type: 'control', stampMs: 0, command });
    if (res.type !== 'control') throw new ApiError(status.INTERNAL, `unexpected result ${res.type}`);
    return res.result;
  }

  /** The Internal service, served on the raft address for followers' forwarded proposals. */
  handlers(): InternalServer {
    return {
      propose: (
        call: ServerUnaryCall<ProposeRequest, ProposeResponse>,
        cb: sendUnaryData<ProposeResponse>,
      ) => {
        const run = async (): Promise<ProposeResponse> => {
          // Never forward again: two nodes that each think the other leads would loop.
          if (this.#node.softState().role !== 'leader') {
            throw new RaftError(
              'E_NOT_LEADER',
              `${this.#node.id} is not the leader`,
              this.#node.softState().leader,
            );
          }
          const result = await this.#proposeRaw(decodeCommand(call.request.command));
          return { result: Buffer.from(result.buffer, result.byteOffset, result.byteLength) };
        };
        run().then(
          (res) => cb(null, res),
          (err: unknown) => cb(toServiceError(err) as ServiceError, null),
        );
      },
    };
  }

  close(): void {
    for (const c of this.#clients.values()) c.close();
    this.#clients.clear();
  }

  async #proposeHere(command: Command): Promise<CommandResult> {
    return decodeResult(await this.#proposeRaw(command));
  }

  #proposeRaw(command: Command): Promise<Uint8Array> {
    return this.#node.propose(encodeCommand({ ...command, stampMs: Date.now() }));
  }

  #forward(leader: Member, command: Command): Promise<CommandResult> {
    let client = this.#clients.get(leader.addr);
    if (client === undefined) {
      client = new InternalClient(leader.addr, peerChannelCredentials(this.#tls));
      this.#clients.set(leader.addr, client);
    }
    const md = new Metadata();
    md.set('x-slipway-forwarded', this.#node.id);
    return new Promise((resolve, reject) => {
      client.propose(
        { command: Buffer.from(encodeCommand(command)) },
        md,
        { deadline: Date.now() + forwardDeadlineMs },
        (err, res) => {
          if (err !== null) {
            this.#logger.debug({ err, leader: leader.id }, 'forwarded proposal failed');
            reject(err);
          } else resolve(decodeResult(res.result));
        },
      );
    });
  }
}

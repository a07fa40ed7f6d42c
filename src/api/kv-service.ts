// The Kv gRPC service: the replicated key-value store and cluster administration. Any node
// answers: writes on a follower are forwarded to the leader, reads are linearizable
// (ReadIndex, through the leader) unless the caller asks for a local read.
import { Metadata, status } from '@grpc/grpc-js';
import type { ClientUnaryCall, sendUnaryData, ServerUnaryCall, ServiceError } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type {
  CompareAndSetRequest,
  CompareAndSetResponse,
  DeleteRequest,
  DeleteResponse,
  KeyValue as KeyValueProto,
  LeaderTransferRequest,
  MemberAddRequest,
  MemberRemoveRequest,
  PutRequest,
  KvServer,
  MemberInfo,
  Session as SessionProto,
  StatusRequest,
  StatusResponse,
  BootServiceStatus,
} from '../gen/kv.js';
import { KvClient, Role, Suffrage } from '../gen/kv.js';
import type { Member, Membership, Role as RaftRole } from '../raft/core/types.js';
import { RaftError } from '../raft/core/types.js';
import type { RaftNode } from '../raft/node.js';
import { peerCallOptions } from '../raft/transport/grpc-config.js';
import { peerChannelCredentials, type PeerTls } from '../platform/peer-tls.js';
import type {
  Command,
  CommandResult,
  DeleteCommand,
  PutCommand,
  SessionTag,
} from '../state/store-command.js';
import { decodeResult, encodeCommand } from '../state/store-command.js';
import type { KeyValue, ReplicatedState } from '../state/replicated-state.js';
import type { Role as OperatorRole } from '../model/records.js';
import type { Authenticator } from './auth.js';
import { auditRecord, safeTarget, statusCodeName, type CallAuditor } from './audit-calls.js';
import {
  attachCallAudit,
  auditedMetadata,
  callAuditOf,
  forwardAudit,
  forwardedAudit,
  isAuditedAnswer,
  type CallAudit,
} from './kv-audit.js';
import { ApiError, toServiceError } from './errors.js';
import type { Proposer } from './proposer.js';
import { awaitLeader, retryRefusals } from './proposer.js';
import { isHostPort } from '../platform/host-port.js';
import { buildVersion, stateVersionAuditInEntry, stateVersionOfThisBuild } from '../state/versions.js';
import { StateDigests } from './state-digest.js';
import { MemberAddresses } from './member-addresses.js';
import { connectionFailure, isServiceError } from '../wire/contract.js';
import { isMemberId, memberIdForm } from '../model/member-id.js';

/** Lets timers and I/O run between slices of the digest's encoding. */
function nextTurnOfEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** The namespace the operator-facing `kv` commands use; the control plane has its own. */
export const operatorNamespace = 'kv';
const forwardedKey = 'x-slipway-forwarded';
const forwardDeadlineMs = 10_000;
/** How long a Status asked for another member waits for that member's answer. */
const memberStatusTimeoutMs = 5000;
/** How long a member is given to name its API address (member list waits for it). */
const memberAddressTimeoutMs = 1000;

export interface KvServiceContext {
  readonly node: RaftNode;
  readonly store: ReplicatedState;
  readonly logger: Logger;
  /** The node's identity for forwarding to the leader's raft address (mutual TLS). */
  readonly peerTls?: PeerTls | undefined;
  /** Whether this node is drained, and its open worker streams, for Status (node-drain.ts). */
  readonly drain?: () => { readonly drained: boolean; readonly workerStreams: number };
  /** This node's configured boot services and what each is doing, for Status. */
  readonly bootServices?: () => BootServiceStatus[];
  /** The address this node serves its API on, for members that ask (member-addresses.ts). */
  readonly apiAddr?: string;
  /**
   * Where a client's put goes to the leader: the proposer sends what this node forwards in one
   * event-loop turn as one request on its stream to the leader (docs/decisions/0046). Without
   * it, each put is forwarded as its own Kv call.
   */
  readonly proposer?: Proposer;
}

type Handler<Req, Res> = (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void;

/** Runs `work`, mapping any error to a gRPC status for the caller. */
function unary<Req, Res>(
  work: (req: Req, call: ServerUnaryCall<Req, Res>) => Promise<Res>,
): Handler<Req, Res> {
  return (call, callback) => {
    work(call.request, call).then(
      (res) => callback(null, res),
      (err: unknown) => callback(toServiceError(err) as ServiceError, null),
    );
  };
}

export class KvService {
  readonly #ctx: KvServiceContext;
  readonly #clients = new Map<string, KvClient>();
  readonly #digests: StateDigests;
  readonly #addresses: MemberAddresses;

  constructor(ctx: KvServiceContext) {
    this.#ctx = ctx;
    this.#digests = new StateDigests(ctx.store, nextTurnOfEventLoop);
    this.#addresses = new MemberAddresses({
      self: { id: ctx.node.id, apiAddr: ctx.apiAddr ?? '' },
      ask: async (m) =>
        (await this.peerStatus(m, memberAddressTimeoutMs)).members.find((x) => x.id === m.id)?.apiAddr,
    });
  }

  /** The API address of `member`, learned from it when the membership does not record it. */
  apiAddrOf(member: Member): Promise<string> {
    const known = this.#withApiAddrs({ voters: [member], learners: [] }).voters[0] ?? member;
    return this.#addresses.apiAddrOf(known);
  }

  /**
   * The handlers as served to clients: with `auth`, each call needs a token of the method's role.
   * The copy served on the raft address (for followers' forwards) goes without: mutual TLS
   * authenticates the peer there.
   */
  handlers(auth?: Authenticator, auditor?: CallAuditor): KvServer {
    const h = this.#handlers();
    if (auth === undefined) return takingForwardedAudits(h);
    const guarded: Record<string, Handler<unknown, unknown>> = {};
    for (const [name, handler] of Object.entries(h) as [keyof typeof kvRoles, Handler<unknown, unknown>][]) {
      const audit = kvAudits[name as keyof typeof kvAudits] as KvAudit<unknown, unknown> | undefined;
      guarded[name] =
        auditor !== undefined && audit !== undefined
          ? auditedHandler(auditor, `Kv/${capitalized(name)}`, (req) => kvNeed(name, req), audit, handler)
          : (call, callback) => {
              const need = kvNeed(name, call.request);
              // A read or a session proposes no record of its own; a refusal for its role is
              // recorded all the same (0018).
              const allowed =
                auditor === undefined
                  ? auth.operator(call, need.role, need.why)
                  : auditor.authorize(
                      {
                        metadata: call.metadata,
                        peer: call.getPeer(),
                        method: `Kv/${capitalized(name)}`,
                        kind: `kv.${name}`,
                      },
                      need.role,
                      () => '',
                      need.why,
                    );
              allowed.then(
                () => handler(call, callback),
                (err: unknown) => callback(toServiceError(err) as ServiceError, null),
              );
            };
    }
    return guarded as unknown as KvServer;
  }

  #handlers(): KvServer {
    return { ...this.#storeHandlers(), ...this.#clusterHandlers() };
  }

  /** Reads and writes of the store, and client sessions. */
  #storeHandlers() {
    return {
      registerClient: unary(async (req, call) => {
        return this.#routed(call, 'registerClient', req, undefined, async () => {
          const res = await this.#write({ type: 'registerClient', stampMs: 0 });
          if (res.type !== 'registerClient')
            throw new ApiError(status.INTERNAL, 'unexpected result for registerClient');
          return { clientId: res.clientId };
        });
      }),
      put: unary(async (req, call) => {
        checkKey(req.key);
        const audit = callAuditOf(call);
        const put: PutCommand = {
          type: 'put',
          ns: operatorNamespace,
          key: req.key,
          value: req.value,
          ...(req.prevRevision === undefined ? {} : { prevRevision: req.prevRevision }),
          stampMs: 0,
          ...sessionOf(req.session),
        };
        const answer = (res: CommandResult): { revision: number } => {
          // Only a put with prevRevision can fail its comparison.
          if (res.type === 'error' && res.code === 'E_CAS_FAILED') {
            throw new ApiError(status.FAILED_PRECONDITION, res.message);
          }
          return { revision: revisionOf(res) };
        };
        // A client's put goes through the proposer, which proposes it here when this node leads
        // and otherwise forwards it with the others of its event-loop turn in one call, retrying
        // refusals as leadership settles. A put another node forwarded is proposed here or
        // refused (#routed): never forwarded again.
        const proposer = this.#ctx.proposer;
        if (proposer !== undefined && call.metadata.get(forwardedKey).length === 0)
          return answer(await this.#write(put, audit, proposer));
        return this.#routed(call, 'put', req, audit, async () => answer(await this.#write(put, audit)));
      }),
      delete: unary(async (req, call) => {
        checkKey(req.key);
        const audit = callAuditOf(call);
        return this.#routed(call, 'delete', req, audit, async () => {
          const del: DeleteCommand = {
            type: 'delete',
            ns: operatorNamespace,
            key: req.key,
            stampMs: 0,
            ...sessionOf(req.session),
          };
          const res = await this.#write(del, audit);
          if (res.type === 'error' && res.code === 'E_NOT_FOUND')
            return { deleted: false, revision: this.#ctx.store.revision };
          return { deleted: true, revision: revisionOf(res) };
        });
      }),
      compareAndSet: unary(async (req, call) => {
        checkKey(req.key);
        const audit = callAuditOf(call);
        return this.#routed(call, 'compareAndSet', req, audit, async () => {
          const cas: PutCommand = {
            type: 'put',
            ns: operatorNamespace,
            key: req.key,
            value: req.value,
            prevRevision: req.expectedRevision,
            stampMs: 0,
            ...sessionOf(req.session),
          };
          const res = await this.#write(cas, audit);
          if (res.type === 'error' && res.code === 'E_CAS_FAILED') {
            return {
              succeeded: false,
              revision: this.#ctx.store.get(operatorNamespace, req.key)?.modRevision ?? 0,
            };
          }
          return { succeeded: true, revision: revisionOf(res) };
        });
      }),
      get: unary(async (req) => {
        checkKey(req.key);
        if (!req.local) await this.#ctx.node.linearizableRead();
        const kv = this.#ctx.store.get(operatorNamespace, req.key);
        if (kv === undefined) return { found: false, value: Buffer.alloc(0), revision: 0, createRevision: 0 };
        return {
          found: true,
          value: asBuffer(kv.value),
          revision: kv.modRevision,
          createRevision: kv.createRevision,
        };
      }),
      range: unary(async (req) => {
        if (!req.local) await this.#ctx.node.linearizableRead();
        const limit = req.limit === 0 ? Number.MAX_SAFE_INTEGER : req.limit;
        const kvs = this.#ctx.store.range(
          operatorNamespace,
          req.prefix,
          limit === Number.MAX_SAFE_INTEGER ? limit : limit + 1,
        );
        const more = kvs.length > limit;
        return { kvs: kvs.slice(0, limit).map(toProto), more };
      }),
    } satisfies Partial<KvServer>;
  }

  /** Status, membership and leadership. */
  #clusterHandlers() {
    return {
      status: unary((req) => this.#statusOf(req.member ?? '', req.digest === true)),
      memberList: unary(async (req) => {
        if (!req.local) await this.#ctx.node.linearizableRead();
        return { members: membersOf(await this.#filled(this.#withApiAddrs(this.#ctx.node.membership()))) };
      }),
      memberAdd: unary(async (req, call) => {
        if (!isMemberId(req.id)) {
          throw new ApiError(status.INVALID_ARGUMENT, `member id "${req.id}" must be ${memberIdForm}`);
        }
        checkAddr(req.raftAddr, 'raft address');
        if (req.apiAddr !== '') checkAddr(req.apiAddr, 'API address');
        const audit = callAuditOf(call);
        if (!(await this.#leaderHere())) return this.#forward(call, 'memberAdd', req, audit);
        const member: Member = { id: req.id, addr: req.raftAddr, apiAddr: req.apiAddr };
        const current = this.#ctx.node.membership();
        const existing = [...current.voters, ...current.learners].find((m) => m.id === req.id);
        if (existing !== undefined && existing.addr !== req.raftAddr) {
          throw new ApiError(
            status.ALREADY_EXISTS,
            `member ${req.id} already exists with raft address ${existing.addr}`,
          );
        }
        if (current.voters.some((m) => m.id === req.id)) {
          // Re-running an add that already completed (say after a client timeout) succeeds.
          return { members: membersOf(current) };
        }
        // The record goes with the change that completes the call: the promotion of a voter.
        const context = this.#confContext(audit);
        if (existing !== undefined) {
          if (!req.learner) await this.#ctx.node.promoteWhenCaughtUp(existing, undefined, context);
        } else if (req.learner) {
          await this.#ctx.node.proposeConfChange(
            context === undefined ? { type: 'addLearner', member } : { type: 'addLearner', member, context },
          );
        } else await this.#ctx.node.addMember(member, undefined, context);
        if (context !== undefined && audit !== undefined && !(existing !== undefined && req.learner))
          audit.inEntry = true;
        return { members: membersOf(this.#ctx.node.membership()) };
      }),
      memberRemove: unary(async (req, call) => {
        const audit = callAuditOf(call);
        if (!(await this.#leaderHere())) return this.#forward(call, 'memberRemove', req, audit);
        const context = this.#confContext(audit);
        await this.#ctx.node.removeMember(req.id, context);
        if (context !== undefined && audit !== undefined) audit.inEntry = true;
        return { members: membersOf(this.#ctx.node.membership()) };
      }),
      leaderTransfer: unary(async (req, call) => {
        if (!(await this.#leaderHere())) return this.#forward(call, 'leaderTransfer', req);
        await this.#ctx.node.transferLeadership(req.to);
        const s = this.#ctx.node.softState();
        return { leader: s.leader, term: s.term };
      }),
    } satisfies Partial<KvServer>;
  }

  close(): void {
    for (const c of this.#clients.values()) c.close();
    this.#clients.clear();
  }

  /**
   * The Status of `member`: this node's own when it is this node (or ""), else read from the
   * member over its raft address, where it answers for itself.
   */
  async #statusOf(member: string, digest: boolean): Promise<StatusResponse> {
    if (member === '' || member === this.#ctx.node.id) return this.status(digest);
    const m = this.#ctx.node.membership();
    const target = [...m.voters, ...m.learners].find((x) => x.id === member);
    if (target === undefined) {
      throw new ApiError(
        status.NOT_FOUND,
        `no member ${JSON.stringify(member)} in the cluster; \`slipway member list\` shows the members`,
      );
    }
    try {
      return await this.peerStatus(target, memberStatusTimeoutMs, digest);
    } catch (err) {
      throw new ApiError(
        status.UNAVAILABLE,
        `member ${member} at ${target.addr} did not answer its status: ${peerFailure(err)}`,
      );
    }
  }

  /**
   * This node's Status. With `digest`, also the SHA-256 of its state machine's snapshot encoding:
   * the other fields are read in the same turn of the event loop as the state is captured (so at
   * `applied`), and the state is encoded in slices afterwards, so a large state does not stall
   * the node while it is hashed. Asks at one applied index share one encoding (state-digest.ts).
   */
  async status(digest = false): Promise<StatusResponse> {
    if (!digest) return this.#statusNow();
    const { taken, digest: stateDigest } = await this.#digests.current(() => this.#statusNow());
    return { ...taken, stateDigest };
  }

  #statusNow(): StatusResponse {
    const st = this.#ctx.node.status();
    return {
      id: st.id,
      leader: st.leader,
      term: st.term,
      commit: st.commit,
      applied: st.appliedToStateMachine,
      role: roleToProto(st.role),
      members: membersOf(this.#withApiAddrs(st.membership)),
      build: buildVersion,
      stateVersion: stateVersionOfThisBuild,
      clusterVersion: this.#ctx.store.control.clusterVersion,
      stopped: this.#ctx.node.stoppedBy?.message ?? '',
      leaderTransferee: st.transferee,
      stateDigest: '',
      drained: this.#ctx.drain?.().drained ?? false,
      workerStreams: this.#ctx.drain?.().workerStreams ?? 0,
      bootServices: this.#ctx.bootServices?.() ?? [],
    };
  }

  /**
   * The membership with every API address this node knows without asking: its own, each
   * member's as the member said it in the replicated state (member-api-addrs.ts), else as `member
   * add --api-addr` recorded it.
   */
  #withApiAddrs(m: Membership): Membership {
    const own = this.#ctx.apiAddr ?? '';
    const said = new Map(this.#ctx.store.control.memberApiAddrs.map((x) => [x.id, x.apiAddr]));
    const fill = (list: readonly Member[]): Member[] =>
      list.map((x) => {
        const apiAddr = (x.id === this.#ctx.node.id && own !== '' ? own : said.get(x.id)) ?? x.apiAddr;
        return apiAddr === x.apiAddr ? x : { ...x, apiAddr };
      });
    return { voters: fill(m.voters), learners: fill(m.learners) };
  }

  /**
   * The membership with every API address that can be learned (member-addresses.ts): in a
   * cluster below state version 3 the state records none, and members are asked.
   */
  async #filled(m: Membership): Promise<Membership> {
    const [voters, learners] = await Promise.all([
      this.#addresses.filled(m.voters),
      this.#addresses.filled(m.learners),
    ]);
    return { voters, learners };
  }

  #notLeader(): RaftError {
    const leader = this.#ctx.node.softState().leader;
    return new RaftError('E_NOT_LEADER', `${this.#ctx.node.id} is not the leader`, leader);
  }

  #isLeader(): boolean {
    return this.#ctx.node.softState().role === 'leader';
  }

  /** True when this node leads; false when another does (forward); throws when none does. */
  async #leaderHere(): Promise<boolean> {
    if (this.#isLeader()) return true;
    const leader = await awaitLeader(this.#ctx.node);
    return leader.id === this.#ctx.node.id;
  }

  /**
   * Runs a write here when this node leads and forwards it to the leader otherwise. A refusal
   * that proves the write never entered a log (leadership moving, the old leader's port closed)
   * is retried as leadership settles (retryRefusals), so a graceful handover fails no client.
   * A forwarded call is answered as it is: the node that forwarded it does the retrying.
   */
  #routed<Req, Res>(
    call: ServerUnaryCall<Req, Res>,
    method: ForwardMethod,
    req: Req,
    audit: CallAudit | undefined,
    here: () => Promise<Res>,
  ): Promise<Res> {
    if (call.metadata.get(forwardedKey).length > 0) {
      // Forwarded here because this node led. If it no longer does, refuse at once rather than
      // wait for a new leader (a stopping node would cancel the wait): the forwarder retries.
      if (!this.#isLeader()) return Promise.reject(this.#notLeader());
      return here();
    }
    const once = async (): Promise<Res> =>
      (await this.#leaderHere()) ? here() : this.#forward(call, method, req, audit);
    return retryRefusals(this.#ctx.node, once);
  }

  /**
   * Stamps the leader's time into a command, proposes it and waits until it is applied: here, or
   * `via` the proposer (which the leader stamps). A write with `audit` carries its record in the
   * same entry once the cluster runs at version 3 (as this node has applied it: the version only
   * rises, and every voter applies it once it is committed).
   */
  async #write(command: Command, audit?: CallAudit, via?: Proposer): Promise<CommandResult> {
    const inEntry = audit !== undefined && this.#auditsInEntry();
    const audited =
      inEntry && (command.type === 'put' || command.type === 'delete')
        ? { ...command, audit: { ...audit.tag, kind: audit.kind } }
        : command;
    const result =
      via !== undefined
        ? await via.propose(audited)
        : decodeResult(await this.#ctx.node.propose(encodeCommand({ ...audited, stampMs: Date.now() })));
    if (inEntry) audit.inEntry = true;
    if (result.type === 'error' && result.code !== 'E_CAS_FAILED' && result.code !== 'E_NOT_FOUND') {
      throw new ApiError(
        result.code === 'E_BAD_COMMAND' ? status.INVALID_ARGUMENT : status.FAILED_PRECONDITION,
        result.message,
      );
    }
    return result;
  }

  /** Whether audit records go into their change's own entry: the cluster runs at version 3. */
  #auditsInEntry(): boolean {
    return this.#ctx.store.control.clusterVersion >= stateVersionAuditInEntry;
  }

  /** A membership change's audit record, as its configuration entry's context. */
  #confContext(audit: CallAudit | undefined): Uint8Array | undefined {
    if (audit === undefined || !this.#auditsInEntry()) return undefined;
    const command = auditRecord(audit.tag, audit.kind, audit.target);
    return encodeCommand({ type: 'control', stampMs: Date.now(), command });
  }

  /**
   * Forwards a call to the leader, with its audit record: the leader answers whether it put the
   * record into the change's entry (else the guard here records the call by itself).
   */
  async #forward<Req, Res>(
    call: ServerUnaryCall<Req, Res>,
    method: ForwardMethod,
    req: Req,
    audit?: CallAudit,
  ): Promise<Res> {
    // Never forward twice: two nodes that each think the other leads would loop.
    if (call.metadata.get(forwardedKey).length > 0) throw this.#notLeader();
    const leader = await awaitLeader(this.#ctx.node);
    const client = this.#clientFor(leader.addr);
    const md = new Metadata();
    md.set(forwardedKey, this.#ctx.node.id);
    if (audit !== undefined) forwardAudit(md, audit);
    const deadline = Date.now() + forwardDeadlineMs;
    return new Promise<Res>((resolve, reject) => {
      const fn = client[method].bind(client) as unknown as (
        r: Req,
        m: Metadata,
        o: { deadline: number },
        cb: (e: ServiceError | null, res: Res) => void,
      ) => ClientUnaryCall;
      const sent = fn(req, md, { deadline }, (err, res) => {
        if (err !== null) reject(err);
        else resolve(res);
      });
      // The answer's headers come before its message or status.
      if (audit !== undefined) {
        sent.on('metadata', (answer: Metadata) => {
          if (isAuditedAnswer(answer)) audit.inEntry = true;
        });
      }
    });
  }

  /** Another member's Status, read over its raft address (where mutual TLS names this node). */
  peerStatus(member: Member, timeoutMs: number, digest = false): Promise<StatusResponse> {
    return new Promise((resolve, reject) => {
      this.#clientFor(member.addr).status(
        digest ? { digest } : {},
        new Metadata(),
        { deadline: Date.now() + timeoutMs },
        (err, res) => {
          if (err !== null) reject(err);
          else resolve(res);
        },
      );
    });
  }

  #clientFor(addr: string): KvClient {
    let c = this.#clients.get(addr);
    if (c === undefined) {
      c = new KvClient(addr, peerChannelCredentials(this.#ctx.peerTls), peerCallOptions());
      this.#clients.set(addr, c);
    }
    return c;
  }
}

/**
 * How a Kv call that changes the cluster goes into the audit trail (0018). A store write or a
 * membership change (`inEntry`) carries its record in its own raft entry once the cluster runs
 * at state version 3; before that, and for a leadership transfer (which appends no entry), the
 * record is an audit.record proposed once the call's outcome is known.
 */
interface KvAudit<Req, Res> {
  readonly kind: string;
  readonly target: (req: Req) => string;
  /** A refusal the answer carries rather than an error (a compare that did not match). */
  readonly refusal?: (res: Res) => { code: string; message: string } | undefined;
  /** The change's entry can carry the record (a store write, a configuration change). */
  readonly inEntry?: boolean;
}

const kvAudits = {
  put: { kind: 'kv.put', target: (req: PutRequest) => req.key, inEntry: true },
  delete: {
    kind: 'kv.delete',
    target: (req: DeleteRequest) => req.key,
    inEntry: true,
    refusal: (res: DeleteResponse) =>
      res.deleted ? undefined : { code: 'E_NOT_FOUND', message: 'the key does not exist' },
  },
  compareAndSet: {
    kind: 'kv.compareAndSet',
    target: (req: CompareAndSetRequest) => req.key,
    inEntry: true,
    refusal: (res: CompareAndSetResponse) =>
      res.succeeded ? undefined : { code: 'E_CAS_FAILED', message: 'the revision did not match' },
  },
  memberAdd: {
    kind: 'member.add',
    target: (req: MemberAddRequest) => `${req.id} (${req.raftAddr})`,
    inEntry: true,
  },
  memberRemove: { kind: 'member.remove', target: (req: MemberRemoveRequest) => req.id, inEntry: true },
  leaderTransfer: { kind: 'leader.transfer', target: (req: LeaderTransferRequest) => req.to },
} as const;

/**
 * The handlers served on the raft address, where followers forward calls: a call forwarded with
 * its audit record gets it attached, and the answer says when the record went into the entry.
 */
function takingForwardedAudits(h: KvServer): KvServer {
  const taking: Record<string, Handler<unknown, unknown>> = {
    ...(h as unknown as Record<string, Handler<unknown, unknown>>),
  };
  for (const [name, audit] of Object.entries(kvAudits)) {
    const handler = taking[name];
    if (handler === undefined || !('inEntry' in audit)) continue;
    taking[name] = (call, callback) => {
      const record = forwardedAudit(call.metadata);
      if (record === undefined) {
        handler(call, callback);
        return;
      }
      attachCallAudit(call, record);
      handler(call, (err, res) => {
        if (record.inEntry) call.sendMetadata(auditedMetadata());
        callback(err, res);
      });
    };
  }
  return taking as unknown as KvServer;
}

/** Runs a Kv handler for an authorized caller and records the call with its outcome. */
function auditedHandler(
  auditor: CallAuditor,
  method: string,
  needOf: (request: unknown) => KvNeed,
  audit: KvAudit<unknown, unknown>,
  handler: Handler<unknown, unknown>,
): Handler<unknown, unknown> {
  return (call, callback) => {
    const audited = { metadata: call.metadata, peer: call.getPeer(), method, kind: audit.kind };
    const target = (): string => audit.target(call.request);
    const inEntry = audit.inEntry === true;
    // The handler's own error goes back to the caller as it is (its status and metadata).
    let failed: ServiceError | undefined;
    const need = needOf(call.request);
    auditor
      .run(
        audited,
        need.role,
        target,
        async (tag, proposing) => {
          proposing();
          const record: CallAudit = { tag, kind: audit.kind, target: safeTarget(target), inEntry: false };
          if (inEntry) attachCallAudit(call, record);
          const outcome = await new Promise<{ err: ServiceError | null; res: unknown }>((resolve) => {
            handler(call, (err, res) => {
              resolve({ err: err === null || err === undefined ? null : (err as ServiceError), res });
            });
          });
          if (outcome.err !== null) {
            failed = outcome.err;
            if (!record.inEntry) {
              await auditor.record(tag, audit.kind, record.target, {
                code: statusCodeName(outcome.err.code),
                message: outcome.err.details,
              });
            }
            throw new ApiError(outcome.err.code, outcome.err.details);
          }
          if (!record.inEntry)
            await auditor.record(tag, audit.kind, record.target, audit.refusal?.(outcome.res));
          return outcome.res;
        },
        need.why,
      )
      .then(
        (res) => callback(null, res),
        (err: unknown) => callback(failed ?? (toServiceError(err) as ServiceError), null),
      );
  };
}

function capitalized(name: string): string {
  return name.charAt(0).toUpperCase() + name.slice(1);
}

/**
 * The least role each Kv method needs when tokens are required: the one place that decides it,
 * by method, or by the request where its cost or reach differs (a rule then says why).
 */
const kvRoles = {
  registerClient: 'operator',
  put: 'operator',
  get: 'viewer',
  delete: 'operator',
  compareAndSet: 'operator',
  range: 'viewer',
  status: (req: StatusRequest): KvNeed =>
    req.digest === true
      ? {
          role: 'operator',
          why:
            'the state digest (`cluster status --digest`) encodes the whole replicated state on the node; ' +
            'ask without it, which a viewer may, or use an operator token',
        }
      : { role: 'viewer' },
  memberAdd: 'admin',
  memberRemove: 'admin',
  memberList: 'viewer',
  leaderTransfer: 'admin',
} as const satisfies Record<string, OperatorRole | ((req: never) => KvNeed)>;

/** The role a Kv call needs, and why when its request (not only its method) decides it. */
interface KvNeed {
  readonly role: OperatorRole;
  readonly why?: string;
}

/** What `kvRoles` asks of a call of `method` with `request`. */
function kvNeed(method: keyof typeof kvRoles, request: unknown): KvNeed {
  const rule: OperatorRole | ((req: never) => KvNeed) = kvRoles[method];
  if (typeof rule === 'string') return { role: rule };
  // The handlers' table pairs each method with its own request type.
  return rule(request as never);
}

type ForwardMethod =
  'registerClient' | 'put' | 'delete' | 'compareAndSet' | 'memberAdd' | 'memberRemove' | 'leaderTransfer';

/** A view, not a copy: proto fields want Buffer, the store keeps Uint8Array. */
function asBuffer(v: Uint8Array): Buffer {
  return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}

/** The exactly-once tag of a write, when the client opened a session (§6.3). */
function sessionOf(s: SessionProto | undefined): { session?: SessionTag } {
  if (s === undefined) return {};
  return { session: { clientId: s.clientId, seq: s.seq, ackedSeq: s.ackedSeq } };
}

function revisionOf(res: CommandResult): number {
  return res.type === 'put' || res.type === 'delete' || res.type === 'noop' ? res.revision : 0;
}

function checkKey(key: string): void {
  if (key === '') throw new ApiError(status.INVALID_ARGUMENT, 'the key must not be empty');
}

/**
 * Why a member did not answer, in words of its own: grpc-js's connection text would read, to a
 * client, as if the node it called could not be reached.
 */
function peerFailure(err: unknown): string {
  if (!isServiceError(err)) return (err as Error).message;
  if (err.code === status.DEADLINE_EXCEEDED) return 'no answer in time';
  return connectionFailure(err.details) ?? err.details;
}

function checkAddr(addr: string, what: string): void {
  if (!isHostPort(addr)) {
    throw new ApiError(status.INVALID_ARGUMENT, `${what} "${addr}" must be HOST:PORT`);
  }
}

function toProto(kv: KeyValue): KeyValueProto {
  return {
    key: kv.key,
    value: asBuffer(kv.value),
    revision: kv.modRevision,
    createRevision: kv.createRevision,
  };
}

function membersOf(m: Membership): MemberInfo[] {
  return [
    ...m.voters.map((v) => ({
      id: v.id,
      raftAddr: v.addr,
      apiAddr: v.apiAddr,
      suffrage: Suffrage.SUFFRAGE_VOTER,
    })),
    ...m.learners.map((v) => ({
      id: v.id,
      raftAddr: v.addr,
      apiAddr: v.apiAddr,
      suffrage: Suffrage.SUFFRAGE_LEARNER,
    })),
  ];
}

function roleToProto(r: RaftRole): Role {
  switch (r) {
    case 'follower':
      return Role.ROLE_FOLLOWER;
    case 'preCandidate':
      return Role.ROLE_PRE_CANDIDATE;
    case 'candidate':
      return Role.ROLE_CANDIDATE;
    case 'leader':
      return Role.ROLE_LEADER;
  }
}

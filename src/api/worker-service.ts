// The worker stream (proto/worker.proto): pushes each machine's next action to its agent and
// records the agent's results. Invariant 3 lives here and in the agent's journal:
//  - an attempt is pushed only once its attempt.start is committed: applied on this node (we
//    push what the replicated state shows RUNNING for this worker, never what we merely
//    proposed), or reported by the leader as started in the same committed entry as the result
//    this session forwarded (so a follower need not wait for its own apply to push it);
//  - a session pushes an attempt at most once, and never one the agent's hello says it runs or
//    has a result for; the agent refuses an attempt it already executed (its journal), so a
//    second node pushing the same attempt after a reconnect cannot run it twice;
//  - results are recorded through attempt.result, which the state machine applies once per
//    attempt (duplicates acknowledged, stale attempts refused); each is screened against the
//    applied state first, so a forged, stale or duplicate result costs no Raft write.
import { attemptKey, isTerminal } from '../model/records.js';
import { status } from '@grpc/grpc-js';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type {
  ActionResult,
  AttemptRef,
  ConnectRequest,
  ConnectResponse,
  Hello,
  WorkerServer,
} from '../gen/worker.js';
import type { ControlCommand, ControlResult, StartedAttempt } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import { headUtf8, utf8Length } from '../platform/utf8-text.js';
import { sleep, type Cancel, type Clock } from '../platform/clock.js';
import { InvalidCommandError } from '../state/store-command.js';
import { attemptMessageBytesMax, attemptOutputTailBytesMax, auditTextBytesMax } from '../model/limits.js';
import type { JsonValue, Workflow } from '../model/records.js';
import { actionPositions, nextAction, type ActionPosition } from '../workflow/rules.js';
import type { Authenticator } from './auth.js';
import { ApiError, toServiceError } from './errors.js';
import type { Proposer } from './proposer.js';
import { screenResult, type Screening } from './result-screen.js';

const helloTimeoutMs = 10_000;
const retryDelayMs = 250;

type Stream = ServerDuplexStream<ConnectRequest, ConnectResponse>;

interface Session {
  readonly serial: number;
  readonly workerId: string;
  /** Set when the worker authenticated with a per-boot credential: the one workflow it serves. */
  readonly credentialOf: string | undefined;
  /** An inventory boot's stream: it reports the machine's inventory and is given no action. */
  readonly inventoryBoot: boolean;
  /** SHA-256 of the bearer the worker presented: its inventory report carries it. */
  readonly credentialSha256: string;
  readonly call: Stream;
  hello: boolean;
  closed: boolean;
  /** Attempts this agent knows of on this session: pushed, or named in its hello. */
  readonly known: Set<string>;
  /** The attempt the agent is executing, as far as this session knows. */
  busy: AttemptRef | undefined;
  /** A pump is running; another one was asked for meanwhile. */
  pumping: boolean;
  repump: boolean;
  /** A later pump (a retry's backoff, an action not yet due). */
  timer: Cancel | undefined;
  /** A pump is due at the end of this event-loop turn. */
  immediate: boolean;
  /** Serialises result handling so acknowledgments go out in order. */
  results: Promise<void>;
  /** endAll chose it: it ends once its queued results are answered. */
  ending: boolean;
}

export interface WorkerServiceContext {
  readonly control: ControlState;
  /** What it proposes through (a node passes its Proposer; the simulation its own path). */
  readonly proposer: Pick<Proposer, 'proposeControl' | 'proposeControlApplied'>;
  /** Who a stream's worker is (a node passes its Authenticator). */
  readonly auth: Pick<Authenticator, 'worker'>;
  readonly logger: Logger;
  /** Makes the local state current (a linearizable read, no Raft write). */
  readonly catchUp: () => Promise<void>;
  /** Streams one worker may hold on this node at once (ServerConfig.workerSessionsMax). */
  readonly sessionsPerWorkerMax: number;
  /** Why this node takes no worker streams now (it is drained, node-drain.ts), or undefined. */
  readonly refusal?: () => string | undefined;
  /** Its timers and its reading of the time (src/platform/clock.ts). */
  readonly clock: Clock;
}

export interface WorkerServiceStats {
  connected: number;
}

export class WorkerService {
  readonly #ctx: WorkerServiceContext;
  readonly #sessions = new Map<string, Set<Session>>();
  #serial = 0;
  #closed = false;

  constructor(ctx: WorkerServiceContext) {
    this.#ctx = ctx;
  }

  /** Number of agents with a live stream on this node. */
  get connected(): number {
    let n = 0;
    for (const s of this.#sessions.values()) n += s.size;
    return n;
  }

  handlers(): WorkerServer {
    return {
      connect: (call: Stream) => {
        this.#accept(call).catch((err: unknown) => {
          this.#ctx.logger.debug({ err }, 'worker stream refused');
          call.emit('error', toServiceError(err));
        });
      },
    };
  }

  /** Called from apply (synchronously) whenever a workflow changes: wake its workers' sessions. */
  workflowChanged(wf: Workflow): void {
    for (const task of wf.spec.tasks) this.#wake(task.worker);
    if (isTerminal(wf.state)) this.#revoke(wf.id);
  }

  /**
   * A finished workflow's credentials are no longer valid: end the streams they opened, once
   * the results already queued on them are answered (the one that finished the workflow is
   * acknowledged on this stream; a reboot action waits for that acknowledgment).
   */
  #revoke(workflowId: string): void {
    for (const set of this.#sessions.values()) {
      for (const session of set) {
        if (session.credentialOf !== workflowId) continue;
        session.results = session.results.then(() => {
          if (session.closed) return;
          this.#endWith(
            session,
            new ApiError(
              status.UNAUTHENTICATED,
              `workflow ${workflowId} ended; its worker credential is revoked`,
            ),
          );
        });
      }
    }
  }

  hardwareChanged(id: string): void {
    this.#wake(id);
  }

  /** A snapshot replaced the whole state (no per-workflow change told of it): wake every session. */
  restored(): void {
    for (const workerId of this.#sessions.keys()) this.#wake(workerId);
  }

  close(): void {
    this.#closed = true;
    const stopping = toServiceError(
      new ApiError(status.UNAVAILABLE, 'this node is stopping; reconnect to another'),
    );
    for (const set of this.#sessions.values()) {
      for (const s of set) {
        this.#end(s);
        s.call.emit('error', stopping);
      }
    }
    this.#sessions.clear();
  }

  /**
   * Ends every open stream with UNAVAILABLE (a drain, node-drain.ts): each once the results
   * already queued on it are answered, so what the agent reported is acknowledged here and not
   * sent again. The agent reconnects elsewhere and keeps running its action (invariant 3).
   */
  endAll(reason: string): void {
    for (const [workerId, set] of this.#sessions) {
      for (const session of set) {
        if (session.ending || session.closed) continue;
        session.ending = true;
        session.results = session.results.then(() => {
          if (session.closed) return;
          this.#end(session);
          this.#forget(session);
          this.#ctx.logger.info({ workerId, session: session.serial }, 'worker stream ended by the drain');
          session.call.emit('error', toServiceError(new ApiError(status.UNAVAILABLE, reason)));
        });
      }
    }
  }

  async #accept(call: Stream): Promise<void> {
    if (this.#closed) throw new ApiError(status.UNAVAILABLE, 'this node is shutting down');
    // A drained node takes no stream: the agent moves on to its next server (or the balancer's).
    const refusal = this.#ctx.refusal?.();
    if (refusal !== undefined) throw new ApiError(status.UNAVAILABLE, refusal);
    const { workerId, credentialOf, inventoryBoot, credentialSha256 } = await this.#ctx.auth.worker(call);
    const session: Session = {
      serial: ++this.#serial,
      workerId,
      credentialOf,
      inventoryBoot: inventoryBoot === true,
      credentialSha256: credentialSha256 ?? '',
      call,
      hello: false,
      closed: false,
      known: new Set(),
      busy: undefined,
      pumping: false,
      repump: false,
      timer: undefined,
      immediate: false,
      results: Promise.resolve(),
      ending: false,
    };
    let set = this.#sessions.get(workerId);
    if (set === undefined) {
      set = new Set();
      this.#sessions.set(workerId, set);
    }
    const log = this.#ctx.logger.child({ workerId, session: session.serial });
    this.#makeRoom(set, log);
    set.add(session);
    log.info('worker connected');
    const cancelHelloTimer = this.#ctx.clock.after(helloTimeoutMs, () => {
      if (!session.hello) {
        call.emit(
          'error',
          toServiceError(new ApiError(status.INVALID_ARGUMENT, 'the first message must be hello')),
        );
      }
    });
    const drop = (): void => {
      cancelHelloTimer();
      if (session.closed) return;
      this.#end(session);
      const s = this.#sessions.get(workerId);
      s?.delete(session);
      if (s?.size === 0) this.#sessions.delete(workerId);
      log.info('worker disconnected');
    };
    call.on('data', (msg: ConnectRequest) => {
      const kind = msg.kind;
      if (kind === undefined) return;
      switch (kind.$case) {
        case 'hello':
          if (session.hello) return;
          cancelHelloTimer();
          this.#hello(session, kind.value);
          return;
        case 'result':
          this.#queueResult(session, kind.value);
          return;
        case 'heartbeat':
          return;
        case 'progress':
          log.debug({ attempt: kind.value.attempt, message: kind.value.message }, 'action progress');
          return;
        case 'inventory':
          session.results = session.results.then(() =>
            this.#inventory(session, kind.value.inventoryJson, log),
          );
          return;
      }
    });
    call.on('end', () => {
      drop();
      call.end();
    });
    call.on('cancelled', drop);
    call.on('error', drop);
    call.on('close', drop);
  }

  /**
   * At most sessionsPerWorkerMax streams per worker: the oldest go. Refusing the newest instead
   * would lock out an agent reconnecting after a network break behind its own half-dead
   * streams, which the node only notices when keepalive gives up on them. Only the worker's
   * own token opens its streams, so closing the oldest lets no one else take its place.
   */
  #makeRoom(set: Set<Session>, log: Logger): void {
    const max = this.#ctx.sessionsPerWorkerMax;
    for (const oldest of set) {
      if (set.size < max) return;
      set.delete(oldest);
      this.#end(oldest);
      const reason =
        `worker ${oldest.workerId} opened more than ${max} streams on this node (workerSessionsMax); ` +
        'its oldest stream is closed';
      log.warn(
        { closed: oldest.serial, sessionsMax: max },
        'too many streams for this worker; closing the oldest',
      );
      oldest.call.emit('error', toServiceError(new ApiError(status.RESOURCE_EXHAUSTED, reason)));
    }
  }

  #hello(session: Session, hello: Hello): void {
    if (hello.running !== undefined) {
      session.known.add(attemptKey(hello.running));
      session.busy = hello.running;
    }
    for (const r of hello.pendingResults) {
      if (r.attempt !== undefined) session.known.add(attemptKey(r.attempt));
      this.#queueResult(session, r);
    }
    session.results = session.results.then(() => {
      session.hello = true;
      this.#schedulePump(session, 0);
    });
  }

  #queueResult(session: Session, r: ActionResult): void {
    session.results = session.results.then(() => this.#result(session, r));
  }

  async #result(session: Session, r: ActionResult): Promise<void> {
    const screening = await this.#screen(session, r);
    const ref = r.attempt;
    if (screening === undefined) return;
    const log = this.#ctx.logger.child({
      workerId: session.workerId,
      workflowId: ref?.workflowId,
      actionIndex: ref?.actionIndex,
      attempt: ref?.attempt,
    });
    if (screening.verdict === 'refuse' || ref === undefined) {
      const reason = screening.verdict === 'refuse' ? screening.reason : 'the result names no attempt';
      this.#refuse(session, log, ref, reason);
      return;
    }
    if (screening.verdict === 'duplicate') {
      // Recorded in the applied (so committed) state: acknowledged without a Raft write.
      if (session.busy !== undefined && attemptKey(session.busy) === attemptKey(ref))
        session.busy = undefined;
      log.info({ duplicate: true }, 'result recorded');
      this.#send(session, {
        kind: { $case: 'ack', value: { attempt: ref, duplicate: true, committedAtMs: 0 } },
      });
      this.#schedulePump(session, 0);
      return;
    }
    if (screening.cut) {
      const sizes = { messageBytes: utf8Length(r.message), outputTailBytes: utf8Length(r.outputTail) };
      log.warn(
        { ...sizes, messageBytesMax: attemptMessageBytesMax, outputTailBytesMax: attemptOutputTailBytesMax },
        'result cut to the limits',
      );
    }
    for (;;) {
      if (session.closed) return;
      let res: ControlResult;
      let committedAtMs: number;
      try {
        ({ result: res, resultAtMs: committedAtMs } = await this.#ctx.proposer.proposeControlApplied({
          type: 'attempt.result',
          workflowId: ref.workflowId,
          actionIndex: ref.actionIndex,
          attempt: ref.attempt,
          workerId: session.workerId,
          success: r.success,
          exitStatus: r.exitStatus,
          message: screening.message,
          outputTail: screening.outputTail,
          startNext: true,
        }));
      } catch (err) {
        if (isInvalid(err)) {
          // A result no retry can make valid: answered, so the agent drops it and moves on.
          this.#refuse(session, log, ref, `the result is invalid: ${(err as Error).message}`);
          return;
        }
        // No leader or a lost forward: the result may or may not be in; sending it again is
        // safe because a duplicate is acknowledged and ignored.
        log.debug({ err }, 'recording a result failed; retrying');
        await sleep(this.#ctx.clock, retryDelayMs);
        continue;
      }
      if (session.busy !== undefined && attemptKey(session.busy) === attemptKey(ref))
        session.busy = undefined;
      if (res.type === 'error') {
        this.#refuse(session, log, ref, res.message);
      } else {
        log.info(
          { success: r.success, exitStatus: r.exitStatus, duplicate: res.type === 'duplicate' },
          'result recorded',
        );
        this.#send(session, {
          kind: {
            $case: 'ack',
            value: { attempt: ref, duplicate: res.type === 'duplicate', committedAtMs },
          },
        });
        if (res.type === 'attempt' && res.started !== undefined) this.#pushStarted(session, ref, res.started);
      }
      this.#schedulePump(session, 0);
      return;
    }
  }

  /**
   * Screens a result against the applied state (src/api/result-screen.ts); a refusal that may
   * only mean this node is behind is screened again after a linearizable read (no Raft write).
   * Undefined when the session closed meanwhile.
   */
  async #screen(session: Session, r: ActionResult): Promise<Screening | undefined> {
    const screen = (): Screening =>
      screenResult({
        workerId: session.workerId,
        credentialOf: session.credentialOf,
        result: r,
        workflow: r.attempt === undefined ? undefined : this.#ctx.control.workflow(r.attempt.workflowId),
      });
    const first = screen();
    if (first.verdict !== 'refuse' || !first.mayLag) return first;
    for (;;) {
      if (session.closed) return undefined;
      try {
        await this.#ctx.catchUp();
        return screen();
      } catch (err) {
        this.#ctx.logger.debug({ err, workerId: session.workerId }, 'catching up failed; retrying');
        await sleep(this.#ctx.clock, retryDelayMs);
      }
    }
  }

  #refuse(session: Session, log: Logger, ref: AttemptRef | undefined, reason: string): void {
    if (ref !== undefined && session.busy !== undefined && attemptKey(session.busy) === attemptKey(ref))
      session.busy = undefined;
    log.warn({ reason }, 'result refused');
    this.#send(session, { kind: { $case: 'refused', value: { attempt: ref, reason } } });
    this.#schedulePump(session, 0);
  }

  /**
   * Pushes the attempt that the committed entry of `reported`'s result started on this worker.
   * This node may not have applied that entry yet; the workflow's rendered spec never changes,
   * so the action is read from it, and the attempt number and deadline come from the result.
   */
  #pushStarted(session: Session, reported: AttemptRef, started: StartedAttempt): void {
    const wf = this.#ctx.control.workflow(reported.workflowId);
    const position = wf === undefined ? undefined : actionPositions(wf.spec)[started.actionIndex];
    if (session.busy !== undefined || position?.task.worker !== session.workerId) return;
    const ref = {
      workflowId: reported.workflowId,
      actionIndex: started.actionIndex,
      attempt: started.attempt,
    };
    this.#pushAction(session, ref, position, started.deadlineMs);
  }

  #wake(workerId: string): void {
    const set = this.#sessions.get(workerId);
    if (set === undefined) return;
    for (const s of set) this.#schedulePump(s, 0);
  }

  #schedulePump(session: Session, afterMs: number): void {
    if (session.closed || !session.hello) return;
    if (session.pumping) {
      session.repump = true;
      return;
    }
    if (session.immediate) return;
    if (afterMs > 0) {
      session.timer ??= this.#ctx.clock.after(afterMs, () => {
        session.timer = undefined;
        this.#pump(session);
      });
      return;
    }
    // defer (setImmediate), not a 0 ms timer: a timer waits for the next loop iteration and at least
    // 1 ms, and every dispatch (an ack, then the next action) goes through here.
    session.timer?.();
    session.timer = undefined;
    session.immediate = true;
    this.#ctx.clock.defer(() => {
      session.immediate = false;
      this.#pump(session);
    });
  }

  #pump(session: Session): void {
    if (session.closed || session.pumping) return;
    session.pumping = true;
    session.repump = false;
    this.#pumpOnce(session).then(
      (next) => {
        session.pumping = false;
        if (session.repump) this.#schedulePump(session, 0);
        else if (next !== undefined) this.#schedulePump(session, next);
      },
      (err: unknown) => {
        this.#ctx.logger.debug({ err, workerId: session.workerId }, 'dispatch failed; retrying');
        session.repump = false;
        session.pumping = false;
        this.#schedulePump(session, retryDelayMs);
      },
    );
  }

  /**
   * One dispatch step for a session. Returns a delay after which to look again (a retry's
   * backoff or a refused start), or undefined when only a state change can bring new work.
   */
  async #pumpOnce(session: Session): Promise<number | undefined> {
    // An inventory boot runs no workflow: its credential is for the report alone.
    if (session.inventoryBoot) return undefined;
    const control = this.#ctx.control;
    const workerId = session.workerId;
    // The attempt the agent runs was cancelled, timed out or deleted: tell it to stop.
    if (session.busy !== undefined) {
      const busy = session.busy;
      const wf = control.workflow(busy.workflowId);
      const st = wf?.actions[busy.actionIndex];
      // This node has not applied the attempt's start yet (pushed from the leader's result).
      if (st !== undefined && st.attempt < busy.attempt) return undefined;
      if (st?.state !== 'RUNNING' || st.attempt !== busy.attempt) {
        const reason =
          wf === undefined ? 'the workflow was deleted' : `the attempt is ${st?.state ?? 'gone'}`;
        this.#send(session, { kind: { $case: 'cancel', value: { attempt: busy, reason } } });
        session.busy = undefined;
      } else return undefined;
    }
    // A finished workflow has no running action and nothing to start (transitions stop both).
    const workflows = control
      .workflowsForWorker(workerId)
      .filter((wf) => !isTerminal(wf.state) && (session.credentialOf ?? wf.id) === wf.id);
    // First, hand over what the state already shows RUNNING on this worker.
    for (const wf of workflows) {
      const positions = actionPositions(wf.spec);
      for (let i = 0; i < wf.actions.length; i++) {
        const st = wf.actions[i];
        const pos = positions[i];
        if (st?.state !== 'RUNNING' || pos === undefined || pos.task.worker !== workerId) continue;
        const ref: AttemptRef = { workflowId: wf.id, actionIndex: i, attempt: st.attempt };
        if (!session.known.has(attemptKey(ref))) {
          this.#pushAction(session, ref, pos, st.deadlineMs);
          return undefined;
        }
        // Known but not answered: the agent is on it (its result will wake us).
        return undefined;
      }
    }
    if (control.hardware(workerId)?.netboot.allowWorkflow === false) return undefined;
    // Then start the next due action on this worker; the change that start applies pushes it.
    let wait: number | undefined;
    for (const wf of workflows) {
      const next = nextAction(wf);
      if (next === null || next.workerId !== workerId) continue;
      const due = (next.notBeforeMs ?? 0) - this.#ctx.clock.now();
      if (due > 0) {
        wait = wait === undefined ? due : Math.min(wait, due);
        continue;
      }
      const res = await this.#apply({
        type: 'attempt.start',
        workflowId: wf.id,
        actionIndex: next.index,
        attempt: next.attempt,
        workerId,
      });
      if (res.type === 'error') {
        // Another node's session started it, or our clock is ahead of the leader's.
        return res.code === 'E_NOT_DUE' ? retryDelayMs : undefined;
      }
      return undefined;
    }
    return wait;
  }

  #pushAction(session: Session, ref: AttemptRef, pos: ActionPosition, deadlineMs: number | undefined): void {
    session.known.add(attemptKey(ref));
    session.busy = ref;
    this.#send(session, {
      kind: {
        $case: 'action',
        value: {
          attempt: ref,
          task: pos.task.name,
          name: pos.action.name,
          image: pos.action.image ?? '',
          command: [...pos.action.command],
          args: [...pos.action.args],
          env: { ...pos.action.env },
          volumes: [...pos.action.volumes],
          timeoutS: pos.action.timeoutS,
          deadlineMs: deadlineMs ?? 0,
          builtin: pos.action.builtin ?? '',
        },
      },
    });
    // Debug: the result's info line and the action.started event already tell this story.
    this.#ctx.logger.debug({ workerId: session.workerId, ...ref, action: pos.action.name }, 'action pushed');
  }

  /**
   * An inventory report (docs/decisions/0029-discovery.md): proposed with the digest of the
   * stream's credential, which apply checks against the machine's inventory-boot credential; a
   * refusal is recorded in the audit trail under the worker's name, and answered.
   */
  async #inventory(session: Session, text: string, log: Logger): Promise<void> {
    let inventory: JsonValue;
    try {
      inventory = JSON.parse(text) as JsonValue;
    } catch (err) {
      this.#answerInventory(session, false, '', `the inventory is not JSON: ${(err as Error).message}`);
      return;
    }
    let res: ControlResult;
    try {
      res = await this.#apply({
        type: 'hardware.inventory',
        id: session.workerId,
        credentialSha256: session.credentialSha256,
        inventory,
        audit: {
          user: headUtf8(`worker ${session.workerId}`, auditTextBytesMax),
          role: 'viewer',
          address: headUtf8(session.call.getPeer(), auditTextBytesMax),
          method: 'Worker/Connect',
        },
      });
    } catch (err) {
      if (isInvalid(err)) {
        log.warn({ err }, 'inventory report refused');
        this.#answerInventory(session, false, '', (err as Error).message);
        return;
      }
      // Not recorded for now (no leader, a forward cut, the node stopping): the stream ends
      // UNAVAILABLE, which the agent takes as "send it again" to the next node; an answer would be
      // final to it. A report applied after all is answered "recorded" when it comes again.
      log.warn({ err }, 'inventory report not recorded; the agent sends it again');
      this.#endWith(
        session,
        new ApiError(
          status.UNAVAILABLE,
          `inventory report not recorded: ${(err as Error).message}; send it again`,
        ),
      );
      return;
    }
    if (res.type === 'hardware') {
      log.info({ hardwareId: res.hardware.id, state: res.hardware.lifecycle?.state }, 'inventory recorded');
      this.#answerInventory(session, true, res.hardware.id, `recorded as hardware ${res.hardware.id}`);
      return;
    }
    const message = res.type === 'error' ? res.message : `unexpected result ${res.type}`;
    log.warn({ message }, 'inventory report refused');
    this.#answerInventory(session, false, '', message);
  }

  #answerInventory(session: Session, accepted: boolean, hardwareId: string, message: string): void {
    this.#send(session, { kind: { $case: 'inventoryAck', value: { accepted, hardwareId, message } } });
  }

  #apply(command: ControlCommand): Promise<ControlResult> {
    return this.#ctx.proposer.proposeControl(command);
  }

  #send(session: Session, msg: ConnectResponse): void {
    if (session.closed) return;
    session.call.write(msg);
  }

  /** Drops an ended session from the sessions of its worker (its stream's own handlers do not, once it is closed). */
  #forget(session: Session): void {
    const set = this.#sessions.get(session.workerId);
    set?.delete(session);
    if (set?.size === 0) this.#sessions.delete(session.workerId);
  }

  /** Ends the stream with `error`, and forgets it (a drain waits for `connected` to reach 0). */
  #endWith(session: Session, error: ApiError): void {
    this.#end(session);
    this.#forget(session);
    session.call.emit('error', toServiceError(error));
  }

  #end(session: Session): void {
    if (session.closed) return;
    session.closed = true;
    session.timer?.();
    session.timer = undefined;
  }
}

/** A refusal no retry can change: the command breaks the state's rules. */
function isInvalid(err: unknown): boolean {
  return (
    err instanceof InvalidCommandError || (err instanceof ApiError && err.code === status.INVALID_ARGUMENT)
  );
}

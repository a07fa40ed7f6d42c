// Who may call what. Operators present `authorization: Bearer TOKEN`; the cluster keeps only
// the token's SHA-256 with a role. Workers present their machine's token and `x-worker-id`.
// With auth off (a plaintext development node, see src/node/auth-mode.ts) every caller is an admin.
import { createHash, timingSafeEqual } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import type { Metadata } from '@grpc/grpc-js';
import type { Role } from '../model/records.js';
import type { ControlState } from '../state/control/control-state.js';
import { workflowOfCredential } from '../state/control/credentials.js';
import { AuthFailureLimiter, sourceAddress } from './auth-failure-limiter.js';
import { ApiError } from './errors.js';

const roleRank: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

export interface Caller {
  readonly name: string;
  readonly role: Role;
}

export function sha256Hex(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export function bearerToken(md: Metadata): string | undefined {
  const v = md.get('authorization')[0];
  if (typeof v !== 'string') return undefined;
  const m = /^Bearer\s+(\S+)$/i.exec(v.trim());
  return m?.[1];
}

/** An authenticated worker stream. */
export interface WorkerCaller {
  readonly workerId: string;
  /**
   * The workflow whose per-boot credential the worker presented: the stream serves only that
   * workflow, and ends when it does (the credential is revoked then).
   */
  readonly credentialOf?: string;
  /**
   * The machine's inventory-boot credential (docs/decisions/0029-discovery.md): the stream
   * serves no workflow; it reports the machine's inventory.
   */
  readonly inventoryBoot?: boolean;
  /** SHA-256 of the bearer the worker presented, when it presented one: what its reports carry. */
  readonly credentialSha256?: string;
}

const noOperatorsMessage =
  'this node knows no operator token: it was started without the bootstrap admin token and the ' +
  'cluster holds no named tokens, so every call is refused. Restart it with admin.token in ' +
  '--tls-dir or with --admin-token-file FILE';

export interface AuthOptions {
  readonly enabled: boolean;
  /** SHA-256 of the bootstrap admin token (from `slipway bootstrap`), accepted without state. */
  readonly bootstrapAdminSha256?: string | undefined;
  /** Failed authentications allowed per source address (default: 10 per 60 s). */
  readonly failures?: AuthFailureLimiter | undefined;
}

/** What authentication reads from a call: its metadata, and its peer for the source address. */
export interface AuthCall {
  readonly metadata: Metadata;
  getPeer(): string;
}

export class Authenticator {
  readonly #control: ControlState;
  readonly #opts: AuthOptions;
  /** Makes the local state current (a linearizable read), for tokens created a moment ago. */
  readonly #catchUp: () => Promise<void>;
  readonly #failures: AuthFailureLimiter;

  constructor(control: ControlState, opts: AuthOptions, catchUp: () => Promise<void>) {
    this.#control = control;
    this.#opts = opts;
    this.#catchUp = catchUp;
    this.#failures = opts.failures ?? new AuthFailureLimiter({ failuresMax: 10, windowMs: 60_000 });
  }

  get enabled(): boolean {
    return this.#opts.enabled;
  }

  /**
   * The operator behind the call, if their role is at least `need`; throws otherwise, with `why`
   * in the refusal when the request (not only the method) decides the role.
   */
  async operator(call: AuthCall, need: Role, why?: string): Promise<Caller> {
    const caller = await this.identify(call);
    const refusal = roleRefusal(caller, need, why);
    if (refusal !== undefined) throw refusal;
    return caller;
  }

  /** The operator behind the call, whatever their role; UNAUTHENTICATED without a valid token. */
  async identify(call: AuthCall): Promise<Caller> {
    if (!this.#opts.enabled) return { name: 'local', role: 'admin' };
    return this.#limited(call, () => this.#operator(call.metadata));
  }

  async #operator(md: Metadata): Promise<Caller> {
    const token = bearerToken(md);
    if (token === undefined) {
      throw new ApiError(
        status.UNAUTHENTICATED,
        this.#noOperators()
          ? noOperatorsMessage
          : 'an operator token is required: pass --token-file or SLIPWAY_TOKEN',
      );
    }
    const sha = sha256Hex(token);
    let caller = this.#lookup(sha);
    if (caller === undefined) {
      await this.#catchUp();
      caller = this.#lookup(sha);
    }
    if (caller === undefined) {
      throw new ApiError(
        status.UNAUTHENTICATED,
        this.#noOperators() ? noOperatorsMessage : 'the operator token is not valid',
      );
    }
    return caller;
  }

  /**
   * The worker behind a stream: its machine's per-boot credential (claimed by the boot OS, see
   * src/state/control/credentials.ts) or the machine's worker token (`slipway hardware token`,
   * for agents an operator starts). Throws UNAUTHENTICATED otherwise.
   */
  async worker(call: AuthCall): Promise<WorkerCaller> {
    if (!this.#opts.enabled) return this.#worker(call.metadata);
    return this.#limited(call, () => this.#worker(call.metadata));
  }

  async #worker(md: Metadata): Promise<WorkerCaller> {
    const id = md.get('x-worker-id')[0];
    if (typeof id !== 'string' || id === '') {
      throw new ApiError(status.INVALID_ARGUMENT, 'x-worker-id metadata (the hardware id) is required');
    }
    const token = bearerToken(md);
    if (token !== undefined) {
      // A credential issued a moment ago may not be applied here yet: look again after a
      // linearizable read, unless auth is off (then the stream is accepted anyway).
      const found =
        this.#credentialOf(id, token) ??
        (this.#opts.enabled ? await this.#catchUp().then(() => this.#credentialOf(id, token)) : undefined);
      if (found !== undefined) return found;
    }
    if (!this.#opts.enabled) {
      return token === undefined ? { workerId: id } : { workerId: id, credentialSha256: sha256Hex(token) };
    }
    if (token === undefined)
      throw new ApiError(status.UNAUTHENTICATED, `worker ${id}: a worker credential is required`);
    throw new ApiError(
      status.UNAUTHENTICATED,
      `worker ${id}: the credential is not valid (expired, revoked when its workflow ended, or not this machine's)`,
    );
  }

  /**
   * Runs an authentication unless the call's source address has used up its failures; an
   * UNAUTHENTICATED answer counts as one. A wrong role (PERMISSION_DENIED) does not: the
   * token was good.
   */
  async #limited<T>(call: AuthCall, authenticate: () => Promise<T>): Promise<T> {
    const address = sourceAddress(call.getPeer());
    const waitMs = this.#failures.blockedForMs(address);
    if (waitMs > 0) {
      const { failuresMax, windowMs } = this.#failures.limits;
      throw new ApiError(
        status.RESOURCE_EXHAUSTED,
        `too many failed authentications from ${address} (more than ${failuresMax} in ${windowMs / 1000} s: ` +
          `authFailuresMax, authFailureWindowS); try again in ${Math.ceil(waitMs / 1000)} s`,
      );
    }
    try {
      return await authenticate();
    } catch (err) {
      if (err instanceof ApiError && err.code === status.UNAUTHENTICATED) this.#failures.failed(address);
      throw err;
    }
  }

  #credentialOf(id: string, token: string): WorkerCaller | undefined {
    const hw = this.#control.hardware(id);
    if (hw === undefined) return undefined;
    const digest = sha256Hex(token);
    if (constantTimeEqual(hw.workerTokenSha256, digest)) return { workerId: id, credentialSha256: digest };
    const held = hw.inspection;
    if (held !== undefined && held.expiresMs > Date.now() && constantTimeEqual(held.sha256, digest)) {
      return { workerId: id, inventoryBoot: true, credentialSha256: digest };
    }
    // The credential a report used up: its stream may only send that report again, answered as
    // recorded (apply checks it is the same inventory), so an agent whose answer was lost goes on.
    if (held === undefined && hw.reportedWith !== undefined && constantTimeEqual(hw.reportedWith, digest)) {
      return { workerId: id, inventoryBoot: true, credentialSha256: digest };
    }
    const wf = workflowOfCredential(this.#control.activeWorkflowsOf(id), id, digest, Date.now());
    return wf === undefined ? undefined : { workerId: id, credentialOf: wf.id, credentialSha256: digest };
  }

  /** No token could ever pass here: no bootstrap token, and none in the (applied) state. */
  #noOperators(): boolean {
    return this.#opts.bootstrapAdminSha256 === undefined && this.#control.tokens().length === 0;
  }

  #lookup(sha: string): Caller | undefined {
    if (
      this.#opts.bootstrapAdminSha256 !== undefined &&
      constantTimeEqual(sha, this.#opts.bootstrapAdminSha256)
    ) {
      return { name: 'bootstrap-admin', role: 'admin' };
    }
    const t = this.#control.token(sha);
    return t === undefined ? undefined : { name: t.name, role: t.role };
  }
}

/** PERMISSION_DENIED when the caller's role is below `need`; `why` says what made it `need`. */
export function roleRefusal(caller: Caller, need: Role, why?: string): ApiError | undefined {
  if (roleRank[caller.role] >= roleRank[need]) return undefined;
  return new ApiError(
    status.PERMISSION_DENIED,
    `token "${caller.name}" has role ${caller.role}; this needs ${need} or higher` +
      (why === undefined ? '' : `: ${why}`),
  );
}

function constantTimeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

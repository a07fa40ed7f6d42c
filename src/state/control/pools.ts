// Pools in the replicated state (docs/decisions/0035-pools.md, 0036): pool.create, pool.scale,
// pool.taint, pool.delete from the operator; pool.allocate, pool.reserve and pool.release from
// the leader's pool keeper (src/node/pool-keeper.ts). A pool.allocate is a workflow.allocate for
// the pool's template and selector, refused when the pool's untainted slots are all filled as
// this entry finds them, so two allocations never fill one slot whatever the leader does, and
// refused when the machine would break the spread. The chosen machine joins the pool's members in
// the same entry; members that no longer fill a slot (failed, released) leave then. A release is
// refused unless its rule holds now: surplus beyond the size, a tainted member within the
// maxUnavailable budget, the pool being deleted, or a failed member awaiting the pool's release
// template (it may have left the members already).
import type { ControlCommand, ControlErrorCode } from './commands.js';
import type { Hardware, Template } from '../../model/records.js';
import {
  awaitsFailedRelease,
  fillsSlot,
  heldWhy,
  policyOf,
  slotsFilled,
  isReleasable,
  isSpareOf,
  spreadAllowed,
  taintBudgetAllows,
  takes,
  type Pool,
  type PoolFailure,
  type RaceOf,
} from '../../fleet/pool.js';
import type { Selector } from '../../fleet/selector-terms.js';
import type { Candidate } from '../../fleet/allocation.js';
import { labelKeyProblem } from '../../model/labels.js';
import { record } from './immutable.js';
import { parseSelector, SelectorError } from '../../fleet/selector.js';
import { formatSelector } from '../../fleet/selector-terms.js';
import { alternateAttemptsMax, poolSizeMax, poolsMax } from '../../model/limits.js';

type Command<T extends ControlCommand['type']> = Extract<ControlCommand, { readonly type: T }>;

export type PoolRefusal = { readonly code: ControlErrorCode; readonly message: string };

const poolNamePattern = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** What is wrong with a pool's name, or undefined: a DNS label (lower case, digits, '-'). */
export function poolNameProblem(name: string): string | undefined {
  return poolNamePattern.test(name)
    ? undefined
    : `pool name ${JSON.stringify(name.slice(0, 80))} must be 1-63 lower-case letters, digits or '-', starting and ending with a letter or digit`;
}

/** What is wrong with a size or a spares count, or undefined. */
export function poolSizeProblem(what: string, n: number): string | undefined {
  return Number.isSafeInteger(n) && n >= 0 && n <= poolSizeMax
    ? undefined
    : `${what} must be a whole number from 0 to ${poolSizeMax}, got ${n}`;
}

/** What the pool rules read of the rest of the state. */
export interface PoolLookups {
  readonly hardware: (id: string) => Hardware | undefined;
  readonly fleet: () => Iterable<Hardware>;
  /** The race a workflow runs for: two lanes fill one slot. */
  readonly raceOf: RaceOf;
}

/** What is wrong with a pool's attempts, or undefined. */
export function poolAttemptsProblem(n: number): string | undefined {
  return Number.isSafeInteger(n) && n >= 1 && n <= alternateAttemptsMax
    ? undefined
    : `attempts must be a whole number from 1 to ${alternateAttemptsMax}, got ${n}`;
}

/** What a pool.delete does: the pool goes now, or stays deleting while its members are released. */
export type PoolDeletion =
  { readonly kind: 'removed'; readonly pool: Pool } | { readonly kind: 'deleting'; readonly pool: Pool };

/** What a pool.release does to its machine, once allowed. */
export type PoolReleaseOutcome = {
  readonly pool: Pool;
  /** The pool went with its last member (deleting). */
  readonly removed: boolean;
  /** workflow: its release template runs; at-once: releasing → ready now; leave: stays as it is. */
  readonly how: 'workflow' | 'at-once' | 'leave';
};

function selectorOf(pool: Pool): Selector {
  const selector = parseSelector(pool.selector);
  if (selector instanceof SelectorError)
    throw new Error(`a stored selector does not parse: ${selector.message}`);
  return selector;
}

const notFound = (name: string): PoolRefusal => ({
  code: 'E_NOT_FOUND',
  message: `pool "${name}" does not exist`,
});

const beingDeleted = (pool: Pool): PoolRefusal => ({
  code: 'E_CONFLICT',
  message: `pool "${pool.name}" is being deleted: its members run its release template "${pool.releaseTemplate ?? ''}"`,
});

/** The pools in the state, by name, and the rules of their commands. */
export class Pools {
  #pools = new Map<string, Pool>();

  get(name: string): Pool | undefined {
    return this.#pools.get(name);
  }

  /** Sorted by name. */
  all(): Pool[] {
    return [...this.#pools.keys()].sort().map((k) => this.#pools.get(k) as Pool);
  }

  restore(pools: readonly Pool[]): void {
    this.#pools = new Map(pools.map((p) => [p.name, p]));
  }

  /** The pool a machine belongs to, if any. */
  ownerOf(hardwareId: string): Pool | undefined {
    for (const p of this.#pools.values()) if (p.members.includes(hardwareId)) return p;
    return undefined;
  }

  create(
    command: Command<'pool.create'>,
    template: (name: string) => Template | undefined,
    artifact: (name: string) => unknown,
  ): Pool | PoolRefusal {
    const problem =
      poolNameProblem(command.name) ??
      poolSizeProblem('size', command.size) ??
      poolSizeProblem('spares', command.spares) ??
      (command.maxUnavailable === undefined
        ? undefined
        : poolSizeProblem('maxUnavailable', command.maxUnavailable)) ??
      (command.spreadBy === undefined ? undefined : labelKeyProblem(command.spreadBy)) ??
      (command.attempts === undefined ? undefined : poolAttemptsProblem(command.attempts));
    if (problem !== undefined) return { code: 'E_INVALID', message: problem };
    const selector = parseSelector(command.selector);
    if (selector instanceof SelectorError)
      return { code: 'E_INVALID', message: `selector: ${selector.message}` };
    for (const name of [command.template, command.releaseTemplate]) {
      if (name !== undefined && template(name) === undefined)
        return { code: 'E_NOT_FOUND', message: `template "${name}" does not exist` };
    }
    if (command.image !== undefined && artifact(command.image) === undefined) {
      return {
        code: 'E_NOT_FOUND',
        message: `artifact "${command.image}" is not registered: add it first (\`slipway artifact add FILE --name ${command.image}\`)`,
      };
    }
    if (this.#pools.has(command.name)) return { code: 'E_EXISTS', message: `pool "${command.name}" exists` };
    if (this.#pools.size >= poolsMax)
      return {
        code: 'E_CONFLICT',
        message: `${this.#pools.size} pools exist, the most (${poolsMax}): delete one first`,
      };
    const pool: Pool = {
      name: command.name,
      selector: formatSelector(selector),
      template: command.template,
      size: command.size,
      spares: command.spares,
      members: [],
      version: 1,
      spreadBy: command.spreadBy,
      releaseTemplate: command.releaseTemplate,
      image: command.image,
      maxUnavailable: command.maxUnavailable,
      onFailure: command.onFailure,
      attempts: command.attempts,
    };
    return this.#set(pool);
  }

  /**
   * A member's installation ended (docs/decisions/0040): a failure is counted, with its machine
   * and reason; a success clears the count. The pool after, or undefined when nothing changed.
   */
  installationEnded(
    name: string,
    ended: { readonly failed: false } | ({ readonly failed: true } & PoolFailure),
  ): Pool | undefined {
    const pool = this.#pools.get(name);
    if (pool === undefined) return undefined;
    if (!ended.failed) {
      if (pool.failedInARow === undefined) return undefined;
      return this.#set({
        ...pool,
        failedInARow: undefined,
        lastFailure: undefined,
        version: pool.version + 1,
      });
    }
    const lastFailure: PoolFailure = { hardwareId: ended.hardwareId, reason: ended.reason };
    const failedInARow = (pool.failedInARow ?? 0) + 1;
    return this.#set({ ...pool, failedInARow, lastFailure, version: pool.version + 1 });
  }

  /** An operator's `pool resume`: the count of failures in a row starts afresh. */
  resume(name: string): Pool | PoolRefusal {
    const pool = this.#pools.get(name);
    if (pool === undefined) return notFound(name);
    if (pool.deleting === true) return beingDeleted(pool);
    if (pool.failedInARow === undefined) return pool;
    return this.#set({ ...pool, failedInARow: undefined, lastFailure: undefined, version: pool.version + 1 });
  }

  /**
   * A member that is ready again (a race's loser, an operator's release) leaves the members; a
   * pool being deleted goes with its last one, as pool.release does.
   */
  left(hardwareId: string): void {
    for (const pool of [...this.#pools.values()]) {
      if (!pool.members.includes(hardwareId)) continue;
      const members = pool.members.filter((m) => m !== hardwareId);
      if (pool.deleting === true && members.length === 0) {
        this.#pools.delete(pool.name);
        continue;
      }
      const tainted = (pool.tainted ?? []).filter((m) => m !== hardwareId);
      this.#set({
        ...pool,
        members,
        tainted: tainted.length === 0 ? undefined : tainted,
        version: pool.version + 1,
      });
    }
  }

  scale(command: Command<'pool.scale'>): Pool | PoolRefusal {
    const pool = this.#pools.get(command.name);
    if (pool === undefined) return notFound(command.name);
    if (pool.deleting === true) return beingDeleted(pool);
    const problem = poolSizeProblem('size', command.size);
    if (problem !== undefined) return { code: 'E_INVALID', message: problem };
    return this.#set({ ...pool, size: command.size, version: pool.version + 1 });
  }

  /** Every member provisioning or deployed is to be replaced. */
  taint(name: string, hardware: (id: string) => Hardware | undefined): Pool | PoolRefusal {
    const pool = this.#pools.get(name);
    if (pool === undefined) return notFound(name);
    if (pool.deleting === true) return beingDeleted(pool);
    const tainted = pool.members.filter((id) => fillsSlot(hardware(id)?.lifecycle?.state));
    return this.#set({
      ...pool,
      tainted: tainted.length === 0 ? undefined : tainted,
      version: pool.version + 1,
    });
  }

  /**
   * Refused while a member is provisioning. Without a release template (or members to release)
   * the pool goes now, its deployed members staying deployed; with one it stays, deleting, until
   * the leader has released every member through it. Its spares are freed either way (the caller).
   */
  delete(name: string, hardware: (id: string) => Hardware | undefined): PoolDeletion | PoolRefusal {
    const pool = this.#pools.get(name);
    if (pool === undefined) return notFound(name);
    if (pool.deleting === true) return beingDeleted(pool);
    const busy = pool.members.filter((id) => hardware(id)?.lifecycle?.state === 'provisioning');
    if (busy.length > 0) {
      return {
        code: 'E_CONFLICT',
        message: `pool "${name}" has machines provisioning (${busy.join(', ')}): delete it once they are deployed or failed`,
      };
    }
    const leaving = pool.members.filter((id) => isReleasable(hardware(id)?.lifecycle?.state));
    if (pool.releaseTemplate === undefined || leaving.length === 0) {
      this.#pools.delete(name);
      return { kind: 'removed', pool };
    }
    const deleting: Pool = {
      ...pool,
      members: leaving,
      tainted: undefined,
      deleting: true,
      version: pool.version + 1,
    };
    return { kind: 'deleting', pool: this.#set(deleting) };
  }

  /**
   * Whether pool.allocate may fill a slot now: the pool exists and is not being deleted, its
   * template is the command's, and fewer untainted members fill slots than its size. Refused as
   * stale (E_CONFLICT) otherwise. With the spread values a new member may take.
   */
  allocation(
    command: Command<'pool.allocate'>,
    lookups: PoolLookups,
  ): { readonly pool: Pool; readonly spread?: ReadonlySet<string> } | PoolRefusal {
    const pool = this.#pools.get(command.pool);
    if (pool === undefined) return notFound(command.pool);
    if (pool.deleting === true) return beingDeleted(pool);
    const held = heldWhy(pool);
    if (held !== undefined) return { code: 'E_CONFLICT', message: `pool "${pool.name}" is ${held}` };
    const filled = this.#untaintedFilled(pool, lookups);
    if (filled >= pool.size) {
      return {
        code: 'E_CONFLICT',
        message: `pool "${pool.name}" has ${filled} machines provisioning or deployed, its size ${pool.size}: nothing to allocate`,
      };
    }
    const spread = spreadAllowed(pool, selectorOf(pool), lookups.fleet());
    return spread === undefined ? { pool } : { pool, spread };
  }

  /** Untainted members filling slots, a race's two lanes counted once. */
  #untaintedFilled(pool: Pool, lookups: PoolLookups): number {
    const tainted = new Set(pool.tainted ?? []);
    const members: Hardware[] = [];
    for (const id of pool.members) {
      const hw = lookups.hardware(id);
      if (hw !== undefined && !tainted.has(id)) members.push(hw);
    }
    return slotsFilled(members, lookups.raceOf);
  }

  /**
   * After pool.allocate gave `hardwareIds` (one, or a race's two) a workflow: they join; members
   * no longer filling a slot leave, but for failed ones the retry policy installs again.
   */
  joined(pool: Pool, hardwareIds: readonly string[], hardware: (id: string) => Hardware | undefined): Pool {
    const retry = policyOf(pool) === 'retry';
    const kept = pool.members.filter((id) => {
      const state = hardware(id)?.lifecycle?.state;
      return !hardwareIds.includes(id) && (fillsSlot(state) || (retry && state === 'failed'));
    });
    const tainted = (pool.tainted ?? []).filter((id) => kept.includes(id));
    return this.#set({
      ...pool,
      members: [...kept, ...hardwareIds].sort(),
      tainted: tainted.length === 0 ? undefined : tainted,
      version: pool.version + 1,
    });
  }

  /** Whether the machine may be kept as the pool's spare now: ready, matching, free, spares short. */
  reserve(command: Command<'pool.reserve'>, lookups: PoolLookups): Pool | PoolRefusal {
    const pool = this.#pools.get(command.pool);
    if (pool === undefined) return notFound(command.pool);
    if (pool.deleting === true) return beingDeleted(pool);
    const hw = lookups.hardware(command.hardwareId);
    if (hw === undefined)
      return { code: 'E_NOT_FOUND', message: `hardware "${command.hardwareId}" does not exist` };
    const selector = selectorOf(pool);
    if (isSpareOf(pool, hw) || !takes(pool, selector, hw)) {
      return {
        code: 'E_CONFLICT',
        message: `hardware "${hw.id}" is not a ready, free machine matching pool "${pool.name}" (${pool.selector})`,
      };
    }
    let spares = 0;
    for (const m of lookups.fleet()) if (isSpareOf(pool, m)) spares += 1;
    if (spares >= pool.spares) {
      return {
        code: 'E_CONFLICT',
        message: `pool "${pool.name}" keeps ${spares} spares, its spares ${pool.spares}: nothing to reserve`,
      };
    }
    return pool;
  }

  /** Whether the member may be released now, for the reason given; the pool after, and how. */
  release(command: Command<'pool.release'>, lookups: PoolLookups): PoolReleaseOutcome | PoolRefusal {
    const pool = this.#pools.get(command.pool);
    if (pool === undefined) return notFound(command.pool);
    const id = command.hardwareId;
    const hw = lookups.hardware(id);
    // A failed member may have left the members already (its slot refilled): its mark names the pool.
    const failed = command.why === 'failed' && hw !== undefined && awaitsFailedRelease(pool, hw);
    if (hw === undefined || (!pool.members.includes(id) && !failed))
      return { code: 'E_CONFLICT', message: `hardware "${id}" is no member of pool "${pool.name}"` };
    if ((pool.releaseTemplate === undefined) !== (command.release === undefined)) {
      return {
        code: 'E_INVALID',
        message:
          pool.releaseTemplate === undefined
            ? `pool "${pool.name}" has no release template: a release carries no workflow`
            : `pool "${pool.name}" releases through template "${pool.releaseTemplate}": the release needs its workflow`,
      };
    }
    const refusal = this.#releaseRefusal(pool, hw, command.why, lookups);
    if (refusal !== undefined) return { code: 'E_CONFLICT', message: refusal };
    const members = pool.members.filter((m) => m !== id);
    const tainted = (pool.tainted ?? []).filter((m) => m !== id);
    const after: Pool = {
      ...pool,
      members,
      tainted: tainted.length === 0 ? undefined : tainted,
      version: pool.version + 1,
    };
    const removed = pool.deleting === true && members.length === 0;
    if (removed) this.#pools.delete(pool.name);
    const stored = removed ? after : this.#set(after);
    const how = command.release !== undefined ? 'workflow' : command.why === 'taint' ? 'at-once' : 'leave';
    return { pool: stored, removed, how };
  }

  #releaseRefusal(
    pool: Pool,
    hw: Hardware,
    why: Command<'pool.release'>['why'],
    lookups: PoolLookups,
  ): string | undefined {
    const state = hw.lifecycle?.state;
    const tainted = new Set(pool.tainted ?? []);
    const states = pool.members.map((id) => lookups.hardware(id)?.lifecycle?.state);
    switch (why) {
      case 'delete':
        if (pool.deleting !== true) return `pool "${pool.name}" is not being deleted`;
        return isReleasable(state)
          ? undefined
          : `hardware "${hw.id}" is ${state ?? 'untracked'}: it cannot be released`;
      case 'surplus': {
        if (pool.deleting === true || tainted.has(hw.id) || state !== 'deployed')
          return `hardware "${hw.id}" is no untainted deployed member of pool "${pool.name}"`;
        const untainted = this.#untaintedFilled(pool, lookups);
        return untainted > pool.size
          ? undefined
          : `pool "${pool.name}" has ${untainted} untainted machines provisioning or deployed, its size ${pool.size}: none is surplus`;
      }
      case 'failed':
        return awaitsFailedRelease(pool, hw)
          ? undefined
          : `hardware "${hw.id}" is no failed member of pool "${pool.name}" awaiting its release template`;
      case 'taint': {
        if (pool.deleting === true || !tainted.has(hw.id) || state !== 'deployed')
          return `hardware "${hw.id}" is no tainted deployed member of pool "${pool.name}"`;
        const deployed = states.filter((s) => s === 'deployed').length;
        return taintBudgetAllows(pool, deployed)
          ? undefined
          : `pool "${pool.name}" has ${deployed} machines deployed: releasing one would leave fewer than its size ${pool.size} less maxUnavailable ${pool.maxUnavailable ?? 1}`;
      }
    }
  }

  /** Stores the pool, its absent fields left out (one form in the state and the snapshot). */
  #set(pool: Pool): Pool {
    const stored = record<Pool>(pool);
    this.#pools.set(stored.name, stored);
    return stored;
  }
}

export function isRefusal(x: object): x is PoolRefusal {
  return 'code' in x;
}

/** Candidates keep only machines of the allowed spread values (all, without --spread-by). */
export function withinSpread<C extends { readonly hardwareId: string }>(
  pool: Pool,
  spread: ReadonlySet<string> | undefined,
  candidates: readonly C[],
  hardware: (id: string) => Candidate | undefined,
): C[] {
  if (spread === undefined || pool.spreadBy === undefined) return [...candidates];
  const key = pool.spreadBy;
  return candidates.filter((c) => {
    const hw = hardware(c.hardwareId);
    return hw !== undefined && spread.has(hw.labels?.[key] ?? '');
  });
}

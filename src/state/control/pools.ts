// Pools in the replicated state (docs/decisions/0035-pools.md): pool.create, pool.scale,
// pool.delete from the operator, pool.allocate from the leader's pool keeper
// (src/node/pool-keeper.ts). A pool.allocate is a workflow.allocate for the pool's template and
// selector, refused when the pool's slots are all filled as this entry finds them, so two
// allocations never fill one slot whatever the leader does. The chosen machine joins the pool's
// members in the same entry; members that no longer fill a slot (failed, released) leave then.
import type { ControlCommand, ControlErrorCode } from './commands.js';
import type { Hardware, Template } from '../../model/records.js';
import { fillsSlot, type Pool } from '../../fleet/pool.js';
import { parseSelector, SelectorError } from '../../fleet/selector.js';
import { formatSelector } from '../../fleet/selector-terms.js';
import { poolSizeMax, poolsMax } from '../../model/limits.js';

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
  ): Pool | PoolRefusal {
    const problem =
      poolNameProblem(command.name) ??
      poolSizeProblem('size', command.size) ??
      poolSizeProblem('spares', command.spares);
    if (problem !== undefined) return { code: 'E_INVALID', message: problem };
    const selector = parseSelector(command.selector);
    if (selector instanceof SelectorError)
      return { code: 'E_INVALID', message: `selector: ${selector.message}` };
    if (template(command.template) === undefined)
      return { code: 'E_NOT_FOUND', message: `template "${command.template}" does not exist` };
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
    };
    this.#pools.set(pool.name, pool);
    return pool;
  }

  scale(command: Command<'pool.scale'>): Pool | PoolRefusal {
    const pool = this.#pools.get(command.name);
    if (pool === undefined) return { code: 'E_NOT_FOUND', message: `pool "${command.name}" does not exist` };
    const problem = poolSizeProblem('size', command.size);
    if (problem !== undefined) return { code: 'E_INVALID', message: problem };
    const scaled = { ...pool, size: command.size, version: pool.version + 1 };
    this.#pools.set(pool.name, scaled);
    return scaled;
  }

  /** Refused while a member is provisioning; deployed members stay deployed, no longer the pool's. */
  delete(name: string, hardware: (id: string) => Hardware | undefined): PoolRefusal | undefined {
    const pool = this.#pools.get(name);
    if (pool === undefined) return { code: 'E_NOT_FOUND', message: `pool "${name}" does not exist` };
    const busy = pool.members.filter((id) => hardware(id)?.lifecycle?.state === 'provisioning');
    if (busy.length > 0) {
      return {
        code: 'E_CONFLICT',
        message: `pool "${name}" has machines provisioning (${busy.join(', ')}): delete it once they are deployed or failed`,
      };
    }
    this.#pools.delete(name);
    return undefined;
  }

  /**
   * Whether pool.allocate may fill a slot now: the pool exists, its template is the command's,
   * and fewer members fill slots than its size. Refused as stale (E_CONFLICT) otherwise.
   */
  allocation(
    command: Command<'pool.allocate'>,
    hardware: (id: string) => Hardware | undefined,
  ): Pool | PoolRefusal {
    const pool = this.#pools.get(command.pool);
    if (pool === undefined) return { code: 'E_NOT_FOUND', message: `pool "${command.pool}" does not exist` };
    const filled = pool.members.filter((id) => fillsSlot(hardware(id)?.lifecycle?.state)).length;
    if (filled >= pool.size) {
      return {
        code: 'E_CONFLICT',
        message: `pool "${pool.name}" has ${filled} machines provisioning or deployed, its size ${pool.size}: nothing to allocate`,
      };
    }
    return pool;
  }

  /** After pool.allocate gave `hardwareId` a workflow: it joins; members no longer filling a slot leave. */
  joined(pool: Pool, hardwareId: string, hardware: (id: string) => Hardware | undefined): Pool {
    const kept = pool.members.filter((id) => id !== hardwareId && fillsSlot(hardware(id)?.lifecycle?.state));
    const after = { ...pool, members: [...kept, hardwareId].sort(), version: pool.version + 1 };
    this.#pools.set(pool.name, after);
    return after;
  }
}

export function isRefusal(x: Pool | PoolRefusal): x is PoolRefusal {
  return 'code' in x;
}

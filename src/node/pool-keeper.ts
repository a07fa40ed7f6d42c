// The pools' leader duty (docs/decisions/0035-pools.md): while this node leads, each pool with
// fewer members provisioning or deployed than its size is offered the next ready machines
// matching its selector, each with the pool's template rendered, in a pool.allocate; the
// replicated state picks among them at apply and refuses once the pool's slots are filled. One
// proposal per pool at a time, awaited, so a scan never asks twice for one slot; and since the
// state holds the pool and its members, a new leader carries on from there.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import { poolStanding, type Pool } from '../fleet/pool.js';
import { parseSelector, SelectorError } from '../fleet/selector.js';
import { offerMachines, renderForMachine } from '../api/allocation-offer.js';

export const poolScanMs = 500;

export interface PoolKeeperOptions {
  readonly control: ControlState;
  readonly isLeader: () => boolean;
  readonly propose: (command: ControlCommand) => Promise<ControlResult>;
  readonly logger: Logger;
}

export class PoolKeeper {
  readonly #o: PoolKeeperOptions;
  #timer: NodeJS.Timeout | undefined;
  #scanning = false;
  /** What was last said of each pool that cannot be filled, to say it once, by pool name. */
  readonly #said = new Map<string, string>();
  /** Machines this node's proposals gave to pools. */
  allocated = 0;

  constructor(options: PoolKeeperOptions) {
    this.#o = options;
  }

  start(): void {
    this.#timer = setInterval(() => {
      void this.scan();
    }, poolScanMs);
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Proposes one allocation for every pool short of machines (leader only). */
  async scan(): Promise<void> {
    if (!this.#o.isLeader() || this.#scanning) return;
    this.#scanning = true;
    try {
      for (const pool of this.#o.control.pools()) await this.#keep(pool);
    } finally {
      this.#scanning = false;
    }
  }

  #sayOnce(pool: Pool, what: string, err?: unknown): void {
    if (this.#said.get(pool.name) === what) return;
    this.#said.set(pool.name, what);
    this.#o.logger.warn({ pool: pool.name, err }, what);
  }

  async #keep(pool: Pool): Promise<void> {
    const { control, logger } = this.#o;
    const selector = parseSelector(pool.selector);
    const template = control.template(pool.template);
    if (selector instanceof SelectorError || template === undefined) {
      this.#sayOnce(pool, `pool ${pool.name}: its template "${pool.template}" is gone`);
      return;
    }
    const fleet = control.hardwareList();
    const standing = poolStanding(pool, selector, fleet);
    if (standing.why !== undefined) this.#sayOnce(pool, `pool ${pool.name}: ${standing.why}`);
    if (standing.offer.length === 0) return;
    const workflowId = `${pool.name}-${randomUUID()}`;
    let candidates;
    try {
      candidates = await offerMachines({
        fleet: fleet.filter((hw) => !pool.members.includes(hw.id)),
        selector,
        template,
        workflowId,
        hardwareMap: {},
        render: (t, hw, id, map) => Promise.resolve(renderForMachine(control, t, hw, id, map)),
      });
    } catch (err) {
      this.#sayOnce(pool, `pool ${pool.name}: its template does not render for the machines`, err);
      return;
    }
    if (candidates.length === 0) return;
    try {
      const res = await this.#o.propose({
        type: 'pool.allocate',
        pool: pool.name,
        id: workflowId,
        templateVersion: template.version,
        hardwareMap: {},
        candidates,
      });
      if (res.type === 'pool') {
        this.allocated++;
        this.#said.delete(pool.name);
        logger.info({ pool: pool.name, workflowId, members: res.pool.members }, 'pool: allocated a machine');
      } else if (res.type === 'error') {
        // Overtaken (E_VERSION), filled meanwhile or gone (E_CONFLICT, E_NOT_FOUND): the next scan reads again.
        logger.debug({ pool: pool.name, code: res.code, message: res.message }, 'pool: allocation refused');
      }
    } catch (err) {
      logger.debug({ err, pool: pool.name }, 'pool: proposing failed; offered again');
    }
  }
}

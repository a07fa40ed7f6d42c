// The pools' leader duty (docs/decisions/0035-pools.md, 0036): while this node leads, each pool is
// brought one step nearer what it asks, every scan, by commands in the log: a member to release
// (surplus after a scale down, a tainted member within the pool's budget, every member of a pool
// being deleted) with its release template rendered when it has one; the next ready machines for
// a missing slot, its spares and the values of its spread label first, each with the pool's
// template rendered for it, in a pool.allocate; a spare to reserve once the slots are filled. The
// decisions are src/fleet/pool.ts's; the replicated state holds the same rules at apply and
// refuses a stale one. One proposal at a time, awaited, so a scan never asks twice for one slot;
// and since the state holds the pool, its members and its spares, a new leader carries on.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AllocationCandidate, ControlCommand, ControlResult } from '../state/control/commands.js';
import type { ControlState } from '../state/control/control-state.js';
import type { Hardware, RenderedTemplate, Template } from '../model/records.js';
import { policyOf, poolStanding, type Pool, type PoolStanding } from '../fleet/pool.js';
import { parseSelector, SelectorError } from '../fleet/selector.js';
import type { Selector } from '../fleet/selector-terms.js';
import { offerMachines, renderForMachine } from '../api/allocation-offer.js';
import type { PoolVariables } from '../workflow/template-variables.js';
import type { Clock, Cancel } from '../platform/clock.js';

export const poolScanMs = 500;

export interface PoolKeeperOptions {
  readonly control: ControlState;
  readonly isLeader: () => boolean;
  readonly propose: (command: ControlCommand) => Promise<ControlResult>;
  readonly logger: Logger;
  /** Where machines fetch artifacts (http://VIP[:port]): `{{ pool.image.url }}` starts with it. */
  readonly artifactBaseUrl?: string;
  /** Its timers (src/platform/clock.ts: real ones in a node, virtual ones in the simulation). */
  readonly clock: Clock;
}

/** The template variables of a pool's workflows: its name, and its image when it names one. */
export function poolVariables(control: ControlState, pool: Pool, artifactBaseUrl: string): PoolVariables {
  const artifact = pool.image === undefined ? undefined : control.artifact(pool.image);
  if (artifact === undefined) return { name: pool.name };
  const path = `/artifacts/${encodeURIComponent(artifact.name)}`;
  return {
    name: pool.name,
    image: { name: artifact.name, sha256: artifact.sha256, path, url: `${artifactBaseUrl}${path}` },
  };
}

export class PoolKeeper {
  readonly #o: PoolKeeperOptions;
  #stopTimer: Cancel | undefined;
  #scanning = false;
  /** What was last said of each pool that cannot be filled, to say it once, by pool name. */
  readonly #said = new Map<string, string>();
  /** Machines this node's proposals gave to pools. */
  allocated = 0;
  /** Members this node's proposals released from pools. */
  released = 0;

  constructor(options: PoolKeeperOptions) {
    this.#o = options;
  }

  start(): void {
    this.#stopTimer = this.#o.clock.every(poolScanMs, () => {
      void this.scan();
    });
  }

  stop(): void {
    this.#stopTimer?.();
    this.#stopTimer = undefined;
  }

  /** Brings every pool one step nearer its size (leader only). */
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
    const { control } = this.#o;
    const selector = parseSelector(pool.selector);
    const template = control.template(pool.template);
    if (selector instanceof SelectorError || template === undefined) {
      this.#sayOnce(pool, `pool ${pool.name}: its template "${pool.template}" is gone`);
      return;
    }
    const fleet = control.hardwareList();
    const standing = poolStanding(pool, selector, fleet, (id) => control.workflow(id)?.race?.request);
    if (standing.why !== undefined) this.#sayOnce(pool, `pool ${pool.name}: ${standing.why}`);
    if (standing.release !== undefined) await this.#release(pool, standing.release);
    if (standing.retry !== undefined) await this.#retry(pool, template, standing.retry);
    else if (standing.offer.length > 0) await this.#allocate(pool, selector, template, fleet, standing);
    else if (standing.reserve !== undefined) {
      await this.#proposed(
        pool,
        { type: 'pool.reserve', pool: pool.name, hardwareId: standing.reserve },
        'kept a spare',
      );
    }
  }

  #render(pool: Pool, template: Template, hw: Hardware, workflowId: string): RenderedTemplate {
    const variables = poolVariables(this.#o.control, pool, this.#o.artifactBaseUrl ?? '');
    return renderForMachine(this.#o.control, template, hw, workflowId, {}, variables);
  }

  async #allocate(
    pool: Pool,
    selector: Selector,
    template: Template,
    fleet: readonly Hardware[],
    standing: PoolStanding,
  ): Promise<void> {
    const workflowId = `${pool.name}-${randomUUID()}`;
    const byId = new Map(fleet.map((hw) => [hw.id, hw]));
    const offered = standing.offer.map((id) => byId.get(id)).filter((hw) => hw !== undefined);
    let candidates;
    try {
      candidates = await offerMachines({
        // In the standing's order (its spares first, the spread kept); the state checks them again.
        fleet: offered,
        selector,
        forPool: pool.name,
        template,
        workflowId,
        hardwareMap: {},
        render: (t, hw, id) => Promise.resolve(this.#render(pool, t, hw, id)),
      });
    } catch (err) {
      this.#sayOnce(pool, `pool ${pool.name}: its template does not render for the machines`, err);
      return;
    }
    if (candidates.length === 0) return;
    // The race policy starts a slot on two machines; with one to offer, on that one (0040).
    const race = policyOf(pool) === 'race' && candidates.length >= 2;
    if (policyOf(pool) === 'race' && !race)
      this.#sayOnce(pool, `pool ${pool.name}: one machine can take a slot, so it runs no race for it`);
    const command = allocation(pool, template, workflowId, candidates, race ? { race: true } : {});
    if (await this.#proposed(pool, command, race ? 'started a race for a slot' : 'allocated a machine'))
      this.allocated += race ? 2 : 1;
  }

  /** The retry policy: the failed member's installation again, on its own machine. */
  async #retry(pool: Pool, template: Template, hardwareId: string): Promise<void> {
    const hw = this.#o.control.hardware(hardwareId);
    if (hw === undefined) return;
    const workflowId = `${pool.name}-${randomUUID()}`;
    let spec: RenderedTemplate;
    try {
      spec = this.#render(pool, template, hw, workflowId);
    } catch (err) {
      this.#sayOnce(pool, `pool ${pool.name}: its template does not render for ${hw.id}`, err);
      return;
    }
    const command = allocation(pool, template, workflowId, [{ hardwareId: hw.id, spec }], { retry: true });
    if (await this.#proposed(pool, command, `installing ${hw.id} again (retry)`)) this.allocated++;
  }

  async #release(pool: Pool, release: NonNullable<PoolStanding['release']>): Promise<void> {
    const { control } = this.#o;
    const hw = control.hardware(release.hardwareId);
    if (hw === undefined) return;
    let workflow: { id: string; templateVersion: number; spec: RenderedTemplate } | undefined;
    if (pool.releaseTemplate !== undefined) {
      const template = control.template(pool.releaseTemplate);
      if (template === undefined) {
        this.#sayOnce(pool, `pool ${pool.name}: its release template "${pool.releaseTemplate}" is gone`);
        return;
      }
      const id = `${pool.name}-release-${randomUUID()}`;
      try {
        workflow = { id, templateVersion: template.version, spec: this.#render(pool, template, hw, id) };
      } catch (err) {
        this.#sayOnce(pool, `pool ${pool.name}: its release template does not render for ${hw.id}`, err);
        return;
      }
    }
    const command: ControlCommand = {
      type: 'pool.release',
      pool: pool.name,
      hardwareId: hw.id,
      why: release.why,
      ...(workflow === undefined ? {} : { release: workflow }),
    };
    if (await this.#proposed(pool, command, `released a member (${release.why})`)) this.released++;
  }

  /** Proposes one decision; true when it was applied. */
  async #proposed(pool: Pool, command: ControlCommand, what: string): Promise<boolean> {
    const { logger } = this.#o;
    try {
      const res = await this.#o.propose(command);
      if (res.type === 'error') {
        // Overtaken (E_VERSION), done meanwhile or gone (E_CONFLICT, E_NOT_FOUND): the next scan reads again.
        logger.debug(
          { pool: pool.name, code: res.code, message: res.message },
          `pool: ${command.type} refused`,
        );
        return false;
      }
      this.#said.delete(pool.name);
      logger.info({ pool: pool.name, command: command.type }, `pool: ${what}`);
      return true;
    } catch (err) {
      logger.debug(
        { err, pool: pool.name },
        `pool: proposing ${command.type} failed; the next scan reads again`,
      );
      return false;
    }
  }
}

/** A pool.allocate of the pool's template for the machines offered, a race's or a retry's. */
function allocation(
  pool: Pool,
  template: Template,
  workflowId: string,
  candidates: readonly AllocationCandidate[],
  policy: { readonly race?: true; readonly retry?: true },
): ControlCommand {
  return {
    type: 'pool.allocate',
    pool: pool.name,
    id: workflowId,
    templateVersion: template.version,
    hardwareMap: {},
    candidates,
    ...policy,
  };
}

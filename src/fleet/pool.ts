// Pools (issue 23 item 4, docs/decisions/0035-pools.md): N machines matching a selector, each
// deployed with one template, kept at N by the leader. A pool record names its members, the
// machines allocated to it; what each member is now is its lifecycle state. This module is the
// pure part: how a pool stands against the fleet, and which machines the leader offers next.
// Pure: pool and machines in, answers out.
import type { MachineState } from '../model/machine-lifecycle.js';
import { noMachineMessage, tallyOf, verdictOf, type Candidate } from './allocation.js';
import type { Selector } from './selector-terms.js';

/** A pool as the replicated state keeps it. */
export interface Pool {
  readonly name: string;
  /** Canonical text (formatSelector). */
  readonly selector: string;
  readonly template: string;
  /** How many members the leader keeps provisioning or deployed. */
  readonly size: number;
  /** Spare machines wanted besides (counted and shown; not acted on yet). */
  readonly spares: number;
  /** Machines allocated to the pool, sorted by id. */
  readonly members: readonly string[];
  readonly version: number;
}

/** The states in which a member fills one of the pool's slots. */
export function fillsSlot(state: MachineState | undefined): boolean {
  return state === 'provisioning' || state === 'deployed';
}

/** How a pool stands: its members by state, what it lacks, and the machines to offer next. */
export interface PoolStanding {
  readonly deployed: number;
  readonly provisioning: number;
  readonly failed: number;
  /** Ready, unowned machines matching the selector that are no member. */
  readonly ready: number;
  /** Slots to fill now: size minus members provisioning or deployed, at least 0. */
  readonly missing: number;
  /** Slots that no ready machine can fill now: missing beyond ready. */
  readonly lacking: number;
  /** Why the pool lacks machines (the allocation refusal's words), when it does. */
  readonly why?: string;
  /** Ready matching machines, in the order given (the fleet's, by id), at most `missing`. */
  readonly offer: readonly string[];
}

/**
 * A pool against the fleet: members counted by state; the machines that would fill its missing
 * slots, never more than missing, so one decision never takes two machines for one slot.
 */
export function poolStanding(pool: Pool, selector: Selector, fleet: readonly Candidate[]): PoolStanding {
  const members = new Set(pool.members);
  let deployed = 0;
  let provisioning = 0;
  let failed = 0;
  const ready: string[] = [];
  for (const m of fleet) {
    if (members.has(m.id)) {
      const state = m.lifecycle?.state;
      if (state === 'deployed') deployed += 1;
      else if (state === 'provisioning') provisioning += 1;
      else if (state === 'failed') failed += 1;
    } else if (verdictOf(selector, m).kind === 'selected') {
      ready.push(m.id);
    }
  }
  const missing = Math.max(0, pool.size - deployed - provisioning);
  const lacking = Math.max(0, missing - ready.length);
  const standing = { deployed, provisioning, failed, ready: ready.length, missing, lacking };
  const offer = ready.slice(0, missing);
  if (lacking === 0) return { ...standing, offer };
  const others = fleet.filter((m) => !members.has(m.id));
  const tally = tallyOf(selector, others);
  const short = `${lacking} of ${pool.size} ${lacking === 1 ? 'slot' : 'slots'} cannot be filled`;
  return { ...standing, offer, why: `${short}: ${noMachineMessage(pool.selector, tally)}` };
}

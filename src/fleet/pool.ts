// Pools (issue 23 item 4, docs/decisions/0035-pools.md and 0036): N machines matching a selector,
// each deployed with one template, kept at N by the leader, spread across a label's values, with
// K spares kept ready for the pool, and replaced in turn when tainted. A pool record names its
// members, the machines allocated to it; what each member is now is its lifecycle state. This
// module is the pure part: how a pool stands against the fleet, and what the leader does next
// (one allocation, one spare reserved, one member released). Apply (src/state/control/pools.ts)
// holds the same rules, so a stale decision cannot break them.
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
  /** How many untainted members the leader keeps provisioning or deployed. */
  readonly size: number;
  /** Ready matching machines kept reserved for the pool besides. */
  readonly spares: number;
  /** Machines allocated to the pool, sorted by id. */
  readonly members: readonly string[];
  readonly version: number;
  /** The label whose values the members are spread across. */
  readonly spreadBy?: string | undefined;
  /** The template a member leaving the pool runs before it is ready again. */
  readonly releaseTemplate?: string | undefined;
  /** The registered artifact the pool's workflows write (`{{ pool.image.url }}`). */
  readonly image?: string | undefined;
  /** A taint's budget: members that may be unavailable at once; absent means 1. */
  readonly maxUnavailable?: number | undefined;
  /** Members to replace (`pool taint`), sorted by id; absent when none. */
  readonly tainted?: readonly string[] | undefined;
  /** Deleted while members still run its release template; gone once they have. */
  readonly deleting?: true | undefined;
  /**
   * Where a slot goes after a failed installation (docs/decisions/0040): absent, alternate (another
   * machine); retry, the same machine again; race, two machines at once, the first to deploy kept.
   */
  readonly onFailure?: PoolRetryPolicy | undefined;
  /** Attempts per slot before the pool holds (holdAt); absent: poolAttemptsDefault. */
  readonly attempts?: number | undefined;
  /** Installations failed since a member last deployed or the pool was resumed; absent: none. */
  readonly failedInARow?: number | undefined;
  /** The last of those failures: the machine, and why it failed. */
  readonly lastFailure?: PoolFailure | undefined;
}

/** The failure policies a pool may name besides the default, alternate. */
export type PoolRetryPolicy = 'retry' | 'race';
export type PoolFailurePolicy = 'alternate' | PoolRetryPolicy;
export const poolFailurePolicies: readonly PoolFailurePolicy[] = ['alternate', 'retry', 'race'];

export interface PoolFailure {
  readonly hardwareId: string;
  readonly reason: string;
}

export const maxUnavailableDefault = 1;
/** Installations that may fail in a row, when a pool names no --attempts. */
export const poolAttemptsDefault = 3;

export function policyOf(pool: Pool): PoolFailurePolicy {
  return pool.onFailure ?? 'alternate';
}

export function attemptsOf(pool: Pool): number {
  return pool.attempts ?? poolAttemptsDefault;
}

/**
 * Failed installations in a row at which the pool holds: its attempts for each of its slots. A
 * slot may try `attempts` machines (retry: installations) while nothing in the pool deploys, as a
 * workflow's request may try `--attempts` machines; any deployment proves the template and starts
 * the count afresh, so failures of installations running side by side in a large pool do not
 * hold it while others deploy.
 */
export function holdAt(pool: Pool): number {
  return attemptsOf(pool) * Math.max(1, pool.size);
}

/**
 * Why the pool holds (allocates nothing until an operator resumes it), or undefined. A fleet is
 * not burnt through by a template or an image that fails everywhere (Metal3's days of futile
 * retries).
 */
export function heldWhy(pool: Pool): string | undefined {
  const failed = pool.failedInARow ?? 0;
  if (failed < holdAt(pool)) return undefined;
  const last = pool.lastFailure;
  const where = last === undefined ? '' : `; the last on ${last.hardwareId}: ${last.reason}`;
  const slots = pool.size === 1 ? 'its slot' : `each of its ${Math.max(1, pool.size)} slots`;
  return (
    `held: ${failed} installations failed in a row with none deployed, ${attemptsOf(pool)} attempts for ${slots}${where}; ` +
    `mend the cause, then \`slipway pool resume ${pool.name}\``
  );
}

/**
 * The race a provisioning member's workflow runs for (its request's id), or undefined. Two lanes
 * of one race fill one slot (docs/decisions/0040).
 */
export type RaceOf = (workflowId: string) => string | undefined;

/** A member filling a slot counts once, and the two lanes of a race count once between them. */
export function slotsFilled(members: Iterable<Candidate>, raceOf: RaceOf | undefined): number {
  let filled = 0;
  const races = new Set<string>();
  for (const m of members) {
    const lc = m.lifecycle;
    if (!fillsSlot(lc?.state)) continue;
    const race = lc?.state === 'provisioning' && lc.owner !== undefined ? raceOf?.(lc.owner) : undefined;
    if (race === undefined) filled += 1;
    else if (!races.has(race)) {
      races.add(race);
      filled += 1;
    }
  }
  return filled;
}

/**
 * Whether a member is installed again on its own machine under the retry policy: its
 * installation failed (failed, not quarantined), nothing owns it, and no release awaits it.
 */
export function awaitsRetry(pool: Pool, machine: Candidate): boolean {
  const lc = machine.lifecycle;
  return (
    policyOf(pool) === 'retry' &&
    pool.members.includes(machine.id) &&
    lc?.state === 'failed' &&
    lc.owner === undefined &&
    lc.afterRelease === undefined
  );
}

/** The states in which a member fills one of the pool's slots. */
export function fillsSlot(state: MachineState | undefined): boolean {
  return state === 'provisioning' || state === 'deployed';
}

/** The slots the pool keeps filled: its size, or none while it is being deleted. */
export function targetOf(pool: Pool): number {
  return pool.deleting === true ? 0 : pool.size;
}

/** A machine's value of the pool's spread label ('' when it has none). */
export function spreadValue(pool: Pool, machine: Candidate): string {
  return pool.spreadBy === undefined ? '' : (machine.labels?.[pool.spreadBy] ?? '');
}

/**
 * Why a member leaves: the pool is smaller now, it is tainted, the pool is being deleted, or its
 * installation failed and the pool has a release template (it runs, then the machine is failed).
 */
export type ReleaseWhy = 'surplus' | 'taint' | 'delete' | 'failed';

/** Whether the machine is a failed member of the pool waiting for its release template. */
export function awaitsFailedRelease(pool: Pool, machine: Candidate): boolean {
  const lc = machine.lifecycle;
  const after = lc?.afterRelease;
  return (
    pool.releaseTemplate !== undefined &&
    after?.pool === pool.name &&
    lc?.state === after.state &&
    lc.owner === undefined
  );
}

/** One spread value: untainted members filling slots there, and machines the pool may take there. */
export interface SpreadCount {
  readonly value: string;
  readonly members: number;
  readonly available: number;
}

/** How a pool stands, and what the leader does next. */
export interface PoolStanding {
  readonly deployed: number;
  readonly provisioning: number;
  readonly failed: number;
  /** Tainted members still provisioning or deployed. */
  readonly tainted: number;
  /** Ready machines reserved for the pool. */
  readonly sparesReady: number;
  /** Ready, unowned matching machines that are no member and no other pool's spare. */
  readonly ready: number;
  /** Slots to fill now: the target minus untainted members provisioning or deployed, at least 0. */
  readonly missing: number;
  /** Slots that no machine can fill now: missing beyond what the pool may take. */
  readonly lacking: number;
  /** Spares wanted that no machine can be: spares beyond those reserved and those left. */
  readonly sparesLacking: number;
  /** Why the pool lacks machines (the allocation refusal's words), when it does. */
  readonly why?: string;
  /** Per spread value, by value; empty without --spread-by. */
  readonly spread: readonly SpreadCount[];
  /** Machines for the next slot, best first (its spares, then by id), none that break the spread. */
  readonly offer: readonly string[];
  /** The next machine to reserve as a spare, when the slots are filled and spares are short. */
  readonly reserve?: string;
  /** The next member to release, and why. */
  readonly release?: { readonly hardwareId: string; readonly why: ReleaseWhy };
  /** Under the retry policy: the failed member to install again, before any other machine. */
  readonly retry?: string;
  /** Why the pool holds (heldWhy): nothing is offered, retried or reserved until it is resumed. */
  readonly held?: string;
}

/** Whether `machine` may fill a slot of `pool`: ready, unowned, matching, no member, no other's spare. */
export function takes(pool: Pool, selector: Selector, machine: Candidate): boolean {
  return !pool.members.includes(machine.id) && verdictOf(selector, machine, pool.name).kind === 'selected';
}

/**
 * The spread values a new member may take (the spread rule): those with the fewest untainted
 * members among the values where the pool may take a machine. Undefined: any (no --spread-by).
 */
export function spreadAllowed(
  pool: Pool,
  selector: Selector,
  fleet: Iterable<Candidate>,
): ReadonlySet<string> | undefined {
  if (pool.spreadBy === undefined) return undefined;
  const counts = spreadCounts(pool, selector, fleet);
  let least = Infinity;
  for (const c of counts) if (c.available > 0) least = Math.min(least, c.members);
  return new Set(counts.filter((c) => c.available > 0 && c.members === least).map((c) => c.value));
}

function spreadCounts(pool: Pool, selector: Selector, fleet: Iterable<Candidate>): SpreadCount[] {
  const members = new Set(pool.members);
  const tainted = new Set(pool.tainted ?? []);
  const by = new Map<string, { members: number; available: number }>();
  const at = (v: string): { members: number; available: number } => {
    let c = by.get(v);
    if (c === undefined) {
      c = { members: 0, available: 0 };
      by.set(v, c);
    }
    return c;
  };
  for (const m of fleet) {
    if (members.has(m.id)) {
      if (!tainted.has(m.id) && fillsSlot(m.lifecycle?.state)) at(spreadValue(pool, m)).members += 1;
    } else if (takes(pool, selector, m)) {
      at(spreadValue(pool, m)).available += 1;
    }
  }
  return [...by.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([value, c]) => ({ value, ...c }));
}

/** Whether `machine` is a ready spare reserved for `pool`. */
export function isSpareOf(pool: Pool, machine: Candidate): boolean {
  const lc = machine.lifecycle;
  return lc?.spareOf === pool.name && lc.state === 'ready' && lc.owner === undefined;
}

/**
 * Whether releasing a tainted member now keeps the taint's budget: deployed members (tainted or
 * not) stay at least the target minus maxUnavailable.
 */
export function taintBudgetAllows(pool: Pool, deployed: number): boolean {
  return deployed - 1 >= targetOf(pool) - (pool.maxUnavailable ?? maxUnavailableDefault);
}

/** States from which a member can be released (the lifecycle table's `release` moves). */
const releasable: ReadonlySet<MachineState | undefined> = new Set([
  'deployed',
  'failed',
  'quarantined',
  'maintenance',
]);

export function isReleasable(state: MachineState | undefined): boolean {
  return releasable.has(state);
}

/**
 * A pool against the fleet: members counted by state; the machines for its next slot (never
 * more than one slot at a time, none that break the spread), the next spare to reserve, and
 * the next member to release (surplus after a scale down, a tainted member within the budget,
 * every member of a pool being deleted).
 */
export function poolStanding(
  pool: Pool,
  selector: Selector,
  fleet: readonly Candidate[],
  raceOf?: RaceOf,
): PoolStanding {
  const members = new Set(pool.members);
  const tainted = new Set(pool.tainted ?? []);
  let deployed = 0;
  let provisioning = 0;
  let failed = 0;
  let taintedFilling = 0;
  let spares = 0;
  const untaintedDeployed: Candidate[] = [];
  const taintedDeployed: Candidate[] = [];
  const leaving: Candidate[] = [];
  const candidates: Candidate[] = [];
  let failedRelease: string | undefined;
  let retry: string | undefined;
  const untaintedMembers: Candidate[] = [];
  for (const m of fleet) {
    const state = m.lifecycle?.state;
    if (failedRelease === undefined && awaitsFailedRelease(pool, m)) failedRelease = m.id;
    if (retry === undefined && awaitsRetry(pool, m)) retry = m.id;
    if (members.has(m.id)) {
      if (!tainted.has(m.id)) untaintedMembers.push(m);
      if (state === 'deployed') deployed += 1;
      else if (state === 'provisioning') provisioning += 1;
      else if (state === 'failed') failed += 1;
      if (fillsSlot(state) && tainted.has(m.id)) taintedFilling += 1;
      if (state === 'deployed') (tainted.has(m.id) ? taintedDeployed : untaintedDeployed).push(m);
      if (isReleasable(state)) leaving.push(m);
    } else if (takes(pool, selector, m)) {
      candidates.push(m);
      if (isSpareOf(pool, m)) spares += 1;
    }
  }
  const target = targetOf(pool);
  const untainted = slotsFilled(untaintedMembers, raceOf);
  const missing = Math.max(0, target - untainted);
  const held = pool.deleting === true ? undefined : heldWhy(pool);
  const retrying = missing > 0 && held === undefined && pool.deleting !== true ? retry : undefined;
  // A retried member fills its slot on its own machine: that slot is not lacking a machine.
  const lacking =
    held === undefined ? Math.max(0, missing - (retrying === undefined ? 0 : 1) - candidates.length) : 0;
  const spread = pool.spreadBy === undefined ? [] : spreadCounts(pool, selector, fleet);
  const allowed = spreadAllowed(pool, selector, fleet);
  const offer =
    missing === 0 || held !== undefined || retrying !== undefined
      ? []
      : candidates
          .filter((m) => allowed === undefined || allowed.has(spreadValue(pool, m)))
          .sort((a, b) => Number(isSpareOf(pool, b)) - Number(isSpareOf(pool, a)))
          .map((m) => m.id);
  const others = candidates.filter((m) => !isSpareOf(pool, m));
  const wanted = pool.deleting === true ? 0 : pool.spares;
  const sparesLacking = Math.max(0, wanted - spares - Math.max(0, others.length - missing));
  const reserve =
    missing === 0 && spares < wanted && held === undefined ? nextSpare(pool, others, spread) : undefined;
  const release: PoolStanding['release'] =
    failedRelease === undefined
      ? nextRelease(pool, {
          untainted,
          deployed,
          untaintedDeployed,
          taintedDeployed,
          leaving,
        })
      : { hardwareId: failedRelease, why: 'failed' };
  const standing = {
    deployed,
    provisioning,
    failed,
    tainted: taintedFilling,
    sparesReady: spares,
    ready: others.length,
    missing,
    lacking,
    sparesLacking,
    spread,
    offer,
    ...(reserve === undefined ? {} : { reserve }),
    ...(release === undefined ? {} : { release }),
    ...(retrying === undefined ? {} : { retry: retrying }),
    ...(held === undefined ? {} : { held }),
  };
  if (held !== undefined) return { ...standing, why: held };
  if (lacking === 0 && sparesLacking === 0) return standing;
  const tally = tallyOf(
    selector,
    fleet.filter((m) => !members.has(m.id) && !isSpareOf(pool, m)),
  );
  const short =
    lacking > 0
      ? `${lacking} of ${target} ${lacking === 1 ? 'slot' : 'slots'} cannot be filled`
      : `${sparesLacking} of ${wanted} ${sparesLacking === 1 ? 'spare' : 'spares'} cannot be kept`;
  return { ...standing, why: `${short}: ${noMachineMessage(pool.selector, tally)}` };
}

/** A spare from the spread value with the fewest members, then by id. */
function nextSpare(
  pool: Pool,
  others: readonly Candidate[],
  spread: readonly SpreadCount[],
): string | undefined {
  const count = (m: Candidate): number => spread.find((c) => c.value === spreadValue(pool, m))?.members ?? 0;
  const sorted = [...others].sort((a, b) => count(a) - count(b));
  return sorted[0]?.id;
}

interface Members {
  readonly untainted: number;
  readonly deployed: number;
  readonly untaintedDeployed: readonly Candidate[];
  readonly taintedDeployed: readonly Candidate[];
  readonly leaving: readonly Candidate[];
}

/** The next member to release, by the rules pool.release holds at apply. */
function nextRelease(pool: Pool, m: Members): PoolStanding['release'] {
  if (pool.deleting === true) {
    const first = m.leaving[0];
    return first === undefined ? undefined : { hardwareId: first.id, why: 'delete' };
  }
  if (m.untainted > pool.size) {
    const surplus = mostCrowded(pool, m.untaintedDeployed);
    if (surplus !== undefined) return { hardwareId: surplus, why: 'surplus' };
  }
  const first = m.taintedDeployed[0];
  if (first !== undefined && taintBudgetAllows(pool, m.deployed))
    return { hardwareId: first.id, why: 'taint' };
  return undefined;
}

/** The deployed member in the spread value with the most of them, the last by id among those. */
function mostCrowded(pool: Pool, deployed: readonly Candidate[]): string | undefined {
  const per = new Map<string, number>();
  for (const m of deployed) per.set(spreadValue(pool, m), (per.get(spreadValue(pool, m)) ?? 0) + 1);
  let best: Candidate | undefined;
  for (const m of deployed) {
    const n = per.get(spreadValue(pool, m)) ?? 0;
    const b = best === undefined ? -1 : (per.get(spreadValue(pool, best)) ?? 0);
    if (n >= b) best = m;
  }
  return best?.id;
}

// A pool as `slipway pool get|list` shows it (docs/decisions/0035, 0036): the record the state
// keeps, and how it stands against the fleet now (src/fleet/pool.ts): deployed, provisioning,
// spares ready, failed, tainted, per spread value, its members and spares with their states, and
// how many slots or spares it lacks and why.
import type { Pool } from '../fleet/pool.js';
import {
  attemptsOf,
  isSpareOf,
  maxUnavailableDefault,
  policyOf,
  poolStanding,
  spreadValue,
  type RaceOf,
} from '../fleet/pool.js';
import { parseSelector, SelectorError } from '../fleet/selector.js';
import type { PoolMember, PoolRecord } from '../gen/control.js';
import type { Hardware } from '../model/records.js';

export function poolRecord(pool: Pool, fleet: readonly Hardware[], raceOf?: RaceOf): PoolRecord {
  const selector = parseSelector(pool.selector);
  if (selector instanceof SelectorError)
    throw new Error(`a stored selector does not parse: ${selector.message}`);
  const s = poolStanding(pool, selector, fleet, raceOf);
  const tainted = new Set(pool.tainted ?? []);
  const byId = new Map(fleet.map((hw) => [hw.id, hw]));
  const member = (id: string, spare: boolean): PoolMember => {
    const hw = byId.get(id);
    return {
      id,
      state: hw?.lifecycle?.state ?? '',
      tainted: tainted.has(id),
      spare,
      spreadValue: hw === undefined ? '' : spreadValue(pool, hw),
    };
  };
  const spares = fleet.filter((hw) => isSpareOf(pool, hw)).map((hw) => hw.id);
  return {
    name: pool.name,
    selector: pool.selector,
    template: pool.template,
    size: pool.size,
    spares: pool.spares,
    spreadBy: pool.spreadBy ?? '',
    releaseTemplate: pool.releaseTemplate ?? '',
    image: pool.image ?? '',
    maxUnavailable: pool.maxUnavailable ?? maxUnavailableDefault,
    deleting: pool.deleting === true,
    version: pool.version,
    deployed: s.deployed,
    provisioning: s.provisioning,
    sparesReady: s.sparesReady,
    failed: s.failed,
    tainted: s.tainted,
    lacking: s.lacking,
    sparesLacking: s.sparesLacking,
    why: s.why ?? '',
    spread: s.spread.map((c) => ({ ...c })),
    members: [...pool.members.map((id) => member(id, false)), ...spares.map((id) => member(id, true))],
    onFailure: policyOf(pool),
    attempts: attemptsOf(pool),
    failedInARow: pool.failedInARow ?? 0,
    held: s.held ?? '',
  };
}

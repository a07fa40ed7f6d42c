// The race failure policy's record keeping (docs/decisions/0037-race-and-accept-rule.md): a
// request runs as two lanes, each a workflow on its own machine; the request's lane keeps every
// machine either lane took, in order, and the winner. Pure: records in, records out.
import type { Workflow, RaceLane } from '../../model/records.js';
import { isTerminal } from '../../model/records.js';
import { awaitsAlternate } from './allocation.js';
import { record } from './immutable.js';

/** The machines a race's lanes took, in order, as the request keeps them (its own when it is gone). */
export function raceTriedOf(lane: Workflow, request: Workflow | undefined): readonly string[] {
  return request?.race?.tried ?? lane.alternate?.tried ?? [lane.hardwareId];
}

/** The request with one more machine taken by a lane. */
export function raceTook(request: Workflow, hardwareId: string): Workflow {
  const race = request.race;
  if (race === undefined) throw new Error(`workflow ${request.id} is no race's request`);
  const tried = Object.freeze([...(race.tried ?? []), hardwareId]);
  return record<Workflow>({ ...request, race: record<RaceLane>({ ...race, tried }) });
}

/** Where a race stands, from its two lanes: won, running (a lane active or to move on), failed. */
export type RaceOutcome = 'won' | 'running' | 'failed';

export function raceOutcome(request: Workflow, rival: Workflow | undefined): RaceOutcome {
  if (request.race?.winner !== undefined) return 'won';
  const live = (wf: Workflow | undefined): boolean =>
    wf !== undefined && (!isTerminal(wf.state) || awaitsAlternate(wf));
  return live(request) || live(rival) ? 'running' : 'failed';
}

// The machine lifecycle's transition table and the rules that read it
// (docs/decisions/0028-machine-lifecycle.md). The table is data, in this one place: apply
// (src/state/control/hardware-lifecycle.ts) refuses any move it does not list, and the property
// test checks every recorded transition against it. Pure: records in, answers out.
import type {
  LifecycleTrigger,
  MachineLifecycle,
  MachineState,
  OperatorVerb,
} from '../model/machine-lifecycle.js';
import { operatorVerbs } from '../model/machine-lifecycle.js';

/** One allowed move: `trigger` takes a machine from `from` (null: no state yet) to `to`. */
export interface LifecycleEdge {
  readonly from: MachineState | null;
  readonly to: MachineState;
  readonly trigger: LifecycleTrigger;
}

type Moves = readonly (readonly [MachineState | null, MachineState])[];

/** By trigger, the moves it may make. */
const moves: { readonly [T in LifecycleTrigger]: Moves } = {
  // A machine's history starts: created by an operator, or found when the cluster first tracks it.
  register: [[null, 'enrolled']],
  adopt: [
    [null, 'enrolled'],
    [null, 'provisioning'],
    [null, 'deployed'],
    [null, 'failed'],
  ],
  inspect: [
    ['enrolled', 'inspecting'],
    ['ready', 'inspecting'],
    ['failed', 'inspecting'],
    ['quarantined', 'inspecting'],
    ['maintenance', 'inspecting'],
  ],
  // Discovery's outcomes (the inventory step): facts as before, or facts that changed.
  inspected: [['inspecting', 'ready']],
  drift: [['inspecting', 'maintenance']],
  accept: [
    ['enrolled', 'ready'],
    ['quarantined', 'ready'],
    ['maintenance', 'ready'],
  ],
  // A workflow created for (or retried on) the machine owns it until it ends.
  provision: [
    ['enrolled', 'provisioning'],
    ['ready', 'provisioning'],
    ['deployed', 'provisioning'],
    ['failed', 'provisioning'],
  ],
  succeed: [['provisioning', 'deployed']],
  // The policy's count of failures within its window quarantines the machine instead.
  fail: [
    ['provisioning', 'failed'],
    ['provisioning', 'quarantined'],
    // A release workflow (a pool's release template) that fails.
    ['releasing', 'failed'],
  ],
  cancel: [
    ['provisioning', 'failed'],
    ['releasing', 'failed'],
  ],
  drain: [
    ['enrolled', 'maintenance'],
    ['ready', 'maintenance'],
    ['provisioning', 'maintenance'],
    ['deployed', 'maintenance'],
    ['failed', 'maintenance'],
  ],
  // Back to where the drain found it (or to how its workflow ended meanwhile).
  undrain: [
    ['maintenance', 'enrolled'],
    ['maintenance', 'ready'],
    ['maintenance', 'provisioning'],
    ['maintenance', 'deployed'],
    ['maintenance', 'failed'],
  ],
  // An operator's release, or a race's loser (its workflow cancelled: the rival won, 0037).
  release: [
    ['provisioning', 'releasing'],
    ['deployed', 'releasing'],
    ['failed', 'releasing'],
    ['quarantined', 'releasing'],
    ['maintenance', 'releasing'],
  ],
  // A release's end: ready again, or, for a failed pool member (0036), its failure as it was.
  released: [
    ['releasing', 'ready'],
    ['releasing', 'failed'],
    ['releasing', 'quarantined'],
  ],
  quarantine: [
    ['enrolled', 'quarantined'],
    ['ready', 'quarantined'],
    ['deployed', 'quarantined'],
    ['failed', 'quarantined'],
    ['maintenance', 'quarantined'],
  ],
  retire: [
    ['enrolled', 'retired'],
    ['ready', 'retired'],
    ['deployed', 'retired'],
    ['failed', 'retired'],
    ['quarantined', 'retired'],
    ['maintenance', 'retired'],
  ],
  // The leader's deadline: a machine stuck in a transitional state fails.
  expire: [
    ['inspecting', 'failed'],
    ['provisioning', 'failed'],
    ['provisioning', 'quarantined'],
    ['releasing', 'failed'],
  ],
};

/** The transition table: every move a machine may make, and nothing else. */
export const lifecycleTable: readonly LifecycleEdge[] = Object.freeze(
  Object.entries(moves).flatMap(([trigger, list]) =>
    list.map(([from, to]) => Object.freeze({ from, to, trigger: trigger as LifecycleTrigger })),
  ),
);

/** States a machine only passes through: each has a deadline, enforced by the leader. */
export const transitionalStates: ReadonlySet<MachineState> = new Set([
  'inspecting',
  'provisioning',
  'releasing',
]);

export function isTransitional(state: MachineState): boolean {
  return transitionalStates.has(state);
}

/** True when the table lists this move. */
export function isAllowed(from: MachineState | null, to: MachineState, trigger: LifecycleTrigger): boolean {
  return moves[trigger].some(([f, t]) => f === from && t === to);
}

/** Where `trigger` takes a machine in `from`; undefined when the table has no such move. */
export function targetOf(from: MachineState, trigger: LifecycleTrigger): MachineState | undefined {
  const found = moves[trigger].filter(([f]) => f === from);
  // undrain has one move per state drained from; the record says which (drainedFrom).
  return found.length === 1 ? found[0]?.[1] : undefined;
}

/** How an operator asks for a trigger: the verbs as themselves, the others by what does them. */
function asked(trigger: LifecycleTrigger): string {
  if ((operatorVerbs as readonly string[]).includes(trigger)) return trigger;
  switch (trigger) {
    case 'provision':
      return 'workflow create';
    case 'succeed':
    case 'fail':
    case 'cancel':
      return `its workflow's ${trigger === 'succeed' ? 'success' : trigger === 'fail' ? 'failure' : 'cancel'}`;
    case 'expire':
      return 'its deadline';
    case 'inspected':
    case 'drift':
      return `inspection (${trigger})`;
    default:
      return trigger;
  }
}

/** The moves from `state`, as the refusals list them: "drain → maintenance, ...". */
export function movesText(state: MachineState): string {
  const out = lifecycleTable.filter((e) => e.from === state).map((e) => `${asked(e.trigger)} → ${e.to}`);
  return out.length === 0 ? 'none: it is final' : [...new Set(out)].join(', ');
}

/** Why `trigger` cannot move machine `id` from `state`: names the state and the allowed moves. */
export function moveRefusal(id: string, state: MachineState, trigger: LifecycleTrigger): string {
  return `hardware "${id}" is ${state}; ${asked(trigger)} is not one of its moves (from ${state}: ${movesText(state)})`;
}

/**
 * Why the operator's verb may not be applied to this machine now, or undefined: the table, then
 * the owner rule (a machine a workflow still runs on is left to it, but for drain).
 */
export function verbRefusal(id: string, lifecycle: MachineLifecycle, verb: OperatorVerb): string | undefined {
  const { state, owner } = lifecycle;
  if (verb === 'undrain') {
    if (state !== 'maintenance') return moveRefusal(id, state, verb);
    return undefined;
  }
  if (targetOf(state, verb) === undefined) return moveRefusal(id, state, verb);
  if (owner !== undefined && verb !== 'drain') {
    return (
      `hardware "${id}" is ${state} and workflow "${owner}" still runs on it; wait for it to end, ` +
      `or cancel it (\`slipway workflow cancel ${owner}\`), then ${verb}`
    );
  }
  return undefined;
}

/**
 * Why a workflow may not take machine `id` now (invariant 9), or undefined: the table's
 * `provision` moves, and one owner at a time.
 */
export function provisionRefusal(id: string, lifecycle: MachineLifecycle): string | undefined {
  if (lifecycle.owner !== undefined) {
    return (
      `hardware "${id}" is ${lifecycle.state}, owned by workflow "${lifecycle.owner}": one workflow ` +
      `at a time; wait for it to end or cancel it (\`slipway workflow cancel ${lifecycle.owner}\`)`
    );
  }
  if (targetOf(lifecycle.state, 'provision') === undefined) {
    return moveRefusal(id, lifecycle.state, 'provision');
  }
  return undefined;
}

/**
 * Why a release workflow (a pool's release template, docs/decisions/0036) may not take machine
 * `id` now, or undefined: the table's `release` moves, and one owner at a time.
 */
export function releaseRefusal(id: string, lifecycle: MachineLifecycle): string | undefined {
  if (lifecycle.owner !== undefined) {
    return `hardware "${id}" is ${lifecycle.state}, owned by workflow "${lifecycle.owner}": one workflow at a time`;
  }
  if (targetOf(lifecycle.state, 'release') === undefined) return moveRefusal(id, lifecycle.state, 'release');
  return undefined;
}

/** The reason a deadline's expiry gives. */
export function expiryReason(state: MachineState): string {
  return `deadline passed in ${state}`;
}

/**
 * The release step of a machine an operator releases (`hardware release`): none is known, so it
 * completes at once. A pool's release template runs as a release workflow instead
 * (docs/decisions/0036), started by the pool, not by this verb.
 */
export function releaseTemplateOf(_hardwareId: string): string | undefined {
  return undefined;
}

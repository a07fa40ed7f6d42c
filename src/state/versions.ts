// Which state version each control command needs, and the refusals that keep a cluster from
// proposing what some member cannot apply (docs/decisions/0019-version-gates.md). The version
// numbers themselves, and what each adds, are src/model/versions.ts; they are handed on here so
// the state's readers keep one import.
import type { BuiltinAction, RenderedTemplate } from '../model/records.js';
import type { ControlCommand } from './control/commands.js';

import {
  buildVersion,
  stateVersionBaseline,
  stateVersionBoundedState,
  stateVersionFleet,
  stateVersionNodeDrain,
  stateVersionOfThisBuild,
} from '../model/versions.js';

export {
  stateVersionBaseline,
  stateVersionOfThisBuild,
  stateVersionBoundedState,
  stateVersionSnapshotRecords,
  stateVersionNodeDrain,
  stateVersionFleet,
  stateVersionAuditInEntry,
  advertisedStateVersion,
  buildVersion,
} from '../model/versions.js';

/** The state version a control command needs: every member must apply it alike. */
export function controlCommandVersion(command: ControlCommand): number {
  switch (command.type) {
    case 'cluster.version':
      // Whoever applies "the cluster now runs at N" must know what N means.
      return Math.max(2, command.version);
    case 'workflow.retention':
    case 'workflow.gc':
      return stateVersionBoundedState;
    case 'member.drain':
      return stateVersionNodeDrain;
    case 'hardware.lifecycle':
    case 'hardware.label':
    case 'hardware.expire':
    case 'credential.inventory':
    case 'hardware.inventory':
    case 'workflow.allocate':
    case 'workflow.alternate':
    case 'pool.create':
    case 'pool.scale':
    case 'pool.delete':
    case 'pool.allocate':
    case 'pool.taint':
    case 'pool.resume':
    case 'pool.reserve':
    case 'pool.release':
    case 'hardware.quarantinePolicy':
    case 'hardware.acceptRule':
    case 'member.apiAddr':
      return stateVersionFleet;
    case 'workflow.create':
      return namesFleetBuiltin(command.spec) ? stateVersionFleet : stateVersionBaseline;
    default:
      return stateVersionBaseline;
  }
}

/** Built-in actions that builds below stateVersionFleet do not know. */
const fleetBuiltins: ReadonlySet<BuiltinAction> = new Set([
  'cexec',
  'archive2disk',
  'qemuimg2disk',
  'rootio',
  'syslinux',
  'oci2disk',
  'grub2disk',
]);

function namesFleetBuiltin(spec: RenderedTemplate): boolean {
  return spec.tasks.some((task) =>
    task.actions.some((action) => action.builtin !== undefined && fleetBuiltins.has(action.builtin)),
  );
}

/**
 * Thrown by apply for a committed entry written by a newer build (a state version above this
 * build's). The node must stop applying: answering it with an error would leave this node's state
 * different from the nodes that applied it.
 */
export class EntryTooNewError extends Error {
  readonly needs: number;

  constructor(needs: number, what: string) {
    super(
      `${what} needs state version ${needs}, but this build (${buildVersion}) applies up to ` +
        `${stateVersionOfThisBuild}: run a newer build on this node`,
    );
    this.name = 'EntryTooNewError';
    this.needs = needs;
  }
}

/**
 * Why `command` may not be proposed in a cluster at `clusterVersion`, or undefined when it may.
 * The refusal names what to do: wait for a new cluster's members, or finish the upgrade.
 */
export function clusterVersionRefusal(command: ControlCommand, clusterVersion: number): string | undefined {
  const needs = controlCommandVersion(command);
  if (needs > stateVersionOfThisBuild) {
    return `${command.type} needs state version ${needs}; this node's build (${buildVersion}) supports up to ${stateVersionOfThisBuild}`;
  }
  // Raising the version is the one command newer than the cluster: the leader proposes it only
  // once every voter supports the new version (cluster-version-keeper.ts).
  if (needs <= clusterVersion || command.type === 'cluster.version') return undefined;
  return versionRefusal(command.type, needs, clusterVersion);
}

/** Why `what`, which needs cluster version `needs`, is refused at `clusterVersion`: what to do. */
export function versionRefusal(what: string, needs: number, clusterVersion: number): string {
  return (
    `${what} needs cluster version ${needs}, and the cluster runs at version ${clusterVersion} ` +
    'until every voter runs a build that supports it: its leader raises the version as soon as ' +
    'every voter has answered with such a build (a cluster just started, within a second or two ' +
    'once all its members run); in a rolling upgrade, finish the upgrade ' +
    '(`slipway cluster version` shows each member)'
  );
}

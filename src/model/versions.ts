// State versions: the numbers a build applies and the cluster may propose, shared by the state,
// the nodes and the CLI (`slipway cluster version`, `upgrade check`); which command needs which is
// src/state/versions.ts (docs/decisions/0019-version-gates.md).
//
// The state version is one number for the whole replicated format: the commands, their fields,
// and the snapshot. A build applies every state version up to stateVersionOfThisBuild. The
// cluster's effective version is kept in the replicated state (ControlState.clusterVersion); the
// leader raises it once every voter says it supports more, and nothing newer than it is proposed.
//
// Version 1 is every format of builds 0.1.x, which came before versions were advertised: a
// member that answers Status without a state version runs one of them.
// Version 2 adds the cluster.version command itself (the gates), and bounded state
// (docs/decisions/0020-bounded-state.md): workflow.retention, workflow.gc, the retention in the
// snapshot with, while no operator has set it, the stamp at which the cluster reached version 2
// (the grace before the default removes anything), and a per-workflow budget for the output
// tails kept in events; snapshots whose
// control state is records (docs/decisions/0023-streamed-snapshots.md); and member.drain
// (docs/decisions/0022-node-drain.md) with the drained members in the snapshot.
// Version 3 adds the machine lifecycle (docs/decisions/0028-machine-lifecycle.md): every machine's
// state, owner, deadline and history and its labels in the hardware records, hardware.lifecycle,
// hardware.label and hardware.expire, and the lifecycle's effect on hardware and workflow commands;
// and discovery (docs/decisions/0029-discovery.md): credential.inventory, hardware.inventory, and
// each machine's inventory and inventory-boot credential in its record;
// and selection (docs/decisions/0030-allocation-at-apply.md): workflow.allocate and
// workflow.alternate, and the selector and alternate policy in workflow records.
// Version 3 also adds member.apiAddr and every member's API address in the state
// (docs/decisions/0038-member-api-addresses.md).
// Version 3 also adds the audit record inside a Kv write's own entry and a membership change's
// (docs/decisions/0018-audit-trail.md): one raft entry per audited write.
// Version 3 also adds built-in actions (Tinkerbell's hub actions cexec, archive2disk and those in
// fleetBuiltins in src/state/versions.ts): a version 2 build's schema refuses a workflow whose
// actions name them.
/** The formats of builds that predate version gates. */
export const stateVersionBaseline = 1;

/** The highest state version this build applies and may propose. */
export const stateVersionOfThisBuild = 3;

/**
 * From this version on, apply bounds the output tails each workflow's events keep
 * (workflowOutputTailBytesMax): builds of version 1 keep them all, so a cluster at 1 must too.
 */
export const stateVersionBoundedState = 2;

/**
 * From this version on, the store's snapshot holds the control state as records (snapshot
 * layout 3, docs/decisions/0023-streamed-snapshots.md): builds of version 1 read only the one
 * JSON document, so a cluster at 1 keeps writing it.
 */
export const stateVersionSnapshotRecords = 2;
/** From this version on, members may be drained (member.drain, docs/decisions/0022-node-drain.md). */
export const stateVersionNodeDrain = 2;
/**
 * From this version on, every machine has a lifecycle (docs/decisions/0028-machine-lifecycle.md):
 * raising the cluster to it derives each machine's state from its workflows, and from then on
 * hardware and workflow commands move it. Builds of version 2 track none, so a cluster below 3
 * keeps none.
 */
export const stateVersionFleet = 3;
/**
 * From this version on, a Kv write carries its audit record in its own entry (the store
 * command's audit flag) and a membership change in its configuration entry's context: builds of
 * version 2 read neither, so a cluster below 3 records them by a separate audit.record.
 */
export const stateVersionAuditInEntry = 3;

/** The state version a member applies, from its Status: builds before 0.2.0 answer 0, meaning 1. */
export function advertisedStateVersion(advertised: number): number {
  return Math.max(advertised, stateVersionBaseline);
}

/** This build, as members advertise it: the package's version. */
export const buildVersion = '0.2.0';

// @ts-check
// The layering (docs/decisions/0026-layout-and-boundaries.md): each folder and the folders it may
// import (a folder also reaches every subfolder of those it lists, and its own). Lower layers
// never import higher ones; test/ may import anything.
const srcBelowServices = [
  'src/platform',
  'src/gen',
  'src/wire',
  'src/model',
  'src/fleet',
  'src/raft',
  'src/workflow',
  'src/state',
];
const srcSubsystems = [
  ...srcBelowServices,
  'src/power',
  'src/artifacts',
  'src/boot',
  'src/worker',
  'src/bootos',
  'src/api',
  'src/node',
  'src/tinkerbell',
  'src/cli',
];
const zones = {
  'src/platform': [],
  'src/gen': [],
  // What nodes and clients agree on beside the protobuf messages (refusal metadata, limits, the
  // snapshot file).
  'src/wire': ['src/platform', 'src/gen'],
  'src/model': ['src/platform'],
  // Selectors, fingerprints, drift: pure rules on model records, so the state can apply them.
  'src/fleet': ['src/platform', 'src/model'],
  'src/raft': ['src/platform', 'src/gen'],
  // The consensus core is pure: it imports nothing of ours outside itself (not storage, transport
  // or the driver above it).
  'src/raft/core': [],
  'src/workflow': ['src/platform', 'src/model'],
  // Tinkerbell's objects mapped to Slipway's documents (docs/decisions/0039): pure, for the CLI.
  'src/tinkerbell': ['src/platform', 'src/model', 'src/workflow'],
  'src/state': ['src/platform', 'src/model', 'src/fleet', 'src/workflow', 'src/raft'],
  'src/power': ['src/platform', 'src/model', 'src/state'],
  // The boot servers answer from what they are given; a node wires them to the state
  // (src/node/boot-services.ts).
  'src/boot': ['src/platform', 'src/model'],
  'src/artifacts': [...srcBelowServices, 'src/boot'],
  'src/worker': ['src/platform', 'src/gen', 'src/model', 'src/workflow'],
  'src/bootos': ['src/platform'],
  'src/api': [...srcBelowServices, 'src/power', 'src/artifacts'],
  'src/node': [...srcSubsystems.filter((z) => z !== 'src/cli' && z !== 'src/node'), 'lb'],
  // A client: the wire, the ground and the model; the rest only lazily (cliLazy below).
  'src/cli': ['src/platform', 'src/gen', 'src/wire', 'src/model'],
  // The balancer renders what src/model describes (the balancer spec, member ids).
  lb: ['src/platform', 'src/gen', 'src/model'],
  cluster: [...srcSubsystems, 'lb'],
  bench: [...srcSubsystems, 'lb', 'cluster'],
  bin: ['src/cli'],
  test: ['*'],
};
// What the CLI loads only for the commands that use it, each subsystem through one module.
const cliLazy = [
  'src/node/index.ts', // server
  'src/node/snapshot-seed.ts', // snapshot restore, offline
  'cluster/index.ts', // lab up|down
  'lb/index.ts', // balancer config|follow, the HAProxy of cluster up
  'src/worker/index.ts', // worker (the agent)
  'src/bootos/index.ts', // bootos build
  'src/tinkerbell/index.ts', // import
  'src/workflow/index.ts', // template create, hardware create: the documents checked before sending
  'src/fleet/index.ts', // --selector, checked before sending
];

/** The options of slipway/import-boundaries: the table, and how folders outside src/ reach it. */
export const importBoundaryOptions = {
  zones,
  // Outside src/, a subsystem is reached through its index.ts; the leaf libraries are open.
  entryOnly: ['lb', 'cluster', 'bench'],
  open: ['src/platform', 'src/gen', 'src/wire', 'src/model'],
  lazy: { 'src/cli': cliLazy },
};

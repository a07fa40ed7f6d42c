// @ts-check
// The files that take their time from a Clock passed in (src/platform/clock.ts,
// docs/decisions/0043-one-clock.md): the raft driver, the leader's duties, the power executor and
// the worker service, which the simulation runs on its virtual time. eslint.config.js forbids
// Node's timers and the wall clock in them; test/unit/clock-seam-lint.test.ts proves it does.
export const clockSeamFiles = [
  'src/raft/node.ts',
  'src/node/deadline-scanner.ts',
  'src/node/alternate-scanner.ts',
  'src/node/pool-keeper.ts',
  'src/node/cluster-version-keeper.ts',
  'src/node/workflow-collector.ts',
  'src/node/api-address-keeper.ts',
  'src/power/executor.ts',
  'src/power/steps.ts',
  'src/power/waiters.ts',
  'src/api/worker-service.ts',
];

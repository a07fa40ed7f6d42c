// What each operator request does, as idempotent steps: the plan lives with the power jobs in
// the replicated state (src/state/control/power-jobs.ts), which also makes a workflow's own
// netboot and disk-boot jobs; re-exported here for the API and the CLI.
export { powerAttemptsDefault, powerStepsOf as powerSteps } from '../state/control/power-jobs.js';

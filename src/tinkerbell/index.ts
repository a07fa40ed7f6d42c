// The Tinkerbell mapping's entry, for `slipway import` (the CLI loads it only for that command):
// reading the objects, planning what they become, and reconciling the plan with the cluster.
export { ImportInputError, readObjects, type InputFile } from './objects.js';
export { planImport, type ImportPlan } from './plan.js';
export { reconcile, type ClusterView, type ImportStep } from './reconcile.js';

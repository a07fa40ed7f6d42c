// The fleet's public entry, for the folders outside src/ (lb, cluster, bench) that reach a
// subsystem only through its index.ts; inside src/, import the module you use.
export {
  explain,
  formatSelector,
  formatTerm,
  labelKeyAllowed,
  machineFacts,
  matches,
  operators,
  parseSelector,
  pointAt,
  SelectorError,
  type FactSource,
  type MachineFacts,
  type Operator,
  type Selector,
  type SelectorFailure,
  type Term,
} from './selector.js';
export { describeBytes, formatBytes, parseBytes } from './quantity.js';
export {
  describeIdentifier,
  FingerprintIndex,
  fingerprintOf,
  fingerprintOfMachine,
  matchFingerprint,
  type Fingerprint,
  type FingerprintMatch,
  type Identifier,
} from './fingerprint.js';
export { inventoryDrift, type Drift, type DriftPart } from './drift.js';
export {
  chooseMachine,
  noMachineMessage,
  notReadyReason,
  tallyOf,
  verdictOf,
  type Candidate,
  type Tally,
  type Verdict,
} from './allocation.js';

// The replicated state's public entry, for code outside src/ (the benchmarks): the state
// machine, the store's entry commands and their encoding, and the control commands.
export { KvStore } from './kv-store.js';
export { decodeCommand, decodeResult, encodeCommand, encodeResult, type Command } from './store-command.js';
export type { ControlCommand } from './control/commands.js';
export { pastRetention } from './control/workflow-retention.js';

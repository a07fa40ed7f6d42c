// The worker agent's entry, for `slipway worker` (the CLI loads it only for that command): the
// agent, the credential it claims, how it reboots or powers off its machine, and its inventory.
export { Agent } from './agent.js';
export { ClaimedCredential, type CredentialSource } from './credential-claim.js';
export { collectInventory } from './inventory.js';
export { reportInventory } from './inventory-report.js';
export { machineControlFrom, machineControlVariable, type MachineControl } from './machine-control.js';

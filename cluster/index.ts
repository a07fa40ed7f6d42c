// cluster/'s entry: the machine lab as `slipway lab up|down` runs it, which the CLI loads only for
// those commands and only through this module: the lab itself (./machine-lab.ts), the removal of a lab's
// namespaces (./netns-lab.ts), and the size forms of its flags (src/fleet's quantities).
export { formatBytes, parseBytes } from '../src/fleet/index.js';
export { labSpecProblem, MachineLab, type LabDiskBus, type LabMachineSpec } from './machine-lab.js';
export { removeLab } from './netns-lab.js';

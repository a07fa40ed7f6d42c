// The workflow folder's public entry: for code outside src/ (the benchmarks), and for the CLI,
// which loads it only for the commands that check a document before sending it (template create,
// hardware create).
export { hardwareFromFlags, parseBmcCredentials, parseHardwareDocument, withBmc } from './hardware-doc.js';
export { nextAction } from './rules.js';
export { validateTemplateSource } from './template.js';

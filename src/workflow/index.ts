// The workflow rules' public entry, for code outside src/ (the benchmarks).
export { nextAction } from './rules.js';

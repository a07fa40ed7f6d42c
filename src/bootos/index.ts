// The boot OS's public entry, for code outside src/: its build and the markers its init prints.
export { buildBootOs } from './build.js';
export { bootOsMarkers } from './init-script.js';

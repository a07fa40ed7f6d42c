// The node's entry for `slipway server`, which the CLI loads only when it runs one: the
// configuration's reader and schema, and the composition root that starts the node. (The
// offline restore enters through ./snapshot-seed.ts, so that it loads no server.)
export { readConfigFile, validateServerConfig, type ServerConfig } from './config.js';
export { startNode, type RunningNode } from './start-node.js';

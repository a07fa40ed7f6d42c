// Consensus's public entry, for code outside src/ (the benchmarks): the log store, the message
// types and the transport's framing.
export { message, type Entry, type Message } from './core/types.js';
export { LevelLogStore } from './storage/level-log-store.js';
export { decodeEnvelopeMessages, encodeMessageFrame } from './transport/codec.js';

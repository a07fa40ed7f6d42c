// The boot subsystem's public entry, for code outside src/ (the network-namespace lab, the
// benchmarks): the three servers, the inventory they answer from, and the wire codecs. A node
// composes the same servers through src/node/boot-services.ts.
export { startDhcpServer, type DhcpCounters, type DhcpMode, type DhcpServer } from './dhcp/server.js';
export { startTftpServer, type TftpServer } from './tftp/server.js';
export { startHttpBootServer, type HttpBootServer } from './http/server.js';
export { defaultBootArtifacts } from './http/ipxe-script.js';
export { staticInventory, type BootInventory } from './inventory.js';
export {
  broadcastFlag,
  clientHardwareAddress,
  decodeDhcpPacket,
  encodeDhcpPacket,
  type DhcpPacket,
} from './dhcp/codec.js';
export type { DhcpOptions } from './dhcp/options.js';
export { hexWithColons } from './dhcp/wire-values.js';
export { decodePacket, encodePacket, type TftpPacket } from './tftp/packet.js';

// DHCP packets as a client sends them, and the two ways a server's answer can go, for the
// unit tests of the DHCP server's answer path.
import assert from 'node:assert/strict';
import type { DhcpPacket } from '../../src/boot/dhcp/codec.js';
import type { DhcpMessageType, DhcpOptions } from '../../src/boot/dhcp/options.js';
import type { ReplyOutcome } from '../../src/boot/dhcp/reply.js';

/** A client's request of `type` from `mac` (colon-separated), unrelayed, with no address yet. */
export function clientPacket(
  type: DhcpMessageType,
  mac: string,
  options: DhcpOptions = {},
  fields: Partial<DhcpPacket> = {},
): DhcpPacket {
  const chaddr = new Uint8Array(16);
  chaddr.set(mac.split(':').map((byte) => parseInt(byte, 16)));
  return {
    op: 'request',
    htype: 1,
    hlen: 6,
    hops: 0,
    xid: 0x4242,
    secs: 0,
    flags: 0,
    ciaddr: '0.0.0.0',
    yiaddr: '0.0.0.0',
    siaddr: '0.0.0.0',
    giaddr: '0.0.0.0',
    chaddr,
    sname: '',
    file: '',
    options: { messageType: type, ...options },
    ...fields,
  };
}

/** The reply packet; fails the test with the server's reason when it ignored the request. */
export function replyOf(outcome: ReplyOutcome): DhcpPacket {
  assert.equal(outcome.kind, 'reply', outcome.kind === 'ignore' ? outcome.reason : '');
  if (outcome.kind !== 'reply') throw new Error('unreachable');
  return outcome.packet;
}

/** Why the server ignored the request; fails the test when it replied. */
export function ignoredReason(outcome: ReplyOutcome): string {
  assert.equal(outcome.kind, 'ignore', 'expected no reply');
  return outcome.kind === 'ignore' ? outcome.reason : '';
}

// Builds the reply to one client request, or says why there is none. Pure: the decoded
// request, Slipway's answer for this machine and a boot decision in; the reply packet, where
// to send it and the size limit to encode it with out.
//
// Two modes, as in Tinkerbell's smee:
// - reservation: Slipway is the DHCP server. Addresses come from the hardware record, so the
//   answer is deterministic and any node holding the VIP gives the same one.
// - proxy: another server hands out addresses; Slipway adds only boot information
//   (PXE specification 2.1, proxyDHCP): no yiaddr, option 60 "PXEClient".
//
// Client requests that deserve no answer (a REQUEST for another server, a DECLINE) come back
// as `ignore` with a reason, so the server can log and count them.

import { broadcastFlag, hasBroadcastFlag, type DhcpPacket } from './codec.js';
import { DhcpSettingsError } from './errors.js';
import {
  maxMessageSizeMin,
  optionCode,
  type DhcpMessageType,
  type DhcpOptions,
  type IpxeEncapsulated,
} from './options.js';
import type { BootDecision } from './pxe-policy.js';
import { encodeSubOptions, ipxeSubOptionCode, pxeSubOptionCode, type SubOption } from './sub-options.js';
import { ipv4Broadcast, ipv4Zero, isContiguousMask, latin1ToBytes, subnetBroadcast } from './wire-values.js';
import { isIpv4 } from '../../platform/addresses.js';

/** What Slipway hands this machine in reservation mode, from its hardware record. */
export interface ReservedLease {
  readonly ip: string;
  readonly mask: string;
  readonly gateway?: string;
  readonly dns: readonly string[];
  readonly hostname?: string;
  readonly domain?: string;
  readonly leaseTimeS: number;
}

export type ReplyInput =
  | {
      readonly mode: 'reservation';
      readonly request: DhcpPacket;
      /** Option 54; the VIP, so renewals follow whichever node holds it. */
      readonly serverId: string;
      readonly lease: ReservedLease;
      readonly boot: BootDecision;
    }
  | {
      readonly mode: 'proxy';
      readonly request: DhcpPacket;
      readonly serverId: string;
      readonly boot: BootDecision;
    };

export interface ReplyDestination {
  readonly address: string;
  readonly port: number;
  /**
   * RFC 2131 §4.1: 'relay' to giaddr:67; 'client-address' to ciaddr:68; 'broadcast';
   * 'assigned-address' to yiaddr:68 at the client's hardware address.
   */
  readonly via: 'relay' | 'client-address' | 'broadcast' | 'assigned-address';
  /** Where to send instead when the socket cannot reach an unconfigured client (see `note`). */
  readonly fallback?: { readonly address: string; readonly port: number };
  readonly note?: string;
}

export type ReplyOutcome =
  | {
      readonly kind: 'reply';
      readonly packet: DhcpPacket;
      readonly destination: ReplyDestination;
      /** Pass to encodeDhcpPacket: the client's option 57, bounded by 576 and the Ethernet MTU. */
      readonly maxMessageSize: number;
      readonly reason: string;
    }
  | { readonly kind: 'ignore'; readonly reason: string };

export const serverPort = 67;
export const clientPort = 68;

/** Replies stay within one Ethernet frame: boot firmware cannot be trusted to reassemble fragments. */
export const replyMessageSizeMax = 1500;

/** RFC 2131 §3.3: 0xffffffff means infinity, and such a lease is never renewed. */
const infiniteLeaseS = 0xffffffff;

/** Longest name the 128-byte `file` field holds with its terminating NUL. */
const fileFieldTextMax = 127;

export function buildReply(input: ReplyInput): ReplyOutcome {
  checkSettings(input);
  const { request } = input;
  if (request.op !== 'request') return ignore('a BOOTREPLY, not a client request');
  const type = request.options.messageType;
  if (type === undefined) return ignore('BOOTP request without option 53; Slipway answers DHCP only');
  return input.mode === 'reservation' ? reservationReply(input, type) : proxyReply(input, type);
}

/** RFC 2131 §4.1 (and §4.3.2 for DHCPNAK): where a reply to `request` goes. */
export function replyDestination(request: DhcpPacket, reply: DhcpPacket): ReplyDestination {
  const broadcast = { address: ipv4Broadcast, port: clientPort, via: 'broadcast' } as const;
  if (request.giaddr !== ipv4Zero) return { address: request.giaddr, port: serverPort, via: 'relay' };
  if (reply.options.messageType === 'NAK') return broadcast;
  if (request.ciaddr !== ipv4Zero)
    return { address: request.ciaddr, port: clientPort, via: 'client-address' };
  if (hasBroadcastFlag(request) || reply.yiaddr === ipv4Zero) return broadcast;
  return {
    address: reply.yiaddr,
    port: clientPort,
    via: 'assigned-address',
    fallback: { address: ipv4Broadcast, port: clientPort },
    note:
      'RFC 2131 unicasts to yiaddr at chaddr, which needs an ARP entry for an address the client ' +
      'does not hold yet; Node cannot write one, so send to the fallback unless the platform can',
  };
}

type ReservationInput = Extract<ReplyInput, { mode: 'reservation' }>;
type ProxyInput = Extract<ReplyInput, { mode: 'proxy' }>;

function reservationReply(input: ReservationInput, type: DhcpMessageType): ReplyOutcome {
  const { request, lease, serverId } = input;
  switch (type) {
    case 'DISCOVER':
      return reply(input, 'OFFER', { yiaddr: lease.ip, ciaddr: ipv4Zero }, `OFFER of reserved ${lease.ip}`);
    case 'REQUEST': {
      const { serverId: chosen, requestedIp } = request.options;
      if (chosen !== undefined && chosen !== serverId) return ignore(`client selected server ${chosen}`);
      // SELECTING and INIT-REBOOT name the address in option 50; RENEWING/REBINDING in ciaddr.
      const wanted = requestedIp ?? (request.ciaddr === ipv4Zero ? undefined : request.ciaddr);
      if (wanted === undefined) return ignore('REQUEST names no address (no option 50, ciaddr 0.0.0.0)');
      if (wanted !== lease.ip)
        return buildNak(request, serverId, `requested ${wanted} but ${lease.ip} is this client's address`);
      return reply(input, 'ACK', { yiaddr: lease.ip, ciaddr: request.ciaddr }, `ACK of reserved ${lease.ip}`);
    }
    case 'INFORM':
      // RFC 2131 §3.4: configuration only; no address and no lease time.
      return reply(input, 'ACK', { yiaddr: ipv4Zero, ciaddr: request.ciaddr }, 'ACK to INFORM');
    case 'DECLINE':
      return ignore(
        `client declined ${request.options.requestedIp ?? 'its address'}: another host may be using it`,
      );
    case 'RELEASE':
      return ignore('RELEASE needs no reply, and reservations outlive it');
    case 'OFFER':
    case 'ACK':
    case 'NAK':
      return ignore(`${type} is a server message`);
    default:
      return unreachable(type);
  }
}

function proxyReply(input: ProxyInput, type: DhcpMessageType): ReplyOutcome {
  const { request, boot, serverId } = input;
  if (boot.kind === 'no-boot') return ignore(`proxy mode has nothing to offer: ${boot.reason}`);
  const vendorClass = request.options.vendorClass ?? '';
  if (!vendorClass.startsWith('PXEClient') && !vendorClass.startsWith('HTTPClient')) {
    return ignore('proxy mode answers only PXEClient and HTTPClient vendor classes');
  }
  switch (type) {
    case 'DISCOVER':
      return reply(input, 'OFFER', { yiaddr: ipv4Zero, ciaddr: ipv4Zero }, `proxy OFFER: ${boot.reason}`);
    case 'REQUEST': {
      // A broadcast REQUEST that selects the address server is not ours to answer.
      const chosen = request.options.serverId;
      if (chosen !== undefined && chosen !== serverId) return ignore(`client selected server ${chosen}`);
      return reply(input, 'ACK', { yiaddr: ipv4Zero, ciaddr: request.ciaddr }, `proxy ACK: ${boot.reason}`);
    }
    case 'INFORM':
    case 'DECLINE':
    case 'RELEASE':
    case 'OFFER':
    case 'ACK':
    case 'NAK':
      return ignore(`proxy mode does not answer ${type}`);
    default:
      return unreachable(type);
  }
}

function reply(
  input: ReplyInput,
  type: 'OFFER' | 'ACK',
  addresses: { readonly yiaddr: string; readonly ciaddr: string },
  reason: string,
): ReplyOutcome {
  const { request } = input;
  const boot = bootFields(request, input.boot, input.mode);
  const configuration =
    input.mode === 'reservation'
      ? leaseOptions(input.lease, type === 'ACK' && addresses.yiaddr === ipv4Zero)
      : undefined;
  const options =
    configuration !== undefined && !echoes(request)
      ? sharedReservationOptions(configuration, type, input.serverId, boot.options)
      : {
          messageType: type,
          serverId: input.serverId,
          ...configuration,
          ...boot.options,
          ...(input.mode === 'proxy' ? proxyOptions(request, input.boot) : {}),
          ...echoedOptions(request),
        };
  const packet = replyPacket(request, {
    yiaddr: addresses.yiaddr,
    ciaddr: addresses.ciaddr,
    siaddr: boot.siaddr,
    file: boot.file,
    flags: request.flags,
    options,
  });
  return finish(request, packet, reason);
}

/**
 * A reservation's reply options when the request makes the server echo nothing: the same for
 * every request of this lease (its `configuration`) with the same type and boot options `b`, so
 * built once and frozen (the encoder then reuses their wire form too).
 */
function sharedReservationOptions(
  configuration: DhcpOptions,
  type: 'OFFER' | 'ACK',
  serverId: string,
  b: DhcpOptions,
): DhcpOptions {
  let byAnswer = reservationOptionsCache.get(configuration);
  if (byAnswer === undefined) {
    byAnswer = new Map();
    reservationOptionsCache.set(configuration, byAnswer);
  }
  const vendorSpecific = b.vendorSpecific === undefined ? '' : Array.from(b.vendorSpecific).join('.');
  // The key holds every option bootFields can set (keep them in step); lengths first, since a
  // name may hold the separator itself.
  const file = b.bootfileName ?? '';
  const vendorClass = b.vendorClass ?? '';
  const ipxe = b.ipxe === undefined ? '' : Array.from(b.ipxe.raw).join('.');
  const key = `${type}|${serverId}|${file.length}:${file}|${vendorClass.length}:${vendorClass}|${vendorSpecific}|${ipxe}`;
  let options = byAnswer.get(key);
  if (options === undefined) {
    // Bounded: the key varies only with settings and the few boot answers a machine can get.
    if (byAnswer.size >= 64) byAnswer.clear();
    options = Object.freeze({ messageType: type, serverId, ...configuration, ...b });
    byAnswer.set(key, options);
  }
  return options;
}

const reservationOptionsCache = new WeakMap<DhcpOptions, Map<string, DhcpOptions>>();

/** A DHCPNAK to `request`, with `why` in option 56 for the client's log. */
export function buildNak(request: DhcpPacket, serverId: string, why: string): ReplyOutcome {
  requireAddress('serverId', serverId);
  const message = latin1ToBytes(why) ?? new Uint8Array(0);
  const packet = replyPacket(request, {
    yiaddr: ipv4Zero,
    ciaddr: ipv4Zero,
    siaddr: ipv4Zero,
    file: '',
    // RFC 2131 §4.3.2: through a relay, the NAK must be broadcast onto the client's segment.
    flags: request.giaddr === ipv4Zero ? request.flags : request.flags | broadcastFlag,
    options: {
      messageType: 'NAK',
      serverId,
      ...(message.length > 0 ? { other: [{ code: optionCode.message, data: message }] } : {}),
      ...echoedOptions(request),
    },
  });
  return finish(request, packet, `NAK: ${why}`);
}

function finish(request: DhcpPacket, packet: DhcpPacket, reason: string): ReplyOutcome {
  const asked = request.options.maxMessageSize ?? maxMessageSizeMin;
  return {
    kind: 'reply',
    packet,
    destination: replyDestination(request, packet),
    maxMessageSize: Math.min(Math.max(asked, maxMessageSizeMin), replyMessageSizeMax),
    reason,
  };
}

function replyPacket(
  request: DhcpPacket,
  fields: Pick<DhcpPacket, 'yiaddr' | 'ciaddr' | 'siaddr' | 'file' | 'flags' | 'options'>,
): DhcpPacket {
  return {
    op: 'reply',
    htype: request.htype,
    hlen: request.hlen,
    hops: 0,
    xid: request.xid,
    secs: 0,
    flags: fields.flags,
    ciaddr: fields.ciaddr,
    yiaddr: fields.yiaddr,
    siaddr: fields.siaddr,
    giaddr: request.giaddr,
    chaddr: request.chaddr,
    sname: '',
    file: fields.file,
    options: fields.options,
  };
}

/** The options of each lease (a reservation's lease object lives as long as its record). */
const leaseOptionsCache = new WeakMap<ReservedLease, { full?: DhcpOptions; inform?: DhcpOptions }>();

function leaseOptions(lease: ReservedLease, informOnly: boolean): DhcpOptions {
  let cached = leaseOptionsCache.get(lease);
  if (cached === undefined) {
    cached = {};
    leaseOptionsCache.set(lease, cached);
  }
  const key = informOnly ? 'inform' : 'full';
  return (cached[key] ??= computeLeaseOptions(lease, informOnly));
}

function computeLeaseOptions(lease: ReservedLease, informOnly: boolean): DhcpOptions {
  const broadcastAddress = subnetBroadcast(lease.ip, lease.mask);
  const infinite = lease.leaseTimeS === infiniteLeaseS;
  return {
    ...(informOnly
      ? {}
      : {
          leaseTimeS: lease.leaseTimeS,
          // RFC 2131 §4.4.5 defaults: T1 = 0.5 and T2 = 0.875 of the lease.
          ...(infinite
            ? {}
            : {
                renewalTimeS: Math.floor(lease.leaseTimeS / 2),
                rebindingTimeS: Math.floor((lease.leaseTimeS * 7) / 8),
              }),
        }),
    subnetMask: lease.mask,
    ...(broadcastAddress === undefined ? {} : { broadcastAddress }),
    ...(lease.gateway === undefined ? {} : { routers: [lease.gateway] }),
    ...(lease.dns.length === 0 ? {} : { dnsServers: lease.dns }),
    ...(lease.hostname === undefined ? {} : { hostname: lease.hostname }),
    ...(lease.domain === undefined ? {} : { domainName: lease.domain }),
  };
}

interface BootFields {
  readonly siaddr: string;
  readonly file: string;
  readonly options: DhcpOptions;
}

/**
 * To an iPXE client of a server that hands out its address: no-pxedhcp, so that it requests at
 * once instead of waiting for ProxyDHCP offers that will not come. Not from a ProxyDHCP server,
 * whose offer is the one it waits for.
 */
const ipxeNoProxyDhcp: IpxeEncapsulated = (() => {
  const subOptions: SubOption[] = [{ code: ipxeSubOptionCode.noPxeDhcp, data: Uint8Array.of(1) }];
  return { raw: encodeSubOptions(subOptions, 'dhcp', 'option 175 (iPXE)'), subOptions };
})();

function bootFields(request: DhcpPacket, boot: BootDecision, mode: ReplyInput['mode']): BootFields {
  if (boot.kind === 'no-boot') return { siaddr: ipv4Zero, file: '', options: {} };
  // PXE ROMs read the `file` field; a long URL only fits option 67, which iPXE also reads.
  const fitsFileField = boot.bootfile.length <= fileFieldTextMax;
  const asked = request.options.parameterRequestList?.includes(optionCode.bootfileName) ?? false;
  const discovery = boot.pxeDiscoveryControl;
  return {
    siaddr: boot.nextServer,
    file: fitsFileField ? boot.bootfile : '',
    options: {
      ...(fitsFileField && !asked ? {} : { bootfileName: boot.bootfile }),
      ...(boot.vendorClassEcho === undefined ? {} : { vendorClass: boot.vendorClassEcho }),
      ...(boot.client === 'ipxe' && mode === 'reservation' ? { ipxe: ipxeNoProxyDhcp } : {}),
      ...(discovery === undefined
        ? {}
        : {
            vendorSpecific: encodeSubOptions(
              [{ code: pxeSubOptionCode.discoveryControl, data: Uint8Array.of(discovery) }],
              'dhcp',
              'option 43 (vendor-specific information)',
            ),
          }),
    },
  };
}

function proxyOptions(request: DhcpPacket, boot: BootDecision): DhcpOptions {
  const httpBoot = boot.kind === 'boot' && boot.vendorClassEcho !== undefined;
  return {
    // The PXE client recognises a proxyDHCP offer by option 60 "PXEClient".
    ...(httpBoot ? {} : { vendorClass: 'PXEClient' }),
    ...(request.options.clientUuid === undefined ? {} : { clientUuid: request.options.clientUuid }),
  };
}

function echoes(request: DhcpPacket): boolean {
  return request.options.clientId !== undefined || request.options.relayAgentInfo !== undefined;
}

/** Options a server must return as the client or relay sent them. */
function echoedOptions(request: DhcpPacket): DhcpOptions {
  const { clientId, relayAgentInfo } = request.options;
  return {
    // RFC 6842: echo the client identifier so the client can match the reply.
    ...(clientId === undefined ? {} : { clientId }),
    // RFC 3046 §2.2: echo relay agent information verbatim (the encoder puts it last).
    ...(relayAgentInfo === undefined ? {} : { relayAgentInfo }),
  };
}

function checkSettings(input: ReplyInput): void {
  requireAddress('serverId', input.serverId);
  if (input.boot.kind === 'boot') {
    requireAddress('boot.nextServer', input.boot.nextServer);
    if (input.boot.bootfile.length === 0) throw new DhcpSettingsError('boot.bootfile', 'is empty');
    requireLatin1('boot.bootfile', input.boot.bootfile);
  }
  if (input.mode !== 'reservation') return;
  const { lease } = input;
  if (checkedLeases.has(lease)) return;
  requireAddress('lease.ip', lease.ip);
  if (!isContiguousMask(lease.mask)) {
    throw new DhcpSettingsError('lease.mask', `"${lease.mask}" is not a contiguous IPv4 netmask`);
  }
  if (lease.gateway !== undefined) requireAddress('lease.gateway', lease.gateway);
  lease.dns.forEach((server, i) => requireAddress(`lease.dns[${i}]`, server));
  if (!Number.isInteger(lease.leaseTimeS) || lease.leaseTimeS < 1 || lease.leaseTimeS > infiniteLeaseS) {
    throw new DhcpSettingsError(
      'lease.leaseTimeS',
      `${lease.leaseTimeS} is not a whole number of seconds from 1 to 2^32-1`,
    );
  }
  if (lease.hostname !== undefined) requireLatin1('lease.hostname', lease.hostname);
  if (lease.domain !== undefined) requireLatin1('lease.domain', lease.domain);
  checkedLeases.add(lease);
}

/** Leases that passed checkSettings; the lease types are readonly, so a pass stays valid. */
const checkedLeases = new WeakSet<ReservedLease>();

function requireAddress(field: string, address: string): void {
  if (!isIpv4(address)) throw new DhcpSettingsError(field, `"${address}" is not a dotted-quad IPv4 address`);
}

function requireLatin1(field: string, text: string): void {
  if (text.length === 0) throw new DhcpSettingsError(field, 'is empty');
  if (latin1ToBytes(text) === undefined) throw new DhcpSettingsError(field, 'has characters outside Latin-1');
}

function ignore(reason: string): ReplyOutcome {
  return { kind: 'ignore', reason };
}

function unreachable(value: never): never {
  throw new Error(`unhandled message type ${String(value)}`);
}

// The DHCP server: decodes each datagram, looks the client up in the boot inventory, asks the
// lease backend for its address and the PXE policy for its boot file, builds the reply with
// the pure reply builder and sends it where RFC 2131 §4.1 says. Sockets live in
// socket-driver.ts; everything here past the socket is a function of the request and the
// committed state, so any node holding the VIP gives the same answer (invariant 5).
//
// Bad input changes nothing (invariant 7): a malformed datagram is dropped, counted and logged
// at debug; a broken hardware record is logged and skipped; nothing a client sends can crash
// the server.
//
// Addresses come from a LeaseBackend: the hardware record's reservation (reservation mode), or
// pools of Raft-committed leases (dynamic mode, dynamic-leases.ts), which commit before they
// answer a REQUEST (leaseFor may return a promise for that reason). Reservations answer in the
// same turn as the datagram arrived: no promise, and what the hardware record implies (the lease,
// its options, the boot settings) is worked out once per record and reused.
import type { Logger } from 'pino';
import { canonicalMac, type BootInventory, type BootRecord } from '../inventory.js';
import { ipxeScriptPath, joinBaseUrl, binaryPrefix } from '../http/paths.js';
import { clientHardwareAddress, decodeDhcpPacket, encodeDhcpPacket, type DhcpPacket } from './codec.js';
import { DhcpDecodeError, DhcpEncodeError, DhcpSettingsError } from './errors.js';
import {
  decideBoot,
  defaultIpxeBinaries,
  type BootDecision,
  type IpxeBinaries,
  type NetbootSettings,
} from './pxe-policy.js';
import {
  buildNak,
  buildReply,
  clientPort,
  serverPort,
  type ReplyOutcome,
  type ReservedLease,
} from './reply.js';
import {
  addressHolderCheck,
  openDhcpSockets,
  type DhcpPeer,
  type DhcpSockets,
  type Subnet,
} from './socket-driver.js';
import { isIpv4 } from '../../platform/addresses.js';
import { ipv4FromNumber, ipv4ToNumber, ipv4Zero, prefixMaskBits } from './wire-values.js';

export type { DhcpPeer, Subnet } from './socket-driver.js';

/**
 * reservation: known hardware only, addresses from its records. dynamic: the same, plus pool
 * addresses for everyone else. proxy: boot information only, beside another DHCP server.
 */
export type DhcpMode = 'reservation' | 'dynamic' | 'proxy';

/** What a lease backend is asked: one client's request, and its hardware if the inventory knows it. */
export interface LeaseQuery {
  readonly mac: string;
  readonly record: BootRecord | undefined;
  readonly request: DhcpPacket;
  /** The listening interface's subnets; empty when listening on an address only. */
  readonly segment: readonly Subnet[];
  /** Our option 54: a REQUEST naming another server is not ours. */
  readonly serverAddress: string;
}

export type LeaseAnswer =
  | { readonly kind: 'lease'; readonly lease: ReservedLease }
  | { readonly kind: 'none'; readonly reason: string }
  /** The client asked for an address it cannot have: answer DHCPNAK. */
  | { readonly kind: 'nak'; readonly reason: string };

/** Where client addresses come from. */
export interface LeaseBackend {
  /** A promise only when the answer waits for something (a commit, in dynamic mode). */
  leaseFor(query: LeaseQuery): LeaseAnswer | Promise<LeaseAnswer>;
}

/** Observers for metrics and tests; they must not throw. */
export interface DhcpServerHooks {
  readonly onReply?: (event: DhcpReplyEvent) => void;
  readonly onIgnore?: (event: DhcpIgnoreEvent) => void;
  readonly onMalformed?: (event: { readonly from: DhcpPeer; readonly error: DhcpDecodeError }) => void;
  /** Unexpected failures: bad hardware settings, send errors, socket errors. */
  readonly onError?: (error: unknown) => void;
}

export interface DhcpReplyEvent {
  readonly from: DhcpPeer;
  readonly request: DhcpPacket;
  readonly reply: DhcpPacket;
  readonly to: DhcpPeer;
  readonly via: 'relay' | 'client-address' | 'broadcast' | 'assigned-address';
  readonly reason: string;
}

export interface DhcpIgnoreEvent {
  readonly from: DhcpPeer;
  readonly request: DhcpPacket;
  readonly reason: string;
}

export interface DhcpServerOptions {
  readonly inventory: BootInventory;
  /** The VIP (or the node's address): option 54 and next-server, so renewals and TFTP follow it. */
  readonly serverAddress: string;
  /** Base of the iPXE script URLs, e.g. http://VIP:8080. */
  readonly httpBaseUrl: string;
  /** Where UEFI HTTP boot clients fetch iPXE binaries; default httpBaseUrl + /binaries. */
  readonly httpBinaryBaseUrl?: string;
  readonly mode: DhcpMode;
  /**
   * Whether this node answers right now. In steady state exactly one node does; the default is
   * "this host holds serverAddress" (the VIP holder). The node wires it to leadership with a
   * live quorum. Asked for every datagram, so it must be cheap (the default re-reads the
   * interfaces at most every 250 ms).
   */
  readonly shouldAnswer?: () => boolean;
  /** Listen on this interface (broadcasts included); see socket-driver.ts. */
  readonly interfaceName?: string;
  /** The interface's subnets, primary first; default: read with os.networkInterfaces(). */
  readonly segment?: readonly Subnet[];
  /** Listen address when there is no interface (relayed/unicast only); default 0.0.0.0. */
  readonly address?: string;
  /** Listen port; default 67, 0 picks a free one (tests). */
  readonly port?: number;
  /** Port relayed replies go to at giaddr; default 67. Tests move it off the privileged port. */
  readonly relayPort?: number;
  /** Port replies to clients go to; default 68. */
  readonly clientPort?: number;
  /** Default: the hardware records' reservations. */
  readonly leases?: LeaseBackend;
  readonly ipxeBinaries?: IpxeBinaries;
  readonly logger: Logger;
  readonly hooks?: DhcpServerHooks;
  /** Counters to add to (shared by the servers a node opens one after another); default: new ones. */
  readonly counters?: DhcpCounters;
}

export interface DhcpCounters {
  /** Datagrams received. */
  received: number;
  replied: number;
  /** Well-formed requests that deserve no answer (unknown MAC, another server chosen, ...). */
  ignored: number;
  malformed: number;
  /** Datagrams dropped because this node is not the one answering. */
  standby: number;
  /** Datagrams dropped because too many answers were in flight. */
  overloaded: number;
  /** Requests that failed on our side: bad hardware settings or a send error. */
  failed: number;
}

export interface DhcpServer {
  /** The address replies are sent from and the bound port. */
  readonly address: string;
  readonly port: number;
  /** Live counters (read them; the server owns them). */
  readonly counters: Readonly<DhcpCounters>;
  /**
   * Also listens on these local addresses (the VIP while this host holds it), so that a reply
   * to a datagram sent to one leaves from it; see socket-driver.ts.
   */
  setUnicastAddresses(addresses: readonly string[]): Promise<void>;
  /** Stops listening; resolves once in-flight answers are done and the sockets are closed. */
  close(): Promise<void>;
}

/** Answers being worked on at once; beyond it datagrams are dropped, as a kernel queue would. */
export const answersInFlightMax = 1024;

/** Everything an answer depends on besides the request. */
export interface AnswerContext {
  readonly mode: DhcpMode;
  readonly inventory: BootInventory;
  readonly leases: LeaseBackend;
  readonly serverAddress: string;
  readonly httpBaseUrl: string;
  readonly httpBinaryBaseUrl: string;
  readonly ipxeBinaries: IpxeBinaries;
  readonly segment: readonly Subnet[];
}

/**
 * The reply to one decoded request, or why there is none; a promise only when the lease backend
 * answers with one. Throws DhcpSettingsError when a hardware record cannot be turned into a
 * valid reply.
 */
export function answerRequest(
  request: DhcpPacket,
  context: AnswerContext,
): ReplyOutcome | Promise<ReplyOutcome> {
  if (request.op !== 'request') return { kind: 'ignore', reason: 'a BOOTREPLY, not a client request' };
  if (request.htype !== 1 || request.hlen !== 6) {
    return { kind: 'ignore', reason: `hardware type ${request.htype}/${request.hlen}: Ethernet only` };
  }
  const mac = clientHardwareAddress(request);
  const record = context.inventory.byMac(mac);
  if (context.mode === 'proxy') {
    if (record === undefined) return { kind: 'ignore', reason: `no hardware has MAC ${mac}` };
    return buildReply({
      mode: 'proxy',
      request,
      serverId: context.serverAddress,
      boot: bootDecision(request, record, context),
    });
  }
  const answer = context.leases.leaseFor({
    mac,
    record,
    request,
    segment: context.segment,
    serverAddress: context.serverAddress,
  });
  return answer instanceof Promise
    ? answer.then((settled) => leaseReply(request, record, settled, context))
    : leaseReply(request, record, answer, context);
}

function leaseReply(
  request: DhcpPacket,
  record: BootRecord | undefined,
  answer: LeaseAnswer,
  context: AnswerContext,
): ReplyOutcome {
  if (answer.kind === 'none') return { kind: 'ignore', reason: answer.reason };
  if (answer.kind === 'nak') return buildNak(request, context.serverAddress, answer.reason);
  const { lease } = answer;
  // The wildcard socket hears every interface's broadcasts: an unconfigured, unrelayed client
  // is on this listener's segment only if its address is.
  const local = request.giaddr === ipv4Zero && request.ciaddr === ipv4Zero;
  if (local && context.segment.length > 0 && !context.segment.some((net) => subnetHas(net, lease.ip))) {
    return { kind: 'ignore', reason: `reserved ${lease.ip} is not on this interface's subnets` };
  }
  return buildReply({
    mode: 'reservation',
    request,
    serverId: context.serverAddress,
    lease,
    boot:
      record === undefined
        ? { kind: 'no-boot', reason: 'unknown hardware' }
        : bootDecision(request, record, context),
  });
}

/** Reservations: the address comes from the hardware record's interface, and only from there. */
export function reservedLeases(): LeaseBackend {
  // Keyed by the interface object: an updated hardware record brings new objects.
  const answers = new WeakMap<BootRecord['iface'], LeaseAnswer>();
  return {
    leaseFor: ({ mac, record }) => {
      if (record === undefined) return { kind: 'none', reason: `no hardware has MAC ${mac}` };
      let answer = answers.get(record.iface);
      if (answer === undefined) {
        answer = reservationOf(mac, record);
        answers.set(record.iface, answer);
      }
      return answer;
    },
  };
}

function reservationOf(mac: string, record: BootRecord): LeaseAnswer {
  const { iface, hardware } = record;
  if (iface.ip === undefined) {
    return { kind: 'none', reason: `hardware ${hardware.id} reserves no address for ${mac}` };
  }
  return {
    kind: 'lease',
    lease: {
      ip: iface.ip.address,
      mask: prefixToMask(iface.ip.prefix),
      ...(iface.gateway === undefined ? {} : { gateway: iface.gateway }),
      dns: iface.dns,
      ...(iface.hostname === undefined ? {} : { hostname: iface.hostname }),
      leaseTimeS: iface.leaseTimeS,
    },
  };
}

/**
 * Per context, hardware record and interface, the netboot settings. Keyed by the (immutable)
 * hardware object: any change to a machine, allowPXE included, stores a new one.
 */
const netbootCache = new WeakMap<
  AnswerContext,
  WeakMap<BootRecord['hardware'], Map<string, NetbootSettings>>
>();

function bootDecision(request: DhcpPacket, record: BootRecord, context: AnswerContext): BootDecision {
  let byHardware = netbootCache.get(context);
  if (byHardware === undefined) {
    byHardware = new WeakMap();
    netbootCache.set(context, byHardware);
  }
  let byMac = byHardware.get(record.hardware);
  if (byMac === undefined) {
    byMac = new Map();
    byHardware.set(record.hardware, byMac);
  }
  let netboot = byMac.get(record.iface.mac);
  if (netboot === undefined) {
    netboot = netbootSettings(record, context);
    byMac.set(record.iface.mac, netboot);
  }
  return decideBoot(request, netboot, context.ipxeBinaries);
}

function netbootSettings(record: BootRecord, context: AnswerContext): NetbootSettings {
  const { hardware, iface } = record;
  const mac = canonicalMac(iface.mac) ?? iface.mac;
  return {
    allowPXE: hardware.netboot.allowPXE,
    arch: hardware.arch,
    uefi: hardware.uefi,
    // Custom scripts and chain URLs are served at the same per-MAC URL, so DHCP never changes.
    ipxeScriptUrl: joinBaseUrl(context.httpBaseUrl, ipxeScriptPath(mac)),
    tftpServer: context.serverAddress,
    httpBinaryBaseUrl: context.httpBinaryBaseUrl,
  };
}

// ---------------------------------------------------------------------------------------------
// The socket loop

export async function startDhcpServer(options: DhcpServerOptions): Promise<DhcpServer> {
  checkOptions(options);
  const sockets = await openDhcpSockets({
    ...(options.interfaceName === undefined ? {} : { interfaceName: options.interfaceName }),
    ...(options.address === undefined ? {} : { address: options.address }),
    ...(options.segment === undefined ? {} : { segment: options.segment }),
    port: options.port ?? serverPort,
  });
  const context: AnswerContext = {
    mode: options.mode,
    inventory: options.inventory,
    leases: options.leases ?? reservedLeases(),
    serverAddress: options.serverAddress,
    httpBaseUrl: options.httpBaseUrl,
    httpBinaryBaseUrl: options.httpBinaryBaseUrl ?? joinBaseUrl(options.httpBaseUrl, binaryPrefix),
    ipxeBinaries: options.ipxeBinaries ?? defaultIpxeBinaries,
    segment: sockets.segment,
  };
  const server = new ServerLoop(sockets, context, options);
  options.logger.info(
    {
      address: sockets.address,
      port: sockets.port,
      interface: options.interfaceName,
      mode: options.mode,
      serverAddress: options.serverAddress,
    },
    'DHCP server listening',
  );
  return server;
}

/** Counters all at zero. */
export function newDhcpCounters(): DhcpCounters {
  return { received: 0, replied: 0, ignored: 0, malformed: 0, standby: 0, overloaded: 0, failed: 0 };
}

class ServerLoop implements DhcpServer {
  readonly counters: DhcpCounters;
  readonly #sockets: DhcpSockets;
  readonly #context: AnswerContext;
  readonly #shouldAnswer: () => boolean;
  readonly #relayPort: number;
  readonly #clientPort: number;
  readonly #logger: Logger;
  readonly #hooks: DhcpServerHooks;
  /** Answers waiting for their lease backend (dynamic mode's commits). */
  readonly #inFlight = new Set<Promise<void>>();
  /** Replies handed to the socket whose send has not completed. */
  #sending = 0;
  #sent: (() => void) | undefined;
  #closed = false;

  constructor(sockets: DhcpSockets, context: AnswerContext, options: DhcpServerOptions) {
    this.counters = options.counters ?? newDhcpCounters();
    this.#sockets = sockets;
    this.#context = context;
    this.#shouldAnswer = options.shouldAnswer ?? addressHolderCheck(options.serverAddress);
    this.#relayPort = options.relayPort ?? serverPort;
    this.#clientPort = options.clientPort ?? clientPort;
    this.#logger = options.logger;
    this.#hooks = options.hooks ?? {};
    sockets.onMessage((message, from, local) => this.#onDatagram(message, from, local));
    sockets.onError((error) => this.#fail(error, 'DHCP socket error'));
  }

  get address(): string {
    return this.#sockets.address;
  }

  get port(): number {
    return this.#sockets.port;
  }

  setUnicastAddresses(addresses: readonly string[]): Promise<void> {
    return this.#sockets.setUnicastAddresses(addresses);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all(this.#inFlight);
    if (this.#sending > 0) await new Promise<void>((resolve) => (this.#sent = resolve));
    await this.#sockets.close();
  }

  /** `local`: the address the datagram was sent to, when a socket bound there received it. */
  #onDatagram(message: Buffer, from: DhcpPeer, local: string | undefined): void {
    if (this.#closed) return;
    this.counters.received += 1;
    if (!this.#answering()) {
      this.counters.standby += 1;
      return;
    }
    if (this.#inFlight.size + this.#sending >= answersInFlightMax) {
      this.counters.overloaded += 1;
      return;
    }
    let request: DhcpPacket;
    try {
      request = decodeDhcpPacket(message);
    } catch (error) {
      this.counters.malformed += 1;
      if (error instanceof DhcpDecodeError) {
        this.#logger.debug({ from, offset: error.offset, problem: error.problem }, 'malformed DHCP datagram');
        this.#hooks.onMalformed?.({ from, error });
      } else {
        this.#fail(error, 'DHCP decoder failed', { from });
      }
      return;
    }
    let outcome: ReplyOutcome | Promise<ReplyOutcome>;
    try {
      outcome = answerRequest(request, this.#context);
    } catch (error) {
      this.#answerFailed(error, request, from);
      return;
    }
    if (!(outcome instanceof Promise)) {
      this.#replySafely(request, from, outcome, local);
      return;
    }
    const answering = outcome.then(
      (settled) => this.#replySafely(request, from, settled, local),
      (error: unknown) => this.#answerFailed(error, request, from),
    );
    this.#inFlight.add(answering);
    void answering.finally(() => this.#inFlight.delete(answering));
  }

  /** The leadership check; a check that throws counts as "not answering", never as a crash. */
  #answering(): boolean {
    try {
      return this.#shouldAnswer();
    } catch (error) {
      this.#fail(error, 'DHCP shouldAnswer failed');
      return false;
    }
  }

  /** What the logs say about a request (built only when something is logged). */
  #facts(request: DhcpPacket, from: DhcpPeer): Record<string, unknown> {
    const mac = clientHardwareAddress(request);
    return { from, mac, xid: request.xid, type: request.options.messageType };
  }

  /** #reply, with a throwing hook counted as a failure rather than reaching the socket's emitter. */
  #replySafely(request: DhcpPacket, from: DhcpPeer, outcome: ReplyOutcome, local: string | undefined): void {
    try {
      this.#reply(request, from, outcome, local);
    } catch (error) {
      this.#answerFailed(error, request, from);
    }
  }

  /** Sends the answer from `local` (where the request was sent) when a socket is bound there. */
  #reply(request: DhcpPacket, from: DhcpPeer, outcome: ReplyOutcome, local: string | undefined): void {
    if (outcome.kind === 'ignore') {
      this.counters.ignored += 1;
      if (this.#logger.isLevelEnabled('debug')) {
        this.#logger.debug(
          { ...this.#facts(request, from), reason: outcome.reason },
          'DHCP request not answered',
        );
      }
      this.#hooks.onIgnore?.({ from, request, reason: outcome.reason });
      return;
    }
    const { destination, packet } = outcome;
    // RFC 2131 unicasts to yiaddr at chaddr; without an ARP entry for it, broadcast instead.
    const target = destination.fallback ?? destination;
    const to: DhcpPeer = {
      address: target.address,
      port: destination.via === 'relay' ? this.#relayPort : this.#clientPort,
    };
    let bytes: Uint8Array;
    try {
      bytes = encodeDhcpPacket(packet, { maxMessageSize: outcome.maxMessageSize });
    } catch (error) {
      if (!(error instanceof DhcpEncodeError)) {
        this.#answerFailed(error, request, from);
        return;
      }
      // What a reply must echo (option 82, client id) came in too big for any reply: the
      // request is bad input, not our failure, and must not let a client flood the error log.
      this.counters.ignored += 1;
      this.#logger.debug(
        { ...this.#facts(request, from), problem: error.message },
        'DHCP reply would be too large; not answered',
      );
      this.#hooks.onIgnore?.({
        from,
        request,
        reason: 'the reply would be too large for the echoed options',
      });
      return;
    }
    if (this.#closed) return;
    this.#sending += 1;
    this.#sockets.send(
      bytes,
      to,
      (error) => {
        this.#sending -= 1;
        if (this.#sending === 0) this.#sent?.();
        if (error !== null) {
          this.#answerFailed(error, request, from);
          return;
        }
        this.counters.replied += 1;
        if (this.#logger.isLevelEnabled('debug')) {
          this.#logger.debug(
            {
              ...this.#facts(request, from),
              to,
              via: destination.via,
              reply: packet.options.messageType,
              reason: outcome.reason,
            },
            'DHCP reply sent',
          );
        }
        try {
          const { via } = destination;
          this.#hooks.onReply?.({ from, request, reply: packet, to, via, reason: outcome.reason });
        } catch (hookError) {
          this.#fail(hookError, 'DHCP onReply hook failed');
        }
      },
      local,
    );
  }

  #answerFailed(error: unknown, request: DhcpPacket, from: DhcpPeer): void {
    if (this.#closed) return;
    this.counters.failed += 1;
    const why = error instanceof DhcpSettingsError ? 'hardware settings cannot be sent' : 'reply failed';
    this.#fail(error, `DHCP ${why}`, this.#facts(request, from));
  }

  #fail(error: unknown, message: string, facts: object = {}): void {
    const level = error instanceof DhcpSettingsError ? 'warn' : 'error';
    this.#logger[level]({ ...facts, err: error }, message);
    this.#hooks.onError?.(error);
  }
}

function checkOptions(options: DhcpServerOptions): void {
  if (options.mode === 'dynamic' && options.leases === undefined) {
    throw new DhcpSettingsError('leases', 'dynamic mode needs a lease backend with pools');
  }
  if (!isIpv4(options.serverAddress)) {
    throw new DhcpSettingsError('serverAddress', `"${options.serverAddress}" is not an IPv4 address`);
  }
  for (const [field, url] of [
    ['httpBaseUrl', options.httpBaseUrl],
    ['httpBinaryBaseUrl', options.httpBinaryBaseUrl],
  ] as const) {
    if (url !== undefined && !/^https?:\/\/[^/\s]+(\/\S*)?$/.test(url)) {
      throw new DhcpSettingsError(field, `"${url}" is not an http:// or https:// URL`);
    }
  }
  for (const [field, port] of [
    ['port', options.port],
    ['relayPort', options.relayPort],
    ['clientPort', options.clientPort],
  ] as const) {
    if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535)) {
      throw new DhcpSettingsError(field, `${port} is not a UDP port`);
    }
  }
}

function prefixToMask(prefix: number): string {
  return ipv4FromNumber(prefixMaskBits(prefix));
}

function subnetHas(net: Subnet, address: string): boolean {
  const a = ipv4ToNumber(address);
  const b = ipv4ToNumber(net.address);
  if (a === undefined || b === undefined) return false;
  const mask = prefixMaskBits(net.prefix);
  return (a & mask) >>> 0 === (b & mask) >>> 0;
}

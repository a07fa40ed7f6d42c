// Dynamic mode's lease backend: addresses from pools, every ACK preceded by a grant committed
// through Raft (the ledger), so a leader failover never loses a lease and never hands one
// address to two machines.
//
// - Hardware with a reserved address still gets it; everyone else gets a pool address.
// - DISCOVER picks an address without committing anything (as Kea does) and holds it for this
//   MAC for a few seconds, so concurrent DISCOVERs get different offers.
// - REQUEST commits the grant, then ACKs; a grant the state refuses is NAKed.
// - RELEASE and DECLINE are committed and get no reply (RFC 2131 §4.3.4, §4.3.5).
//
// Only the node that answers DHCP (the leader) runs this, so the holds are local; the state
// machine decides every grant, so a stale hold can cost an offer, never a duplicate address.
import type { GrantOutcome, Lease, LeaseGrant } from '../../model/records.js';
import { clientHardwareAddress } from './codec.js';
import type { ReservedLease } from './reply.js';
import type { LeaseAnswer, LeaseBackend, LeaseQuery } from './server.js';
import { poolHas, poolSubnetHas, type DhcpPool } from './pool.js';
import { ipv4FromNumber as ipText, ipv4ToNumber as ipNumber, ipv4Zero } from './wire-values.js';

/** The replicated lease state, as the DHCP server on the leader sees and changes it. */
export interface LeaseLedger {
  leaseOfMac(mac: string): Lease | undefined;
  leaseAt(ip: string): Lease | undefined;
  /** The MAC of the hardware interface that reserves `ip`, if any. */
  reservedFor(ip: string): string | undefined;
  /** Commits a grant (the ledger may batch them); resolves once applied. */
  grant(grant: LeaseGrant): Promise<GrantOutcome>;
  release(mac: string, ip: string): Promise<void>;
  decline(mac: string, ip: string): Promise<void>;
}

export interface DynamicLeaseOptions {
  readonly pools: readonly DhcpPool[];
  readonly leaseTimeS: number;
  readonly ledger: LeaseLedger;
  /** The reservation backend, for machines whose hardware record reserves an address. */
  readonly reservations: LeaseBackend;
  /** How long an offered address is kept for its client. */
  readonly offerHoldMs?: number;
  readonly now?: () => number;
}

/** Offers held at once; past it, the expired ones are swept, and if none are, DISCOVERs wait. */
export const offerHoldsMax = 65_536;
const offerHoldMsDefault = 10_000;
/**
 * A lease younger than this share of its time is handed out again as committed. Renewals at T1
 * (half the lease) always commit an extension.
 */
const reuseFraction = 0.25;

interface Hold {
  readonly mac: string;
  readonly ip: string;
  readonly untilMs: number;
}

export function dynamicLeases(options: DynamicLeaseOptions): LeaseBackend {
  return new DynamicLeases(options);
}

class DynamicLeases implements LeaseBackend {
  readonly #pools: readonly DhcpPool[];
  readonly #leaseTimeS: number;
  readonly #ledger: LeaseLedger;
  readonly #reservations: LeaseBackend;
  readonly #holdMs: number;
  readonly #now: () => number;
  readonly #holdByMac = new Map<string, Hold>();
  readonly #holdByIp = new Map<string, Hold>();
  /** Per pool: where the next search for a free address starts. */
  readonly #cursor = new Map<DhcpPool, number>();

  constructor(options: DynamicLeaseOptions) {
    this.#pools = options.pools;
    this.#leaseTimeS = options.leaseTimeS;
    this.#ledger = options.ledger;
    this.#reservations = options.reservations;
    this.#holdMs = options.offerHoldMs ?? offerHoldMsDefault;
    this.#now = options.now ?? Date.now;
  }

  async leaseFor(query: LeaseQuery): Promise<LeaseAnswer> {
    if (query.record?.iface.ip !== undefined) return this.#reservations.leaseFor(query);
    const { request } = query;
    const mac = clientHardwareAddress(request);
    const pools = this.#poolsFor(query);
    switch (request.options.messageType) {
      case 'DISCOVER':
        return this.#offer(mac, pools);
      case 'REQUEST':
        return this.#request(query, mac, pools);
      case 'RELEASE': {
        const lease = this.#ledger.leaseOfMac(mac);
        if (lease === undefined || lease.ip !== request.ciaddr || lease.expiresMs <= this.#now()) {
          return none(`RELEASE of ${request.ciaddr}, which ${mac} does not hold`);
        }
        await this.#ledger.release(mac, lease.ip);
        return none(`${mac} released ${lease.ip}`);
      }
      case 'DECLINE': {
        const ip = request.options.requestedIp;
        const lease = this.#ledger.leaseOfMac(mac);
        if (ip === undefined || lease?.ip !== ip)
          return none(`DECLINE of ${ip ?? 'nothing'}, which ${mac} does not hold`);
        await this.#ledger.decline(mac, ip);
        this.#drop(mac);
        return none(`${mac} declined ${ip}: another host uses it; kept out of the pool`);
      }
      case 'INFORM': {
        // Configuration only (the reply carries no address): the pool the client's address is in.
        const ip = ipNumber(request.ciaddr);
        const pool = ip === undefined ? undefined : this.#pools.find((p) => poolSubnetHas(p, ip));
        return pool === undefined
          ? none(`INFORM from ${request.ciaddr}, outside every pool`)
          : leaseAnswer(pool, request.ciaddr, this.#leaseTimeS);
      }
      default:
        return none(`${request.options.messageType ?? 'BOOTP'} gets no lease`);
    }
  }

  /** The pools this client may get an address from, by where its request came from. */
  #poolsFor(query: LeaseQuery): DhcpPool[] {
    const { request } = query;
    const via =
      request.giaddr !== ipv4Zero ? request.giaddr : request.ciaddr !== ipv4Zero ? request.ciaddr : undefined;
    if (via !== undefined) {
      const n = ipNumber(via);
      return n === undefined ? [] : this.#pools.filter((p) => poolSubnetHas(p, n));
    }
    if (query.segment.length === 0) return [...this.#pools];
    return this.#pools.filter((p) =>
      query.segment.some((net) => {
        const n = ipNumber(net.address);
        return n !== undefined && net.prefix === p.prefix && poolSubnetHas(p, n);
      }),
    );
  }

  #offer(mac: string, pools: readonly DhcpPool[]): LeaseAnswer {
    if (pools.length === 0) return none(`no pool serves ${mac}'s segment`);
    const now = this.#now();
    const found = this.#candidate(mac, pools, now);
    if (found === undefined) {
      return none(`every address of ${pools.map((p) => p.spec).join(', ')} is in use`);
    }
    if (!this.#hold(mac, found.ip, now)) return none('too many offers outstanding');
    return leaseAnswer(found.pool, found.ip, this.#leaseTimeS);
  }

  async #request(query: LeaseQuery, mac: string, pools: readonly DhcpPool[]): Promise<LeaseAnswer> {
    const { request } = query;
    const chosen = request.options.serverId;
    if (chosen !== undefined && chosen !== query.serverAddress) {
      this.#drop(mac);
      return none(`client selected server ${chosen}`);
    }
    // SELECTING and INIT-REBOOT name the address in option 50; RENEWING/REBINDING in ciaddr.
    const wanted = request.options.requestedIp ?? (request.ciaddr === ipv4Zero ? undefined : request.ciaddr);
    if (wanted === undefined) return none('REQUEST names no address (no option 50, ciaddr 0.0.0.0)');
    const current = this.#ledger.leaseOfMac(mac);
    const n = ipNumber(wanted);
    const pool = n === undefined ? undefined : pools.find((p) => poolHas(p, n));
    if (pool === undefined) {
      // RFC 2131 §4.3.2: an address from another network is NAKed if we know the client,
      // and answered with silence if we do not (another server may own it).
      if (current === undefined)
        return none(`${wanted} is not in a pool serving ${mac}, and ${mac} has no lease`);
      return nak(`${wanted} is not in a pool serving this client`);
    }
    const now = this.#now();
    // A client asking again for the lease it was granted a moment ago (a repeated DORA, a reboot)
    // gets what is committed, without another commit, as Kea's cache-threshold does: the ACK
    // promises only the time the committed lease has left.
    if (current?.ip === wanted && current.state === 'bound') {
      const leftMs = current.expiresMs - now;
      if (leftMs > this.#leaseTimeS * 1000 * (1 - reuseFraction)) {
        this.#drop(mac);
        return leaseAnswer(pool, wanted, Math.floor(leftMs / 1000));
      }
    }
    if (!this.#free(wanted, mac, now)) return nak(`${wanted} is held for another client`);
    // Kept until the commit lands, so no concurrent DISCOVER offers it to another MAC.
    this.#hold(mac, wanted, now);
    const outcome = await this.#ledger.grant({ mac, ip: wanted, leaseTimeS: this.#leaseTimeS });
    if (!outcome.granted) {
      this.#drop(mac);
      return nak(outcome.reason);
    }
    this.#drop(mac);
    return leaseAnswer(pool, wanted, this.#leaseTimeS);
  }

  /** The address to offer: the client's own, then the one it asks for, then a free one. */
  #candidate(
    mac: string,
    pools: readonly DhcpPool[],
    now: number,
  ): { readonly ip: string; readonly pool: DhcpPool } | undefined {
    const poolOf = (ip: string | undefined): DhcpPool | undefined => {
      const n = ip === undefined ? undefined : ipNumber(ip);
      return n === undefined ? undefined : pools.find((p) => poolHas(p, n));
    };
    const held = this.#holdByMac.get(mac);
    const heldPool = held !== undefined && held.untilMs > now ? poolOf(held.ip) : undefined;
    if (held !== undefined && heldPool !== undefined) return { ip: held.ip, pool: heldPool };
    const own = this.#ledger.leaseOfMac(mac)?.ip;
    const ownPool = poolOf(own);
    if (own !== undefined && ownPool !== undefined && this.#free(own, mac, now))
      return { ip: own, pool: ownPool };
    for (const pool of pools) {
      // Never-leased addresses first, so expired leases keep their address for their machine.
      const fresh = this.#scan(
        pool,
        (ip) => this.#ledger.leaseAt(ip) === undefined && this.#free(ip, mac, now),
      );
      if (fresh !== undefined) return { ip: fresh, pool };
    }
    for (const pool of pools) {
      const any = this.#scan(pool, (ip) => this.#free(ip, mac, now));
      if (any !== undefined) return { ip: any, pool };
    }
    return undefined;
  }

  /** The first address of the pool from its cursor on (wrapping) that `ok` accepts. */
  #scan(pool: DhcpPool, ok: (ip: string) => boolean): string | undefined {
    const size = pool.last - pool.first + 1;
    const start = this.#cursor.get(pool) ?? 0;
    for (let i = 0; i < size; i++) {
      const offset = (start + i) % size;
      const ip = ipText(pool.first + offset);
      if (ok(ip)) {
        this.#cursor.set(pool, (offset + 1) % size);
        return ip;
      }
    }
    return undefined;
  }

  /** Whether `mac` may have `ip` now: not reserved, leased, declined or offered to another. */
  #free(ip: string, mac: string, now: number): boolean {
    const reserved = this.#ledger.reservedFor(ip);
    if (reserved !== undefined && reserved !== mac) return false;
    const lease = this.#ledger.leaseAt(ip);
    if (lease !== undefined && lease.mac !== mac && lease.expiresMs > now) return false;
    const hold = this.#holdByIp.get(ip);
    return hold === undefined || hold.mac === mac || hold.untilMs <= now;
  }

  #hold(mac: string, ip: string, now: number): boolean {
    this.#drop(mac);
    if (this.#holdByMac.size >= offerHoldsMax) {
      for (const hold of this.#holdByMac.values()) if (hold.untilMs <= now) this.#drop(hold.mac);
      if (this.#holdByMac.size >= offerHoldsMax) return false;
    }
    const hold: Hold = { mac, ip, untilMs: now + this.#holdMs };
    this.#holdByMac.set(mac, hold);
    this.#holdByIp.set(ip, hold);
    return true;
  }

  #drop(mac: string): void {
    const hold = this.#holdByMac.get(mac);
    if (hold === undefined) return;
    this.#holdByMac.delete(mac);
    if (this.#holdByIp.get(hold.ip) === hold) this.#holdByIp.delete(hold.ip);
  }
}

function leaseAnswer(pool: DhcpPool, ip: string, leaseTimeS: number): LeaseAnswer {
  const lease: ReservedLease = {
    ip,
    mask: pool.mask,
    ...(pool.router === undefined ? {} : { gateway: pool.router }),
    dns: pool.dns,
    leaseTimeS,
  };
  return { kind: 'lease', lease };
}

function none(reason: string): LeaseAnswer {
  return { kind: 'none', reason };
}

function nak(reason: string): LeaseAnswer {
  return { kind: 'nak', reason };
}

// Dynamic DHCP leases in the replicated state. The DHCP server on the leader picks addresses
// and proposes grants; apply decides, by the leader's stamp, whether each grant stands, so two
// nodes (or a stale leader) can never give one address to two machines: a grant for an address
// another MAC holds unexpired, or one reserved for other hardware, is refused.
//
// One lease per MAC: a grant to a MAC that holds another address releases the old one. Expired
// leases stay until their address is given to someone else, so a machine that comes back gets
// the same address (what Kea and dnsmasq do too).
import { leaseGrantsPerCommandMax, leasesMax, leaseTimeSMax } from '../../model/limits.js';
import type { GrantOutcome, Lease, LeaseGrant } from '../../model/records.js';
import { isIpv4, normalizeMac } from '../../platform/addresses.js';
import { record } from './immutable.js';

/** Who an address is reserved for in hardware records (another machine's interface), if anyone. */
export type ReservationLookup = (ip: string) => string | undefined;

export class LeaseTable {
  #byIp = new Map<string, Lease>();
  #ipByMac = new Map<string, string>();

  get size(): number {
    return this.#byIp.size;
  }

  at(ip: string): Lease | undefined {
    return this.#byIp.get(ip);
  }

  /** The MAC's bound lease, expired or not. */
  ofMac(mac: string): Lease | undefined {
    const normal = normalizeMac(mac);
    const ip = normal === undefined ? undefined : this.#ipByMac.get(normal);
    return ip === undefined ? undefined : this.#byIp.get(ip);
  }

  /** Every lease, by address (numerically). */
  all(): Lease[] {
    return [...this.#byIp.values()].sort((a, b) => ipOrder(a.ip, b.ip));
  }

  /** A batch of grants, each decided on its own, in order (a later one sees the earlier ones). */
  grant(
    grants: readonly LeaseGrant[],
    nowMs: number,
    reservedFor: ReservationLookup,
  ): GrantOutcome[] | string {
    if (grants.length === 0 || grants.length > leaseGrantsPerCommandMax) {
      return `grants: must hold 1-${leaseGrantsPerCommandMax} grants, got ${grants.length}`;
    }
    return grants.map((g) => this.#grantOne(g, nowMs, reservedFor));
  }

  #grantOne(grant: LeaseGrant, nowMs: number, reservedFor: ReservationLookup): GrantOutcome {
    const mac = normalizeMac(grant.mac);
    if (mac === undefined) return refused(`"${grant.mac}" is not a MAC address`);
    if (!isIpv4(grant.ip)) return refused(`"${grant.ip}" is not a dotted-quad IPv4 address`);
    if (!Number.isSafeInteger(grant.leaseTimeS) || grant.leaseTimeS < 1 || grant.leaseTimeS > leaseTimeSMax) {
      return refused(`lease time ${grant.leaseTimeS} s is not 1-${leaseTimeSMax}`);
    }
    const reservedMac = reservedFor(grant.ip);
    if (reservedMac !== undefined && reservedMac !== mac) {
      return refused(`${grant.ip} is reserved for ${reservedMac} in a hardware record`);
    }
    const current = this.#byIp.get(grant.ip);
    if (current !== undefined && current.mac !== mac && current.expiresMs > nowMs) {
      return refused(
        current.state === 'declined'
          ? `${grant.ip} was declined (another host uses it) until ${new Date(current.expiresMs).toISOString()}`
          : `${grant.ip} is leased to ${current.mac} until ${new Date(current.expiresMs).toISOString()}`,
      );
    }
    if (current === undefined && this.#byIp.size >= leasesMax) {
      return refused(`the state holds the maximum of ${leasesMax} leases`);
    }
    const kept = current?.mac === mac && current.state === 'bound';
    const lease = record<Lease>({
      ip: grant.ip,
      mac,
      state: 'bound',
      expiresMs: nowMs + grant.leaseTimeS * 1000,
      grantedMs: kept ? current.grantedMs : nowMs,
      updatedMs: nowMs,
    });
    if (current !== undefined && current.mac !== mac) this.#ipByMac.delete(current.mac);
    const previousIp = this.#ipByMac.get(mac);
    if (previousIp !== undefined && previousIp !== grant.ip) this.#byIp.delete(previousIp);
    this.#byIp.set(lease.ip, lease);
    this.#ipByMac.set(mac, lease.ip);
    return { granted: true, lease };
  }

  /** RFC 2131 §4.4.6: the client gives the address back; it stays its affinity, expired now. */
  release(mac: string, ip: string, nowMs: number): Lease | string {
    const lease = this.#owned(mac, ip);
    if (typeof lease === 'string') return lease;
    const released = record<Lease>({
      ...lease,
      expiresMs: Math.min(lease.expiresMs, nowMs),
      updatedMs: nowMs,
    });
    this.#byIp.set(ip, released);
    return released;
  }

  /**
   * RFC 2131 §4.4.6: the client found the address in use by another host. It is kept from
   * everyone for `probationS`, and the client loses its claim.
   */
  decline(mac: string, ip: string, probationS: number, nowMs: number): Lease | string {
    const lease = this.#owned(mac, ip);
    if (typeof lease === 'string') return lease;
    if (!Number.isSafeInteger(probationS) || probationS < 1 || probationS > leaseTimeSMax) {
      return `probation ${probationS} s is not 1-${leaseTimeSMax}`;
    }
    const declined = record<Lease>({
      ip,
      mac: '',
      state: 'declined',
      expiresMs: nowMs + probationS * 1000,
      grantedMs: nowMs,
      updatedMs: nowMs,
    });
    this.#ipByMac.delete(lease.mac);
    this.#byIp.set(ip, declined);
    return declined;
  }

  #owned(mac: string, ip: string): Lease | string {
    const normal = normalizeMac(mac);
    if (normal === undefined) return `"${mac}" is not a MAC address`;
    const lease = this.#byIp.get(ip);
    if (lease === undefined || lease.mac !== normal) return `${ip} is not leased to ${normal}`;
    return lease;
  }

  /** Checks a snapshot's leases and returns the installer, or a problem. */
  static prepare(leases: readonly Lease[]): (() => LeaseTable) | string {
    const byIp = new Map<string, Lease>();
    const ipByMac = new Map<string, string>();
    for (const lease of leases) {
      if (!isIpv4(lease.ip)) return `lease address "${lease.ip}" is not a dotted-quad IPv4 address`;
      if (byIp.has(lease.ip)) return `two leases for ${lease.ip}`;
      if (lease.state === 'bound') {
        if (normalizeMac(lease.mac) !== lease.mac)
          return `lease of ${lease.ip}: "${lease.mac}" is not a normal MAC`;
        if (ipByMac.has(lease.mac)) return `${lease.mac} holds two leases`;
        ipByMac.set(lease.mac, lease.ip);
      } else if (lease.mac !== '') {
        return `declined lease of ${lease.ip} names a holder`;
      }
      byIp.set(lease.ip, lease);
    }
    return () => {
      const table = new LeaseTable();
      table.#byIp = byIp;
      table.#ipByMac = ipByMac;
      return table;
    };
  }
}

function refused(reason: string): GrantOutcome {
  return { granted: false, reason };
}

/** Orders dotted quads by value. */
export function ipOrder(a: string, b: string): number {
  return ipValue(a) - ipValue(b);
}

/** An IPv4 address as a number, for ordering. */
export function ipValue(ip: string): number {
  let value = 0;
  for (const part of ip.split('.')) value = value * 256 + Number(part);
  return value;
}

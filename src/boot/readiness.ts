// When a boot service can be opened, read from the link table: DHCP on an interface needs the
// interface and an IPv4 address on it (and serves only with carrier); a service on an address
// needs that address on this host (the wildcard always is). Pure: a table in, a Readiness out.
import type { LinkState, LinkTable } from '../platform/link-watch.js';
import type { Subnet } from './dhcp/socket-driver.js';
import type { Readiness } from './link-bound-service.js';

const wildcards = new Set(['0.0.0.0', '::', '[::]', '']);

/** Why an interface that is there still cannot pass traffic, or undefined when it can. */
function linkTrouble(link: LinkState): string | undefined {
  if (!link.adminUp) return `interface ${link.name} is down (ip link set ${link.name} up)`;
  if (!link.carrier)
    return `interface ${link.name} has no carrier (cable, switch port, or bridge without a port up)`;
  return undefined;
}

/** DHCP on an interface (broadcasts included), or on an address (`--dhcp-addr`). */
export function dhcpReadiness(where: {
  readonly dhcpInterface?: string | undefined;
  readonly dhcpAddr?: string | undefined;
}): (links: LinkTable) => Readiness<readonly Subnet[]> {
  const name = where.dhcpInterface;
  if (name === undefined) {
    const host = hostOf(where.dhcpAddr ?? '0.0.0.0:67');
    const onAddress = addressReadiness(host);
    return (links) => {
      const r = onAddress(links);
      return r.ready ? { ...r, arg: [] } : r;
    };
  }
  return (links) => {
    const link = links.get(name);
    if (link === undefined) {
      const known = [...links.keys()].join(', ');
      return { ready: false, reason: `interface ${name} does not exist (interfaces here: ${known})` };
    }
    if (link.ipv4.length === 0) return { ready: false, reason: `interface ${name} has no IPv4 address` };
    // A /32 is an extra address (the VIP while this node leads), not a subnet the interface is
    // on: it must not make the sockets open again each time the VIP comes or goes.
    const subnets = link.ipv4.filter((a) => a.prefix < 32);
    const segment = (subnets.length > 0 ? subnets : link.ipv4).map((a) => ({
      address: a.address,
      prefix: a.prefix,
    }));
    // A new ifindex (the interface made again) or other addresses: sockets are opened again.
    const key = `${String(link.index)} ${segment.map((a) => `${a.address}/${String(a.prefix)}`).join(' ')}`;
    const trouble = linkTrouble(link);
    return { ready: true, key, arg: segment, ...(trouble === undefined ? {} : { degraded: trouble }) };
  };
}

/** A service bound on `host`: ready when it is the wildcard or an address of this host. */
export function addressReadiness(host: string): (links: LinkTable) => Readiness<undefined> {
  // The whole of 127.0.0.0/8 is local on Linux, not only the address lo lists.
  if (wildcards.has(host) || host.startsWith('127.'))
    return () => ({ ready: true, key: 'any', arg: undefined });
  return (links) => {
    for (const link of links.values()) {
      if (!link.ipv4.some((a) => a.address === host)) continue;
      const trouble = linkTrouble(link);
      return {
        ready: true,
        key: `${String(link.index)} ${link.name}`,
        arg: undefined,
        ...(trouble === undefined ? {} : { degraded: trouble }),
      };
    }
    return { ready: false, reason: `address ${host} is not on this host (yet)` };
  };
}

/**
 * The local addresses DHCP binds a socket on besides its own, so that a reply leaves from the
 * address its request was sent to: the server identifier (the VIP) while this host holds it, and
 * the DHCP interface's other addresses.
 */
export function dhcpUnicastAddresses(
  cfg: { readonly advertise: string; readonly dhcpInterface?: string | undefined },
  links: LinkTable,
): string[] {
  const addresses = new Set<string>();
  const own = cfg.dhcpInterface === undefined ? undefined : links.get(cfg.dhcpInterface);
  for (const a of own?.ipv4 ?? []) addresses.add(a.address);
  for (const link of links.values()) {
    if (link.ipv4.some((a) => a.address === cfg.advertise)) addresses.add(cfg.advertise);
  }
  return [...addresses];
}

function hostOf(addr: string): string {
  const i = addr.lastIndexOf(':');
  return addr.slice(0, i).replace(/^\[|\]$/g, '');
}

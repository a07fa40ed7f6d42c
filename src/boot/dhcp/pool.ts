// Dynamic address pools as the operator writes them on the command line:
//
//   START-END/PREFIX[,router=IP][,dns=IP+IP...]     e.g. 10.0.0.100-10.0.0.199/24,router=10.0.0.1
//
// The prefix gives the subnet (netmask, broadcast, and which relay or interface the pool
// serves); router and DNS are handed to every client of the pool. Pure: parsing and address
// arithmetic only.
import { ipv4FromNumber as ipText, ipv4ToNumber as ipNumber, prefixMaskBits } from './wire-values.js';

export interface DhcpPool {
  /** As written, for logs and errors. */
  readonly spec: string;
  readonly first: number;
  readonly last: number;
  readonly prefix: number;
  /** The subnet's network address, as a number. */
  readonly network: number;
  readonly mask: string;
  readonly router?: string;
  readonly dns: readonly string[];
}

export class PoolSpecError extends Error {
  constructor(spec: string, problem: string) {
    super(
      `--dhcp-pool ${JSON.stringify(spec)}: ${problem} (expected START-END/PREFIX[,router=IP][,dns=IP+IP])`,
    );
    this.name = 'PoolSpecError';
  }
}

/** Addresses a pool may span: a /16 is 65,534 machines, more than one segment should hold. */
export const poolSizeMax = 65_536;

export function parsePoolSpec(spec: string): DhcpPool {
  const [range = '', ...settings] = spec.split(',');
  const match = /^([0-9.]+)-([0-9.]+)\/([0-9]{1,2})$/.exec(range.trim());
  if (match === null) throw new PoolSpecError(spec, 'the range is not START-END/PREFIX');
  const [, startText = '', endText = '', prefixText = ''] = match;
  const first = ipNumber(startText);
  const last = ipNumber(endText);
  const prefix = Number(prefixText);
  if (first === undefined) throw new PoolSpecError(spec, `${startText} is not an IPv4 address`);
  if (last === undefined) throw new PoolSpecError(spec, `${endText} is not an IPv4 address`);
  if (prefix < 8 || prefix > 30) throw new PoolSpecError(spec, `prefix /${prefix} must be 8-30`);
  if (last < first) throw new PoolSpecError(spec, `${endText} comes before ${startText}`);
  const maskBits = prefixMaskBits(prefix);
  const network = (first & maskBits) >>> 0;
  const broadcast = (network | ~maskBits) >>> 0;
  if ((last & maskBits) >>> 0 !== network) {
    throw new PoolSpecError(spec, `${startText} and ${endText} are not in one /${prefix} subnet`);
  }
  if (first === network || last === broadcast) {
    throw new PoolSpecError(spec, `the range includes the subnet's network or broadcast address`);
  }
  if (last - first + 1 > poolSizeMax) throw new PoolSpecError(spec, `more than ${poolSizeMax} addresses`);
  let router: string | undefined;
  const dns: string[] = [];
  for (const setting of settings) {
    const [key = '', value = ''] = setting.split('=', 2).map((s) => s.trim());
    if (key === 'router') {
      const n = ipNumber(value);
      if (n === undefined || (n & maskBits) >>> 0 !== network) {
        throw new PoolSpecError(
          spec,
          `router ${JSON.stringify(value)} is not an address in the pool's subnet`,
        );
      }
      router = ipText(n);
    } else if (key === 'dns') {
      for (const server of value.split('+')) {
        const n = ipNumber(server);
        if (n === undefined)
          throw new PoolSpecError(spec, `dns ${JSON.stringify(server)} is not an IPv4 address`);
        dns.push(ipText(n));
      }
    } else {
      throw new PoolSpecError(spec, `unknown setting ${JSON.stringify(key)} (router, dns)`);
    }
  }
  return {
    spec,
    first,
    last,
    prefix,
    network,
    mask: ipText(maskBits),
    ...(router === undefined ? {} : { router }),
    dns,
  };
}

/** Pools must not overlap: an address belongs to one pool, so one set of options applies. */
export function overlappingPools(pools: readonly DhcpPool[]): [DhcpPool, DhcpPool] | undefined {
  const sorted = [...pools].sort((a, b) => a.first - b.first);
  for (let i = 1; i < sorted.length; i++) {
    const [a, b] = [sorted[i - 1], sorted[i]];
    if (a !== undefined && b !== undefined && b.first <= a.last) return [a, b];
  }
  return undefined;
}

export function poolHas(pool: DhcpPool, ip: number): boolean {
  return ip >= pool.first && ip <= pool.last;
}

/** Whether `ip` is in the pool's subnet (a relay's giaddr, say). */
export function poolSubnetHas(pool: DhcpPool, ip: number): boolean {
  return (ip & prefixMaskBits(pool.prefix)) >>> 0 === pool.network;
}

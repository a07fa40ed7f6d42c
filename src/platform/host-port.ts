// HOST:PORT, as every address flag, config field, API request and balancer spec takes it: a
// host name or IPv4 address, or an IPv6 address in brackets, then a port from 1 to 65535. One
// definition, so that an address one part accepts is never refused by another.

export interface HostPort {
  /** As written; an IPv6 address keeps its brackets. */
  readonly host: string;
  readonly port: number;
}

/** A name or IPv4 address begins and ends with a letter or digit (never "-x" or "."). */
const hostPortPattern = /^([A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9a-fA-F:.]+\]):(\d{1,5})$/;

/** The parts of `addr`, or undefined when it is not HOST:PORT with a port 1-65535. */
export function parseHostPort(addr: string): HostPort | undefined {
  const m = hostPortPattern.exec(addr);
  if (m === null) return undefined;
  const port = Number(m[2]);
  return port >= 1 && port <= 65_535 ? { host: m[1]!, port } : undefined;
}

export function isHostPort(addr: string): boolean {
  return parseHostPort(addr) !== undefined;
}

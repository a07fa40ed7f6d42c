// Where a machine's BMC answers: `ipmi://HOST:PORT`, the form operators give with --bmc and in
// the hardware document's bmc.address. A bare HOST (the form before power control existed) is
// read as ipmi://HOST:623, so stored records and old documents stay valid.

export const ipmiPortDefault = 623;

export interface BmcEndpoint {
  /** A host name or an IPv4 address, or an IPv6 address without brackets. */
  readonly host: string;
  readonly port: number;
}

const hostLabel = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const hostnamePattern = new RegExp(`^(?=.{1,253}$)${hostLabel}(?:\\.${hostLabel})*$`);
const ipv6Pattern = /^[0-9A-Fa-f:.]{2,45}$/;

/** The endpoint, or a message saying what is wrong and the form wanted. */
export function parseBmcAddress(text: string): BmcEndpoint | { readonly problem: string } {
  const shown = JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
  const want = 'want ipmi://HOST:PORT, e.g. ipmi://10.0.1.17:623';
  if (text.trim() === '') return { problem: 'is empty' };
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(text);
  if (scheme !== null && scheme[1]?.toLowerCase() !== 'ipmi') {
    return { problem: `${shown} has the scheme "${scheme[1] ?? ''}"; only ipmi is supported (${want})` };
  }
  const rest = scheme === null ? text : text.slice(scheme[0].length);
  // [v6]:port, host:port or host; nothing after the authority (no path, user or query).
  const parts = /^(?:\[([^\]]*)\]|([^:/?#@[\]]*))(?::([0-9]*))?$/.exec(rest);
  if (parts === null) return { problem: `${shown} is not a BMC address (${want})` };
  const host = parts[1] ?? parts[2] ?? '';
  const v6 = parts[1] !== undefined;
  if (host === '') return { problem: `${shown} has no host (${want})` };
  if (v6 ? !ipv6Pattern.test(host) || !host.includes(':') : !hostnamePattern.test(host)) {
    return { problem: `${shown}: "${host}" is not a host name or IP address (${want})` };
  }
  const portText = parts[3];
  if (portText === undefined) return { host, port: ipmiPortDefault };
  const port = Number(portText);
  if (portText === '' || !Number.isInteger(port) || port < 1 || port > 65535) {
    return { problem: `${shown}: the port must be 1-65535 (${want})` };
  }
  return { host, port };
}

/** The canonical text of an endpoint: ipmi://HOST:PORT (IPv6 in brackets). */
export function formatBmcAddress(endpoint: BmcEndpoint): string {
  const host = endpoint.host.includes(':') ? `[${endpoint.host}]` : endpoint.host;
  return `ipmi://${host}:${String(endpoint.port)}`;
}

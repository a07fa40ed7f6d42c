// The address forms every part of Slipway agrees on: a canonical dotted-quad IPv4 address and
// a MAC address in lower-case colon form. One definition, because the replicated state, the
// template and hardware documents and the DHCP server must accept exactly the same strings.
// Pure; no Buffer, so the DHCP codec that uses it stays free of node:* imports.

/**
 * A canonical dotted quad ("10.0.0.1"; no leading zeros, no spaces) as an unsigned 32-bit
 * number, or undefined. Hand-parsed: every DHCP reply parses several addresses, and a regular
 * expression plus split() cost a tenth of the server's CPU in a boot storm.
 */
export function parseIpv4(text: string): number | undefined {
  const length = text.length;
  if (length < 7 || length > 15) return undefined;
  let value = 0;
  let at = 0;
  for (let part = 0; part < 4; part++) {
    if (part > 0) {
      if (text.charCodeAt(at) !== 0x2e) return undefined;
      at += 1;
    }
    const start = at;
    let octet = 0;
    while (at < length && at - start < 4) {
      const digit = text.charCodeAt(at) - 0x30;
      if (digit < 0 || digit > 9) break;
      octet = octet * 10 + digit;
      at += 1;
    }
    const digits = at - start;
    if (digits === 0 || digits > 3 || octet > 255) return undefined;
    if (digits > 1 && text.charCodeAt(start) === 0x30) return undefined;
    value = value * 256 + octet;
  }
  return at === length ? value : undefined;
}

/** True for a canonical dotted quad ("10.0.0.1"; no leading zeros, no spaces). */
export function isIpv4(text: string): boolean {
  return parseIpv4(text) !== undefined;
}

const macPattern = /^[0-9a-f]{2}([:-])[0-9a-f]{2}(?:\1[0-9a-f]{2}){4}$/i;

/** The MAC in lower-case colon form ("52:54:00:12:34:56"), or undefined when it is not one. */
export function normalizeMac(text: string): string | undefined {
  return macPattern.test(text) ? text.toLowerCase().replaceAll('-', ':') : undefined;
}

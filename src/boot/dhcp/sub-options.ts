// Encapsulated options: code-length-value lists carried inside one DHCP option. Two syntaxes
// exist. Vendor options (43, RFC 2132 §8.4) and iPXE's 175 reuse the main option syntax, with
// Pad (0) and End (255). Relay agent information (82, RFC 3046 §2.0) is plain TLV: every code
// is a real sub-option and there is no End.

import { DhcpDecodeError, DhcpEncodeError } from './errors.js';

export interface SubOption {
  readonly code: number;
  readonly data: Uint8Array;
}

/** 'dhcp': Pad and End as in the main options field; 'tlv': every byte pair starts a sub-option. */
export type SubOptionSyntax = 'dhcp' | 'tlv';

/** PXE sub-options of option 43 (PXE specification 2.1, table 2-1). */
export const pxeSubOptionCode = { discoveryControl: 6 } as const;

/** PXE_DISCOVERY_CONTROL bit 3: boot the file named in the offer, with no menu or server discovery. */
export const pxeDiscoveryControlUseBootfile = 8;

/**
 * iPXE's sub-options of option 175 that a server sets (iPXE's include/ipxe/dhcp.h): no-pxedhcp
 * (176) = 1 tells iPXE that the server answering is the only one with boot information, so
 * that it does not wait for ProxyDHCP offers (about 2 s at every iPXE DHCP) before it requests.
 */
export const ipxeSubOptionCode = { noPxeDhcp: 176 } as const;

/** Relay agent sub-options (RFC 3046 §3). */
export const relayAgentSubOptionCode = { circuitId: 1, remoteId: 2 } as const;

const padCode = 0;
const endCode = 255;

/**
 * Parses the sub-options in `data`. Errors point at `optionOffset` (where the enclosing option
 * starts in the packet) and say where inside the option's data the problem is, because after
 * RFC 3396 concatenation a data position no longer maps to one packet position.
 */
export function decodeSubOptions(
  data: Uint8Array,
  syntax: SubOptionSyntax,
  optionOffset: number,
  optionLabel: string,
): SubOption[] {
  const found: SubOption[] = [];
  let i = 0;
  while (i < data.length) {
    const code = data[i]!;
    if (syntax === 'dhcp' && code === padCode) {
      i += 1;
      continue;
    }
    if (syntax === 'dhcp' && code === endCode) break;
    if (i + 1 >= data.length) {
      throw new DhcpDecodeError(
        optionOffset,
        `${optionLabel}: sub-option ${code} at data byte ${i} has no length byte`,
      );
    }
    const length = data[i + 1]!;
    const start = i + 2;
    if (start + length > data.length) {
      throw new DhcpDecodeError(
        optionOffset,
        `${optionLabel}: sub-option ${code} at data byte ${i} claims ${length} bytes but only ${data.length - start} remain`,
      );
    }
    found.push({ code, data: data.slice(start, start + length) });
    i = start + length;
  }
  return found;
}

/** Encodes sub-options; with 'dhcp' syntax an End is appended, as PXE clients expect. */
export function encodeSubOptions(
  subOptions: readonly SubOption[],
  syntax: SubOptionSyntax,
  optionLabel: string,
): Uint8Array {
  const bytes: number[] = [];
  for (const { code, data } of subOptions) {
    const reserved = syntax === 'dhcp' && (code === padCode || code === endCode);
    if (!Number.isInteger(code) || code < 0 || code > 255 || reserved) {
      throw new DhcpEncodeError(optionLabel, `sub-option code ${code} is not usable here`);
    }
    if (data.length > 255) {
      throw new DhcpEncodeError(optionLabel, `sub-option ${code} has ${data.length} bytes; the limit is 255`);
    }
    bytes.push(code, data.length, ...data);
  }
  if (syntax === 'dhcp') bytes.push(endCode);
  return Uint8Array.from(bytes);
}

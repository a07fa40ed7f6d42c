// Which boot information a network-booting client gets. Pure: the decoded request and the
// hardware's netboot settings in, a decision out; the reply builder turns it into fields.
//
// Order matters:
// 1. allowPXE off: no boot information at all.
// 2. iPXE (user class "iPXE" or option 175): the HTTP script. A ROM iPXE and an iPXE we
//    chainloaded send identical options (seen with QEMU's iPXE), so the only way to break the
//    PXE -> iPXE -> PXE loop is to send every iPXE client straight to the script.
// 3. UEFI HTTP boot (vendor class "HTTPClient..."): an HTTP URL to the iPXE EFI binary, with
//    option 60 "HTTPClient" echoed, without which the firmware ignores the offer (UEFI spec, HTTP Boot).
// 4. PXE ROMs: an iPXE binary over TFTP chosen by option 93 (RFC 4578 §2.1), falling back to
//    the hardware record when the client sends no architecture.
// A per-hardware binary or script override beats every automatic choice.

import type { DhcpPacket } from './codec.js';
import { DhcpSettingsError } from './errors.js';
import { pxeDiscoveryControlUseBootfile } from './sub-options.js';
import { isIpv4 } from '../../platform/addresses.js';

/** The hardware record's view of how this machine may network-boot. */
export interface NetbootSettings {
  readonly allowPXE: boolean;
  /** The machine's declared CPU architecture; used only when the client sends no option 93. */
  readonly arch: 'x86_64' | 'arm64';
  /** Declared firmware; used only when the client sends no option 93. */
  readonly uefi: boolean;
  /** Per-machine HTTP URL of the iPXE script Slipway renders (the per-MAC URL). */
  readonly ipxeScriptUrl: string;
  /** Operator override for the iPXE script. */
  readonly customIpxeScriptUrl?: string;
  /** Operator override for the iPXE binary file name, whatever the client's architecture. */
  readonly ipxeBinary?: string;
  /** The address clients fetch binaries from over TFTP: the cluster VIP. */
  readonly tftpServer: string;
  /** HTTP base URL the iPXE binaries are also served under, for UEFI HTTP boot. */
  readonly httpBinaryBaseUrl: string;
}

/** iPXE binary file names, as found in the TFTP root and under httpBinaryBaseUrl. */
export interface IpxeBinaries {
  readonly bios: string;
  readonly efiX86: string;
  readonly efiArm64: string;
}

export const defaultIpxeBinaries: IpxeBinaries = {
  bios: 'undionly.kpxe',
  efiX86: 'ipxe.efi',
  efiArm64: 'snp.efi',
};

export type BootClient = 'ipxe' | 'http-boot' | 'pxe';

export type BootDecision =
  | {
      readonly kind: 'boot';
      readonly client: BootClient;
      /** A TFTP file name, or a full HTTP URL. */
      readonly bootfile: string;
      /** siaddr: where the client fetches the bootfile from. */
      readonly nextServer: string;
      /** Option 60 to put in the reply; UEFI HTTP boot only accepts offers that echo it. */
      readonly vendorClassEcho?: 'HTTPClient';
      /** Option 43 sub-option 6 (PXE_DISCOVERY_CONTROL) for PXE ROMs. */
      readonly pxeDiscoveryControl?: number;
      readonly reason: string;
    }
  | { readonly kind: 'no-boot'; readonly reason: string };

type Firmware = keyof IpxeBinaries;

interface ArchEntry {
  readonly name: string;
  /** The binary family that boots it, or why none does. */
  readonly firmware: Firmware | { readonly refused: string };
}

// RFC 4578 §2.1 and the IANA "Processor Architecture Types" registry. 7 and 9 are both x86-64
// UEFI in practice (RFC 4578's table had them swapped; the registry fixed it).
const architectures: ReadonlyMap<number, ArchEntry> = new Map<number, ArchEntry>([
  [0, { name: 'x86 BIOS', firmware: 'bios' }],
  [1, { name: 'NEC/PC98', firmware: { refused: 'no iPXE build for NEC/PC98' } }],
  [2, { name: 'EFI Itanium', firmware: { refused: 'no iPXE build for Itanium' } }],
  [3, { name: 'DEC Alpha', firmware: { refused: 'no iPXE build for DEC Alpha' } }],
  [4, { name: 'Arc x86', firmware: { refused: 'no iPXE build for Arc x86' } }],
  [5, { name: 'Intel Lean Client', firmware: { refused: 'no iPXE build for Intel Lean Client' } }],
  [6, { name: 'EFI IA32', firmware: 'efiX86' }],
  [7, { name: 'EFI x86-64', firmware: 'efiX86' }],
  [8, { name: 'EFI Xscale', firmware: { refused: 'no iPXE build for Xscale' } }],
  [9, { name: 'EFI BC', firmware: 'efiX86' }],
  [10, { name: 'EFI ARM32', firmware: { refused: 'Slipway ships no 32-bit ARM iPXE binary' } }],
  [11, { name: 'EFI ARM64', firmware: 'efiArm64' }],
  [15, { name: 'x86 UEFI HTTP', firmware: 'efiX86' }],
  [16, { name: 'x64 UEFI HTTP', firmware: 'efiX86' }],
  [18, { name: 'ARM32 UEFI HTTP', firmware: { refused: 'Slipway ships no 32-bit ARM iPXE binary' } }],
  [19, { name: 'ARM64 UEFI HTTP', firmware: 'efiArm64' }],
]);

/** True for a client that is already running iPXE: user class "iPXE" or iPXE's option 175. */
export function isIpxeClient(request: DhcpPacket): boolean {
  return request.options.ipxe !== undefined || (request.options.userClass?.classes.includes('iPXE') ?? false);
}

export function decideBoot(
  request: DhcpPacket,
  netboot: NetbootSettings,
  binaries: IpxeBinaries = defaultIpxeBinaries,
): BootDecision {
  if (!netboot.allowPXE) return { kind: 'no-boot', reason: 'allowPXE is off for this hardware' };
  if (!isIpv4(netboot.tftpServer)) {
    throw new DhcpSettingsError('tftpServer', `"${netboot.tftpServer}" is not an IPv4 address`);
  }
  const nextServer = netboot.tftpServer;

  if (isIpxeClient(request)) {
    const custom = netboot.customIpxeScriptUrl;
    return {
      kind: 'boot',
      client: 'ipxe',
      bootfile: custom ?? netboot.ipxeScriptUrl,
      nextServer,
      reason:
        custom === undefined
          ? 'iPXE client: straight to the HTTP script, which breaks the chainload loop'
          : "iPXE client: the hardware's custom iPXE script",
    };
  }

  const vendorClass = request.options.vendorClass ?? '';
  if (vendorClass.startsWith('HTTPClient')) {
    const choice = chooseBinary(request, netboot, binaries);
    if (choice.kind === 'no-boot') return choice;
    if (choice.firmware === 'bios') {
      return {
        kind: 'no-boot',
        reason: `UEFI HTTP boot client reports ${choice.source}; HTTP boot needs UEFI`,
      };
    }
    return {
      kind: 'boot',
      client: 'http-boot',
      bootfile: joinUrl(netboot.httpBinaryBaseUrl, choice.binary),
      nextServer,
      vendorClassEcho: 'HTTPClient',
      reason: `UEFI HTTP boot, ${choice.source}: ${choice.binary} over HTTP`,
    };
  }

  const pxeRom = vendorClass.startsWith('PXEClient');
  if (!pxeRom && request.options.clientArch === undefined) {
    return {
      kind: 'no-boot',
      reason: 'not a network-boot client (no PXEClient/HTTPClient vendor class, no option 93)',
    };
  }
  const choice = chooseBinary(request, netboot, binaries);
  if (choice.kind === 'no-boot') return choice;
  return {
    kind: 'boot',
    client: 'pxe',
    bootfile: choice.binary,
    nextServer,
    ...(pxeRom ? { pxeDiscoveryControl: pxeDiscoveryControlUseBootfile } : {}),
    reason: `PXE, ${choice.source}: ${choice.binary} over TFTP`,
  };
}

type BinaryChoice =
  | {
      readonly kind: 'binary';
      readonly binary: string;
      readonly firmware: Firmware | 'override';
      readonly source: string;
    }
  | { readonly kind: 'no-boot'; readonly reason: string };

function chooseBinary(request: DhcpPacket, netboot: NetbootSettings, binaries: IpxeBinaries): BinaryChoice {
  if (netboot.ipxeBinary !== undefined) {
    return { kind: 'binary', binary: netboot.ipxeBinary, firmware: 'override', source: 'hardware override' };
  }
  const arches = request.options.clientArch;
  if (arches === undefined) {
    const firmware: Firmware = netboot.arch === 'arm64' ? 'efiArm64' : netboot.uefi ? 'efiX86' : 'bios';
    const declared = `${netboot.arch}${netboot.uefi ? ' UEFI' : ' BIOS'}`;
    return {
      kind: 'binary',
      binary: binaries[firmware],
      firmware,
      source: `no option 93, hardware says ${declared}`,
    };
  }
  // A client may list several architectures; the first one Slipway knows wins.
  for (const arch of arches) {
    const entry = architectures.get(arch);
    if (entry === undefined) continue;
    const source = `architecture ${arch} (${entry.name})`;
    if (typeof entry.firmware !== 'string') {
      return { kind: 'no-boot', reason: `${source} refused: ${entry.firmware.refused}` };
    }
    return { kind: 'binary', binary: binaries[entry.firmware], firmware: entry.firmware, source };
  }
  return {
    kind: 'no-boot',
    reason: `client architecture ${arches.join(', ')} is not one Slipway knows how to boot`,
  };
}

function joinUrl(base: string, file: string): string {
  return base.endsWith('/') ? `${base}${file}` : `${base}/${file}`;
}

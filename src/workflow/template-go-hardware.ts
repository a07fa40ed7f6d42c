// Tinkerbell's `.Hardware`, from the machine as Slipway holds it (docs/decisions/0042). Tinkerbell
// hands its templates a Hardware with Go's field names: Disks (the devices), Interfaces (each with
// DHCP and Netboot), Metadata, UserData and VendorData. The import (src/tinkerbell/hardware.ts)
// keeps spec.metadata at the top of the machine's metadata and the rest of the spec under
// metadata.tinkerbell; this puts them back where Tinkerbell's templates look:
//
//   Disks               metadata.tinkerbell.disks; else the disks of the machine's inventory
//   Interfaces[i].DHCP  the machine's interface i: MAC, Hostname, IP (Address, Netmask, Gateway,
//                       Family 4), NameServers, LeaseTime, VLANID, Arch, UEFI; fields Slipway has
//                       no place for (TimeServers, IfaceName, ...) from the imported interface
//                       with that MAC. Netboot and DisableDHCP come from the import only.
//   Metadata            the machine's metadata but metadata.tinkerbell
//   UserData, VendorData  the imported spec's userData and vendorData
//
// Keys take Go's spelling, as Tinkerbell's types name them: instance → Instance, id → ID,
// operating_system → OperatingSystem, allowPXE → AllowPXE, ipxe_script_url → IpxeScriptURL.
// Anything absent stays absent, so naming it is the renderer's "not defined" error.
import type { Hardware, JsonValue, NetworkInterface } from '../model/records.js';
import { normalizeMac } from '../platform/addresses.js';

/** The metadata key under which the import keeps Tinkerbell's own fields (src/tinkerbell). */
const keptKey = 'tinkerbell';

type Mapping = Readonly<Record<string, unknown>>;

function isMapping(value: unknown): value is Mapping {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** What `.Hardware` holds for this machine. */
export function goHardwareVariable(hardware: Hardware): Record<string, unknown> {
  const kept = isMapping(hardware.metadata[keptKey]) ? hardware.metadata[keptKey] : {};
  const spec = isMapping(kept['spec']) ? kept['spec'] : {};
  const keptInterfaces = Array.isArray(spec['interfaces']) ? (spec['interfaces'] as unknown[]) : [];
  const { [keptKey]: _kept, ...metadata } = hardware.metadata;
  const variable: Record<string, unknown> = {
    Interfaces: hardware.interfaces.map((nic) => goInterface(hardware, nic, keptInterfaces)),
    Metadata: goNames(metadata),
  };
  const disks = keptDisks(kept['disks']) ?? hardware.inventory?.disks.map((disk) => disk.path);
  if (disks !== undefined) variable['Disks'] = disks;
  if (typeof spec['userData'] === 'string') variable['UserData'] = spec['userData'];
  if (typeof spec['vendorData'] === 'string') variable['VendorData'] = spec['vendorData'];
  return variable;
}

function keptDisks(value: unknown): string[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value.every((disk) => typeof disk === 'string') ? value : undefined;
}

const archOf: Readonly<Record<string, string>> = {
  x86_64: 'x86_64',
  amd64: 'x86_64',
  aarch64: 'arm64',
  arm64: 'arm64',
};

function goInterface(
  hardware: Hardware,
  nic: NetworkInterface,
  keptInterfaces: readonly unknown[],
): Record<string, unknown> {
  const kept = keptInterfaces.find((candidate) => {
    const dhcp = isMapping(candidate) ? candidate['dhcp'] : undefined;
    const mac = isMapping(dhcp) && typeof dhcp['mac'] === 'string' ? normalizeMac(dhcp['mac']) : undefined;
    return mac === nic.mac;
  });
  const { dhcp: keptDhcp, ...keptRest } = isMapping(kept) ? kept : {};
  const extra = isMapping(keptDhcp) ? keptDhcp : {};
  // The arch as the import's Hardware spelled it (aarch64 or arm64), when it is still the machine's.
  const keptArch = typeof extra['arch'] === 'string' ? extra['arch'] : undefined;
  const dhcp: Record<string, unknown> = {
    ...(goNames(extra) as Record<string, unknown>),
    MAC: nic.mac,
    NameServers: nic.dns,
    LeaseTime: nic.leaseTimeS,
    Arch: keptArch !== undefined && archOf[keptArch] === hardware.arch ? keptArch : hardware.arch,
    UEFI: hardware.uefi,
  };
  if (nic.hostname === undefined) delete dhcp['Hostname'];
  else dhcp['Hostname'] = nic.hostname;
  if (nic.vlan === undefined) delete dhcp['VLANID'];
  else dhcp['VLANID'] = String(nic.vlan);
  if (nic.ip === undefined) delete dhcp['IP'];
  else {
    dhcp['IP'] = {
      Address: nic.ip.address,
      Netmask: netmaskOf(nic.ip.prefix),
      ...(nic.gateway === undefined ? {} : { Gateway: nic.gateway }),
      Family: 4,
    };
  }
  return { ...(goNames(keptRest) as Record<string, unknown>), DHCP: dhcp };
}

/** 24 → 255.255.255.0. */
export function netmaskOf(prefix: number): string {
  const bits = prefix <= 0 ? 0 : (0xffffffff << (32 - Math.min(prefix, 32))) >>> 0;
  return [24, 16, 8, 0].map((shift) => (bits >>> shift) & 0xff).join('.');
}

/** Whole keys whose Go name the generic rule below does not find. */
const goNameOverrides: Readonly<Record<string, string>> = { ipxe: 'IPXE' };
/** Words Go spells in capitals (Tinkerbell's types: ID, MAC, IP, DHCP, UEFI, VLANID, SSHKeys, ...). */
const initialisms = new Set([
  'id',
  'ip',
  'mac',
  'dhcp',
  'url',
  'uefi',
  'vlan',
  'osie',
  'ssh',
  'uid',
  'gid',
  'mtu',
  'bmc',
  'cpu',
  'nic',
  'guid',
  'bios',
  'dns',
]);

/** A JSON key in Go's spelling: snake_case and camelCase words, each capitalized. */
export function goName(key: string): string {
  const override = goNameOverrides[key];
  if (override !== undefined) return override;
  const words = key.split(/[_\s-]+/).flatMap((part) => part.match(/[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+/g) ?? []);
  if (words.length === 0) return key;
  return words
    .map((word) =>
      initialisms.has(word.toLowerCase()) ? word.toUpperCase() : word.charAt(0).toUpperCase() + word.slice(1),
    )
    .join('');
}

/** A deep copy with every mapping's keys in Go's spelling. */
function goNames(value: unknown): unknown {
  if (Array.isArray(value)) return (value as readonly JsonValue[]).map(goNames);
  if (!isMapping(value)) return value;
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    // defineProperty: a key such as "__proto__" stays an ordinary key.
    Object.defineProperty(copy, goName(key), {
      value: goNames(item),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return copy;
}

/** What `.Hardware.NAME` may name, and `.Hardware.Interfaces.[N].NAME`. */
const goHardwareFields = ['Disks', 'Interfaces', 'Metadata', 'UserData', 'VendorData'];
const goInterfaceFields = ['DHCP', 'Netboot', 'DisableDHCP'];
const goDhcpFields = [
  'MAC',
  'Hostname',
  'IP',
  'NameServers',
  'TimeServers',
  'LeaseTime',
  'Arch',
  'UEFI',
  'IfaceName',
  'VLANID',
];
const goIpFields = ['Address', 'Netmask', 'Gateway', 'Family'];

/** Why `Hardware.…` can never exist, or undefined when it may. Checked at `template create`. */
export function goHardwareProblem(parts: readonly string[]): string | undefined {
  const [, field, ...rest] = parts;
  const written = parts.map((part) => (/^\d+$/.test(part) ? `[${part}]` : part)).join('.');
  if (field === undefined) return undefined;
  if (!goHardwareFields.includes(field))
    return `unknown variable ${written}: Hardware has ${goHardwareFields.join(', ')}`;
  if (field === 'Metadata' || rest.length === 0) return undefined;
  const [index, below, ...deeper] = rest;
  if (field === 'UserData' || field === 'VendorData')
    return `unknown variable ${written}: .Hardware.${field} is a value`;
  if (!/^\d+$/.test(index ?? ''))
    return `unknown variable ${written}: .Hardware.${field} is a list: index it, e.g. index .Hardware.${field} 0`;
  if (field === 'Disks')
    return below === undefined ? undefined : `unknown variable ${written}: a disk is a value`;
  if (below === undefined) return undefined;
  if (!goInterfaceFields.includes(below))
    return `unknown variable ${written}: an interface has ${goInterfaceFields.join(', ')}`;
  const [dhcpField, ipField] = deeper;
  if (below !== 'DHCP' || dhcpField === undefined || goDhcpFields.includes(dhcpField)) {
    if (dhcpField !== 'IP' || ipField === undefined || goIpFields.includes(ipField)) return undefined;
    return `unknown variable ${written}: DHCP.IP has ${goIpFields.join(', ')}`;
  }
  return `unknown variable ${written}: DHCP has ${goDhcpFields.join(', ')}`;
}

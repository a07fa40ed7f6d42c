// A Tinkerbell Hardware (tinkerbell.org/v1alpha1) and its Rufio Machine and Secret, as the
// hardware document `slipway hardware create -f` takes (src/workflow/hardware-doc.ts):
//
//   metadata.name                          → id
//   spec.interfaces[].dhcp.mac, hostname   → interfaces[].mac, hostname (interfaces without a
//                                            dhcp.mac are left out: Slipway knows a NIC by its MAC)
//   dhcp.ip.address + netmask, gateway     → ip ADDRESS/PREFIX, gateway
//   dhcp.name_servers, lease_time, vlan_id → dns, leaseTime, vlan
//   dhcp.arch, dhcp.uefi (first interface) → arch (x86_64|amd64 → x86_64, aarch64|arm64 → arm64), uefi
//   netboot.allowPXE, allowWorkflow        → netboot (any interface allowing it; absent: false,
//                                            as Tinkerbell serves no netboot without allowPXE)
//   netboot.ipxe.url / ipxe.contents       → netboot.ipxeUrl / ipxeScript
//   spec.metadata (instance, facility, …)  → metadata, at its top level: `.Hardware.Metadata.X`
//                                            lookups read hardware.metadata.X
//   spec.bmcRef → Machine spec.connection  → bmc.address ipmi://host:port (port 623 when absent)
//   authSecretRef → Secret username/password → bmc.username, bmc.password (stored as
//                                            `hardware create --bmc-credentials-file` stores them)
//   everything else of spec                → kept: metadata.tinkerbell.spec (the original spec
//                                            but its metadata), with metadata.tinkerbell.disks
//                                            (the devices, as Tinkerbell's `.Hardware.Disks`)
import type { HardwareInput } from '../model/records.js';
import { parseIpv4 } from '../platform/addresses.js';
import { HardwareDocumentError, parseHardwareDocument } from '../workflow/hardware-doc.js';
import { isMapping, objectLabel, type KubeObject } from './objects.js';

/** A field that does not carry over as it is: where it went instead, and why. */
export interface ImportNote {
  readonly object: string;
  readonly field: string;
  readonly outcome: 'kept in metadata.tinkerbell' | 'dropped' | 'renamed';
  readonly reason: string;
}

/** What mapping one object found: notes always, problems when it cannot be imported. */
export interface MappingFindings {
  readonly notes: ImportNote[];
  readonly problems: string[];
}

/** The Machines and Secrets of the input, for a Hardware's bmcRef. */
export interface BmcObjects {
  readonly machine: (name: string, namespace: string) => KubeObject | undefined;
  readonly secret: (name: string, namespace: string) => KubeObject | undefined;
}

/** The key metadata.tinkerbell: what Slipway keeps of a Tinkerbell Hardware it has no field for. */
export const keptKey = 'tinkerbell';

const dhcpMapped = new Set([
  'mac',
  'ip',
  'hostname',
  'lease_time',
  'name_servers',
  'arch',
  'uefi',
  'vlan_id',
]);
const noPlace = 'Slipway has no field for it; templates still read it there';

/** The hardware input for the object, or undefined when problems were found (in `findings`). */
export function mapHardware(
  object: KubeObject,
  bmcObjects: BmcObjects,
  findings: MappingFindings,
): HardwareInput | undefined {
  const label = objectLabel(object);
  const problemsBefore = findings.problems.length;
  const problem = (text: string): void => void findings.problems.push(`${label}: ${text}`);
  const note = (field: string, outcome: ImportNote['outcome'], reason: string): void =>
    void findings.notes.push({ object: label, field, outcome, reason });
  const spec = isMapping(object.body['spec']) ? object.body['spec'] : {};
  const rawInterfaces = Array.isArray(spec['interfaces']) ? spec['interfaces'] : [];
  const interfaces = rawInterfaces.flatMap((nic, i) =>
    mapInterface(nic, `spec.interfaces[${i}]`, problem, note),
  );
  if (interfaces.length === 0)
    problem('spec.interfaces has no interface with dhcp.mac: Slipway needs at least one');
  const firstDhcp = rawInterfaces.map((nic) => (isMapping(nic) ? nic['dhcp'] : undefined)).find(isMapping);
  const tinkMetadata = isMapping(spec['metadata']) ? spec['metadata'] : {};
  if (Object.hasOwn(tinkMetadata, keptKey))
    problem(`spec.metadata.${keptKey}: the import keeps Tinkerbell's own fields under this key; rename it`);
  for (const key of Object.keys(spec)) {
    if (key !== 'interfaces' && key !== 'metadata' && key !== 'bmcRef')
      note(`spec.${key}`, 'kept in metadata.tinkerbell', noPlace);
  }
  const document: Record<string, unknown> = {
    id: object.name,
    arch: mapArch(firstDhcp?.['arch'], problem),
    uefi: firstDhcp?.['uefi'] === true,
    interfaces,
    netboot: mapNetboot(rawInterfaces, note),
    metadata: { ...tinkMetadata, [keptKey]: keptFields(object, spec) },
  };
  const bmc = mapBmc(spec['bmcRef'], object, bmcObjects, problem, note);
  if (bmc !== undefined) document['bmc'] = bmc;
  if (findings.problems.length > problemsBefore) return undefined;
  try {
    return parseHardwareDocument(JSON.stringify(document));
  } catch (err) {
    if (!(err instanceof HardwareDocumentError)) throw err;
    for (const p of err.problems) problem(`as Slipway hardware, ${p.path.join('.')}: ${p.message}`);
    return undefined;
  }
}

function keptFields(object: KubeObject, spec: Record<string, unknown>): Record<string, unknown> {
  const { metadata: _metadata, ...rest } = spec;
  const disks = Array.isArray(spec['disks'])
    ? spec['disks'].map((d) => (isMapping(d) ? d['device'] : undefined)).filter((d) => typeof d === 'string')
    : [];
  const meta = isMapping(object.body['metadata']) ? object.body['metadata'] : {};
  return {
    name: object.name,
    ...(object.namespace === '' ? {} : { namespace: object.namespace }),
    ...(isMapping(meta['labels']) ? { labels: meta['labels'] } : {}),
    disks,
    spec: rest,
  };
}

type Problem = (text: string) => void;
type Note = (field: string, outcome: ImportNote['outcome'], reason: string) => void;

function mapArch(arch: unknown, problem: Problem): string {
  if (arch === undefined || arch === '' || arch === 'x86_64' || arch === 'amd64') return 'x86_64';
  if (arch === 'aarch64' || arch === 'arm64') return 'arm64';
  problem(`dhcp.arch ${JSON.stringify(arch)}: Slipway boots x86_64 (amd64) and arm64 (aarch64) machines`);
  return 'x86_64';
}

function mapInterface(nic: unknown, path: string, problem: Problem, note: Note): Record<string, unknown>[] {
  const dhcp = isMapping(nic) ? nic['dhcp'] : undefined;
  if (!isMapping(dhcp) || typeof dhcp['mac'] !== 'string') {
    note(path, 'dropped', 'it has no dhcp.mac, and Slipway knows an interface by its MAC');
    return [];
  }
  const mapped: Record<string, unknown> = { mac: dhcp['mac'] };
  const ip = mapIp(dhcp['ip'], `${path}.dhcp.ip`, problem);
  if (ip !== undefined) mapped['ip'] = ip.cidr;
  if (ip?.gateway !== undefined) mapped['gateway'] = ip.gateway;
  if (typeof dhcp['hostname'] === 'string' && dhcp['hostname'] !== '') mapped['hostname'] = dhcp['hostname'];
  if (Array.isArray(dhcp['name_servers'])) mapped['dns'] = dhcp['name_servers'];
  if (typeof dhcp['lease_time'] === 'number' && dhcp['lease_time'] > 0)
    mapped['leaseTime'] = dhcp['lease_time'];
  const vlan = dhcp['vlan_id'];
  if (vlan !== undefined && vlan !== '') mapped['vlan'] = typeof vlan === 'string' ? Number(vlan) : vlan;
  for (const key of Object.keys(dhcp))
    if (!dhcpMapped.has(key)) note(`${path}.dhcp.${key}`, 'kept in metadata.tinkerbell', noPlace);
  for (const key of Object.keys(nic as Record<string, unknown>))
    if (key !== 'dhcp' && key !== 'netboot') note(`${path}.${key}`, 'kept in metadata.tinkerbell', noPlace);
  return [mapped];
}

function mapIp(ip: unknown, path: string, problem: Problem): { cidr: string; gateway?: string } | undefined {
  const address = isMapping(ip) ? ip['address'] : undefined;
  if (!isMapping(ip) || address === undefined || address === '') return undefined;
  if (typeof address !== 'string') {
    problem(`${path}.address ${JSON.stringify(address)} is not an IPv4 address`);
    return undefined;
  }
  if (ip['family'] !== undefined && ip['family'] !== 4) {
    problem(`${path}.family ${JSON.stringify(ip['family'])}: Slipway serves IPv4 only`);
    return undefined;
  }
  const prefix = prefixOf(ip['netmask']);
  if (prefix === undefined) {
    problem(
      `${path}.netmask ${JSON.stringify(ip['netmask'])} is not an IPv4 netmask (want e.g. 255.255.255.0)`,
    );
    return undefined;
  }
  const cidr = `${address}/${prefix}`;
  const gateway = ip['gateway'];
  return typeof gateway === 'string' && gateway !== '' ? { cidr, gateway } : { cidr };
}

/** 255.255.255.0 → 24; undefined for anything but a contiguous mask. */
export function prefixOf(netmask: unknown): number | undefined {
  if (typeof netmask !== 'string') return undefined;
  const value = parseIpv4(netmask);
  if (value === undefined) return undefined;
  const ones = value.toString(2).padStart(32, '0');
  return /^1*0*$/.test(ones) ? (ones.indexOf('0') === -1 ? 32 : ones.indexOf('0')) : undefined;
}

function mapNetboot(interfaces: readonly unknown[], note: Note): Record<string, unknown> {
  const netboots = interfaces.map((nic) => (isMapping(nic) ? nic['netboot'] : undefined));
  const netboot: Record<string, unknown> = {
    allowPXE: netboots.some((n) => isMapping(n) && n['allowPXE'] === true),
    allowWorkflow: netboots.some((n) => isMapping(n) && n['allowWorkflow'] === true),
  };
  netboots.forEach((n, i) => {
    if (!isMapping(n)) return;
    const ipxe = n['ipxe'];
    if (isMapping(ipxe) && typeof ipxe['url'] === 'string' && ipxe['url'] !== '')
      netboot['ipxeUrl'] = ipxe['url'];
    else if (isMapping(ipxe) && typeof ipxe['contents'] === 'string' && ipxe['contents'] !== '')
      netboot['ipxeScript'] = ipxe['contents'];
    for (const key of Object.keys(n)) {
      if (key === 'allowPXE' || key === 'allowWorkflow' || key === 'ipxe') continue;
      const why =
        key === 'osie' ? 'Slipway boots its own boot OS (slipway bootos build); kept there' : noPlace;
      note(`spec.interfaces[${i}].netboot.${key}`, 'kept in metadata.tinkerbell', why);
    }
  });
  if (netboots.filter(isMapping).length > 1)
    note(
      'spec.interfaces[].netboot',
      'renamed',
      'Slipway has one netboot setting per machine: any interface allowing PXE (or workflows) allows it',
    );
  return netboot;
}

/** bmc for the document, from the Machine the bmcRef names and its Secret. */
function mapBmc(
  ref: unknown,
  hardware: KubeObject,
  objects: BmcObjects,
  problem: Problem,
  note: Note,
): Record<string, unknown> | undefined {
  if (!isMapping(ref) || typeof ref['name'] !== 'string') return undefined;
  const machine = objects.machine(ref['name'], hardware.namespace);
  if (machine === undefined) {
    note('spec.bmcRef', 'dropped', `Machine ${ref['name']} is not in the input: imported without a BMC`);
    return undefined;
  }
  const spec = isMapping(machine.body['spec']) ? machine.body['spec'] : {};
  const connection = isMapping(spec['connection']) ? spec['connection'] : {};
  const host = connection['host'];
  const machineLabel = objectLabel(machine);
  if (typeof host !== 'string' || host === '') {
    problem(`${machineLabel} (its bmcRef) has no spec.connection.host`);
    return undefined;
  }
  const options = isMapping(connection['providerOptions']) ? connection['providerOptions'] : {};
  const ipmitool = isMapping(options['ipmitool']) ? options['ipmitool'] : {};
  const port = connection['port'] ?? ipmitool['port'] ?? 623;
  if (typeof port !== 'number' && typeof port !== 'string') {
    problem(`${machineLabel}: spec.connection.port ${JSON.stringify(port)} is not a port number`);
    return undefined;
  }
  const hostPart = host.includes(':') ? `[${host}]` : host;
  const bmc: Record<string, unknown> = { address: `ipmi://${hostPart}:${port}` };
  const order = options['preferredOrder'];
  if (Array.isArray(order) && !order.includes('ipmitool'))
    note(
      `${machineLabel} providerOptions.preferredOrder`,
      'dropped',
      'Slipway drives BMCs over IPMI (ipmitool) only',
    );
  for (const key of Object.keys(connection)) {
    if (key === 'host' || key === 'port' || key === 'authSecretRef' || key === 'providerOptions') continue;
    note(`${machineLabel} spec.connection.${key}`, 'dropped', 'IPMI over LAN has no such setting');
  }
  const credentials = secretCredentials(connection['authSecretRef'], machine, objects, problem);
  return credentials === undefined ? bmc : { ...bmc, ...credentials };
}

function secretCredentials(
  ref: unknown,
  machine: KubeObject,
  objects: BmcObjects,
  problem: Problem,
): { username: string; password: string } | undefined {
  if (!isMapping(ref) || typeof ref['name'] !== 'string') return undefined;
  const namespace = typeof ref['namespace'] === 'string' ? ref['namespace'] : machine.namespace;
  const secret = objects.secret(ref['name'], namespace);
  const wanted = `Secret ${namespace === '' ? '' : `${namespace}/`}${ref['name']}`;
  if (secret === undefined) {
    problem(`${objectLabel(machine)} names ${wanted} (authSecretRef), which is not in the input`);
    return undefined;
  }
  const username = secretValue(secret, 'username', problem);
  const password = secretValue(secret, 'password', problem);
  return username === undefined || password === undefined ? undefined : { username, password };
}

/** A Secret's key, from stringData or base64 data; a problem naming the key when it has none. */
function secretValue(secret: KubeObject, key: string, problem: Problem): string | undefined {
  const stringData = secret.body['stringData'];
  const data = secret.body['data'];
  const plain = isMapping(stringData) ? stringData[key] : undefined;
  if (typeof plain === 'string') return plain;
  const encoded = isMapping(data) ? data[key] : undefined;
  if (typeof encoded === 'string' && /^[A-Za-z0-9+/]*={0,2}$/.test(encoded.replace(/\s/g, '')))
    return Buffer.from(encoded, 'base64').toString('utf8');
  // The message never quotes the Secret's values.
  problem(
    typeof encoded === 'string'
      ? `${objectLabel(secret)}: data.${key} is not base64`
      : `${objectLabel(secret)} has no "${key}" key in data or stringData (Rufio reads username and password)`,
  );
  return undefined;
}

// The variables a template's placeholders can name:
//
//   {{ device_1 }}, ...          each hardwareMap entry, at the top level (Tinkerbell's spelling)
//   {{ hardware.id }}            also .arch, .uefi, and .mac/.address/.hostname of the first
//                                interface (when it has them)
//   {{ hardware.interfaces.[0].ip.address }}  every interface: mac, ip.address, ip.prefix,
//                                gateway, dns, hostname, leaseTimeS, vlan
//   {{ hardware.metadata.x }}    the hardware's free-form metadata
//   {{ hardware.inventory.disks.[0].path }}  the inventory the machine last reported
//                                (src/model/inventory.ts: cpu, memory, disks, nics, firmware,
//                                system, bmc); absent until it has reported one
//   {{ workflow.id }}
//   {{ index .Hardware.Disks 0 }} Tinkerbell's `.Hardware` (Disks, Interfaces, Metadata, UserData,
//                                VendorData, Go's field names), from the same machine
//                                (template-go-hardware.ts, docs/decisions/0042)
//   {{ pool.name }}              a pool's workflows only (docs/decisions/0036), and with the
//   {{ pool.image.url }}         pool's --image: .name, .sha256, .path (/artifacts/NAME) and .url
//                                (the artifact served through the VIP), for image2disk's IMG_URL
//                                and IMG_SHA256
//
// The worker token, BMC and netboot settings are left out: a template has no business with them.
// Optional fields that are absent are absent here too, so naming one is a "not defined" error
// rather than an empty string. A structure printed as a value is refused (it would otherwise
// render as "[object Object]").
import type { Hardware, JsonValue, NetworkInterface } from '../model/records.js';
import { closestName } from '../platform/edit-distance.js';
import { goHardwareProblem, goHardwareVariable } from './template-go-hardware.js';
import { PlaceholderError, structureMarker } from './template-placeholders.js';

/** A pool's variables: its name, and the registered artifact it writes (`--image`). */
export interface PoolVariables {
  readonly name: string;
  readonly image?: {
    readonly name: string;
    readonly sha256: string;
    readonly path: string;
    readonly url: string;
  };
}

export interface TemplateVariableSources {
  readonly workflowId: string;
  readonly hardware: Hardware;
  readonly hardwareMap: Readonly<Record<string, string>>;
  readonly pool?: PoolVariables | undefined;
}

/** Names the template's own variables take; a hardwareMap entry may not hide them. */
export const reservedVariableNames: readonly string[] = ['hardware', 'workflow'];
/** Tinkerbell's name for the machine (template-go-hardware.ts). */
const goHardwareName = 'Hardware';

export function templateVariables(sources: TemplateVariableSources): object {
  const reserved = [
    ...reservedVariableNames,
    goHardwareName,
    ...(sources.pool === undefined ? [] : ['pool']),
  ];
  for (const name of reserved) {
    if (Object.hasOwn(sources.hardwareMap, name)) {
      throw new PlaceholderError(
        `hardwareMap entry "${name}" would hide the template's own "${name}" variable`,
      );
    }
  }
  const { hardware } = sources;
  const first = hardware.interfaces[0];
  const summary: Record<string, unknown> = {
    id: hardware.id,
    arch: hardware.arch,
    uefi: hardware.uefi,
    ...(first === undefined ? {} : firstInterfaceSummary(first)),
    interfaces: hardware.interfaces.map(interfaceVariables),
    metadata: hardware.metadata,
    ...(hardware.inventory === undefined ? {} : { inventory: hardware.inventory }),
  };
  const variables = {
    ...sources.hardwareMap,
    hardware: summary,
    [goHardwareName]: goHardwareVariable(hardware),
    workflow: { id: sources.workflowId },
    ...(sources.pool === undefined ? {} : { pool: sources.pool }),
  };
  return refusePrinting(variables, '');
}

function firstInterfaceSummary(first: NetworkInterface): Record<string, string> {
  const summary: Record<string, string> = { mac: first.mac };
  if (first.ip !== undefined) summary['address'] = first.ip.address;
  if (first.hostname !== undefined) summary['hostname'] = first.hostname;
  return summary;
}

function interfaceVariables(nic: NetworkInterface): Record<string, unknown> {
  const variables: Record<string, unknown> = { mac: nic.mac, dns: nic.dns, leaseTimeS: nic.leaseTimeS };
  if (nic.ip !== undefined) variables['ip'] = { address: nic.ip.address, prefix: nic.ip.prefix };
  if (nic.gateway !== undefined) variables['gateway'] = nic.gateway;
  if (nic.hostname !== undefined) variables['hostname'] = nic.hostname;
  if (nic.vlan !== undefined) variables['vlan'] = nic.vlan;
  return variables;
}

/**
 * A deep copy in which every mapping and list turns into a marker when converted to text.
 * Handlebars turns the value of `{{ x }}` into text by concatenation, which goes through
 * Symbol.toPrimitive; the symbol is invisible to placeholder lookups, `{{#each}}` and `{{#if}}`.
 * renderPlaceholders() refuses any marker left in its output, with the line it landed on.
 */
function refusePrinting(value: unknown, path: string): object {
  const copy: unknown = Array.isArray(value)
    ? (value as readonly JsonValue[]).map((item, index) => printable(item, `${path}.[${index}]`))
    : Object.fromEntries(
        Object.entries(value as Record<string, unknown>).map(([key, item]) => [
          key,
          printable(item, path === '' ? key : `${path}.${key}`),
        ]),
      );
  const marker = structureMarker(
    Array.isArray(value) ? 'list' : 'mapping',
    path === '' ? '(all variables)' : path,
  );
  Object.defineProperty(copy, Symbol.toPrimitive, { enumerable: false, value: () => marker });
  return copy as object;
}

function printable(value: unknown, path: string): unknown {
  return typeof value === 'object' && value !== null ? refusePrinting(value, path) : value;
}

/** What `hardware.NAME` may name, and `hardware.interfaces.[N].NAME`. */
const hardwareFields = [
  'id',
  'arch',
  'uefi',
  'mac',
  'address',
  'hostname',
  'interfaces',
  'metadata',
  'inventory',
];
const interfaceFields = ['mac', 'ip', 'gateway', 'dns', 'hostname', 'leaseTimeS', 'vlan'];
/**
 * Fields whose contents are not known when a template is created: the operator's own (metadata),
 * and what the machine reports (inventory). Any name below them may exist.
 */
const openFields = new Set(['metadata', 'inventory']);

/**
 * Why a variable named from the root (`hardware.hostnme`) can never exist, or undefined when it
 * may: checked when a template is created, before any machine is known. A top-level name other
 * than hardware and workflow is a hardwareMap entry (Tinkerbell's device_1), which holds a text,
 * so it has nothing below it.
 */
export function unknownVariableProblem(parts: readonly string[]): string | undefined {
  const [root, field, ...rest] = parts;
  const written = parts.join('.');
  if (root === undefined) return undefined;
  if (root === goHardwareName) return goHardwareProblem(parts);
  if (root === 'pool' && field !== undefined) return poolVariableProblem(written, field, rest);
  if (!reservedVariableNames.includes(root)) {
    if (field === undefined) return undefined;
    const guess = closestName(root, reservedVariableNames);
    if (guess === undefined)
      return `unknown variable ${written}: a hardwareMap entry such as ${root} is a text with nothing below it`;
    const corrected = [guess, field, ...rest];
    // The nearer root is meant; say so only when the whole corrected name exists.
    return unknownVariableProblem(corrected) === undefined
      ? `unknown variable ${written}; did you mean ${corrected.join('.')}?`
      : `unknown variable ${written}: the variables are hardware (${hardwareFields.join(', ')}) and workflow (id)`;
  }
  if (field === undefined) return undefined;
  const fields = root === 'workflow' ? ['id'] : hardwareFields;
  if (root === 'hardware' && (field === 'spec' || field === 'status')) {
    return `unknown variable ${written}: Tinkerbell's .hardware.${field} is not supported; .Hardware has the machine's Disks, Interfaces and Metadata (docs/decisions/0042)`;
  }
  if (!fields.includes(field)) {
    const guess = closestName(field, fields);
    return `unknown variable ${written}: ${root} has ${fields.join(', ')}${guess === undefined ? '' : `; did you mean ${root}.${guess}?`}`;
  }
  if (root === 'hardware' && field === 'interfaces') return interfaceProblem(written, rest);
  if (rest.length > 0 && !openFields.has(field))
    return `unknown variable ${written}: ${root}.${field} is a value`;
  return undefined;
}

const poolImageFields = ['name', 'sha256', 'path', 'url'];

/** `pool.name`, `pool.image.url` and the image's other fields (a pool's workflows only). */
function poolVariableProblem(written: string, field: string, rest: readonly string[]): string | undefined {
  if (field === 'name' && rest.length === 0) return undefined;
  if (
    field === 'image' &&
    (rest.length === 0 || (rest.length === 1 && poolImageFields.includes(rest[0] ?? '')))
  )
    return undefined;
  return `unknown variable ${written}: a pool's workflows have pool.name and pool.image (${poolImageFields.join(', ')})`;
}

function interfaceProblem(written: string, rest: readonly string[]): string | undefined {
  const [index, field, ...below] = rest;
  if (index === undefined) return undefined;
  if (!/^\d+$/.test(index))
    return `unknown variable ${written}: interfaces are numbered, e.g. hardware.interfaces.[0].mac`;
  if (field === undefined) return undefined;
  if (!interfaceFields.includes(field)) {
    const guess = closestName(field, interfaceFields);
    return `unknown variable ${written}: an interface has ${interfaceFields.join(', ')}${guess === undefined ? '' : `; did you mean ${guess}?`}`;
  }
  if (field === 'ip' && below.length > 0 && !['address', 'prefix'].includes(below[0] ?? '')) {
    return `unknown variable ${written}: an interface's ip has address and prefix`;
  }
  if (field !== 'ip' && field !== 'dns' && below.length > 0)
    return `unknown variable ${written}: ${field} is a value`;
  return undefined;
}

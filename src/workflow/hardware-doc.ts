// The hardware document: how an operator describes a machine to `slipway hardware create -f`
// (YAML or JSON) and to the API. camelCase and JSON-friendly:
//
//   id: node-17                        1-128 of [A-Za-z0-9._:-], not shaped like a MAC
//   arch: x86_64                       or arm64; default x86_64
//   uefi: false                        default false
//   interfaces:                        1-64; MACs unique
//     - mac: "aa:bb:cc:dd:ee:ff"       any case, ":" or "-"; stored lower-case with ":"
//       ip: 10.0.0.5/24                or {address: 10.0.0.5, prefix: 24}; optional
//       gateway: 10.0.0.1
//       dns: [10.0.0.2]                up to 16
//       hostname: node-17              RFC 1123
//       leaseTime: 86400               seconds, default 86400 (`leaseTimeS` is accepted too, so
//                                      the JSON of a stored HardwareInput reads back unchanged)
//       vlan: 12                       1-4094
//   netboot: {allowPXE: true, allowWorkflow: true, ipxeScript: "#!ipxe ...", ipxeUrl: http://...}
//   metadata: {...}                    any JSON, up to 64 KiB
//   bmc:                               the machine's BMC, for `slipway power`
//     address: ipmi://10.0.1.17:623    ipmi://HOST[:PORT] (port 623 by default) or a bare HOST;
//                                      stored as ipmi://HOST:PORT
//     username: admin                  at most 16 bytes (IPMI)
//     password: ...                    at most 20 bytes (IPMI v2.0); kept in the replicated
//                                      state, never shown by get/list (they say passwordSet)
//     secretRef: bmc-node-17           optional name of an external secret
//
// Unknown fields are refused by name. Every refusal is a HardwareDocumentError naming the field
// path and, for YAML, the line: `line 4: interfaces[0].mac: "zz:1" is not a MAC address (want
// aa:bb:cc:dd:ee:ff)`.
import { z } from 'zod';
import type { Arch, BmcRef, Netboot, NetworkInterface, HardwareInput } from '../model/records.js';
import { formatBmcAddress, parseBmcAddress } from '../model/bmc-address.js';
import { isIpv4, normalizeMac } from '../platform/addresses.js';
import {
  bmcPasswordBytesMax,
  bmcUsernameBytesMax,
  controlIdLengthMax,
  dnsServersPerInterfaceMax,
  hardwareMetadataBytesMax,
  interfacesPerHardwareMax,
  ipxeScriptBytesMax,
} from '../model/limits.js';
import {
  closestName,
  describeValue,
  YamlSource,
  type FieldPath,
  LocatedError,
  type LocatedProblem,
} from './template-yaml.js';

export class HardwareDocumentError extends LocatedError {
  constructor(problems: readonly LocatedProblem[]) {
    super(problems);
    this.name = 'HardwareDocumentError';
  }
}

/** `hardware create --id --mac --ip [--gateway] [--arch] [--uefi]`. */
export interface HardwareFlags {
  readonly id: string;
  readonly mac: string;
  /** ADDRESS/PREFIX, e.g. 10.0.0.5/24. */
  readonly ip: string;
  readonly gateway?: string | undefined;
  readonly arch?: string | undefined;
  readonly uefi?: boolean | undefined;
}

export const leaseTimeSDefault = 86_400;
export const hardwareDocumentBytesMax = 256 * 1024;
/** DHCP carries lease times in 32 bits; this keeps clear of 0xffffffff, "infinite". */
const leaseTimeSMax = 0x7fff_ffff;
const problemsMax = 20;

const idPattern = new RegExp(`^[A-Za-z0-9._:-]{1,${controlIdLengthMax}}$`);
const hostnameLabel = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

function isHostname(text: string): boolean {
  return text.length <= 253 && text.split('.').every((label) => hostnameLabel.test(label));
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

/** A string field that must pass `accept`; `want` completes "... is not ...". */
function checkedText(accept: (text: string) => boolean, want: string) {
  return z.string().refine(accept, { error: (issue) => `${describeValue(issue.input)} is not ${want}` });
}

const ipv4 = checkedText(isIpv4, 'an IPv4 address (want a.b.c.d)');

const mac = z.string().transform((text, ctx) => {
  const normal = normalizeMac(text);
  if (normal !== undefined) return normal;
  ctx.issues.push({
    code: 'custom',
    input: text,
    message: `${describeValue(text)} is not a MAC address (want aa:bb:cc:dd:ee:ff)`,
  });
  return z.NEVER;
});

const prefix = z.number().int().min(0).max(32);
const ipObject = z.strictObject({ address: ipv4, prefix });

/** "10.0.0.5/24" or {address, prefix}: the string form is turned into the mapping first. */
const ipAssignment = z.preprocess((value, ctx) => {
  if (typeof value !== 'string') return value;
  const cidr = /^([0-9.]+)\/([0-9]{1,2})$/.exec(value);
  const address = cidr?.[1];
  const length = Number(cidr?.[2]);
  if (address !== undefined && isIpv4(address) && length <= 32) return { address, prefix: length };
  ctx.issues.push({
    code: 'custom',
    input: value,
    message: `${describeValue(value)} is not an IPv4 address with a prefix length (want 10.0.0.5/24)`,
  });
  return z.NEVER;
}, ipObject);

const seconds = z.number().int().min(1).max(leaseTimeSMax);

const interfaceSchema = z.strictObject({
  mac,
  ip: ipAssignment.optional(),
  gateway: ipv4.optional(),
  dns: z.array(ipv4).max(dnsServersPerInterfaceMax).default([]),
  hostname: checkedText(
    isHostname,
    'a hostname (letters, digits and "-" in dot-separated labels)',
  ).optional(),
  leaseTime: seconds.optional(),
  leaseTimeS: seconds.optional(),
  vlan: z.number().int().min(1).max(4094).optional(),
});

const netbootSchema = z.strictObject({
  allowPXE: z.boolean().default(true),
  allowWorkflow: z.boolean().default(true),
  ipxeScript: z
    .string()
    .refine((script) => script.startsWith('#!ipxe'), {
      error: 'must start with "#!ipxe" (iPXE refuses it otherwise)',
    })
    .refine((script) => Buffer.byteLength(script) <= ipxeScriptBytesMax, {
      error: `must be at most ${ipxeScriptBytesMax} bytes long`,
    })
    .optional(),
  ipxeUrl: checkedText(isHttpUrl, 'an http:// or https:// URL').optional(),
});

const bmcAddress = z.string().transform((text, ctx) => {
  const endpoint = parseBmcAddress(text);
  if (!('problem' in endpoint)) return formatBmcAddress(endpoint);
  ctx.issues.push({ code: 'custom', input: text, message: endpoint.problem });
  return z.NEVER;
});

const bmcSchema = z.strictObject({
  address: bmcAddress,
  username: z
    .string()
    .min(1)
    .refine((name) => Buffer.byteLength(name) <= bmcUsernameBytesMax, {
      error: `must be at most ${bmcUsernameBytesMax} bytes (IPMI's limit)`,
    })
    .optional(),
  secretRef: z.string().min(1).optional(),
  // The message never quotes the password back.
  password: z
    .string({ error: 'must be a string' })
    .refine((pw) => Buffer.byteLength(pw) <= bmcPasswordBytesMax, {
      error: `must be at most ${bmcPasswordBytesMax} bytes (IPMI v2.0's limit)`,
    })
    .optional(),
});

const metadataSchema = z
  .record(z.string(), z.json())
  .refine((metadata) => Buffer.byteLength(JSON.stringify(metadata)) <= hardwareMetadataBytesMax, {
    error: `must be at most ${hardwareMetadataBytesMax} bytes as JSON`,
  });

const documentSchema = z.strictObject({
  id: z
    .string()
    .refine((id) => idPattern.test(id), {
      error: (issue) =>
        `${describeValue(issue.input)} is not a hardware id (1-${controlIdLengthMax} letters, digits, ".", "_", ":" or "-")`,
    })
    .refine((id) => normalizeMac(id) === undefined, {
      error: "must not look like a MAC address: a task's worker names either one",
    }),
  arch: z.enum(['x86_64', 'arm64']).default('x86_64'),
  uefi: z.boolean().default(false),
  interfaces: z.array(interfaceSchema).min(1).max(interfacesPerHardwareMax),
  netboot: netbootSchema.default({ allowPXE: true, allowWorkflow: true }),
  metadata: metadataSchema.default({}),
  bmc: bmcSchema.optional(),
});

type DocumentOutput = z.output<typeof documentSchema>;

/** Fields allowed in each object of the document, for "did you mean" on unknown ones. */
function allowedFieldsAt(path: FieldPath): readonly string[] {
  const last = path[path.length - 1];
  const parent = path[path.length - 2];
  if (path.length === 0) return Object.keys(documentSchema.shape);
  if (last === 'netboot') return Object.keys(netbootSchema.shape);
  if (last === 'bmc') return Object.keys(bmcSchema.shape);
  if (last === 'ip') return Object.keys(ipObject.shape);
  if (parent === 'interfaces')
    return Object.keys(interfaceSchema.shape).filter((key) => key !== 'leaseTimeS');
  return [];
}

/** Parses and checks a hardware document (YAML or JSON). Throws HardwareDocumentError. */
export function parseHardwareDocument(text: string): HardwareInput {
  const bytes = Buffer.byteLength(text);
  if (bytes > hardwareDocumentBytesMax) {
    throw new HardwareDocumentError([
      {
        path: [],
        message: `the document is ${bytes} bytes; at most ${hardwareDocumentBytesMax} are allowed`,
      },
    ]);
  }
  const parsed = YamlSource.parse(text);
  if (!parsed.ok) throw new HardwareDocumentError([parsed.problem]);
  const source = parsed.source;
  const problems = source.locateAll(checkDocument(source.value));
  if (problems.length > 0) throw new HardwareDocumentError(problems);
  return hardwareInput(documentSchema.parse(source.value));
}

/** `hardware create --id --mac --ip ...`, checked by the same rules; errors name the flags. */
export function hardwareFromFlags(flags: HardwareFlags): HardwareInput {
  const nic: Record<string, unknown> = { mac: flags.mac, ip: flags.ip };
  if (flags.gateway !== undefined) nic['gateway'] = flags.gateway;
  const document: Record<string, unknown> = { id: flags.id, interfaces: [nic] };
  if (flags.arch !== undefined) document['arch'] = flags.arch;
  if (flags.uefi !== undefined) document['uefi'] = flags.uefi;
  const problems = checkDocument(document);
  if (problems.length > 0) {
    throw new HardwareDocumentError(
      problems.map((problem) => ({ path: [], message: `${flagOf(problem.path)}: ${problem.message}` })),
    );
  }
  return hardwareInput(documentSchema.parse(document));
}

function checkDocument(value: unknown): LocatedProblem[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return [{ path: [], message: `a hardware document must be a mapping, got ${describeValue(value)}` }];
  }
  const checked = documentSchema.safeParse(value, { error: errorMessage, reportInput: true });
  const problems: LocatedProblem[] = checked.success ? [] : checked.error.issues.flatMap(problemsOf);
  if (checked.success) problems.push(...crossFieldProblems(checked.data));
  return problems.slice(0, problemsMax);
}

/** Rules spanning fields, once each field is valid on its own. */
function crossFieldProblems(document: DocumentOutput): LocatedProblem[] {
  const problems: LocatedProblem[] = [];
  const firstIndex = new Map<string, number>();
  document.interfaces.forEach((nic, index) => {
    const earlier = firstIndex.get(nic.mac);
    if (earlier === undefined) firstIndex.set(nic.mac, index);
    else
      problems.push({
        path: ['interfaces', index, 'mac'],
        message: `${nic.mac} is already interfaces[${earlier}].mac`,
      });
    if (nic.leaseTime !== undefined && nic.leaseTimeS !== undefined) {
      problems.push({
        path: ['interfaces', index, 'leaseTimeS'],
        message: 'give leaseTime or leaseTimeS, not both',
      });
    }
  });
  if (document.netboot.ipxeScript !== undefined && document.netboot.ipxeUrl !== undefined) {
    problems.push({ path: ['netboot', 'ipxeUrl'], message: 'give ipxeScript or ipxeUrl, not both' });
  }
  return problems;
}

function problemsOf(issue: z.core.$ZodIssue): LocatedProblem[] {
  const path = issue.path.filter((segment) => typeof segment !== 'symbol');
  if (issue.code !== 'unrecognized_keys') return [{ path, message: issue.message }];
  const allowed = allowedFieldsAt(path);
  return issue.keys.map((key) => {
    const guess = closestName(key, allowed);
    const hint = guess === undefined ? '' : ` (did you mean "${guess}"?)`;
    const secret = key === 'passwordSet' ? '; give the password itself (get/list never show it)' : '';
    return {
      path: [...path, key],
      message: `unknown field${hint}${secret}; allowed here: ${allowed.join(', ')}`,
    };
  });
}

/** Plain messages for zod's generic issues; the schema's own refinements say their own. */
function errorMessage(issue: z.core.$ZodRawIssue): string | undefined {
  const got = describeValue(issue.input);
  switch (issue.code) {
    case 'invalid_type':
      return issue.input === undefined
        ? 'is required'
        : `must be ${expectedKind(issue.expected)}, got ${got}`;
    case 'invalid_value':
      return `must be one of ${issue.values.map((value) => JSON.stringify(value)).join(', ')}, got ${got}`;
    case 'too_small':
      return issue.origin === 'array'
        ? `must have at least ${entries(issue.minimum)}`
        : `must be at least ${issue.minimum}, got ${got}`;
    case 'too_big':
      return issue.origin === 'array'
        ? `must have at most ${entries(issue.maximum)}`
        : tooBig(issue.origin, issue.maximum, got);
    case 'invalid_union':
      // Only metadata has a union (JSON values): a YAML tag such as !!binary gave something else.
      return `must be JSON data (strings, numbers, booleans, null, lists and mappings), got ${got}`;
    default:
      return undefined;
  }
}

function entries(count: number | bigint): string {
  return count === 1 ? '1 entry' : `${count} entries`;
}

function tooBig(origin: string, maximum: number | bigint, got: string): string {
  return origin === 'string'
    ? `must be at most ${maximum} characters long`
    : `must be at most ${maximum}, got ${got}`;
}

function expectedKind(expected: string): string {
  switch (expected) {
    case 'int':
      return 'a whole number';
    case 'object':
    case 'record':
      return 'a mapping';
    case 'array':
      return 'a list';
    case 'string':
      return 'a string';
    case 'boolean':
      return 'true or false';
    case 'number':
      return 'a number';
    default:
      return expected;
  }
}

function flagOf(path: FieldPath): string {
  const field = path[path.length - 1];
  if (path[0] === 'interfaces' && (field === 'mac' || field === 'ip' || field === 'gateway'))
    return `--${field}`;
  if (path[0] === 'interfaces' && path[2] === 'ip') return '--ip';
  return path[0] === 'id' || path[0] === 'arch' || path[0] === 'uefi' ? `--${path[0]}` : 'flags';
}

function hardwareInput(document: DocumentOutput): HardwareInput {
  const interfaces = document.interfaces.map((nic): NetworkInterface => {
    const result: { -readonly [K in keyof NetworkInterface]: NetworkInterface[K] } = {
      mac: nic.mac,
      dns: nic.dns,
      leaseTimeS: nic.leaseTime ?? nic.leaseTimeS ?? leaseTimeSDefault,
    };
    if (nic.ip !== undefined) result.ip = nic.ip;
    if (nic.gateway !== undefined) result.gateway = nic.gateway;
    if (nic.hostname !== undefined) result.hostname = nic.hostname;
    if (nic.vlan !== undefined) result.vlan = nic.vlan;
    return result;
  });
  const netboot: { -readonly [K in keyof Netboot]: Netboot[K] } = {
    allowPXE: document.netboot.allowPXE,
    allowWorkflow: document.netboot.allowWorkflow,
  };
  if (document.netboot.ipxeScript !== undefined) netboot.ipxeScript = document.netboot.ipxeScript;
  if (document.netboot.ipxeUrl !== undefined) netboot.ipxeUrl = document.netboot.ipxeUrl;
  const arch: Arch = document.arch;
  const input = {
    id: document.id,
    interfaces,
    arch,
    uefi: document.uefi,
    netboot,
    metadata: document.metadata,
  };
  return document.bmc === undefined ? input : { ...input, bmc: bmcRef(document.bmc) };
}

function bmcRef(bmc: NonNullable<DocumentOutput['bmc']>): BmcRef {
  const ref: { -readonly [K in keyof BmcRef]: BmcRef[K] } = { address: bmc.address };
  if (bmc.username !== undefined) ref.username = bmc.username;
  if (bmc.secretRef !== undefined) ref.secretRef = bmc.secretRef;
  if (bmc.password !== undefined) ref.password = bmc.password;
  return ref;
}

/** `--bmc URL [--bmc-credentials-file F]`: the machine's BMC, set or replaced on a parsed input. */
export function withBmc(
  input: HardwareInput,
  bmc: { readonly address: string; readonly username?: string; readonly password?: string },
): HardwareInput {
  const checked = bmcSchema.safeParse(bmc, { error: errorMessage, reportInput: true });
  if (!checked.success) {
    throw new HardwareDocumentError(
      checked.error.issues.map((issue) => ({
        path: [],
        message: `${issue.path[0] === 'address' ? '--bmc' : `--bmc-credentials-file: ${String(issue.path[0])}`}: ${issue.message}`,
      })),
    );
  }
  return { ...input, bmc: bmcRef(checked.data) };
}

/**
 * A BMC credentials file: `username:password` on one line, or the user name on the first line
 * and the password on the second (for passwords with a colon). Surrounding blank space and a
 * final newline are ignored.
 */
export function parseBmcCredentials(text: string): { username: string; password: string } {
  const lines = text.split(/\r?\n/).filter((line) => line.trim() !== '');
  if (lines.length === 2) return { username: (lines[0] ?? '').trim(), password: (lines[1] ?? '').trim() };
  const line = lines[0]?.trim() ?? '';
  const colon = line.indexOf(':');
  if (lines.length !== 1 || colon <= 0) {
    throw new HardwareDocumentError([
      {
        path: [],
        message:
          '--bmc-credentials-file: want "username:password" on one line, or the user name and the password on two lines',
      },
    ]);
  }
  return { username: line.slice(0, colon), password: line.slice(colon + 1) };
}

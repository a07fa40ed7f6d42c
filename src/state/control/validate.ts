// The domain rules apply checks before it changes anything: formats, ranges and sizes of what
// operators and proposers send. Each check returns a problem that names the field (the E_INVALID
// message), or undefined. Rules that depend on other records (unique MACs, existing hardware)
// live with the appliers (apply-*.ts), which read the tables and indexes they need.
import { utf8Length } from '../../platform/utf8-text.js';
import { isIpv4, normalizeMac } from '../../platform/addresses.js';
import { parseBmcAddress } from '../../model/bmc-address.js';
import {
  actionRetriesMax,
  bmcPasswordBytesMax,
  bmcUsernameBytesMax,
  controlIdLengthMax,
  dnsServersPerInterfaceMax,
  hardwareMetadataBytesMax,
  interfacesPerHardwareMax,
  ipxeScriptBytesMax,
  templateSourceBytesMax,
  timeoutSMax,
  workerTokenLengthMax,
  workflowActionsMax,
  workflowTasksMax,
} from '../../model/limits.js';
import type { HardwareInput, NetworkInterface, RenderedTemplate } from '../../model/records.js';
import { at } from './shape.js';

const idPattern = new RegExp(`^[A-Za-z0-9._:-]{1,${controlIdLengthMax}}$`);
const templateNamePattern = new RegExp(`^[A-Za-z0-9._-]{1,${controlIdLengthMax}}$`);
const label = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const hostnamePattern = new RegExp(`^(?=.{1,253}$)${label}(?:\\.${label})*$`);
const workerTokenPattern = new RegExp(`^[\\x21-\\x7e]{1,${workerTokenLengthMax}}$`);
const sha256Pattern = /^[0-9a-f]{64}$/i;
const urlPattern = /^https?:\/\/\S+$/;
/** C0 controls other than tab, LF and CR: YAML and iPXE scripts have no use for them. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const controlCharacterPattern = /[\u0000-\u0008\u000b\u000c\u000e-\u001f]/;
const leaseTimeSMax = 0xffffffff; // DHCP option 51 is 32 bits

function quoted(s: string): string {
  return JSON.stringify(s.length > 64 ? `${s.slice(0, 64)}…` : s);
}

function inRange(n: number, min: number, max: number): boolean {
  return Number.isSafeInteger(n) && n >= min && n <= max;
}

/** Hardware ids, workflow ids and token names. */
export function idProblem(field: string, id: string): string | undefined {
  if (idPattern.test(id)) return undefined;
  return `${field}: ${quoted(id)} must be 1-${controlIdLengthMax} characters of A-Z a-z 0-9 . _ : -`;
}

export function templateNameProblem(field: string, name: string): string | undefined {
  if (templateNamePattern.test(name)) return undefined;
  return `${field}: ${quoted(name)} must be 1-${controlIdLengthMax} characters of A-Z a-z 0-9 . _ -`;
}

export function workerTokenProblem(token: string): string | undefined {
  if (workerTokenPattern.test(token)) return undefined;
  return `workerToken must be 1-${workerTokenLengthMax} printable ASCII characters without spaces`;
}

export function sha256Problem(sha256: string): string | undefined {
  return sha256Pattern.test(sha256)
    ? undefined
    : `sha256: must be 64 hexadecimal digits, got ${quoted(sha256)}`;
}

export function templateSourceProblem(source: string): string | undefined {
  if (source.trim() === '') return 'source: is empty';
  const bytes = utf8Length(source);
  if (bytes > templateSourceBytesMax)
    return `source: ${bytes} bytes is over the limit of ${templateSourceBytesMax}`;
  if (controlCharacterPattern.test(source)) return 'source: contains a control character (YAML allows none)';
  return undefined;
}

/**
 * Checks hardware as the operator describes it and returns it with MACs in lower-case colon
 * form, or the first problem. Uniqueness of MACs across machines is the caller's check.
 */
export function normalizeHardware(input: HardwareInput): { hardware: HardwareInput } | { problem: string } {
  const problem =
    idProblem('id', input.id) ??
    (input.interfaces.length === 0 ? 'interfaces: at least one network interface is required' : undefined) ??
    (input.interfaces.length > interfacesPerHardwareMax
      ? `interfaces: ${input.interfaces.length} is over the limit of ${interfacesPerHardwareMax}`
      : undefined) ??
    netbootProblem(input) ??
    metadataProblem(input) ??
    bmcProblem(input);
  if (problem !== undefined) return { problem };
  const interfaces: NetworkInterface[] = [];
  const seen = new Set<string>();
  for (const [i, iface] of input.interfaces.entries()) {
    const path = at('interfaces', i);
    const mac = normalizeMac(iface.mac);
    if (mac === undefined)
      return { problem: `${path}.mac: ${quoted(iface.mac)} is not a MAC address (want aa:bb:cc:dd:ee:ff)` };
    if (seen.has(mac)) return { problem: `${path}.mac: ${mac} appears twice in this machine` };
    seen.add(mac);
    const ifaceProblem = interfaceProblem(path, iface);
    if (ifaceProblem !== undefined) return { problem: ifaceProblem };
    interfaces.push(iface.mac === mac ? iface : { ...iface, mac });
  }
  return { hardware: { ...input, interfaces } };
}

function interfaceProblem(path: string, iface: NetworkInterface): string | undefined {
  if (iface.ip !== undefined) {
    if (!isIpv4(iface.ip.address))
      return `${path}.ip.address: ${quoted(iface.ip.address)} is not an IPv4 address`;
    if (!inRange(iface.ip.prefix, 0, 32)) return `${path}.ip.prefix: must be 0-32, got ${iface.ip.prefix}`;
  }
  if (iface.gateway !== undefined && !isIpv4(iface.gateway)) {
    return `${path}.gateway: ${quoted(iface.gateway)} is not an IPv4 address`;
  }
  if (iface.dns.length > dnsServersPerInterfaceMax) {
    return `${path}.dns: ${iface.dns.length} servers is over the limit of ${dnsServersPerInterfaceMax}`;
  }
  for (const [j, server] of iface.dns.entries()) {
    if (!isIpv4(server)) return `${at(`${path}.dns`, j)}: ${quoted(server)} is not an IPv4 address`;
  }
  if (iface.hostname !== undefined && !hostnamePattern.test(iface.hostname)) {
    return `${path}.hostname: ${quoted(iface.hostname)} is not a valid host name`;
  }
  if (!inRange(iface.leaseTimeS, 1, leaseTimeSMax)) {
    return `${path}.leaseTimeS: must be 1-${leaseTimeSMax} seconds, got ${iface.leaseTimeS}`;
  }
  if (iface.vlan !== undefined && !inRange(iface.vlan, 1, 4094)) {
    return `${path}.vlan: must be 1-4094, got ${iface.vlan}`;
  }
  return undefined;
}

function netbootProblem(input: HardwareInput): string | undefined {
  const { ipxeScript, ipxeUrl } = input.netboot;
  if (ipxeScript !== undefined) {
    if (utf8Length(ipxeScript) > ipxeScriptBytesMax) {
      return `netboot.ipxeScript: over the limit of ${ipxeScriptBytesMax} bytes`;
    }
    if (controlCharacterPattern.test(ipxeScript)) return 'netboot.ipxeScript: contains a control character';
  }
  if (ipxeUrl !== undefined && (!urlPattern.test(ipxeUrl) || utf8Length(ipxeUrl) > ipxeScriptBytesMax)) {
    return `netboot.ipxeUrl: ${quoted(ipxeUrl)} is not an http:// or https:// URL`;
  }
  return undefined;
}

function bmcProblem(input: HardwareInput): string | undefined {
  const bmc = input.bmc;
  if (bmc === undefined) return undefined;
  const endpoint = parseBmcAddress(bmc.address);
  if ('problem' in endpoint) return `bmc.address: ${endpoint.problem}`;
  if (bmc.username !== undefined && utf8Length(bmc.username) > bmcUsernameBytesMax) {
    return `bmc.username: IPMI allows at most ${bmcUsernameBytesMax} bytes`;
  }
  // The password is never quoted back: errors end up in logs and on terminals.
  if (bmc.password !== undefined && utf8Length(bmc.password) > bmcPasswordBytesMax) {
    return `bmc.password: IPMI v2.0 allows at most ${bmcPasswordBytesMax} bytes`;
  }
  if (bmc.password !== undefined && controlCharacterPattern.test(bmc.password)) {
    return 'bmc.password: contains a control character';
  }
  return undefined;
}

/** Power job ids, which the proposer makes (UUIDs), checked like other ids. */
export function powerJobIdProblem(id: string): string | undefined {
  return idProblem('jobId', id);
}

function metadataProblem(input: HardwareInput): string | undefined {
  const bytes = utf8Length(JSON.stringify(input.metadata));
  if (bytes <= hardwareMetadataBytesMax) return undefined;
  return `metadata: ${bytes} bytes of JSON is over the limit of ${hardwareMetadataBytesMax}`;
}

/**
 * Checks a rendered template's limits. The proposer validated the template; this guards the
 * replicated state against a proposer that did not (an old build, a bug).
 */
export function specProblem(spec: RenderedTemplate): string | undefined {
  if (!inRange(spec.globalTimeoutS, 1, timeoutSMax)) {
    return `spec.globalTimeoutS: must be 1-${timeoutSMax} seconds, got ${spec.globalTimeoutS}`;
  }
  if (spec.tasks.length > workflowTasksMax) {
    return `spec.tasks: ${spec.tasks.length} tasks is over the limit of ${workflowTasksMax}`;
  }
  let actions = 0;
  for (const [t, task] of spec.tasks.entries()) {
    const path = at('spec.tasks', t);
    if (task.name === '') return `${path}.name: is empty`;
    if (task.worker === '') return `${path}.worker: is empty`;
    for (const [a, action] of task.actions.entries()) {
      const where = at(`${path}.actions`, a);
      if (action.name === '') return `${where}.name: is empty`;
      if ((action.image ?? '') === '' && action.command.length === 0 && action.builtin === undefined) {
        return `${where}: needs an image, a command or a built-in action`;
      }
      if (!inRange(action.timeoutS, 1, timeoutSMax)) {
        return `${where}.timeoutS: must be 1-${timeoutSMax} seconds, got ${action.timeoutS}`;
      }
      if (!inRange(action.retries, 0, actionRetriesMax)) {
        return `${where}.retries: must be 0-${actionRetriesMax}, got ${action.retries}`;
      }
    }
    actions += task.actions.length;
  }
  if (actions === 0) return 'spec: has no actions; a workflow needs at least one';
  if (actions > workflowActionsMax)
    return `spec: ${actions} actions is over the limit of ${workflowActionsMax}`;
  return undefined;
}

// The iPXE script a machine gets from /ipxe/{mac}. Pure: the machine's record and the
// cluster's boot settings in, script text out.
//
// Three kinds, the first that applies wins:
// 1. netboot.ipxeScript: the operator's script, served as written ("#!ipxe" added if missing);
// 2. netboot.ipxeUrl: a one-line script that chains to that URL;
// 3. generated: the boot OS (kernel + initramfs from /boot/, `slipway bootos build`) with
//    where to find the cluster on the kernel command line:
//      slipway.worker_id=HARDWARE_ID slipway.server=VIP:API_PORT slipway.http=http://VIP:PORT
//      slipway.mac=MAC
//    and slipway.mode=inventory for an inventory boot (docs/decisions/0029-discovery.md), which
//    is always this kind. Nothing secret: the booted worker claims its credential from slipway.http (invariant 7).
//
// iPXE expands ${...} anywhere in a command line and splits arguments on spaces, so every
// value that lands on one is checked; a record that would change the script's meaning is
// refused with IpxeScriptError instead of being served.
import type { Arch } from '../../model/records.js';
import type { BootRecord } from '../inventory.js';
import { bootOsPrefix, joinBaseUrl } from './paths.js';

export interface BootArtifacts {
  /** File names under the boot OS directory (served at /boot/). */
  readonly kernel: string;
  readonly initrd: string;
}

export interface IpxeScriptSettings {
  /** Base of the artifact URLs: http://VIP:PORT. */
  readonly httpBaseUrl: string;
  /** What the worker agent dials: VIP:API_PORT. */
  readonly apiAddress: string;
  readonly artifacts: { readonly [A in Arch]: BootArtifacts };
  /** Appended to the kernel command line, e.g. console=ttyS0. */
  readonly extraKernelArgs: readonly string[];
}

export const defaultBootArtifacts: { readonly [A in Arch]: BootArtifacts } = {
  x86_64: { kernel: 'vmlinuz-x86_64', initrd: 'initramfs-x86_64' },
  arm64: { kernel: 'vmlinuz-arm64', initrd: 'initramfs-arm64' },
};

export type IpxeScriptKind = 'custom' | 'chain' | 'generated';

export interface IpxeScript {
  readonly kind: IpxeScriptKind;
  readonly text: string;
}

/** A record or setting that cannot be put into a script safely; `field` names it. */
export class IpxeScriptError extends Error {
  readonly code = 'E_IPXE_SCRIPT';
  readonly field: string;

  constructor(field: string, problem: string) {
    super(`cannot build the iPXE script: ${field} ${problem}`);
    this.name = 'IpxeScriptError';
    this.field = field;
  }
}

const header = '#!ipxe';

/** One iPXE argument: printable ASCII with no space, no ${ expansion and no quoting characters. */
const argumentText = /^[\x21-\x7e]+$/;
const forbiddenInArgument = /[$"'\\]/;
const quoting = /["'\\]/;

export function renderIpxeScript(record: BootRecord, settings: IpxeScriptSettings): IpxeScript {
  const { netboot } = record.hardware;
  // An inventory boot is the boot OS's, whatever script the machine's own boots use.
  if (record.mode === 'inventory') return { kind: 'generated', text: generatedScript(record, settings) };
  if (netboot.ipxeScript !== undefined) return { kind: 'custom', text: customScript(netboot.ipxeScript) };
  if (netboot.ipxeUrl !== undefined) {
    // The operator's own URL may use iPXE settings such as ${net0/mac}; only spaces and quoting are refused.
    const url = checkUrl('netboot.ipxeUrl', netboot.ipxeUrl, { expansion: true });
    return { kind: 'chain', text: `${header}\nchain ${url}\n` };
  }
  return { kind: 'generated', text: generatedScript(record, settings) };
}

function generatedScript(record: BootRecord, settings: IpxeScriptSettings): string {
  const { hardware, iface } = record;
  const artifacts = settings.artifacts[hardware.arch];
  const httpBase = checkArgument('httpBaseUrl', settings.httpBaseUrl.replace(/\/+$/, ''));
  const kernelUrl = artifactUrl(settings, 'kernel', artifacts.kernel);
  const initrdUrl = artifactUrl(settings, 'initrd', artifacts.initrd);
  const args = [
    // EFI-stub kernels find the initrd by the name iPXE gave it: the URL's last segment.
    `initrd=${lastSegment(artifacts.initrd)}`,
    `slipway.worker_id=${checkArgument('hardware.id', hardware.id)}`,
    `slipway.server=${checkArgument('apiAddress', settings.apiAddress)}`,
    `slipway.http=${httpBase}`,
    `slipway.mac=${checkArgument('iface.mac', iface.mac)}`,
    ...(record.mode === 'inventory' ? ['slipway.mode=inventory'] : []),
    ...settings.extraKernelArgs.map((arg, i) => checkArgument(`extraKernelArgs[${i}]`, arg)),
  ];
  return [
    header,
    `echo Slipway: booting ${hardware.id} (${iface.mac})${record.mode === 'inventory' ? ' in inventory mode' : ''}`,
    `kernel ${kernelUrl} ${args.join(' ')}`,
    `initrd ${initrdUrl}`,
    'boot',
    '',
  ].join('\n');
}

function customScript(script: string): string {
  const text = script.endsWith('\n') ? script : `${script}\n`;
  return text.startsWith(header) ? text : `${header}\n${text}`;
}

function artifactUrl(settings: IpxeScriptSettings, role: 'kernel' | 'initrd', name: string): string {
  const field = `artifacts.${role}`;
  if (name.split('/').some((segment) => segment === '' || segment === '.' || segment === '..')) {
    throw new IpxeScriptError(field, `"${name}" is not a relative file name`);
  }
  const encoded = name.split('/').map(encodeURIComponent).join('/');
  return checkUrl(field, joinBaseUrl(settings.httpBaseUrl, `${bootOsPrefix}${encoded}`));
}

function checkUrl(field: string, url: string, allow = { expansion: false }): string {
  if (!/^(https?|tftp):\/\/[^/\s]+/.test(url)) {
    throw new IpxeScriptError(field, `"${url}" is not an http, https or tftp URL`);
  }
  return checkArgument(field, url, allow);
}

function checkArgument(field: string, value: string, allow = { expansion: false }): string {
  if (!argumentText.test(value)) {
    throw new IpxeScriptError(field, 'is empty or has spaces or characters outside printable ASCII');
  }
  if (allow.expansion ? quoting.test(value) : forbiddenInArgument.test(value)) {
    throw new IpxeScriptError(
      field,
      `"${value}" contains $, a quote or a backslash, which iPXE would interpret`,
    );
  }
  return value;
}

function lastSegment(name: string): string {
  return name.slice(name.lastIndexOf('/') + 1);
}

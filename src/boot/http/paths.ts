// The HTTP boot server's URL layout, in one place: DHCP hands out these URLs and the HTTP
// server parses them, so the two cannot drift apart.
//
//   /ipxe/{mac}            the machine's iPXE script ({mac} with colons or dashes, optional .ipxe)
//   /artifacts/{name}      kernels, initrds and other boot artifacts from the artifacts directory
//   /binaries/{name}       the iPXE binaries (the TFTP root), for UEFI HTTP boot
//   /boot/{name}           the boot OS (`slipway bootos build`): vmlinuz-ARCH, initramfs-ARCH
//   /credential            POST: a booted machine claims its worker credential
import { canonicalMac } from '../inventory.js';

export const ipxeScriptPrefix = '/ipxe/';
export const artifactPrefix = '/artifacts/';
export const binaryPrefix = '/binaries/';
export const bootOsPrefix = '/boot/';
export const credentialPath = '/credential';

/** The path of a machine's script; `mac` in canonical colon form. */
export function ipxeScriptPath(mac: string): string {
  return `${ipxeScriptPrefix}${mac}`;
}

/** `base` (http://host:port, with or without a trailing slash) joined with an absolute path. */
export function joinBaseUrl(base: string, absolutePath: string): string {
  return `${base.replace(/\/+$/, '')}${absolutePath}`;
}

export type BootRoute =
  | { readonly kind: 'ipxe-script'; readonly mac: string }
  | { readonly kind: 'artifact'; readonly name: string }
  | { readonly kind: 'binary'; readonly name: string }
  | { readonly kind: 'boot-os'; readonly name: string }
  | { readonly kind: 'credential' }
  | { readonly kind: 'not-found'; readonly reason: string };

/**
 * What a request path asks for. `pathname` is the raw, still percent-encoded path; a query
 * string is ignored (iPXE scripts often tag fetches with one). File names stay encoded-free
 * text here; whether they are safe to open is the file server's decision.
 */
export function routeOf(pathname: string): BootRoute {
  if (pathname === credentialPath) return { kind: 'credential' };
  if (pathname.startsWith(ipxeScriptPrefix)) {
    const name = decode(pathname.slice(ipxeScriptPrefix.length));
    const mac = name === undefined ? undefined : canonicalMac(name.replace(/\.ipxe$/, ''));
    if (mac === undefined) return { kind: 'not-found', reason: 'not a MAC address' };
    return { kind: 'ipxe-script', mac };
  }
  for (const [prefix, kind] of [
    [artifactPrefix, 'artifact'],
    [binaryPrefix, 'binary'],
    [bootOsPrefix, 'boot-os'],
  ] as const) {
    if (!pathname.startsWith(prefix)) continue;
    const name = decode(pathname.slice(prefix.length));
    if (name === undefined || name === '') return { kind: 'not-found', reason: 'no file name' };
    return { kind, name };
  }
  return { kind: 'not-found', reason: 'unknown path' };
}

function decode(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

// The pure readers behind the inventory collector (inventory.ts): /proc/cpuinfo, /proc/meminfo,
// a SCSI serial-number VPD page, a world-wide name, and `ipmitool lan print`. The boot OS has
// busybox and nothing that parses these for us, so the parsing is ours and tested on fixtures.
import { headUtf8 } from '../platform/utf8-text.js';
import { isIpv4, normalizeMac } from '../platform/addresses.js';
import type { BmcInventory } from '../model/inventory.js';
import { inventoryTextBytesMax } from '../model/limits.js';

/**
 * Text as the inventory keeps it: control characters (firmware strings hold NULs and padding)
 * become spaces, runs of spaces one, trimmed and cut to the bound; undefined when nothing is left.
 */
export function cleanText(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  let text = '';
  for (const ch of raw) {
    const code = ch.codePointAt(0) ?? 0;
    text += code < 0x20 || code === 0x7f ? ' ' : ch;
  }
  const clean = text.replace(/\s+/g, ' ').trim();
  return clean === '' ? undefined : headUtf8(clean, inventoryTextBytesMax);
}

export interface CpuinfoFacts {
  /** "model name" (x86), "Processor" (older ARM), or the ARM implementer and part. */
  readonly model?: string;
  /** Processor entries: logical CPUs online. */
  readonly processors: number;
  /** Distinct "physical id" values, when the kernel gives them (x86). */
  readonly sockets?: number;
  /** Distinct (physical id, core id) pairs, when the kernel gives them (x86). */
  readonly cores?: number;
}

/** Reads /proc/cpuinfo: blocks of "key : value" lines, one block per logical CPU. */
export function parseCpuinfo(text: string): CpuinfoFacts {
  const blocks = text.split(/\n\s*\n/).map((block) => {
    const fields = new Map<string, string>();
    for (const line of block.split('\n')) {
      const colon = line.indexOf(':');
      if (colon > 0) fields.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
    }
    return fields;
  });
  const cpus = blocks.filter((b) => b.has('processor'));
  const first = (key: string): string | undefined =>
    blocks.map((b) => b.get(key)).find((v) => v !== undefined && v !== '');
  const implementer = first('CPU implementer');
  const part = first('CPU part');
  const model =
    cleanText(first('model name')) ??
    cleanText(first('Processor')) ??
    (implementer === undefined ? undefined : `ARM implementer ${implementer} part ${part ?? 'unknown'}`);
  const packages = new Set(cpus.map((b) => b.get('physical id')).filter((v) => v !== undefined));
  const cores = new Set(
    cpus
      .filter((b) => b.has('physical id') && b.has('core id'))
      .map((b) => `${b.get('physical id')}:${b.get('core id')}`),
  );
  return {
    ...(model === undefined ? {} : { model }),
    processors: cpus.length,
    ...(packages.size === 0 ? {} : { sockets: packages.size }),
    ...(cores.size === 0 ? {} : { cores: cores.size }),
  };
}

/** MemTotal from /proc/meminfo, in bytes (the kernel writes kB meaning KiB). */
export function parseMemTotalBytes(text: string): number | undefined {
  const kib = /^MemTotal:\s+([0-9]+)\s*kB$/m.exec(text)?.[1];
  return kib === undefined ? undefined : Number(kib) * 1024;
}

/**
 * The unit serial number from a SCSI VPD page 0x80 (sysfs `device/vpd_pg80`): byte 1 is the page
 * code, bytes 2-3 the length, then the serial in ASCII, often padded with spaces. For SATA disks
 * libata builds this page from the ATA serial, so both read the same way.
 */
export function parseVpdSerial(page: Uint8Array): string | undefined {
  if (page.length < 4 || page[1] !== 0x80) return undefined;
  const length = ((page[2] ?? 0) << 8) | (page[3] ?? 0);
  const bytes = page.subarray(4, Math.min(page.length, 4 + length));
  let text = '';
  for (const b of bytes) text += b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ' ';
  return cleanText(text);
}

/**
 * A world-wide name from a sysfs `wwid` (SCSI: "naa.5000c500a1b2c3d4"; NVMe: "eui.0025388b71b0e1c2"),
 * lower-case; undefined for vendor-specific ids ("t10.ATA  QEMU HARDDISK ...", "nvme.8086-...").
 */
export function wwnOf(wwid: string | undefined): string | undefined {
  const text = wwid?.trim().toLowerCase();
  return text !== undefined && /^(naa|eui)\.[0-9a-f]{8,32}$/.test(text) ? text : undefined;
}

/** x86_64 stays; aarch64 is written arm64, as Slipway's records write it; others lower-cased. */
export function normalizeArch(machine: string): string {
  const text = machine.trim().toLowerCase();
  if (text === 'aarch64' || text === 'arm64') return 'arm64';
  if (text === 'amd64') return 'x86_64';
  return /^[a-z0-9_]{1,32}$/.test(text) ? text : 'unknown';
}

/**
 * The BMC's LAN address and MAC from `ipmitool lan print`:
 *   IP Address              : 10.0.9.17
 *   MAC Address             : 3c:ec:ef:00:00:0f
 * Undefined when the BMC has no address yet (0.0.0.0, as an unconfigured BMC answers).
 */
export function parseIpmiLanPrint(text: string): BmcInventory | undefined {
  const field = (name: string): string | undefined =>
    new RegExp(`^${name}\\s*:\\s*(\\S+)\\s*$`, 'm').exec(text)?.[1];
  const address = field('IP Address');
  if (address === undefined || !isIpv4(address) || address === '0.0.0.0') return undefined;
  const mac = normalizeMac(field('MAC Address') ?? '');
  return { address, ...(mac === undefined || mac === '00:00:00:00:00:00' ? {} : { mac }) };
}

/** Names in the order a person expects: sda before sdaa, eth2 before eth10. */
export function byDeviceName(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

// The boot services' view of committed state: which machine owns a MAC address. DHCP and the
// HTTP script endpoint only read it; the node backs it with the replicated state (a lookup by
// MAC over applied hardware records), so every node answers from the same committed data.
import type { Hardware, NetworkInterface } from '../model/records.js';

/** A machine and the interface a boot request came from. */
export interface BootRecord {
  readonly hardware: Hardware;
  readonly iface: NetworkInterface;
  /**
   * inventory: boot the boot OS in inventory mode (docs/decisions/0029-discovery.md): the
   * machine is inspecting, or unknown to a node with --discovery (then `hardware` is the record
   * it will be enrolled as).
   */
  readonly mode?: 'inventory';
}

export interface BootInventory {
  /** The machine owning `mac` (lower-case colon form, "52:54:00:12:34:56"), or undefined. */
  byMac(mac: string): BootRecord | undefined;
}

const macHexDigits = /^[0-9a-f]{12}$/;

/**
 * The canonical MAC form the inventory is keyed by ("52:54:00:12:34:56"), from any spelling
 * boot clients use: colons, dashes (iPXE's `${mac:hexhyp}`), dots, bare hex, either case.
 * Undefined when `text` is not a 48-bit MAC address.
 */
export function canonicalMac(text: string): string | undefined {
  const separated = /^[0-9a-fA-F]{2}([:-])(?:[0-9a-fA-F]{2}\1){4}[0-9a-fA-F]{2}$/.test(text);
  const dotted = /^[0-9a-fA-F]{4}\.[0-9a-fA-F]{4}\.[0-9a-fA-F]{4}$/.test(text);
  const bare = macHexDigits.test(text.toLowerCase());
  if (!separated && !dotted && !bare) return undefined;
  const hex = text.toLowerCase().replace(/[:.-]/g, '');
  return hex.match(/../g)?.join(':');
}

/**
 * An inventory over a fixed list of hardware: for tests, the lab and benchmarks. The node
 * uses the replicated state instead. Throws when two interfaces claim one MAC, which the
 * state machine refuses too.
 */
export function staticInventory(hardware: readonly Hardware[]): BootInventory {
  const records = new Map<string, BootRecord>();
  for (const machine of hardware) {
    for (const iface of machine.interfaces) {
      const mac = canonicalMac(iface.mac);
      if (mac === undefined) throw new Error(`hardware ${machine.id}: "${iface.mac}" is not a MAC address`);
      const owner = records.get(mac);
      if (owner !== undefined) {
        throw new Error(`MAC ${mac} belongs to both ${owner.hardware.id} and ${machine.id}`);
      }
      records.set(mac, { hardware: machine, iface });
    }
  }
  return { byMac: (mac) => records.get(mac) };
}

// What a selector reads about a machine: its labels, its architecture and firmware as the record
// says, and the facts of its last accepted inventory. MachineFacts is a plain view, so the
// selector depends on neither the Hardware record nor the replicated state; machineFacts builds
// it from the few fields it needs.
import type { FirmwareMode, Inventory } from '../model/inventory.js';
import type { FactName } from '../model/labels.js';

export interface MachineFacts {
  readonly labels: { readonly [key: string]: string };
  /** Absent until the machine has been inspected and its inventory accepted. */
  readonly inventory?: Inventory;
  readonly arch: string;
  readonly firmware: FirmwareMode;
}

/** The fields machineFacts reads; a Hardware record with labels and inventory is one. */
export interface FactSource {
  readonly arch: string;
  readonly uefi: boolean;
  readonly labels?: { readonly [key: string]: string } | undefined;
  readonly inventory?: Inventory | undefined;
}

const noLabels: { readonly [key: string]: string } = Object.freeze({});

export function machineFacts(machine: FactSource): MachineFacts {
  return {
    labels: machine.labels ?? noLabels,
    ...(machine.inventory === undefined ? {} : { inventory: machine.inventory }),
    arch: machine.arch,
    firmware: machine.uefi ? 'uefi' : 'bios',
  };
}

/**
 * bytes: a quantity with units (memory>=64Gi); count: a plain whole number (cpu.cores>=16;
 * nics.speed counts Mb/s); text: exact text (system.vendor="Dell Inc."); choice: one of a few
 * words (firmware=uefi).
 */
export type FactKind = 'bytes' | 'count' | 'text' | 'choice';

export interface FactSpec {
  readonly kind: FactKind;
  readonly choices?: readonly string[];
  /** Set for a fact with one value per disk or NIC: a term holds when some item satisfies it. */
  readonly item?: { readonly noun: string; readonly plural: string; readonly empty: string };
  /** How a plain number for this fact is counted, for the error on a unit. */
  readonly counts?: string;
  /**
   * Its values on this machine (empty when not reported), or undefined when it comes from the
   * inventory and the machine has none yet: such a machine fails the term, whatever the operator.
   */
  readonly read: (facts: MachineFacts) => readonly (number | string)[] | undefined;
}

const disk = { noun: 'disk', plural: 'disks' } as const;
const nic = { noun: 'NIC', plural: 'NICs' } as const;

function present<T>(values: readonly (T | undefined)[]): readonly T[] {
  return values.filter((v): v is T => v !== undefined);
}

/** A fact read from the inventory, or undefined without one. */
const inv =
  (read: (inventory: Inventory) => readonly (number | string)[]) =>
  (facts: MachineFacts): readonly (number | string)[] | undefined =>
    facts.inventory === undefined ? undefined : read(facts.inventory);

const one = <T>(value: T | undefined): readonly T[] => (value === undefined ? [] : [value]);

/** Every fact a selector can name, by name; the names are src/model/labels.ts's factNames. */
export const factSpecs: { readonly [name in FactName]: FactSpec } = {
  arch: { kind: 'choice', choices: ['x86_64', 'arm64'], read: (f) => [f.arch] },
  firmware: { kind: 'choice', choices: ['bios', 'uefi'], read: (f) => [f.firmware] },
  memory: { kind: 'bytes', read: inv((i) => [i.memory.totalBytes]) },
  'cpu.model': { kind: 'text', read: inv((i) => [i.cpu.model]) },
  'cpu.sockets': { kind: 'count', counts: 'sockets', read: inv((i) => [i.cpu.sockets]) },
  'cpu.cores': { kind: 'count', counts: 'physical cores', read: inv((i) => [i.cpu.cores]) },
  'cpu.threads': { kind: 'count', counts: 'logical CPUs', read: inv((i) => [i.cpu.threads]) },
  'disks.count': { kind: 'count', counts: 'disks', read: inv((i) => [i.disks.length]) },
  'disks.size': {
    kind: 'bytes',
    item: { ...disk, empty: 'has no disks' },
    read: inv((i) => i.disks.map((d) => d.sizeBytes)),
  },
  'disks.total': {
    kind: 'bytes',
    read: inv((i) => [i.disks.reduce((sum, d) => sum + d.sizeBytes, 0)]),
  },
  'disks.model': {
    kind: 'text',
    item: { ...disk, empty: 'no disk reports a model' },
    read: inv((i) => present(i.disks.map((d) => d.model))),
  },
  'disks.rotational': {
    kind: 'choice',
    choices: ['true', 'false'],
    item: { ...disk, empty: 'has no disks' },
    read: inv((i) => i.disks.map((d) => String(d.rotational))),
  },
  'nics.count': { kind: 'count', counts: 'NICs', read: inv((i) => [i.nics.length]) },
  'nics.speed': {
    kind: 'count',
    counts: 'Mb/s (10000 is 10 Gb/s)',
    item: { ...nic, empty: 'no NIC reports a speed (a NIC whose link is down has none)' },
    read: inv((i) => present(i.nics.map((n) => n.speedMbps))),
  },
  'nics.driver': {
    kind: 'text',
    item: { ...nic, empty: 'no NIC reports a driver' },
    read: inv((i) => present(i.nics.map((n) => n.driver))),
  },
  'system.vendor': { kind: 'text', read: inv((i) => one(i.system.vendor)) },
  'system.product': { kind: 'text', read: inv((i) => one(i.system.product)) },
  'system.serial': { kind: 'text', read: inv((i) => one(i.system.serial)) },
};

// Recognising a known machine from a new inventory report by its fingerprint, not only by the MAC
// it booted from, so a replaced NIC does not make a new machine (docs/decisions/0027).
// The rule:
//   - Evidence is the system UUID and serial, every disk's serial and WWN, every NIC's MAC, each
//     only when it can identify one machine: placeholders ("To be filled by O.E.M.", a UUID of
//     all zeros or all Fs, QEMU's QM00001 disk serials), multicast and all-zero MACs are not.
//   - A report that shares no evidence with a known machine is new. One that shares evidence
//     with exactly one machine is that machine, named with what matched.
//   - Anything else is refused with a reason: parts claimed by two known machines (a part moved,
//     or two records describe one machine), or one machine whose system UUID or serial differs
//     from the report's (a part moved into another machine, or the board was replaced). An
//     operator decides those; guessing would give one machine's history to another.
import type { Inventory } from '../model/inventory.js';

export const identifierKinds = ['system-uuid', 'system-serial', 'disk-serial', 'disk-wwn', 'mac'] as const;
export type IdentifierKind = (typeof identifierKinds)[number];

export interface Identifier {
  readonly kind: IdentifierKind;
  readonly value: string;
}

/** A machine's identifiers that are evidence, in a canonical order, without repeats. */
export interface Fingerprint {
  readonly identifiers: readonly Identifier[];
}

export interface Claim {
  readonly machineId: string;
  /** The identifiers the report shares with this machine. */
  readonly by: readonly Identifier[];
}

export type FingerprintMatch =
  | { readonly kind: 'match'; readonly machineId: string; readonly by: readonly Identifier[] }
  | { readonly kind: 'none' }
  | { readonly kind: 'ambiguous'; readonly reason: string; readonly claims: readonly Claim[] };

const placeholderTexts = new Set([
  'to be filled by o.e.m.',
  'to be filled by oem',
  'default string',
  'system serial number',
  'chassis serial number',
  'base board serial number',
  'serial number',
  'not specified',
  'not applicable',
  'not available',
  'not present',
  'unknown',
  'invalid',
  'none',
  'null',
  'empty',
  'n/a',
  'na',
  'oem',
  'o.e.m.',
  '0123456789',
  '123456789',
  '1234567890',
  '0123456789abcdef',
]);

const placeholderUuids = new Set([
  // AMI's default in many boards' SMBIOS: the same on every machine that ships with it.
  '03000200-0400-0500-0006-000700080009',
  '12345678-1234-5678-90ab-cddeefaabbcc',
]);

/** True when a serial can tell one machine or disk from another. */
export function isEvidentSerial(serial: string): boolean {
  const text = serial.trim();
  if (text.length < 3) return false;
  if (placeholderTexts.has(text.toLowerCase())) return false;
  // All one character ("0000000", "FFFFFFFF", "........") or QEMU's default ATA serials.
  if (/^(.)\1*$/.test(text)) return false;
  return !/^QM\d{5}$/.test(text);
}

/** True when a system UUID can tell one machine from another (lower-case 8-4-4-4-12 form). */
export function isEvidentUuid(uuid: string): boolean {
  const digits = uuid.replaceAll('-', '').toLowerCase();
  return !/^(.)\1*$/.test(digits) && !placeholderUuids.has(uuid.toLowerCase());
}

/** True for a unicast MAC that is not all zeros (lower-case colon form). */
export function isEvidentMac(mac: string): boolean {
  const first = Number.parseInt(mac.slice(0, 2), 16);
  return mac !== '00:00:00:00:00:00' && (first & 1) === 0;
}

function isEvidentWwn(wwn: string): boolean {
  return !/^(?:naa\.|eui\.|0x)?0+$/i.test(wwn);
}

const kindOrder = new Map<IdentifierKind, number>(identifierKinds.map((kind, i) => [kind, i]));

function canonical(identifiers: readonly Identifier[]): Fingerprint {
  const seen = new Map<string, Identifier>();
  for (const id of identifiers) seen.set(keyOf(id), id);
  const sorted = [...seen.values()].sort(
    (a, b) =>
      kindOrder.get(a.kind)! - kindOrder.get(b.kind)! || (a.value < b.value ? -1 : a.value > b.value ? 1 : 0),
  );
  return { identifiers: sorted };
}

/** The evidence in an inventory, plus any MACs the machine's record knows it by. */
export function fingerprintOf(
  inventory: Inventory | undefined,
  recordMacs: readonly string[] = [],
): Fingerprint {
  const ids: Identifier[] = [];
  const add = (kind: IdentifierKind, value: string | undefined, evident: (v: string) => boolean): void => {
    if (value !== undefined && evident(value)) ids.push({ kind, value });
  };
  add('system-uuid', inventory?.system.uuid, isEvidentUuid);
  add('system-serial', inventory?.system.serial, isEvidentSerial);
  for (const disk of inventory?.disks ?? []) {
    add('disk-serial', disk.serial, isEvidentSerial);
    add('disk-wwn', disk.wwn?.toLowerCase(), isEvidentWwn);
  }
  for (const nic of inventory?.nics ?? []) add('mac', nic.mac, isEvidentMac);
  for (const mac of recordMacs) add('mac', mac.toLowerCase(), isEvidentMac);
  return canonical(ids);
}

/** The fields fingerprintOfMachine reads; a Hardware record with an inventory is one. */
export interface FingerprintSource {
  readonly interfaces?: readonly { readonly mac: string }[] | undefined;
  readonly inventory?: Inventory | undefined;
}

/** A known machine's fingerprint: its inventory's evidence and the MACs of its record. */
export function fingerprintOfMachine(machine: FingerprintSource): Fingerprint {
  return fingerprintOf(
    machine.inventory,
    (machine.interfaces ?? []).map((i) => i.mac),
  );
}

function keyOf(id: Identifier): string {
  return `${id.kind} ${id.value}`;
}

const kindNames: { readonly [kind in IdentifierKind]: string } = {
  'system-uuid': 'system UUID',
  'system-serial': 'system serial',
  'disk-serial': 'disk serial',
  'disk-wwn': 'disk WWN',
  mac: 'MAC',
};

/** "MAC 52:54:00:00:00:01", "disk serial S45NNE0M1". */
export function describeIdentifier(id: Identifier): string {
  return `${kindNames[id.kind]} ${id.value}`;
}

function describeAll(ids: readonly Identifier[]): string {
  const shown = ids.slice(0, 3).map(describeIdentifier).join(', ');
  return ids.length > 3 ? `${shown} and ${ids.length - 3} more` : shown;
}

/**
 * The known machines' fingerprints, indexed by identifier, so that recognising a report costs
 * the report's size, not the fleet's. Keep it in step with the machines (set, delete).
 */
export class FingerprintIndex {
  readonly #machinesById = new Map<string, Fingerprint>();
  readonly #machinesByIdentifier = new Map<string, Set<string>>();

  get size(): number {
    return this.#machinesById.size;
  }

  set(machineId: string, fingerprint: Fingerprint): void {
    this.delete(machineId);
    this.#machinesById.set(machineId, fingerprint);
    for (const id of fingerprint.identifiers) {
      const key = keyOf(id);
      const owners = this.#machinesByIdentifier.get(key) ?? new Set<string>();
      owners.add(machineId);
      this.#machinesByIdentifier.set(key, owners);
    }
  }

  delete(machineId: string): void {
    const old = this.#machinesById.get(machineId);
    if (old === undefined) return;
    this.#machinesById.delete(machineId);
    for (const id of old.identifiers) {
      const owners = this.#machinesByIdentifier.get(keyOf(id));
      owners?.delete(machineId);
      if (owners?.size === 0) this.#machinesByIdentifier.delete(keyOf(id));
    }
  }

  /** Which known machine the report is, by which identifiers; none; or why it cannot say. */
  match(report: Fingerprint): FingerprintMatch {
    const shared = new Map<string, Identifier[]>();
    for (const id of report.identifiers) {
      for (const machineId of this.#machinesByIdentifier.get(keyOf(id)) ?? []) {
        const by = shared.get(machineId) ?? [];
        by.push(id);
        shared.set(machineId, by);
      }
    }
    const claims: Claim[] = [...shared.entries()]
      .map(([machineId, by]) => ({ machineId, by }))
      .sort((a, b) => (a.machineId < b.machineId ? -1 : 1));
    const [only] = claims;
    if (only === undefined) return { kind: 'none' };
    if (claims.length > 1) {
      const who = claims.map((c) => `${c.machineId} by ${describeAll(c.by)}`).join('; ');
      const reason = `the report matches ${claims.length} known machines (${who}): a part moved between machines, or two records describe one machine; remove the part from the other record or delete the stale one, then inspect again`;
      return { kind: 'ambiguous', reason, claims };
    }
    const contradiction = this.#contradiction(report, only);
    if (contradiction !== undefined) return { kind: 'ambiguous', reason: contradiction, claims };
    return { kind: 'match', machineId: only.machineId, by: only.by };
  }

  /** A system identifier on both sides with different values: not the same machine, or a new board. */
  #contradiction(report: Fingerprint, claim: Claim): string | undefined {
    const known = this.#machinesById.get(claim.machineId)?.identifiers ?? [];
    for (const kind of ['system-uuid', 'system-serial'] as const) {
      const mine = report.identifiers.find((id) => id.kind === kind);
      const theirs = known.find((id) => id.kind === kind);
      if (mine === undefined || theirs === undefined || mine.value === theirs.value) continue;
      return `the report shares ${describeAll(claim.by)} with ${claim.machineId}, but its ${kindNames[kind]} is ${mine.value}, not ${theirs.value}: a part moved from ${claim.machineId} into another machine, or ${claim.machineId}'s board was replaced; an operator decides which`;
    }
    return undefined;
  }
}

/** The report against the known machines, without keeping an index (one report, small fleets). */
export function matchFingerprint(
  report: Fingerprint,
  known: Iterable<{ readonly machineId: string; readonly fingerprint: Fingerprint }>,
): FingerprintMatch {
  const index = new FingerprintIndex();
  for (const { machineId, fingerprint } of known) index.set(machineId, fingerprint);
  return index.match(report);
}

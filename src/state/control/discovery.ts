// Discovery and inventory in the replicated state (docs/decisions/0029-discovery.md): pure
// functions from the state's view and a command to a decision. A machine booted in inventory mode
// claims a per-boot credential (credential.inventory): a MAC no machine has enrols a new machine
// at once, bound to that credential; a known machine must be inspecting, or enrolled with no
// inventory yet. Its report (hardware.inventory) is accepted only with that credential, once.
// The report is then matched against every other machine's fingerprint (src/fleet/fingerprint.ts):
// a machine discovered from a new MAC that is a known machine (a replaced NIC) folds into it. An
// inspecting machine whose facts drifted (src/fleet/drift.ts) goes to maintenance with the drift
// named; one whose facts held (or that had none) is ready.
import type { Hardware, Lease, WorkerCredential } from '../../model/records.js';
import type { Inventory } from '../../model/inventory.js';
import type { MachineState } from '../../model/machine-lifecycle.js';
import { lifecycleReasonBytesMax } from '../../model/limits.js';
import { inventoryDrift } from '../../fleet/drift.js';
import {
  describeIdentifier,
  fingerprintOf,
  fingerprintOfMachine,
  matchFingerprint,
} from '../../fleet/fingerprint.js';
import type { Identifier } from '../../fleet/fingerprint.js';
import { headUtf8 } from '../../platform/utf8-text.js';
import { newCredential } from './credentials.js';
import { deepFreeze } from './immutable.js';
import type { ControlErrorCode } from './commands.js';

/** The lease time of an interface discovery adds; the DHCP server's own setting decides leases. */
const discoveredLeaseTimeS = 3600;

/** The id a machine discovered from `mac` is enrolled under: discovered-525400aa0001. */
export function discoveredHardwareId(mac: string): string {
  return `discovered-${mac.replaceAll(':', '').toLowerCase()}`;
}

export interface DiscoveryView {
  hardware(id: string): Hardware | undefined;
  /** The id of the machine with this (canonical) MAC. */
  hardwareIdOfMac(mac: string): string | undefined;
  leaseOfMac(mac: string): Lease | undefined;
  hardwareList(): readonly Hardware[];
}

export interface InventoryClaim {
  readonly workerId: string;
  /** Canonical lower-case colon form. */
  readonly mac: string;
  readonly ip: string;
  readonly sha256: string;
  readonly ttlS: number;
  readonly claimKey?: string;
}

export type Refusal = { readonly kind: 'refused'; readonly code: ControlErrorCode; readonly message: string };

export type ClaimDecision =
  | Refusal
  /** Bind the credential to this known machine. */
  | { readonly kind: 'known'; readonly hardware: Hardware; readonly credential: WorkerCredential }
  /** No machine has the MAC: enrol one with this id. */
  | { readonly kind: 'new'; readonly credential: WorkerCredential };

function refused(code: ControlErrorCode, message: string): Refusal {
  return { kind: 'refused', code, message };
}

/** True when the machine boots in inventory mode: inspecting, or enrolled with no inventory yet. */
export function wantsInventory(hw: Hardware): boolean {
  const state = hw.lifecycle?.state;
  return state === 'inspecting' || (state === 'enrolled' && hw.inventory === undefined);
}

/**
 * Whether the claimant is the machine it says, and which credential it gets. A known MAC must be
 * the worker's, from its reserved address or bound lease (as for a workflow's credential); an
 * unknown MAC from the address of its bound lease when Slipway leased it one (dynamic mode), or
 * any address when it has none (proxy mode: another server gave it).
 */
export function decideInventoryClaim(
  view: DiscoveryView,
  claim: InventoryClaim,
  nowMs: number,
): ClaimDecision {
  const credential = newCredential(claim, nowMs);
  const lease = view.leaseOfMac(claim.mac);
  const leased =
    lease !== undefined && lease.state === 'bound' && lease.ip === claim.ip && lease.expiresMs > nowMs;
  const ownerId = view.hardwareIdOfMac(claim.mac);
  if (ownerId === undefined) {
    if (view.hardware(claim.workerId) !== undefined) {
      return refused('E_EXISTS', `hardware "${claim.workerId}" exists and has no interface ${claim.mac}`);
    }
    const boundElsewhere = lease !== undefined && lease.state === 'bound' && lease.expiresMs > nowMs;
    if (boundElsewhere && !leased) {
      return refused('E_INVALID', `MAC ${claim.mac} holds a lease for another address than ${claim.ip}`);
    }
    return { kind: 'new', credential };
  }
  const hw = view.hardware(ownerId);
  const iface = hw?.interfaces.find((i) => i.mac === claim.mac);
  if (
    hw === undefined ||
    iface === undefined ||
    ownerId !== claim.workerId ||
    (iface.ip?.address !== claim.ip && !leased)
  ) {
    return refused(
      'E_INVALID',
      `no machine "${claim.workerId}" has an interface ${claim.mac} with address ${claim.ip} from Slipway's DHCP`,
    );
  }
  if (!wantsInventory(hw)) {
    return refused(
      'E_CONFLICT',
      `hardware "${hw.id}" is ${hw.lifecycle?.state ?? 'untracked'}: an inventory boot is for a machine ` +
        `inspecting (slipway hardware inspect ${hw.id}) or enrolled without an inventory`,
    );
  }
  // The same key again is the same boot whose answer was lost; any other claim replaces it too,
  // since the machine has booted again (a report needs the newest credential).
  return { kind: 'known', hardware: hw, credential };
}

/** A machine found by its inventory boot: enrolled by the caller, known by the MAC it booted from. */
export function discoveredHardware(
  id: string,
  mac: string,
  workerTokenSha256: string,
  credential: WorkerCredential | undefined,
  nowMs: number,
): Hardware {
  return deepFreeze<Hardware>({
    id,
    interfaces: [{ mac, dns: [], leaseTimeS: discoveredLeaseTimeS }],
    arch: 'x86_64',
    uefi: false,
    netboot: { allowPXE: true, allowWorkflow: true },
    metadata: { discoveredFrom: mac },
    workerTokenSha256,
    createdMs: nowMs,
    updatedMs: nowMs,
    version: 1,
    ...(credential === undefined ? {} : { inspection: credential }),
  });
}

/**
 * Whether the report is the one the machine's stored inventory came from, sent again: its
 * credential used up by that report, and the same inventory. Anything else is judged afresh.
 */
export function isRepeatedReport(hw: Hardware, sha256: string, inventory: Inventory): boolean {
  return (
    hw.inspection === undefined &&
    hw.reportedWith !== undefined &&
    hw.reportedWith === sha256.toLowerCase() &&
    JSON.stringify(hw.inventory) === JSON.stringify(inventory)
  );
}

/** Why a report with this credential digest may not be applied to the machine, or undefined. */
export function reportCredentialRefusal(hw: Hardware, sha256: string, nowMs: number): string | undefined {
  const held = hw.inspection;
  const who = `inventory report for hardware "${hw.id}" refused`;
  if (held === undefined) {
    return `${who}: it holds no inventory-boot credential (it reported already, or never booted in inventory mode)`;
  }
  if (held.sha256 !== sha256.toLowerCase()) {
    return `${who}: the credential presented is not the machine's inventory-boot credential (issued to ${held.mac} at ${held.ip})`;
  }
  if (held.expiresMs <= nowMs) return `${who}: its inventory-boot credential expired at ${held.expiresMs}`;
  return undefined;
}

export type ReportDecision =
  | Refusal
  | {
      readonly kind: 'report';
      /** The machine the report is about: the reporter, or the known machine it folds into. */
      readonly target: Hardware;
      /** Set when the reporter was discovered from a new MAC and is the known machine `target`. */
      readonly fold?: { readonly from: Hardware; readonly by: readonly Identifier[] };
    };

/**
 * Which machine the report is about, by fingerprint: the reporter, unless it was discovered from
 * a MAC no machine had and its report matches exactly one known machine (a replaced NIC).
 */
export function decideReportTarget(view: DiscoveryView, hw: Hardware, inventory: Inventory): ReportDecision {
  const known = view
    .hardwareList()
    .filter((other) => other.id !== hw.id)
    .map((other) => ({ machineId: other.id, fingerprint: fingerprintOfMachine(other) }));
  const match = matchFingerprint(
    fingerprintOf(
      inventory,
      hw.interfaces.map((i) => i.mac),
    ),
    known,
  );
  switch (match.kind) {
    case 'none':
      return { kind: 'report', target: hw };
    case 'ambiguous':
      return refused('E_CONFLICT', `inventory report for hardware "${hw.id}": ${match.reason}`);
    case 'match': {
      const target = view.hardware(match.machineId);
      const discovered = hw.metadata['discoveredFrom'] !== undefined && hw.inventory === undefined;
      if (target === undefined || !discovered) {
        const by = match.by.map(describeIdentifier).join(', ');
        return refused(
          'E_CONFLICT',
          `inventory report for hardware "${hw.id}" shares ${by} with hardware "${match.machineId}": ` +
            'two records describe one machine; delete the stale one, then inspect again',
        );
      }
      return { kind: 'report', target, fold: { from: hw, by: match.by } };
    }
  }
}

/** The known machine with the discovered record's interfaces added (it keeps its identity). */
export function foldedInterfaces(target: Hardware, from: Hardware): Hardware {
  const macs = new Set(target.interfaces.map((i) => i.mac));
  const added = from.interfaces.filter((i) => !macs.has(i.mac));
  return deepFreeze<Hardware>({ ...target, interfaces: [...target.interfaces, ...added] });
}

/** How the report moves the machine: the lifecycle trigger and reason, or none. */
export type ReportMove =
  | { readonly kind: 'stay' }
  | {
      readonly kind: 'move';
      readonly trigger: 'inspected' | 'drift';
      readonly to: MachineState;
      readonly reason: string;
    };

/**
 * An inspecting machine whose facts drifted from its last inventory goes to maintenance with the
 * drift named; one whose facts held, or that had none, is ready. Any other state stays.
 */
export function reportMove(hw: Hardware, inventory: Inventory): ReportMove {
  if (hw.lifecycle?.state !== 'inspecting') return { kind: 'stay' };
  const drift = hw.inventory === undefined ? [] : inventoryDrift(hw.inventory, inventory);
  if (drift.length === 0) {
    const reason = hw.inventory === undefined ? 'inspected: first inventory' : 'inspected: no drift';
    return { kind: 'move', trigger: 'inspected', to: 'ready', reason };
  }
  const reason = headUtf8(
    `inventory drifted: ${drift.map((d) => d.message).join('; ')}; accept it (slipway hardware accept ${hw.id}) once checked`,
    lifecycleReasonBytesMax,
  );
  return { kind: 'move', trigger: 'drift', to: 'maintenance', reason };
}

/**
 * The record with its new inventory and its inventory-boot credential used up. A machine that
 * discovery made takes its architecture and firmware from its first inventory.
 */
export function withInventory(
  hw: Hardware,
  inventory: Inventory,
  reportedWith: string,
  nowMs: number,
): Hardware {
  const { inspection: _used, ...rest } = hw;
  const first = hw.metadata['discoveredFrom'] !== undefined && hw.inventory === undefined;
  const arch =
    inventory.cpu.arch === 'arm64' || inventory.cpu.arch === 'x86_64' ? inventory.cpu.arch : hw.arch;
  return deepFreeze<Hardware>({
    ...rest,
    ...(first ? { arch, uefi: inventory.firmware === 'uefi' } : {}),
    inventory,
    reportedWith,
    updatedMs: nowMs,
    version: hw.version + 1,
  });
}

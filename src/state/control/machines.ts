// The control state's side of the machine lifecycle (docs/decisions/0028-machine-lifecycle.md):
// which commands move machines and how the moves are stored, indexed, published and audited.
// ControlState owns the records (control-tables.ts) and apply calls in here (apply-command.ts,
// apply-hardware.ts, apply-workflows.ts); the rules themselves are
// hardware-lifecycle.ts (records) and src/fleet/lifecycle.ts (the table).
import { DecodeError } from '../binary.js';
import type { ControlCommand, ControlErrorCode, ControlResult } from './commands.js';
import type { AuditEntry } from './audit-log.js';
import type { SnapshotImage } from './snapshot-format.js';
import type { Transition } from './transitions.js';
import { cancelWorkflow, timeOutWorkflow } from './transitions.js';
import type { Hardware, Lease, Workflow } from '../../model/records.js';
import { InventoryError, parseInventory } from '../../model/inventory.js';
import { isTerminal } from '../../model/records.js';
import type { MachineEvent, MachineLifecycle } from '../../model/machine-lifecycle.js';
import { auditTextBytesMax, errorMessageBytesMax, hardwareMax } from '../../model/limits.js';
import { isTransitional, provisionRefusal, releaseRefusal } from '../../fleet/lifecycle.js';
import { headUtf8 } from '../../platform/utf8-text.js';
import { deepFreeze } from './immutable.js';
import { stateVersionBaseline, stateVersionFleet } from '../versions.js';
import {
  decideInventoryClaim,
  decideReportTarget,
  discoveredHardware,
  foldedInterfaces,
  isRepeatedReport,
  reportCredentialRefusal,
  reportMove,
  withInventory,
} from './discovery.js';
import { readClaimFields } from './credentials.js';
import {
  adoptMachine,
  claimFor,
  claimForRelease,
  expireMachine,
  followOwner,
  lifecycleRecordProblem,
  move,
  registeredLifecycle,
  releasedAtOnce,
  withSpare,
  type Cause,
  type LifecycleOutcome,
  type Moved,
} from './hardware-lifecycle.js';
import { applyVerb, labelMachine } from './machine-verbs.js';
import type { QuarantinePolicy } from '../../model/quarantine-policy.js';
import { acceptedByRule, acceptedByRuleReason, type AcceptRule } from './accept-rule.js';

type Command<T extends ControlCommand['type']> = Extract<ControlCommand, { readonly type: T }>;

/** What the lifecycle needs of the control state: its records and two of its changes. */
export interface MachinesHost {
  clusterVersion(): number;
  /** When repeated failures quarantine a machine (the replicated setting). */
  quarantinePolicy(): QuarantinePolicy;
  /** The auto-accept rule (the replicated setting, accept-rule.ts); undefined: none. */
  acceptRule(): AcceptRule | undefined;
  hardware(id: string): Hardware | undefined;
  hardwareList(): Hardware[];
  /** The pool the machine is a member of, when that pool has a release template (0036). */
  releasingPoolOf(hardwareId: string): string | undefined;
  workflow(id: string): Workflow | undefined;
  /** Every workflow, in no order. */
  allWorkflows(): Iterable<Workflow>;
  /** The machine's workflows that are not finished. */
  activeWorkflowIdsOf(hardwareId: string): Iterable<string>;
  /** Stores a changed machine (indexes, hooks). */
  storeHardware(hw: Hardware): void;
  /**
   * Removes a machine that nothing owns (a discovered record folded into a known machine), or
   * says why it may not go (a workflow or pool owns it).
   */
  removeHardware(id: string): string | undefined;
  hardwareIdOfMac(mac: string): string | undefined;
  hardwareCount(): number;
  leaseOfMac(mac: string): Lease | undefined;
  /** Stores a workflow's change with its events (and so moves its machine again, through follow). */
  commitWorkflow(transition: Transition, nowMs: number): void;
}

/** A new audit entry, before the trail numbers and stamps it. */
export type AuditDraft = Omit<AuditEntry, 'seq' | 'stampMs'>;

function deepFreezeHardware(hw: Hardware): Hardware {
  return deepFreeze<Hardware>(hw);
}

function failure(code: ControlErrorCode, message: string): ControlResult {
  return { type: 'error', code, message: headUtf8(message, errorMessageBytesMax) };
}

function byCreation(a: Workflow, b: Workflow): number {
  return a.createdMs - b.createdMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** Finished workflows by when they finished, then by creation. */
function byFinish(a: Workflow, b: Workflow): number {
  return (a.finishedMs ?? 0) - (b.finishedMs ?? 0) || byCreation(a, b);
}

export class Machines {
  readonly #host: MachinesHost;
  /** Machines in a transitional state, whose deadline the leader watches. */
  #transitional = new Set<string>();
  /** The command being applied: who caused the transitions it makes. */
  #applying: ControlCommand | undefined;
  /** The transitions the command being applied made, for the trail and the hooks. */
  #events: { readonly hardwareId: string; readonly event: MachineEvent }[] = [];

  constructor(host: MachinesHost) {
    this.#host = host;
  }

  /** State version 3 or above: every machine has a lifecycle. */
  get tracked(): boolean {
    return this.#host.clusterVersion() >= stateVersionFleet;
  }

  /** Machines in a transitional state (for the leader's deadline scanner), in no order. */
  get inTransition(): ReadonlySet<string> {
    return this.#transitional;
  }

  /** Marks the command being applied (undefined once it is done). */
  applying(command: ControlCommand | undefined): void {
    this.#applying = command;
  }

  /** Keeps the transitional index in step with a stored (or, undefined, deleted) machine. */
  indexed(id: string, hw: Hardware | undefined): void {
    const state = hw?.lifecycle?.state;
    if (state !== undefined && isTransitional(state)) this.#transitional.add(id);
    else this.#transitional.delete(id);
  }

  /** After a restore: the index built by check(). */
  restored(transitional: Set<string>): void {
    this.#transitional = transitional;
  }

  /** The commands of the lifecycle itself. */
  execute(
    command: Command<'hardware.lifecycle'> | Command<'hardware.label'> | Command<'hardware.expire'>,
    nowMs: number,
  ): ControlResult {
    switch (command.type) {
      case 'hardware.lifecycle':
        return this.#onMachine(
          command.id,
          (hw) => applyVerb(hw, command, this.#ownerOf(hw), this.#cause(), nowMs),
          nowMs,
        );
      case 'hardware.expire':
        return this.#onMachine(
          command.id,
          (hw) =>
            expireMachine(
              hw,
              command,
              this.#host.quarantinePolicy(),
              this.#host.releasingPoolOf(hw.id),
              nowMs,
            ),
          nowMs,
        );
      case 'hardware.label': {
        const hw = this.#host.hardware(command.id);
        if (hw === undefined) return failure('E_NOT_FOUND', `hardware "${command.id}" does not exist`);
        const labelled = labelMachine(hw, command, nowMs);
        if ('problem' in labelled) return failure('E_INVALID', labelled.problem);
        // A spare relabelled is freed: its pool keeps it again if it still matches (0036).
        const stored = withSpare(labelled.hardware, undefined, nowMs) ?? labelled.hardware;
        this.#host.storeHardware(stored);
        return { type: 'hardware', hardware: stored };
      }
    }
  }

  /**
   * A machine booted in inventory mode claims its credential (credential.inventory,
   * docs/decisions/0029-discovery.md): bound to the known machine, or to a machine enrolled now
   * for a MAC no machine has.
   */
  claimInventory(command: Command<'credential.inventory'>, nowMs: number): ControlResult {
    const fields = readClaimFields(command);
    if ('problem' in fields) return failure('E_INVALID', fields.problem);
    const { mac } = fields;
    const decision = decideInventoryClaim(this.#host, { ...command, mac }, nowMs);
    switch (decision.kind) {
      case 'refused':
        return failure(decision.code, decision.message);
      case 'known': {
        const hw = decision.hardware;
        const bound = deepFreezeHardware({
          ...hw,
          inspection: decision.credential,
          updatedMs: nowMs,
          version: hw.version + 1,
        });
        this.#host.storeHardware(bound);
        return { type: 'hardware', hardware: bound };
      }
      case 'new': {
        if (this.#host.hardwareCount() >= hardwareMax) {
          return failure(
            'E_CONFLICT',
            `the state holds the maximum of ${hardwareMax} machines; delete some first`,
          );
        }
        const made = discoveredHardware(
          command.workerId,
          mac,
          command.workerTokenSha256,
          decision.credential,
          nowMs,
        );
        const cause: Cause = { by: `discovery (${mac} at ${command.ip})` };
        const lifecycle = registeredLifecycle(cause, nowMs, `discovered: booted from ${mac}, not known`);
        const hw = deepFreezeHardware({ ...made, lifecycle });
        this.#host.storeHardware(hw);
        this.registered(hw);
        return { type: 'hardware', hardware: hw };
      }
    }
  }

  /**
   * A machine's inventory report (hardware.inventory): refused unless it comes with the machine's
   * inventory-boot credential; then matched by fingerprint, stored, and judged for drift.
   */
  reportInventory(command: Command<'hardware.inventory'>, nowMs: number): ControlResult {
    const reporter = this.#host.hardware(command.id);
    if (reporter === undefined) return failure('E_NOT_FOUND', `hardware "${command.id}" does not exist`);
    let inventory;
    try {
      inventory = parseInventory(command.inventory);
    } catch (err) {
      if (err instanceof InventoryError) return failure('E_INVALID', `inventory: ${err.message}`);
      throw err;
    }
    // The same report again, its answer lost (a node died, a stream timed out): recorded already.
    if (isRepeatedReport(reporter, command.credentialSha256, inventory))
      return { type: 'hardware', hardware: reporter };
    const refusal = reportCredentialRefusal(reporter, command.credentialSha256, nowMs);
    if (refusal !== undefined) return failure('E_INVALID', refusal);
    const decision = decideReportTarget(this.#host, reporter, inventory);
    if (decision.kind === 'refused') return failure(decision.code, decision.message);
    let target = decision.target;
    const fold = decision.fold;
    if (fold !== undefined) {
      // The discovered record was this known machine all along: it goes, its MAC joins the machine.
      // Nothing may own it then: a MAC belongs to one machine.
      const kept = this.#host.removeHardware(fold.from.id);
      if (kept !== undefined) {
        return failure(
          'E_CONFLICT',
          `inventory report for hardware "${command.id}" is machine "${target.id}", but the record cannot be folded into it: ${kept}`,
        );
      }
      target = foldedInterfaces(target, fold.from);
    }
    const step = reportMove(target, inventory);
    const stored = withInventory(target, inventory, command.credentialSha256.toLowerCase(), nowMs);
    const rule = this.#host.acceptRule();
    if (step.kind === 'stay' && rule !== undefined && acceptedByRule(stored, rule)) {
      // The auto-accept rule (docs/decisions/0037): an enrolled machine that matches is ready now.
      const cause: Cause = { by: `accept rule (inventory report of ${command.id})` };
      this.#store(move(stored, 'ready', 'accept', cause, { reason: acceptedByRuleReason(rule) }, nowMs));
      return { type: 'hardware', hardware: this.#host.hardware(stored.id) ?? stored };
    }
    if (step.kind === 'stay') {
      this.#host.storeHardware(stored);
      return { type: 'hardware', hardware: stored };
    }
    const cause: Cause = { by: `inventory report of ${command.id}` };
    const fields =
      step.to === 'maintenance'
        ? { reason: step.reason, drainedFrom: 'enrolled' as const }
        : { reason: step.reason };
    this.#store(move(stored, step.to, step.trigger, cause, fields, nowMs));
    return { type: 'hardware', hardware: this.#host.hardware(stored.id) ?? stored };
  }

  /**
   * The lifecycle a hardware.put stores: a replaced document keeps the machine's; a new machine
   * starts enrolled (from state version 3).
   */
  lifecycleOnPut(existing: Hardware | undefined, nowMs: number): MachineLifecycle | undefined {
    if (existing !== undefined) return existing.lifecycle;
    return this.tracked ? registeredLifecycle(this.#cause(), nowMs) : undefined;
  }

  /** A machine was created: its first event goes to the trail and the hooks. */
  registered(hw: Hardware): void {
    for (const event of hw.lifecycle?.history ?? []) this.#events.push({ hardwareId: hw.id, event });
  }

  /** Why the machine may not be deleted: a workflow owns it. */
  deleteRefusal(hw: Hardware): string | undefined {
    const owner = hw.lifecycle?.owner;
    if (owner === undefined) return undefined;
    return `hardware "${hw.id}" is owned by workflow "${owner}" (${hw.lifecycle?.state ?? ''}); cancel it first (slipway workflow cancel ${owner})`;
  }

  /** Why a workflow may not take the machine now (invariant 9, state version 3), or undefined. */
  provisionRefusal(hardwareId: string): string | undefined {
    const lifecycle = this.tracked ? this.#host.hardware(hardwareId)?.lifecycle : undefined;
    return lifecycle === undefined ? undefined : provisionRefusal(hardwareId, lifecycle);
  }

  /** Why a release workflow may not take the machine now, or undefined. */
  releaseRefusal(hardwareId: string): string | undefined {
    const lifecycle = this.tracked ? this.#host.hardware(hardwareId)?.lifecycle : undefined;
    return lifecycle === undefined
      ? `hardware "${hardwareId}" has no lifecycle`
      : releaseRefusal(hardwareId, lifecycle);
  }

  /** The machine kept as a pool's spare, or (undefined) freed. */
  setSpare(hardwareId: string, pool: string | undefined, nowMs: number): void {
    const hw = this.#host.hardware(hardwareId);
    const changed = hw === undefined ? undefined : withSpare(hw, pool, nowMs);
    if (changed !== undefined) this.#host.storeHardware(changed);
  }

  /** A tainted pool member without a release template: releasing, then ready, now. */
  releaseAtOnce(hardwareId: string, reason: string, nowMs: number): void {
    const hw = this.#host.hardware(hardwareId);
    if (hw?.lifecycle === undefined) return;
    this.#store(releasedAtOnce(hw, this.#cause(), reason, nowMs));
  }

  /** A workflow changed: its machine is claimed when it became active, moved when it ended. */
  follow(before: Workflow | undefined, wf: Workflow, nowMs: number): void {
    const hw = this.tracked ? this.#host.hardware(wf.hardwareId) : undefined;
    const lifecycle = hw?.lifecycle;
    if (hw === undefined || lifecycle === undefined) return;
    const tag = this.#applying?.audit;
    const cause: Cause = {
      by: tag === undefined ? `workflow ${wf.id}` : `${tag.user} (${tag.role})`,
      workflowId: wf.id,
    };
    if (!isTerminal(wf.state) && (before === undefined || isTerminal(before.state))) {
      // Created or retried: provisionRefusal (releaseRefusal) was checked before it was committed.
      if (wf.release === true) {
        if (releaseRefusal(hw.id, lifecycle) === undefined)
          this.#store(claimForRelease(hw, wf, cause, nowMs));
      } else if (provisionRefusal(hw.id, lifecycle) === undefined) {
        this.#store(claimFor(hw, wf, cause, nowMs));
      }
      return;
    }
    const ended = isTerminal(wf.state) && lifecycle.owner === wf.id;
    const next = ended ? this.#nextOwner(hw.id, wf.id) : undefined;
    const releaseVia = ended ? this.#host.releasingPoolOf(hw.id) : undefined;
    const moved = followOwner(hw, wf, next, cause, this.#host.quarantinePolicy(), releaseVia, nowMs);
    if (moved !== undefined) this.#store(moved);
  }

  /** The cluster reached state version 3: each machine's lifecycle, derived from its workflows. */
  adopt(nowMs: number): void {
    const active = new Map<string, Workflow>();
    const last = new Map<string, Workflow>();
    for (const wf of this.#host.allWorkflows()) {
      const done = isTerminal(wf.state);
      const seen = (done ? last : active).get(wf.hardwareId);
      const first = seen === undefined || (done ? byFinish(wf, seen) > 0 : byCreation(wf, seen) < 0);
      if (first) (done ? last : active).set(wf.hardwareId, wf);
    }
    for (const hw of this.#host.hardwareList()) {
      this.#store(adoptMachine(hw, active.get(hw.id), last.get(hw.id), stateVersionFleet, nowMs));
    }
  }

  /**
   * The trail's entries for the transitions the command made, after the command's own: who
   * caused them is the caller's tag, or the machinery (a workflow, the leader's deadline) under
   * the admin role, since it acts for the cluster.
   */
  auditDrafts(command: ControlCommand): AuditDraft[] {
    const tag = command.audit;
    // The events when the cluster begins to track machines say where they stand: not moves.
    return this.#events
      .filter(({ event }) => event.trigger !== 'adopt')
      .map(({ hardwareId, event }) => ({
        user: headUtf8(tag?.user ?? event.by, auditTextBytesMax),
        role: tag?.role ?? 'admin',
        address: tag?.address ?? '',
        method: tag?.method ?? command.type,
        kind: 'hardware.transition',
        target: headUtf8(
          `${hardwareId} ${event.from ?? '(new)'} → ${event.to} (${event.trigger})`,
          auditTextBytesMax,
        ),
      }));
  }

  /** The transitions the command made, for the hooks; clears them. */
  takeEvents(): { readonly hardwareId: string; readonly event: MachineEvent }[] {
    const events = this.#events;
    this.#events = [];
    return events;
  }

  /** Who caused what the command being applied changes: its caller, or the machinery. */
  #cause(): Cause {
    const command = this.#applying;
    const tag = command?.audit;
    if (tag !== undefined) return { by: `${tag.user} (${tag.role})` };
    if (command?.type === 'hardware.expire') return { by: 'leader (deadline)' };
    return { by: `command ${command?.type ?? 'unknown'}` };
  }

  #ownerOf(hw: Hardware): Workflow | undefined {
    const id = hw.lifecycle?.owner;
    return id === undefined ? undefined : this.#host.workflow(id);
  }

  #store(moved: Moved): void {
    this.#host.storeHardware(moved.hardware);
    for (const event of moved.events) this.#events.push({ hardwareId: moved.hardware.id, event });
  }

  /** A lifecycle command on one machine: refused, or stored with the end of its owner workflow. */
  #onMachine(id: string, change: (hw: Hardware) => LifecycleOutcome, nowMs: number): ControlResult {
    const hw = this.#host.hardware(id);
    if (hw === undefined) return failure('E_NOT_FOUND', `hardware "${id}" does not exist`);
    const outcome = change(hw);
    if (outcome.kind === 'refused') return failure(outcome.code, outcome.message);
    this.#store(outcome.moved);
    const end = outcome.endOwner;
    const owner = end === undefined ? undefined : this.#host.workflow(end.workflowId);
    if (end !== undefined && owner !== undefined && !isTerminal(owner.state)) {
      const ending =
        end.how === 'cancel'
          ? cancelWorkflow(owner, end.message, nowMs)
          : timeOutWorkflow(owner, end.message, nowMs);
      this.#host.commitWorkflow(ending, nowMs);
    }
    return { type: 'hardware', hardware: this.#host.hardware(id) ?? outcome.moved.hardware };
  }

  /** The oldest other active workflow for the machine: one queued there before state version 3. */
  #nextOwner(hardwareId: string, ended: string): Workflow | undefined {
    let next: Workflow | undefined;
    for (const id of this.#host.activeWorkflowIdsOf(hardwareId)) {
      const wf = id === ended ? undefined : this.#host.workflow(id);
      if (wf !== undefined && (next === undefined || byCreation(wf, next) < 0)) next = wf;
    }
    return next;
  }
}

/**
 * Checks each machine's lifecycle in a snapshot against its version and workflows; returns the
 * machines in a transitional state. Throws DecodeError naming the problem.
 */
export function checkMachines(image: SnapshotImage, workflows: ReadonlyMap<string, Workflow>): Set<string> {
  const tracked = (image.clusterVersion ?? stateVersionBaseline) >= stateVersionFleet;
  const active = (id: string): Workflow | undefined => {
    const wf = workflows.get(id);
    return wf === undefined || isTerminal(wf.state) ? undefined : wf;
  };
  const transitional = new Set<string>();
  for (const hw of image.hardware) {
    const problem = lifecycleRecordProblem(hw, tracked, active);
    if (problem !== undefined) throw new DecodeError(`control snapshot: ${problem}`);
    if (hw.lifecycle !== undefined && isTransitional(hw.lifecycle.state)) transitional.add(hw.id);
  }
  return transitional;
}

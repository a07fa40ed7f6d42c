// The indexes the control state keeps beside its records, so that the boot and dispatch paths'
// queries (hardware by MAC, workflows by worker) and the leader's scans (active workflows, a
// machine's power jobs) cost O(1) plus their result. Each is kept in step on every change
// (control-tables.ts) and built afresh from a snapshot's records (snapshot-tables.ts).
import { actionPositions, currentActionIndex } from '../../workflow/rules.js';
import { isTerminal, type Hardware, type PowerJob, type Workflow } from '../../model/records.js';
import { isFinishedPowerJob } from './power-jobs.js';

/** The active workflows and who runs their current action (see indexWorkflow). */
export interface WorkflowIndex {
  /** Workflows that are not finished. */
  readonly active: Set<string>;
  /** Worker id → active workflows whose current action (running or next) is on that worker. */
  readonly byWorker: Map<string, Set<string>>;
  readonly workerOf: Map<string, string>;
  /**
   * Worker id → active workflows with a task on that worker, whatever their current action: the
   * credential claim and every worker call's check ask it, so it must not cost a scan of every
   * active workflow (that made a boot storm's cost grow with the square of its machines).
   */
  readonly activeByTaskWorker: Map<string, Set<string>>;
  /** Active workflow id → the workers its tasks name (what activeByTaskWorker holds it under). */
  readonly taskWorkersOf: Map<string, readonly string[]>;
  /**
   * Machine id → its active workflows: a workflow's end asks which one the machine goes to next,
   * on every node, and a scan of every active workflow there made a storm's apply cost grow with
   * the square of its machines.
   */
  readonly activeByHardware: Map<string, Set<string>>;
  /** Active workflow id → the machine activeByHardware holds it under. */
  readonly hardwareOf: Map<string, string>;
}

export function emptyWorkflowIndex(): WorkflowIndex {
  return {
    active: new Set(),
    byWorker: new Map(),
    workerOf: new Map(),
    activeByTaskWorker: new Map(),
    taskWorkersOf: new Map(),
    activeByHardware: new Map(),
    hardwareOf: new Map(),
  };
}

/** Keeps the active set and the per-worker index in step with a stored workflow. */
export function indexWorkflow(ix: WorkflowIndex, wf: Workflow): void {
  const index = currentActionIndex(wf);
  const worker = index === undefined ? undefined : actionPositions(wf.spec)[index]?.task.worker;
  refile(ix.byWorker, ix.workerOf, wf.id, worker);
  if (isTerminal(wf.state)) ix.active.delete(wf.id);
  else ix.active.add(wf.id);
  indexTaskWorkers(ix, wf);
  // Files an active workflow under its machine; a finished one under none.
  refile(ix.activeByHardware, ix.hardwareOf, wf.id, isTerminal(wf.state) ? undefined : wf.hardwareId);
}

/** Files `id` under `key` (none when undefined) in `index`, moving it from where `keyOf` had it. */
function refile(
  index: Map<string, Set<string>>,
  keyOf: Map<string, string>,
  id: string,
  key: string | undefined,
): void {
  const previous = keyOf.get(id);
  if (previous === key) return;
  if (previous !== undefined) {
    const ids = index.get(previous);
    ids?.delete(id);
    if (ids?.size === 0) index.delete(previous);
    keyOf.delete(id);
  }
  if (key !== undefined) {
    addTo(index, key, id);
    keyOf.set(id, key);
  }
}

/** Files an active workflow under each worker its tasks name; a finished one under none. */
function indexTaskWorkers(ix: WorkflowIndex, wf: Workflow): void {
  const workers = isTerminal(wf.state) ? [] : [...new Set(wf.spec.tasks.map((task) => task.worker))];
  const previous = ix.taskWorkersOf.get(wf.id) ?? [];
  if (previous.length === workers.length && previous.every((w, i) => workers[i] === w)) return;
  for (const worker of previous) {
    const ids = ix.activeByTaskWorker.get(worker);
    ids?.delete(wf.id);
    if (ids?.size === 0) ix.activeByTaskWorker.delete(worker);
  }
  for (const worker of workers) addTo(ix.activeByTaskWorker, worker, wf.id);
  if (workers.length === 0) ix.taskWorkersOf.delete(wf.id);
  else ix.taskWorkersOf.set(wf.id, workers);
}

/** The interfaces' MACs (→ machine id) and reserved addresses (→ MAC), by machine. */
export interface InterfaceIndex {
  readonly hardwareByMac: Map<string, string>;
  /** Reserved address → the MAC of the interface that reserves it (for lease grants). */
  readonly reservedIps: Map<string, string>;
}

/** Adds the machine's interfaces; the caller has checked that no other machine has their MACs. */
export function indexInterfaces(ix: InterfaceIndex, hardware: Hardware): void {
  for (const iface of hardware.interfaces) {
    ix.hardwareByMac.set(iface.mac, hardware.id);
    if (iface.ip !== undefined) ix.reservedIps.set(iface.ip.address, iface.mac);
  }
}

export function unindexInterfaces(ix: InterfaceIndex, hardware: Hardware | undefined): void {
  for (const iface of hardware?.interfaces ?? []) {
    ix.hardwareByMac.delete(iface.mac);
    const ip = iface.ip?.address;
    if (ip !== undefined && ix.reservedIps.get(ip) === iface.mac) ix.reservedIps.delete(ip);
  }
}

/** A machine's power jobs, finished or not, and the jobs not finished of every machine. */
export interface PowerJobIndex {
  /** Hardware id → the ids of its power jobs, finished or not. */
  readonly powerJobsByHardware: Map<string, Set<string>>;
  /** Power jobs not finished (for the leader's power executor). */
  readonly activePowerJobs: Set<string>;
}

export function indexPowerJob(ix: PowerJobIndex, job: PowerJob): void {
  addTo(ix.powerJobsByHardware, job.hardwareId, job.id);
  if (isFinishedPowerJob(job)) ix.activePowerJobs.delete(job.id);
  else ix.activePowerJobs.add(job.id);
}

export function unindexPowerJob(ix: PowerJobIndex, job: PowerJob): void {
  ix.activePowerJobs.delete(job.id);
  const ids = ix.powerJobsByHardware.get(job.hardwareId);
  ids?.delete(job.id);
  if (ids?.size === 0) ix.powerJobsByHardware.delete(job.hardwareId);
}

function addTo(index: Map<string, Set<string>>, key: string, id: string): void {
  let ids = index.get(key);
  if (ids === undefined) {
    ids = new Set();
    index.set(key, ids);
  }
  ids.add(id);
}

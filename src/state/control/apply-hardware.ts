// Hardware at apply: a machine's document stored (hardware.put, its worker token, allowPXE) with
// its indexes, its lifecycle and its pool told of the change, and a machine deleted once nothing
// owns it. The lifecycle's own commands are machines.ts.
import { hardwareMax } from '../../model/limits.js';
import type { Hardware, Workflow } from '../../model/records.js';
import { sha256HexOf } from '../digest.js';
import type { ControlResult } from './commands.js';
import { deleted, failure, versionRefusal, type Command } from './apply-outcome.js';
import { dropPowerJob } from './apply-power.js';
import { indexInterfaces, unindexInterfaces } from './control-indexes.js';
import { byCreation, type ControlTables } from './control-tables.js';
import { deepFreeze } from './immutable.js';
import { normalizeHardware, sha256Problem, workerTokenProblem } from './validate.js';

export function putHardware(
  t: ControlTables,
  command: Command<'hardware.put'>,
  nowMs: number,
): ControlResult {
  const checked = normalizeHardware(command.hardware);
  if ('problem' in checked) return failure('E_INVALID', checked.problem);
  const input = checked.hardware;
  const existing = t.hardware.get(input.id);
  const refusal = versionRefusal('hardware', input.id, existing?.version, command.expectVersion);
  if (refusal !== undefined) return refusal;
  for (const [i, iface] of input.interfaces.entries()) {
    const owner = t.hardwareByMac.get(iface.mac);
    if (owner !== undefined && owner !== input.id) {
      return failure(
        'E_INVALID',
        `interfaces[${i}].mac: ${iface.mac} already belongs to hardware "${owner}"`,
      );
    }
  }
  const tokenSha256 =
    command.workerTokenSha256 ??
    (command.workerToken === undefined ? undefined : sha256HexOf(command.workerToken));
  if (existing === undefined) {
    const problem =
      command.workerToken !== undefined
        ? workerTokenProblem(command.workerToken)
        : tokenSha256 === undefined
          ? 'workerTokenSha256: is required to create hardware'
          : sha256Problem(tokenSha256)?.replace(/^sha256/, 'workerTokenSha256');
    if (problem !== undefined) return failure('E_INVALID', problem);
    if (t.hardware.size >= hardwareMax) {
      return failure(
        'E_CONFLICT',
        `the state holds the maximum of ${hardwareMax} machines; delete some first`,
      );
    }
  }
  // A replaced document keeps the machine's lifecycle and labels (docs/decisions/0028).
  const lifecycle = t.machines.lifecycleOnPut(existing, nowMs);
  const stored = deepFreeze<Hardware>({
    ...input,
    workerTokenSha256: existing?.workerTokenSha256 ?? tokenSha256 ?? '',
    createdMs: existing?.createdMs ?? nowMs,
    updatedMs: nowMs,
    version: (existing?.version ?? 0) + 1,
    ...(lifecycle === undefined ? {} : { lifecycle }),
    ...(existing?.labels === undefined ? {} : { labels: existing.labels }),
    ...(existing?.inventory === undefined ? {} : { inventory: existing.inventory }),
    ...(existing?.inspection === undefined ? {} : { inspection: existing.inspection }),
    ...(existing?.reportedWith === undefined ? {} : { reportedWith: existing.reportedWith }),
  });
  storeHardware(t, stored, existing);
  if (existing === undefined) t.machines.registered(stored);
  return { type: 'hardware', hardware: stored };
}

/** Stores a changed machine: its indexes, its lifecycle's, its pool's count, the change. */
export function storeHardware(t: ControlTables, stored: Hardware, existing: Hardware | undefined): void {
  unindexInterfaces(t, existing);
  indexInterfaces(t, stored);
  t.hardware.set(stored.id, stored);
  t.changed.hardware.add(stored.id);
  t.machines.indexed(stored.id, stored);
  followPoolMember(t, existing, stored);
}

/**
 * A pool member's installation ended, counted for the pool's attempts (docs/decisions/0040): a
 * failure (its workflow failed or timed out, or its deadline passed) adds one, a deployment
 * clears the count; an operator's cancel counts neither. A member ready again leaves the pool.
 */
function followPoolMember(t: ControlTables, before: Hardware | undefined, after: Hardware): void {
  const from = before?.lifecycle?.state;
  const lc = after.lifecycle;
  if (lc === undefined || from === lc.state) return;
  const pool = t.pools.ownerOf(after.id);
  if (pool === undefined) return;
  if (lc.state === 'ready') {
    t.pools.left(after.id);
    return;
  }
  if (from !== 'provisioning') return;
  const trigger = lc.history[lc.history.length - 1]?.trigger;
  if (lc.state === 'deployed') t.pools.installationEnded(pool.name, { failed: false });
  else if (trigger === 'fail' || trigger === 'expire') {
    const reason = lc.afterRelease?.reason ?? lc.reason ?? lc.state;
    t.pools.installationEnded(pool.name, { failed: true, hardwareId: after.id, reason });
  }
}

export function deleteHardware(t: ControlTables, id: string): ControlResult {
  const existing = t.hardware.get(id);
  if (existing === undefined) return failure('E_NOT_FOUND', `hardware "${id}" does not exist`);
  const pool = t.pools.ownerOf(id);
  if (pool !== undefined) {
    return failure(
      'E_CONFLICT',
      `hardware "${id}" belongs to pool "${pool.name}": delete the pool first (\`slipway pool delete ${pool.name}\`)`,
    );
  }
  const owned = t.machines.deleteRefusal(existing);
  if (owned !== undefined) return failure('E_CONFLICT', owned);
  // The oldest such workflow is named: the set's order differs after a restore, and the refusal
  // (kept in the audit trail) must read the same on every member.
  let user: Workflow | undefined;
  for (const wfId of t.active) {
    const wf = t.workflows.get(wfId);
    if (wf !== undefined && (wf.hardwareId === id || wf.spec.tasks.some((task) => task.worker === id)))
      if (user === undefined || byCreation(wf, user) < 0) user = wf;
  }
  if (user !== undefined) {
    return failure(
      'E_CONFLICT',
      `hardware "${id}" is used by ${user.state} workflow "${user.id}"; cancel it first`,
    );
  }
  const unfinished = t.firstActivePowerJob(id);
  if (unfinished !== undefined) {
    return failure(
      'E_CONFLICT',
      `hardware "${id}" has ${unfinished.state} power job "${unfinished.id}"; wait for it to finish`,
    );
  }
  for (const job of t.powerJobsOf(id)) dropPowerJob(t, job);
  unindexInterfaces(t, existing);
  t.hardware.delete(id);
  t.machines.indexed(id, undefined);
  t.changed.hardware.add(id);
  return deleted;
}

/** hardware.setAllowPXE, on a machine that must exist. */
export function allowPXE(
  t: ControlTables,
  command: Command<'hardware.setAllowPXE'>,
  nowMs: number,
): ControlResult {
  if (!t.hardware.has(command.id)) return failure('E_NOT_FOUND', `hardware "${command.id}" does not exist`);
  return { type: 'hardware', hardware: setAllowPXE(t, command.id, command.allowPXE, nowMs) };
}

/** Sets allowPXE; a change bumps the version, setting the value it already has does not. */
export function setAllowPXE(t: ControlTables, id: string, allowPXE: boolean, nowMs: number): Hardware {
  const existing = t.hardware.get(id);
  if (existing === undefined) throw new Error(`setAllowPXE on missing hardware ${id}`);
  if (existing.netboot.allowPXE === allowPXE) return existing;
  const stored = deepFreeze<Hardware>({
    ...existing,
    netboot: { ...existing.netboot, allowPXE },
    updatedMs: nowMs,
    version: existing.version + 1,
  });
  storeHardware(t, stored, existing);
  return stored;
}

/** hardware.token: the machine's worker token replaced (by its SHA-256). */
export function setWorkerToken(
  t: ControlTables,
  command: Command<'hardware.token'>,
  nowMs: number,
): ControlResult {
  const existing = t.hardware.get(command.id);
  if (existing === undefined) return failure('E_NOT_FOUND', `hardware "${command.id}" does not exist`);
  const problem = sha256Problem(command.workerTokenSha256);
  if (problem !== undefined) return failure('E_INVALID', problem.replace(/^sha256/, 'workerTokenSha256'));
  const stored = deepFreeze<Hardware>({
    ...existing,
    workerTokenSha256: command.workerTokenSha256.toLowerCase(),
    updatedMs: nowMs,
    version: existing.version + 1,
  });
  storeHardware(t, stored, existing);
  return { type: 'hardware', hardware: stored };
}

/** The first task whose worker is no machine, said as a refusal's message; undefined when none. */
export function unknownWorker(t: ControlTables, tasks: Workflow['spec']['tasks']): string | undefined {
  const i = tasks.findIndex((task) => !t.hardware.has(task.worker));
  const task = tasks[i];
  return task === undefined ? undefined : `spec.tasks[${i}].worker: hardware "${task.worker}" does not exist`;
}

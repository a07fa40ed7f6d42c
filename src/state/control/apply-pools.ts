// Pools at apply (docs/decisions/0035-pools.md, 0036, 0040): the pool commands, with what they
// do beyond the pool's own record (pools.ts): a member's workflow created (its installation,
// its race, its retry, its release), a spare reserved or freed, a tainted member released.
import { raceAttemptsDefault } from '../../model/limits.js';
import { awaitsRetry, policyOf, type Pool } from '../../fleet/pool.js';
import { allocate } from './allocation.js';
import { startRace } from './apply-allocation.js';
import { setAllowPXE } from './apply-hardware.js';
import { deleted, failure, type Command } from './apply-outcome.js';
import { powerRequestRefusal, workflowPowerJob } from './apply-power.js';
import { createWorkflow, newWorkflowRefusal, renderedRefusal, roomRefusal } from './apply-workflows.js';
import type { ControlCommand, ControlErrorCode, ControlResult } from './commands.js';
import type { ControlTables } from './control-tables.js';
import { isRefusal, withinSpread, type PoolLookups } from './pools.js';

export type PoolCommand = Command<
  | 'pool.create'
  | 'pool.scale'
  | 'pool.delete'
  | 'pool.allocate'
  | 'pool.taint'
  | 'pool.resume'
  | 'pool.reserve'
  | 'pool.release'
>;

export function isPoolCommand(command: ControlCommand): command is PoolCommand {
  return command.type.startsWith('pool.');
}

export function applyPool(t: ControlTables, command: PoolCommand, nowMs: number): ControlResult {
  switch (command.type) {
    case 'pool.create':
      return poolResult(
        t.pools.create(
          command,
          (name) => t.templates.get(name),
          (name) => t.artifacts.get(name),
        ),
      );
    case 'pool.scale':
      return poolResult(t.pools.scale(command));
    case 'pool.taint':
      return poolResult(t.pools.taint(command.name, (id) => t.hardware.get(id)));
    case 'pool.resume':
      return poolResult(t.pools.resume(command.name));
    case 'pool.delete': {
      const outcome = t.pools.delete(command.name, (id) => t.hardware.get(id));
      if (isRefusal(outcome)) return failure(outcome.code, outcome.message);
      freeSpares(t, outcome.pool.name, nowMs);
      return outcome.kind === 'removed' ? deleted : { type: 'pool', pool: outcome.pool };
    }
    case 'pool.reserve': {
      const pool = t.pools.reserve(command, poolLookups(t));
      if (isRefusal(pool)) return failure(pool.code, pool.message);
      t.machines.setSpare(command.hardwareId, pool.name, nowMs);
      return { type: 'pool', pool };
    }
    case 'pool.release':
      return releaseFromPool(t, command, nowMs);
    default:
      return allocateForPool(t, command, nowMs);
  }
}

function poolLookups(t: ControlTables): PoolLookups {
  return {
    hardware: (id) => t.hardware.get(id),
    fleet: () => t.hardware.values(),
    raceOf: (id) => t.workflows.get(id)?.race?.request,
  };
}

function poolResult(
  outcome: Pool | { readonly code: ControlErrorCode; readonly message: string },
): ControlResult {
  return isRefusal(outcome) ? failure(outcome.code, outcome.message) : { type: 'pool', pool: outcome };
}

/** The pool's spares are free again (the pool was deleted). */
function freeSpares(t: ControlTables, pool: string, nowMs: number): void {
  for (const hw of [...t.hardware.values()]) {
    if (hw.lifecycle?.spareOf === pool) t.machines.setSpare(hw.id, undefined, nowMs);
  }
}

/** pool.allocate: a workflow.allocate for the pool, when a slot is free as this entry finds it. */
function allocateForPool(t: ControlTables, command: Command<'pool.allocate'>, nowMs: number): ControlResult {
  const lookups = poolLookups(t);
  const allowed = t.pools.allocation(command, lookups);
  if (isRefusal(allowed)) return failure(allowed.code, allowed.message);
  const { pool, spread } = allowed;
  if (command.retry === true) return retryForPool(t, pool, command, nowMs);
  const race = command.race === true;
  if (race && policyOf(pool) !== 'race')
    return failure(
      'E_INVALID',
      `pool "${pool.name}" is under the ${policyOf(pool)} policy: it starts no race`,
    );
  const candidates = withinSpread(pool, spread, command.candidates, lookups.hardware);
  if (candidates.length === 0 && command.candidates.length > 0) {
    return failure(
      'E_VERSION',
      `pool "${pool.name}": the machines offered would put two in one ${pool.spreadBy ?? ''} value while ${[...(spread ?? [])].join(', ') || 'another'} has fewer: offer again`,
    );
  }
  const { pool: _pool, type: _type, audit: _audit, race: _race, retry: _retry, ...rest } = command;
  const asWorkflow: Command<'workflow.allocate'> = {
    ...rest,
    candidates,
    type: 'workflow.allocate',
    template: pool.template,
    selector: pool.selector,
    // A pool's race has its two lanes and no further machine: the pool counts its failures (0040).
    ...(race ? { race: true, alternateAttempts: raceAttemptsDefault } : {}),
  };
  const allocation = allocate(asWorkflow, lookups.hardware, lookups.fleet, pool.name);
  if (allocation.kind === 'refused') return failure(allocation.code, allocation.message);
  const { create, rival } = allocation;
  const created =
    rival === undefined
      ? createWorkflow(t, create, nowMs, { selector: allocation.selector })
      : startRace(t, asWorkflow, allocation, nowMs);
  if (created.type === 'error') return created;
  const took = rival === undefined ? [create.hardwareId] : [create.hardwareId, rival.hardwareId];
  return { type: 'pool', pool: t.pools.joined(pool, took, lookups.hardware) };
}

/** pool.allocate under the retry policy: the failed member installed again, on its own machine. */
function retryForPool(
  t: ControlTables,
  pool: Pool,
  command: Command<'pool.allocate'>,
  nowMs: number,
): ControlResult {
  const [only, ...more] = command.candidates;
  const hw = only === undefined ? undefined : t.hardware.get(only.hardwareId);
  if (only === undefined || more.length > 0 || hw === undefined || !awaitsRetry(pool, hw)) {
    const named = command.candidates.map((c) => c.hardwareId).join(', ') || 'no machine';
    return failure(
      'E_CONFLICT',
      `pool "${pool.name}": ${named} is no failed member to install again under the retry policy`,
    );
  }
  const {
    pool: _pool,
    type: _type,
    audit: _audit,
    race: _race,
    retry: _retry,
    candidates: _candidates,
    ...rest
  } = command;
  const created = createWorkflow(
    t,
    { ...rest, type: 'workflow.create', template: pool.template, hardwareId: hw.id, spec: only.spec },
    nowMs,
    { selector: pool.selector },
  );
  if (created.type === 'error') return created;
  return { type: 'pool', pool: t.pools.joined(pool, [hw.id], (id) => t.hardware.get(id)) };
}

/**
 * pool.release: the member leaves the pool, through the pool's release template (a workflow
 * that owns it from releasing to ready), released at once (a tainted member, no template), or
 * as it is (surplus or a deleted pool's member, no template).
 */
function releaseFromPool(t: ControlTables, command: Command<'pool.release'>, nowMs: number): ControlResult {
  const pool = t.pools.get(command.pool);
  const wf = command.release;
  if (pool !== undefined && wf !== undefined && pool.releaseTemplate !== undefined) {
    // Checked first, so that a refused workflow leaves the pool as it was.
    const refusal = releaseWorkflowRefusal(t, pool.releaseTemplate, command.hardwareId, wf);
    if (refusal !== undefined) return refusal;
  }
  const outcome = t.pools.release(command, poolLookups(t));
  if (isRefusal(outcome)) return failure(outcome.code, outcome.message);
  if (outcome.how === 'workflow' && wf !== undefined && pool?.releaseTemplate !== undefined) {
    // A deployed machine runs its installed system, not the boot OS: one with a BMC is booted
    // from the network for its release (PXE allowed again), as `workflow create --netboot` does.
    const netboot =
      t.hardware.get(command.hardwareId)?.bmc !== undefined &&
      powerRequestRefusal(t, workflowPowerJob(wf.id, command.hardwareId, 'netboot')) === undefined;
    if (netboot) setAllowPXE(t, command.hardwareId, true, nowMs);
    const created = createWorkflow(
      t,
      {
        type: 'workflow.create',
        id: wf.id,
        template: pool.releaseTemplate,
        templateVersion: wf.templateVersion,
        hardwareId: command.hardwareId,
        hardwareMap: {},
        spec: wf.spec,
        ...(netboot ? { netboot: true } : {}),
      },
      nowMs,
      { release: true },
    );
    if (created.type === 'error')
      throw new Error(`a checked release workflow was refused: ${created.message}`);
  } else if (outcome.how === 'at-once') {
    t.machines.releaseAtOnce(command.hardwareId, `tainted in pool ${command.pool}: replaced`, nowMs);
  }
  return outcome.removed ? deleted : { type: 'pool', pool: outcome.pool };
}

/** Why the release workflow would be refused (its template or spec), as createWorkflow checks. */
function releaseWorkflowRefusal(
  t: ControlTables,
  template: string,
  hardwareId: string,
  wf: NonNullable<Command<'pool.release'>['release']>,
): ControlResult | undefined {
  const refusal =
    newWorkflowRefusal(t, wf.id, wf.spec) ?? renderedRefusal(t, template, wf) ?? roomRefusal(t, 1);
  if (refusal !== undefined) return refusal;
  const taken = t.machines.releaseRefusal(hardwareId);
  return taken === undefined ? undefined : failure('E_CONFLICT', taken);
}

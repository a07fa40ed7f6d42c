// Asking for a power change from code: the function the integrator calls (e.g. netboot when a
// workflow starts, from the leader) and the API uses. It proposes power.request through the
// leader; the leader's executor (executor.ts) carries the job out. Any node may call it.
import { randomUUID } from 'node:crypto';
import type { ControlCommand, ControlResult } from '../state/control/commands.js';
import type { PowerJob, PowerOp } from '../model/records.js';
import { powerAttemptsDefault, powerSteps } from './plan.js';

export class PowerRequestError extends Error {
  readonly code: Extract<ControlResult, { type: 'error' }>['code'];
  constructor(code: Extract<ControlResult, { type: 'error' }>['code'], message: string) {
    super(message);
    this.name = 'PowerRequestError';
    this.code = code;
  }
}

/**
 * Enqueues a power job for a machine with a BMC and resolves with the job as committed
 * (PENDING). Throws PowerRequestError when the state refuses it (no such hardware, no BMC, too
 * many queued jobs). Jobs of one machine run one at a time, in the order they were requested.
 */
export async function enqueuePowerJob(
  propose: (command: ControlCommand) => Promise<ControlResult>,
  hardwareId: string,
  op: PowerOp,
  options: { readonly maxAttempts?: number } = {},
): Promise<PowerJob> {
  const result = await propose({
    type: 'power.request',
    jobId: randomUUID(),
    hardwareId,
    op,
    steps: powerSteps(op),
    maxAttempts: options.maxAttempts ?? powerAttemptsDefault,
  });
  if (result.type === 'error') throw new PowerRequestError(result.code, result.message);
  if (result.type !== 'powerJob') throw new Error(`power.request answered ${result.type}`);
  return result.job;
}

// poweroff: nothing to prepare. The agent powers the machine off once the cluster has recorded
// this action's success (agent.ts), so the workflow's end is never lost with the power.
import type { BuiltinContext, BuiltinDone } from './action.js';

export function poweroff(ctx: BuiltinContext): Promise<BuiltinDone> {
  ctx.progress('the machine powers off once the cluster has recorded this result');
  return Promise.resolve({ message: 'poweroff scheduled', effect: 'poweroff' });
}

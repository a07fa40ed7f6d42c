// reboot: nothing to prepare. The agent reboots the machine once the cluster has recorded this
// action's success (agent.ts), so the reboot can never race the result as it does in Tinkerbell.
import type { BuiltinContext, BuiltinDone } from './action.js';

export function reboot(ctx: BuiltinContext): Promise<BuiltinDone> {
  ctx.progress('the machine reboots once the cluster has recorded this result');
  return Promise.resolve({ message: 'reboot scheduled', effect: 'reboot' });
}

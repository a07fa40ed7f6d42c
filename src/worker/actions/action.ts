// What a built-in action is to the runner (builtin.ts): the context it runs in, what it returns,
// and the one error it throws for a failure the operator can act on.
import type { MachineEffect } from '../machine-control.js';

export interface BuiltinContext {
  /** The action's settings (its environment). */
  readonly env: Readonly<Record<string, string>>;
  /** The action's command and args as the template gave them (a hub image's `command`). */
  readonly argv: readonly string[];
  /** Aborted on timeout or cancel; every wait and I/O loop of the action checks it. */
  readonly signal: AbortSignal;
  /** A line for the output tail (and the stream's Progress messages). */
  readonly progress: (line: string) => void;
}

export interface BuiltinDone {
  /** One line: what was done. */
  readonly message: string;
  /** A machine effect to perform once the cluster has acknowledged the result. */
  readonly effect?: MachineEffect;
}

/** A failure the operator can act on: the message names what is wrong and how to fix it. */
export class ActionError extends Error {
  /** The status reported for it: 1, or the exit status of a command the action ran (cexec). */
  readonly exitStatus: number;

  constructor(message: string, exitStatus = 1) {
    super(message);
    this.name = 'ActionError';
    this.exitStatus = exitStatus;
  }
}

// When repeated failures quarantine a machine (docs/decisions/0028-machine-lifecycle.md, the
// addendum): a machine whose workflows fail `failures` times within `windowS` seconds goes to
// quarantined instead of failed, so selectors stop giving it out until an operator accepts it.
// The setting is replicated, like the workflow retention: every node must judge a failure alike.
// Apply compares leader stamps only (the failure's entry and the ones the machine keeps).
import { quarantineFailuresMax, quarantineWindowSMax } from './limits.js';

export interface QuarantinePolicy {
  /** Quarantine at this many failures within the window (K). */
  readonly failures: number;
  /** The window, in seconds (W). */
  readonly windowS: number;
}

export const quarantinePolicyDefault: QuarantinePolicy = Object.freeze({ failures: 2, windowS: 24 * 3600 });

export function isDefaultQuarantinePolicy(p: QuarantinePolicy): boolean {
  return p.failures === quarantinePolicyDefault.failures && p.windowS === quarantinePolicyDefault.windowS;
}

/** What is wrong with a setting, naming the field, or undefined when it may be set. */
export function quarantinePolicyProblem(p: QuarantinePolicy): string | undefined {
  if (!Number.isSafeInteger(p.failures) || p.failures < 1 || p.failures > quarantineFailuresMax) {
    return `failures: must be 1-${quarantineFailuresMax}, got ${p.failures}`;
  }
  if (!Number.isSafeInteger(p.windowS) || p.windowS < 1 || p.windowS > quarantineWindowSMax) {
    return `windowS: must be 1-${quarantineWindowSMax} seconds, got ${p.windowS}`;
  }
  return undefined;
}

/** The window as people write it: 24h, 90m, 2d, or seconds. */
export function windowText(windowS: number): string {
  if (windowS % 86400 === 0 && windowS > 86400) return `${windowS / 86400}d`;
  if (windowS % 3600 === 0) return `${windowS / 3600}h`;
  if (windowS % 60 === 0) return `${windowS / 60}m`;
  return `${windowS}s`;
}

/**
 * A machine's failures after one more at `nowMs`: the kept stamps still inside the window, then
 * this one, at most quarantineFailuresMax (the newest). `quarantine` when they reach the policy's count.
 */
export function recordFailure(
  kept: readonly number[] | undefined,
  policy: QuarantinePolicy,
  nowMs: number,
): { readonly failures: readonly number[]; readonly quarantine: boolean } {
  const fromMs = nowMs - policy.windowS * 1000;
  const recent = [...(kept ?? []).filter((t) => t > fromMs), nowMs];
  const failures = Object.freeze(recent.slice(Math.max(0, recent.length - quarantineFailuresMax)));
  return { failures, quarantine: failures.length >= policy.failures };
}

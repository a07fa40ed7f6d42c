// A change to a machine's labels (`slipway hardware label ID k=v k2-`), checked with the label
// rules of src/model/labels.ts: Kubernetes' syntax, and no key in the inventory facts' namespace,
// so a key the state accepts is always one a selector reads as a label. Pure.
import { labelKeyProblem, labelValueProblem } from '../model/labels.js';
import { labelsPerHardwareMax } from '../model/limits.js';
import type { Labels } from '../model/machine-lifecycle.js';

/** A change to a machine's labels: keys to set to values, keys to remove. */
export interface LabelChange {
  readonly set: Labels;
  readonly remove: readonly string[];
}

export type LabelOutcome = { readonly labels: Labels } | { readonly problem: string };

/** The labels after `change`, or what is wrong with it. Keys come out sorted. */
export function applyLabelChange(current: Labels, change: LabelChange): LabelOutcome {
  for (const key of [...Object.keys(change.set), ...change.remove]) {
    const problem = labelKeyProblem(key);
    if (problem !== undefined) return { problem };
  }
  for (const [key, value] of Object.entries(change.set)) {
    const problem = labelValueProblem(value);
    if (problem !== undefined) return { problem: `${problem} (label ${key})` };
  }
  const both = change.remove.find((key) => Object.hasOwn(change.set, key));
  if (both !== undefined) return { problem: `label ${both}: both set and removed; give it once` };
  const next = new Map(Object.entries(current));
  for (const key of change.remove) next.delete(key);
  for (const [key, value] of Object.entries(change.set)) next.set(key, value);
  if (next.size > labelsPerHardwareMax) {
    return {
      problem: `a machine has at most ${labelsPerHardwareMax} labels; this would leave ${next.size}`,
    };
  }
  return { labels: Object.fromEntries([...next.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) };
}

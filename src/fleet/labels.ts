// Machine labels, checked as Kubernetes checks its labels: a key is an optional DNS-subdomain
// prefix and a slash, then a name of at most 63 characters; a value is at most 63 characters of
// the same alphabet, or empty. Pure.
import { labelsPerHardwareMax } from '../model/limits.js';
import type { Labels } from '../model/machine-lifecycle.js';

const nameMax = 63;
const prefixMax = 253;
/** Alphanumerics at both ends, with -, _ and . inside. */
const name = /^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$/;
/** A DNS subdomain: lower-case labels of alphanumerics and -, joined by dots. */
const subdomain = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

/** What is wrong with a label key, or undefined. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.lastIndexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const base = slash < 0 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > prefixMax || !subdomain.test(prefix))) {
    return `label key "${key}": the prefix before "/" must be a DNS subdomain (lower-case a-z, 0-9, "-" and ".") of at most ${prefixMax} characters`;
  }
  if (base.length === 0 || base.length > nameMax || !name.test(base)) {
    return `label key "${key}": the name must be 1-${nameMax} characters of A-Z, a-z, 0-9, "-", "_" and ".", starting and ending with a letter or digit`;
  }
  return reservedKeyProblem(key);
}

/** What is wrong with a label value, or undefined. */
export function labelValueProblem(key: string, value: string): string | undefined {
  if (value === '') return undefined;
  if (value.length > nameMax || !name.test(value)) {
    return `label ${key}: the value "${value}" must be empty or 1-${nameMax} characters of A-Z, a-z, 0-9, "-", "_" and ".", starting and ending with a letter or digit`;
  }
  return undefined;
}

/**
 * A key that names an inventory fact is the inventory's, not a label (selectors read both in one
 * language). The inventory's fact names come with it; until then no key is reserved.
 */
function reservedKeyProblem(_key: string): string | undefined {
  return undefined;
}

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
    const problem = labelValueProblem(key, value);
    if (problem !== undefined) return { problem };
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

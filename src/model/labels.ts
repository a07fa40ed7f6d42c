// Machine labels as Kubernetes writes them (`rack=a`, `example.com/role=db`), and the names the
// selector language keeps for inventory facts. Here, not in src/fleet, because the replicated
// state refuses a bad label when `hardware label` is applied and the state may import only the
// layers below it; src/fleet/selector.ts reads the same rules, so a key the state accepts is
// always one a selector can name (docs/decisions/0027-selectors-and-inventory.md).

/** Kubernetes' limits: a name and a value at most 63 characters, a prefix at most 253. */
export const labelNameLengthMax = 63;
export const labelPrefixLengthMax = 253;
export const labelValueLengthMax = 63;

/**
 * The inventory facts a selector compares. A label may not be named like one, nor like anything
 * under these roots (`cpu.cache` is not a fact today, but a selector that says it is a typo of
 * one, or a fact to come, never a label).
 */
export const factNames = [
  'arch',
  'firmware',
  'memory',
  'cpu.model',
  'cpu.sockets',
  'cpu.cores',
  'cpu.threads',
  'disks.count',
  'disks.size',
  'disks.total',
  'disks.model',
  'disks.rotational',
  'nics.count',
  'nics.speed',
  'nics.driver',
  'system.vendor',
  'system.product',
  'system.serial',
] as const;
export type FactName = (typeof factNames)[number];

/** The first segment (before the first dot) of every fact name, and of names kept for facts. */
export const factRoots = ['arch', 'firmware', 'memory', 'cpu', 'disks', 'nics', 'system', 'bmc'] as const;

const factNameSet: ReadonlySet<string> = new Set(factNames);
const factRootSet: ReadonlySet<string> = new Set(factRoots);

export function isFactName(key: string): key is FactName {
  return factNameSet.has(key);
}

/**
 * True when the key lies in the facts' namespace: no prefix (a `/` makes a key a label, always)
 * and a first segment that is a fact root (`memory`, `cpu.cores`, `cpu.cache`, `bmc`).
 */
export function isFactNamespace(key: string): boolean {
  if (key.includes('/')) return false;
  const dot = key.indexOf('.');
  return factRootSet.has(dot < 0 ? key : key.slice(0, dot));
}

const namePattern = /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$/;
const prefixLabelPattern = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;
const nameRule = 'letters, digits, "-", "_" and "." (starting and ending with a letter or digit)';

function quoted(text: string): string {
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
}

function prefixProblem(prefix: string): string | undefined {
  if (prefix === '') return 'has an empty prefix before "/"';
  if (prefix.length > labelPrefixLengthMax) {
    return `has a prefix of ${prefix.length} characters; at most ${labelPrefixLengthMax}`;
  }
  if (!prefix.split('.').every((part) => part.length <= 63 && prefixLabelPattern.test(part))) {
    return `has the prefix ${quoted(prefix)}, which is not a DNS subdomain (lower-case, e.g. example.com)`;
  }
  return undefined;
}

function nameProblem(name: string): string | undefined {
  if (name === '') return 'has an empty name';
  if (name.length > labelNameLengthMax) {
    return `has a name of ${name.length} characters; at most ${labelNameLengthMax}`;
  }
  if (!namePattern.test(name)) return `has the name ${quoted(name)}; a name is ${nameRule}`;
  return undefined;
}

/**
 * Why a label key is not allowed, or undefined when it is: Kubernetes' syntax (`[prefix/]name`)
 * and not in the inventory facts' namespace.
 */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const problem =
    slash < 0
      ? nameProblem(key)
      : key.indexOf('/', slash + 1) >= 0
        ? 'has more than one "/"'
        : (prefixProblem(key.slice(0, slash)) ?? nameProblem(key.slice(slash + 1)));
  if (problem !== undefined) return `label key ${quoted(key)} ${problem}`;
  if (isFactNamespace(key)) {
    const what = isFactName(key) ? 'is an inventory fact' : "is in the inventory facts' namespace";
    return `label key ${quoted(key)} ${what} (${factRoots.join(', ')}); use another key or a prefixed one such as example.com/${key}`;
  }
  return undefined;
}

/** Why a label value is not allowed, or undefined: empty, or a name of at most 63 characters. */
export function labelValueProblem(value: string): string | undefined {
  if (value === '') return undefined;
  if (value.length > labelValueLengthMax) {
    return `label value ${quoted(value)} has ${value.length} characters; at most ${labelValueLengthMax}`;
  }
  if (!namePattern.test(value)) return `label value ${quoted(value)} is not ${nameRule}`;
  return undefined;
}

// `slipway server --config FILE`: a YAML (or JSON) mapping whose keys are exactly the command's
// long flags without the dashes (`data-dir`, `api-addr`, `peers`...), read into the same values
// the flags give, so a file and a command line mean the same thing and flags override the file.
// `--print-config` writes the effective configuration back in that form.
import type { ServerConfig } from '../../node/index.js';
import { ConfigError } from '../../platform/config-error.js';
import { editDistance } from '../../platform/edit-distance.js';

/** One long flag of `slipway server`, as the file names it. */
export interface FlagSpec {
  /** The flag without its dashes: `data-dir`. */
  readonly key: string;
  /** Where commander puts its value: `dataDir`. */
  readonly attribute: string;
  readonly takesValue: boolean;
  readonly variadic: boolean;
}

/** What a flag's value is once read: its text, its texts (repeatable flags), or set. */
export type FlagValue = string | string[] | true;

/** The flags a command declares, as a file may name them. */
export function flagSpecsOf(options: readonly CommanderOption[]): FlagSpec[] {
  return options
    .filter((o) => o.long !== undefined)
    .map((o) => ({
      key: (o.long ?? '').replace(/^--/, ''),
      attribute: o.attributeName(),
      takesValue: o.required || o.optional,
      variadic: o.variadic,
    }));
}

/** The part of commander's Option that the file needs. */
export interface CommanderOption {
  readonly long?: string | undefined;
  readonly required: boolean;
  readonly optional: boolean;
  readonly variadic: boolean;
  attributeName(): string;
}

/** Keys that are flags of the command but have no meaning inside the file itself. */
const notInFile = new Set(['config', 'print-config']);

/**
 * The file's settings as flag values, keyed by commander's attribute names. Refuses a key that is
 * not a flag (naming the nearest one), and a value of the wrong shape for its flag.
 */
export function flagValuesOfFile(
  raw: Readonly<Record<string, unknown>>,
  specs: readonly FlagSpec[],
  file: string,
): Record<string, FlagValue> {
  const byKey = new Map(specs.filter((s) => !notInFile.has(s.key)).map((s) => [s.key, s]));
  const problems: string[] = [];
  const values: Record<string, FlagValue> = {};
  for (const [key, value] of Object.entries(raw)) {
    const spec = byKey.get(key);
    if (spec === undefined) {
      const near = nearestKey(key, [...byKey.keys()]);
      problems.push(`${key}: not a setting${near === undefined ? '' : `; did you mean ${near}?`}`);
      continue;
    }
    const read = flagValueOf(spec, value);
    if (typeof read === 'object' && 'problem' in read) problems.push(`${key}: ${read.problem}`);
    else if (read !== undefined) values[spec.attribute] = read;
  }
  if (problems.length > 0) {
    throw new ConfigError(
      `config file ${file}:\n${problems.map((p) => `  ${p}`).join('\n')}\n` +
        '(its keys are the long flags of `slipway server --help` without the dashes)',
    );
  }
  return values;
}

type ReadValue = FlagValue | undefined | { problem: string };

/** One setting's value as its flag would give it; undefined for a switch set to false. */
function flagValueOf(spec: FlagSpec, value: unknown): ReadValue {
  if (!spec.takesValue) {
    if (typeof value !== 'boolean') return { problem: 'must be true or false' };
    return value ? true : undefined;
  }
  if (Array.isArray(value)) {
    const texts = value.map(scalarText);
    if (texts.some((t) => t === undefined)) return { problem: 'must be a list of plain values' };
    const list = texts as string[];
    if (spec.variadic) return list;
    // A list of ID=HOST:PORT items is the comma-separated flag written as YAML likes it.
    if (spec.key === 'peers') return list.join(',');
    return { problem: 'takes one value, not a list' };
  }
  const text = scalarText(value);
  if (text === undefined) return { problem: 'must be a plain value (text or number)' };
  return spec.variadic ? [text] : text;
}

function scalarText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

/** The known key closest to `key` (camelCase spellings included), if any is close enough. */
export function nearestKey(key: string, known: readonly string[]): string | undefined {
  const kebab = key.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase();
  let best: { key: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = Math.min(editDistance(key, candidate), editDistance(kebab, candidate));
    if (best === undefined || distance < best.distance) best = { key: candidate, distance };
  }
  if (best === undefined) return undefined;
  return best.distance <= Math.max(2, Math.floor(best.key.length / 4)) ? best.key : undefined;
}

/**
 * The configuration a node runs with, in the file's form: every setting, defaults included, under
 * its flag's key. Secrets never appear: the configuration names secret files, not their contents.
 */
export function configDocument(cfg: ServerConfig): Record<string, unknown> {
  const doc: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(cfg) as [keyof ServerConfig, unknown][]) {
    if (value === undefined) continue;
    const special = documentFields[field];
    if (special !== undefined) {
      const [key, text] = special(cfg);
      doc[key] = text;
    } else {
      doc[kebabCase(field)] = value;
    }
  }
  return doc;
}

/** Settings whose flag is not the field's name in kebab case, or whose value is written otherwise. */
const documentFields: Partial<Record<keyof ServerConfig, (c: ServerConfig) => [string, unknown]>> = {
  peers: (c) => ['peers', c.peers.map((p) => `${p.id}=${p.addr}`)],
  bootOsDir: (c) => ['bootos-dir', c.bootOsDir],
  dhcpPools: (c) => ['dhcp-pool', c.dhcpPools],
  dhcpLeaseTimeS: (c) => ['dhcp-lease-time', c.dhcpLeaseTimeS],
  kernelArgs: (c) => ['kernel-arg', c.kernelArgs],
  drainGraceMs: (c) => ['drain-grace', durationText(c.drainGraceMs)],
  authFailureWindowS: (c) => ['auth-failure-window', c.authFailureWindowS],
};

function kebabCase(field: string): string {
  return field.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase();
}

/** Milliseconds as the shortest duration text --drain-grace reads back. */
function durationText(ms: number): string {
  if (ms === 0) return '0';
  if (ms % 3_600_000 === 0) return `${String(ms / 3_600_000)}h`;
  if (ms % 60_000 === 0) return `${String(ms / 60_000)}m`;
  if (ms % 1000 === 0) return `${String(ms / 1000)}s`;
  return `${String(ms)}ms`;
}

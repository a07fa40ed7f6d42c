// Byte quantities as Kubernetes writes them: `64Gi` (binary: Ki Mi Gi Ti Pi Ei), `1T` (decimal:
// k or K, M G T P E), `512` (bytes). Selectors compare whole bytes up to 2^53 - 1, exactly: the
// text is read with BigInt, so `1.5Ti` is 1649267441664 and `0.1Ki` (102.4 bytes) is refused.

const binaryUnits: readonly (readonly [string, bigint])[] = [
  ['Ei', 1n << 60n],
  ['Pi', 1n << 50n],
  ['Ti', 1n << 40n],
  ['Gi', 1n << 30n],
  ['Mi', 1n << 20n],
  ['Ki', 1n << 10n],
];
const decimalUnits: readonly (readonly [string, bigint])[] = [
  ['E', 10n ** 18n],
  ['P', 10n ** 15n],
  ['T', 10n ** 12n],
  ['G', 10n ** 9n],
  ['M', 10n ** 6n],
  ['k', 10n ** 3n],
];
const unitsByName = new Map<string, bigint>([...binaryUnits, ...decimalUnits, ['K', 1000n]]);

/** What an operator is told when a unit is wrong. */
export const unitsHint = 'units are Ki Mi Gi Ti Pi Ei (binary), k M G T P E (decimal), or none for bytes';

const largest = BigInt(Number.MAX_SAFE_INTEGER);

export interface QuantityProblem {
  readonly problem: string;
  readonly hint?: string;
}

/** A quantity's text as whole bytes, or what is wrong with it. */
export function parseBytes(text: string): number | QuantityProblem {
  const parts = /^([0-9]{1,20})(?:\.([0-9]{1,20}))?([A-Za-z]*)$/.exec(text);
  if (parts === null) {
    return {
      problem: `${JSON.stringify(text)} is not a quantity`,
      hint: `write e.g. 64Gi or 1T; ${unitsHint}`,
    };
  }
  const [, whole = '', fraction = '', unitName = ''] = parts;
  const unit = unitName === '' ? 1n : unitsByName.get(unitName);
  if (unit === undefined) {
    return { problem: `unknown unit ${JSON.stringify(unitName)}`, hint: unitsHint };
  }
  const scale = 10n ** BigInt(fraction.length);
  const scaled = (BigInt(whole) * scale + BigInt(fraction === '' ? '0' : fraction)) * unit;
  if (scaled % scale !== 0n) return { problem: `${text} is not a whole number of bytes` };
  const bytes = scaled / scale;
  if (bytes > largest) return { problem: `${text} is more than a selector compares (8Pi - 1 bytes)` };
  return Number(bytes);
}

/** A plain whole number (a count, Mb/s), or what is wrong with it. */
export function parseWhole(text: string, what: string): number | QuantityProblem {
  if (!/^[0-9]{1,16}$/.test(text)) {
    return {
      problem: `${JSON.stringify(text)} is not a whole number`,
      hint: `${what} takes a plain number, with no unit`,
    };
  }
  const value = Number(text);
  if (!Number.isSafeInteger(value)) return { problem: `${text} is too large` };
  return value;
}

function exactIn(bytes: bigint, units: readonly (readonly [string, bigint])[]): string | undefined {
  for (const [name, size] of units) if (bytes % size === 0n) return `${bytes / size}${name}`;
  return undefined;
}

/**
 * The canonical text of a whole number of bytes: the shortest exact form (binary first on a tie),
 * so 68719476736 is 64Gi, 10^12 is 1T, 1536 is 1536 rather than 1.5Ki. parseBytes reads it back.
 */
export function formatBytes(bytes: number): string {
  if (bytes === 0) return '0';
  const n = BigInt(bytes);
  const candidates = [exactIn(n, binaryUnits), exactIn(n, decimalUnits), String(bytes)];
  let best = String(bytes);
  for (const c of candidates) if (c !== undefined && c.length < best.length) best = c;
  return best;
}

export type UnitFamily = 'binary' | 'decimal';

/** Binary when the canonical text uses a binary unit (64Gi), else decimal (1T, 512). */
export function unitFamilyOf(bytes: number): UnitFamily {
  return formatBytes(bytes).endsWith('i') ? 'binary' : 'decimal';
}

/**
 * A size for a person to read in explanations and drift: exact when two decimals say it (1.5Gi,
 * 960G); else cut (never rounded) to three significant digits, always with a decimal point and
 * followed by the exact bytes, so it never reads as a threshold it missed: "63.9Gi (… bytes)".
 */
export function describeBytes(bytes: number, family: UnitFamily): string {
  const units = family === 'binary' ? binaryUnits : decimalUnits;
  for (const [name, size] of units) {
    const value = bytes / Number(size);
    if (value < 1) continue;
    if (Number.isInteger(value * 100) && value < 10_000) return `${trim(value.toFixed(2))}${name}`;
    const decimals = Math.max(1, 2 - Math.floor(Math.log10(value)));
    const cut = Math.trunc(value * 10 ** decimals) / 10 ** decimals;
    return `${cut.toFixed(decimals)}${name} (${bytes} bytes)`;
  }
  return `${bytes} bytes`;
}

function trim(fixed: string): string {
  return fixed.includes('.') ? fixed.replace(/\.?0+$/, '') : fixed;
}

// Parsing flag values that several commands share. A bad value is a UsageError: exit 2 with a
// message naming the flag and what it must be.
import { UsageError } from './output.js';

/** A whole number (digits only). */
export function wholeNumber(text: string, flag: string): number {
  if (!/^\d+$/.test(text)) throw new UsageError(`${flag} must be a whole number, got "${text}"`);
  return Number(text);
}

/**
 * The target of a command, given as its argument or by the flag it took before (kept, hidden):
 * undefined when neither is given; both with different values is bad usage.
 */
export function oneTarget(
  argument: string | undefined,
  flagValue: string | undefined,
  flag: string,
): string | undefined {
  if (argument !== undefined && flagValue !== undefined && argument !== flagValue)
    throw new UsageError(`give it once: as the argument ("${argument}") or by ${flag} ("${flagValue}")`);
  return argument ?? flagValue;
}

/** `n1=127.0.0.1:7011,n2=127.0.0.1:7012` as ids and addresses; the addresses are checked later. */
export function idAddressList(text: string, flag: string): { id: string; addr: string }[] {
  return text
    .split(',')
    .filter((item) => item.trim() !== '')
    .map((item) => {
      const eq = item.indexOf('=');
      if (eq <= 0) throw new UsageError(`${flag}: "${item}" must be ID=HOST:PORT`);
      return { id: item.slice(0, eq).trim(), addr: item.slice(eq + 1).trim() };
    });
}

const durationUnitsMs: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A point in time as ms since the epoch: an ISO 8601 time (2026-01-31, 2026-01-31T12:00:00Z) or
 * a duration before `nowMs` (90s, 15m, 1h, 7d), as `--since 1h` reads best.
 */
export function pointInTime(text: string, flag: string, nowMs: number): number {
  const ago = /^(\d+)([smhd])$/.exec(text);
  if (ago !== null) return nowMs - Number(ago[1]) * (durationUnitsMs[ago[2] ?? ''] ?? 0);
  const ms = /^\d{4}-\d{2}-\d{2}/.test(text) ? Date.parse(text) : NaN;
  if (Number.isNaN(ms)) {
    throw new UsageError(
      `${flag} must be an ISO 8601 time (2026-01-31 or 2026-01-31T12:00:00Z) or a duration ago (90s, 15m, 1h, 7d), got "${text}"`,
    );
  }
  return ms;
}

const spanUnitsMs: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

const bareUnitNames = { ms: 'milliseconds', s: 'seconds', d: 'days' } as const;

/**
 * A length of time as ms, as every duration flag takes it: a whole number with a unit (500ms, 30s,
 * 2m, 1h, 7d), or a bare number in the unit the flag's help names (`bare`), as it always took.
 */
export function duration(text: string, flag: string, bare: 'ms' | 's' | 'd'): number {
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(text.trim());
  const ms = m === null ? NaN : Number(m[1]) * (spanUnitsMs[m[2] ?? bare] ?? NaN);
  if (!Number.isSafeInteger(ms)) {
    throw new UsageError(
      `${flag} must be a duration such as 500ms, 30s, 2m or 1h (a bare number is ${bareUnitNames[bare]}), got "${text}"`,
    );
  }
  return ms;
}

/** A duration flag that counts whole seconds: 90s, 20m, 1d, or a bare number of seconds. */
export function durationSeconds(text: string, flag: string): number {
  const ms = duration(text, flag, 's');
  if (ms % 1000 !== 0) throw new UsageError(`${flag} must be whole seconds, got "${text}"`);
  return ms / 1000;
}

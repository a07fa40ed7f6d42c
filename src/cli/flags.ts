// Parsing flag values that several commands share. A bad value is a UsageError: exit 2 with a
// message naming the flag and what it must be.
import { UsageError } from './output.js';

/** A whole number (digits only). */
export function wholeNumber(text: string, flag: string): number {
  if (!/^\d+$/.test(text)) throw new UsageError(`${flag} must be a whole number, got "${text}"`);
  return Number(text);
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

const spanUnitsMs: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A length of time as ms: 0, or a whole number with a unit (500ms, 5s, 2m, 1h). */
export function duration(text: string, flag: string): number {
  const m = /^(\d+)(ms|s|m|h)$/.exec(text);
  if (text === '0') return 0;
  if (m === null)
    throw new UsageError(`${flag} must be a duration such as 500ms, 5s, 2m or 0, got "${text}"`);
  return Number(m[1]) * (spanUnitsMs[m[2] ?? ''] ?? 0);
}

// Structured logs: pino JSON to stderr, so stdout stays free for command output.
import { pino } from 'pino';
import type { Logger } from 'pino';

export type { Logger };

export function createLogger(
  fields: Record<string, string>,
  level = process.env['SLIPWAY_LOG_LEVEL'] ?? 'info',
): Logger {
  return pino({ level, base: { pid: process.pid, ...fields } }, pino.destination(2));
}

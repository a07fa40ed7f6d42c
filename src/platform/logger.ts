// Structured logs: pino JSON to stderr, so stdout stays free for command output.
import { pino } from 'pino';
import type { Logger } from 'pino';

export type { Logger };

/**
 * Fields that hold secrets wherever a log line might carry them (a command, a hardware record,
 * a BMC target): pino replaces them before the line is written.
 */
export const secretPaths: readonly string[] = [
  'password',
  '*.password',
  '*.*.password',
  '*.*.*.password',
  'workerToken',
  '*.workerToken',
  '*.*.workerToken',
  // Operator tokens and the header that carries them, should a call's metadata or a token
  // answer ever be logged (the audit trail names the token, never the token itself).
  'token',
  '*.token',
  'authorization',
  '*.authorization',
];

export function createLogger(
  fields: Record<string, string>,
  level = process.env['SLIPWAY_LOG_LEVEL'] ?? 'info',
): Logger {
  // Asynchronous: a synchronous write(2) per line cost the event loop ~8 ms a second under a
  // few hundred results a second. Lines written while one write is in flight go out with the
  // next; pino flushes what is left when the process exits (only SIGKILL can lose a last line).
  return pino(
    {
      level,
      base: { pid: process.pid, ...fields },
      redact: { paths: [...secretPaths], censor: '[redacted]' },
    },
    pino.destination({ dest: 2, sync: false }),
  );
}

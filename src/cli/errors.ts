// How the CLI words refusals whose text is not the node's own. A request over the node's
// apiMessageBytesMax is refused by grpc-js before any slipway code sees it, with grpc-js's words
// ("Received message larger than max (X vs Y)"): no hook of grpc-js's server reaches that status
// (docs/decisions/0011-security.md, Limits), so the CLI names the setting instead.
import { status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { apiMessageBytesMaxLimit, isServiceError } from '../wire/contract.js';

/**
 * The largest answer the CLI accepts (grpc.max_receive_message_length on its channels): above
 * any node's apiMessageBytesMax, so grpc-js's "larger than max" naming another limit is the
 * node's refusal of a request, never the CLI's of an answer. Lists page at 2 MiB.
 */
export const answerBytesMax = 2 * apiMessageBytesMaxLimit;

const receivedTooLarge = /^Received message larger than max \((\d+) vs\.? (\d+)\)$/;

/**
 * For a request the node refused as larger than its apiMessageBytesMax: a message naming the
 * setting and its flag. Undefined for any other error.
 */
export function messageLimitRefusal(err: ServiceError): string | undefined {
  if (err.code !== status.RESOURCE_EXHAUSTED) return undefined;
  const m = receivedTooLarge.exec(err.details);
  if (m === null) return undefined;
  const sent = Number(m[1]);
  const limit = Number(m[2]);
  // This client's own limit: an answer it refused, not the node's refusal.
  if (limit === answerBytesMax) return undefined;
  return (
    `the request is ${sizeText(sent)}, larger than the node's apiMessageBytesMax ` +
    `(--api-message-bytes-max, ${sizeText(limit)})`
  );
}

/** Bytes as an operator reads them: "4 MiB", "5.2 MiB (5452595 bytes)", "900 bytes". */
export function sizeText(bytes: number): string {
  const mib = bytes / (1024 * 1024);
  if (bytes < 1024 * 1024) return `${bytes} bytes`;
  if (Number.isInteger(mib)) return `${mib} MiB`;
  return `${mib.toFixed(1)} MiB (${bytes} bytes)`;
}

/** Refusals that mean the operator's input was wrong: exit 2, as for bad flags. */
const usageStatuses = new Set<number>([status.INVALID_ARGUMENT, status.NOT_FOUND, status.ALREADY_EXISTS]);

/**
 * How a command that failed with `err` ends, when `err` is not a usage error: the line for
 * stderr and the exit code. A refusal of the operator's input (a request over the node's message
 * limit included) exits 2; any other failure 1.
 */
export function failureExit(err: unknown): { message: string; exitCode: number } {
  if (!isServiceError(err)) return { message: err instanceof Error ? err.message : String(err), exitCode: 1 };
  const tooLarge = messageLimitRefusal(err);
  if (tooLarge !== undefined) return { message: tooLarge, exitCode: 2 };
  return { message: err.details || err.message, exitCode: usageStatuses.has(err.code) ? 2 : 1 };
}

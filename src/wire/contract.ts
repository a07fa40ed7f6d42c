// What a node and its clients agree on at the wire, beside the protobuf messages themselves: the
// metadata keys of a refusal, which refusals prove a write was never appended, and the largest
// messages and pages. The nodes (api/errors.ts, api/pages.ts, node/config.ts) and the CLI
// (src/cli) both read them from here. The CLI starts fast because this module loads no state,
// raft or validation code: grpc-js is all it needs, and only for its status codes.
import { status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';

/** The leader a refusing node knows of, so a client or a forwarding node can go there. */
export const leaderHintKey = 'x-slipway-leader';
/** The raft refusal behind an UNAVAILABLE, so a forwarding node can tell "never appended". */
export const raftCodeKey = 'x-slipway-raft-code';

/** Raft refusals given before anything is appended: the write did not happen. */
export const refusedBeforeAppendCodes: ReadonlySet<string> = new Set([
  'E_NOT_LEADER',
  'E_TRANSFER_IN_PROGRESS',
]);

/**
 * Whether a failed write call proves the write was not applied and never will be: the node
 * refused it before appending (its raft code says so), or the connection was never made. Any
 * other UNAVAILABLE (a proposal dropped by a leadership change, a connection lost mid-call) is
 * ambiguous: the write may still commit, so sending it again could apply it twice.
 */
export function refusedBeforeAppend(err: ServiceError): boolean {
  if (err.code !== status.UNAVAILABLE) return false;
  const raftCode = err.metadata.get(raftCodeKey)[0];
  if (typeof raftCode === 'string') return refusedBeforeAppendCodes.has(raftCode);
  return /No connection established|ECONNREFUSED/.test(err.details);
}

export function isServiceError(err: unknown): err is ServiceError {
  return err instanceof Error && typeof (err as Partial<ServiceError>).code === 'number' && 'metadata' in err;
}

/** Why grpc-js could not connect, in a few words, from its error text; undefined for other errors. */
export function connectionFailure(details: string): string | undefined {
  if (/ECONNREFUSED/.test(details)) return 'connection refused';
  if (/ENOTFOUND|DNS resolution failed/.test(details)) return 'name not found';
  if (/EHOSTUNREACH/.test(details)) return 'host unreachable';
  if (/ENETUNREACH/.test(details)) return 'network unreachable';
  if (/ETIMEDOUT/.test(details)) return 'connection timed out';
  if (/No connection established/.test(details)) return 'no connection';
  return undefined;
}

/** The largest apiMessageBytesMax a node accepts (64 MiB). */
export const apiMessageBytesMaxLimit = 64 * 1024 * 1024;

/** The largest page limit a caller may ask for in a list call (src/api/pages.ts). */
export const pageItemsMax = 1_000;

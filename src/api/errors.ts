// The one place where operating errors become gRPC statuses. Clients act on the code:
// UNAVAILABLE means "try another node", FAILED_PRECONDITION means "re-read and decide".
import { Metadata, status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { RaftError } from '../raft/core/types.js';
import { InvalidCommandError } from '../state/command.js';
import { EntryTooNewError } from '../state/versions.js';

export const leaderHintKey = 'x-slipway-leader';
/** The raft refusal behind an UNAVAILABLE, so a forwarding node can tell "never appended". */
export const raftCodeKey = 'x-slipway-raft-code';

export class ApiError extends Error {
  readonly code: status;
  constructor(code: status, message: string) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
  }
}

export function toServiceError(err: unknown): Partial<ServiceError> {
  const metadata = new Metadata();
  if (err instanceof ApiError) return { code: err.code, details: err.message, metadata };
  if (err instanceof InvalidCommandError)
    return { code: status.INVALID_ARGUMENT, details: err.message, metadata };
  // A follower on a newer build forwarded what this (older) leader cannot read: nothing appended.
  if (err instanceof EntryTooNewError)
    return { code: status.FAILED_PRECONDITION, details: err.message, metadata };
  if (err instanceof RaftError) {
    if (err.leader !== '') metadata.set(leaderHintKey, err.leader);
    metadata.set(raftCodeKey, err.code);
    return { code: raftCodeToStatus(err), details: err.message, metadata };
  }
  if (isServiceError(err)) return { code: err.code, details: err.details, metadata: err.metadata };
  const message = err instanceof Error ? err.message : String(err);
  return { code: status.INTERNAL, details: `internal error: ${message}`, metadata };
}

function raftCodeToStatus(err: RaftError): status {
  switch (err.code) {
    case 'E_NOT_LEADER':
    case 'E_PROPOSAL_DROPPED':
    case 'E_TRANSFER_IN_PROGRESS':
      return status.UNAVAILABLE;
    case 'E_BACKPRESSURE':
      return status.RESOURCE_EXHAUSTED;
    case 'E_CONF_CHANGE_PENDING':
      return status.FAILED_PRECONDITION;
    case 'E_UNKNOWN_MEMBER':
      return status.NOT_FOUND;
    case 'E_BAD_REQUEST':
      return status.INVALID_ARGUMENT;
  }
}

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

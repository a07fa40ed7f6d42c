// The one place where operating errors become gRPC statuses. Clients act on the code:
// UNAVAILABLE means "try another node", FAILED_PRECONDITION means "re-read and decide".
import { Metadata, status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { RaftError } from '../raft/core/types.js';
import { InvalidCommandError } from '../state/store-command.js';
import type { ControlErrorCode } from '../state/control/commands.js';
import { EntryTooNewError } from '../state/versions.js';
import { isServiceError, leaderHintKey, raftCodeKey } from '../wire/contract.js';

// The wire-level facts live in wire.ts, which the CLI loads without this module's state code.
export {
  isServiceError,
  leaderHintKey,
  raftCodeKey,
  refusedBeforeAppend,
  refusedBeforeAppendCodes,
} from '../wire/contract.js';

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

/** The status of a refusal by the control state: the caller's input, a missing or existing record, or a race. */
export function controlErrorStatus(code: ControlErrorCode): status {
  switch (code) {
    case 'E_INVALID':
      return status.INVALID_ARGUMENT;
    case 'E_NOT_FOUND':
      return status.NOT_FOUND;
    case 'E_EXISTS':
      return status.ALREADY_EXISTS;
    case 'E_VERSION':
    case 'E_CONFLICT':
    case 'E_STALE_ATTEMPT':
    case 'E_NOT_DUE':
      return status.FAILED_PRECONDITION;
  }
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

// The Internal service's ArtifactRead, served on the raft address (mutual TLS when the cluster
// has certificates): a range of verified content from this node's store, for a peer that lacks
// it. Only files under the store's sha256/ directory are read, so a peer never receives a
// partial or unverified copy.
import { status } from '@grpc/grpc-js';
import type { sendUnaryData, ServerUnaryCall, ServiceError } from '@grpc/grpc-js';
import type { ArtifactReadRequest, ArtifactReadResponse, InternalServer } from '../gen/internal.js';
import { ApiError, toServiceError } from './errors.js';
import type { ContentStore } from '../artifacts/content-store.js';
import { fetchChunkBytes } from '../artifacts/fetcher.js';

const hexDigest = /^[0-9a-f]{64}$/;

export function artifactReadHandlers(store: ContentStore): Pick<InternalServer, 'artifactRead'> {
  return {
    artifactRead: (
      call: ServerUnaryCall<ArtifactReadRequest, ArtifactReadResponse>,
      cb: sendUnaryData<ArtifactReadResponse>,
    ) => {
      const run = async (): Promise<ArtifactReadResponse> => {
        const { sha256, offset, length } = call.request;
        if (!hexDigest.test(sha256)) {
          throw new ApiError(
            status.INVALID_ARGUMENT,
            `sha256 must be 64 lower-case hex digits, got "${sha256}"`,
          );
        }
        if (length === 0 || length > fetchChunkBytes) {
          throw new ApiError(status.INVALID_ARGUMENT, `length must be 1-${fetchChunkBytes}, got ${length}`);
        }
        const read = await store.read(sha256, offset, length);
        if (read === undefined)
          throw new ApiError(status.NOT_FOUND, `no verified copy of sha256 ${sha256} here`);
        if (offset >= read.totalBytes && read.totalBytes > 0) {
          throw new ApiError(
            status.OUT_OF_RANGE,
            `offset ${offset} is past the end of sha256 ${sha256} (${read.totalBytes} bytes)`,
          );
        }
        return { data: read.data, totalBytes: read.totalBytes };
      };
      run().then(
        (res) => cb(null, res),
        (err: unknown) => cb(toServiceError(err) as ServiceError, null),
      );
    },
  };
}

// Receiving an artifact upload (Control.ArtifactAdd, a client stream) into this node's content
// store. The first message names the artifact and announces its size and SHA-256; the content
// is written as it arrives and stored under its digest only when both match. The caller
// registers it (artifact.put) after that, so the replicated state never names content that its
// proposing node does not hold.
import { status } from '@grpc/grpc-js';
import type { ArtifactAddRequest } from '../gen/control.js';
import { ApiError } from './errors.js';
import { artifactBytesMax } from '../model/limits.js';
import { artifactNameProblem } from '../model/artifact-name.js';
import { sha256Problem } from '../state/control/validate.js';
import { ContentMismatchError, type ContentStore } from '../artifacts/content-store.js';

/** What an upload announced and delivered, stored and verified. */
export interface ReceivedArtifact {
  readonly name: string;
  readonly sha256: string;
  readonly bytes: number;
  /** 0: create or replace; n: replace only version n. */
  readonly expectVersion: number;
}

/** Reads the whole upload into the store; throws ApiError (INVALID_ARGUMENT) on bad content. */
export async function receiveArtifact(
  messages: AsyncIterable<ArtifactAddRequest>,
  store: ContentStore,
): Promise<ReceivedArtifact> {
  const iterator = messages[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done === true)
    throw new ApiError(status.INVALID_ARGUMENT, 'the upload is empty: no name, size or digest');
  const head = first.value;
  const sha256 = head.sha256.toLowerCase();
  const problem =
    artifactNameProblem(head.name) ??
    sha256Problem(head.sha256) ??
    (head.bytes <= artifactBytesMax
      ? undefined
      : `bytes: ${head.bytes} is over the limit of ${artifactBytesMax}`);
  if (problem !== undefined) throw new ApiError(status.INVALID_ARGUMENT, problem);
  const writer = await store.writer(sha256, head.bytes);
  try {
    await writer.write(head.data);
    for (;;) {
      const next = await iterator.next();
      if (next.done === true) break;
      if (next.value.name !== '' || next.value.sha256 !== '') {
        throw new ApiError(status.INVALID_ARGUMENT, 'only the first message of an upload names the artifact');
      }
      await writer.write(next.value.data);
    }
    await writer.finish();
  } catch (err) {
    await writer.abort();
    if (err instanceof ContentMismatchError) {
      throw new ApiError(
        status.INVALID_ARGUMENT,
        `${err.message}; nothing was stored (did the file change while it was sent?)`,
      );
    }
    throw err;
  }
  return { name: head.name, sha256, bytes: head.bytes, expectVersion: head.expectVersion };
}

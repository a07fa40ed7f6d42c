// Where image2disk reads an image from. Today an http:// or https:// URL; registered artifacts
// will come here too, so image2disk sees only a stream and its length.
import { Readable } from 'node:stream';
import type { ReadableStream } from 'node:stream/web';
import { ActionError } from './builtin.js';

export interface ImageSource {
  /** The image's bytes as served (before any decompression). */
  readonly body: Readable;
  /** From Content-Length; undefined when the server does not say. */
  readonly lengthBytes: number | undefined;
}

/** Opens the image; resolves once the server has answered 200, so nothing is written before. */
export async function openImage(url: string, signal: AbortSignal): Promise<ImageSource> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ActionError(`IMG_URL ${url} is not a URL; give an http:// or https:// URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ActionError(`IMG_URL ${url} is not an http:// or https:// URL`);
  }
  let response: Response;
  try {
    response = await fetch(parsed, { signal, redirect: 'follow' });
  } catch (error) {
    if (signal.aborted) throw error;
    const cause =
      error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error);
    throw new ActionError(`cannot fetch IMG_URL ${url}: ${cause}`);
  }
  if (response.status !== 200 || response.body === null) {
    await response.body?.cancel().catch(() => undefined);
    throw new ActionError(
      `IMG_URL ${url} answered ${response.status} ${response.statusText}; it must answer 200 with the image`,
    );
  }
  const length = Number(response.headers.get('content-length') ?? Number.NaN);
  return {
    body: Readable.fromWeb(response.body as ReadableStream<Uint8Array>),
    lengthBytes: Number.isSafeInteger(length) && length >= 0 ? length : undefined,
  };
}

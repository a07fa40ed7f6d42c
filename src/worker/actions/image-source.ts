// Where image2disk reads an image from (and archive2disk its archive). Today an http:// or https:// URL; registered artifacts
// will come here too, so image2disk sees only a stream and its length.
//
// The image is usually served by the node holding the VIP. When that node dies mid-download,
// the connection breaks; the VIP moves to the new leader, which serves the same file. So a
// broken body is resumed with a Range request from the byte it stopped at (when the server
// said it accepts ranges), for a bounded time, instead of failing the attempt and writing the
// image a second time. The SHA-256 covers the whole stream, resumed parts included. The first
// request is tried again the same way when it cannot connect at all.
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ReadableStream } from 'node:stream/web';
import { ActionError } from './action.js';

export interface ImageSource {
  /** The image's bytes as served (before any decompression). */
  readonly body: Readable;
  /** From Content-Length; undefined when the server does not say. */
  readonly lengthBytes: number | undefined;
}

export interface OpenOptions {
  /** Told each time a broken download is resumed, or its first request tried again. */
  readonly onResume?: (message: string) => void;
  /** How long a broken download may take to resume, in all. Default 120 s. */
  readonly resumeWindowMs?: number;
  /** The setting that named the URL, for error messages. Default IMG_URL. */
  readonly urlSetting?: string;
}

/** Opens the image; resolves once the server has answered 200, so nothing is written before. */
export async function openImage(
  url: string,
  signal: AbortSignal,
  options: OpenOptions = {},
): Promise<ImageSource> {
  const setting = options.urlSetting ?? 'IMG_URL';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ActionError(`${setting} ${url} is not a URL; give an http:// or https:// URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ActionError(`${setting} ${url} is not an http:// or https:// URL`);
  }
  const response = await firstResponse(parsed, signal, options);
  if (response.status !== 200 || response.body === null) {
    await response.body?.cancel().catch(() => undefined);
    throw new ActionError(
      `${setting} ${url} answered ${response.status} ${response.statusText}; it must answer 200 with the image`,
    );
  }
  const length = Number(response.headers.get('content-length') ?? Number.NaN);
  const lengthBytes = Number.isSafeInteger(length) && length >= 0 ? length : undefined;
  const first = Readable.fromWeb(response.body as ReadableStream<Uint8Array>);
  const resumable = response.headers.get('accept-ranges') === 'bytes' && lengthBytes !== undefined;
  return {
    body: resumable ? Readable.from(resumingBody(parsed, first, lengthBytes, signal, options)) : first,
    lengthBytes,
  };
}

const resumeDelayMinMs = 250;
const resumeDelayMaxMs = 4000;

/** Answers that say the server is between owners (a balancer or a node still starting). */
const retriedStatuses = new Set([502, 503, 504]);

/**
 * The first answer for the image. A connection that fails or a 502/503/504 is tried again, with
 * the backoff and within the window a broken download has: the VIP may be moving between nodes
 * just as the download starts (the node that held it killed, its address not yet answered by the
 * new leader). Anything else is the answer.
 */
async function firstResponse(url: URL, signal: AbortSignal, options: OpenOptions): Promise<Response> {
  const deadline = Date.now() + (options.resumeWindowMs ?? 120_000);
  for (let tries = 0; ; tries++) {
    let why: string;
    try {
      const response = await fetch(url, { signal, redirect: 'follow' });
      if (!retriedStatuses.has(response.status)) return response;
      await response.body?.cancel().catch(() => undefined);
      why = `${response.status} ${response.statusText}`;
      if (Date.now() > deadline) return response;
    } catch (error) {
      if (signal.aborted) throw error;
      why = error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error);
      if (Date.now() > deadline)
        throw new ActionError(`cannot fetch ${options.urlSetting ?? 'IMG_URL'} ${url.href}: ${why}`);
    }
    options.onResume?.(`fetching the image failed (${why}); trying again`);
    await sleep(Math.min(resumeDelayMaxMs, resumeDelayMinMs * 2 ** Math.min(tries, 8)), undefined, {
      signal,
    });
  }
}

async function* resumingBody(
  url: URL,
  first: Readable,
  total: number,
  signal: AbortSignal,
  options: OpenOptions,
): AsyncGenerator<Buffer> {
  let offset = 0;
  let body: Readable = first;
  let deadline: number | undefined;
  for (let tries = 0; ;) {
    try {
      for await (const chunk of body as AsyncIterable<Buffer>) {
        offset += chunk.length;
        deadline = undefined;
        tries = 0;
        yield chunk;
      }
      if (offset === total) return;
      throw new Error(`the server ended the body at byte ${offset} of ${total}`);
    } catch (error) {
      body.destroy();
      if (signal.aborted) throw error;
      deadline ??= Date.now() + (options.resumeWindowMs ?? 120_000);
      const reason = error instanceof Error ? error.message : String(error);
      for (;;) {
        if (Date.now() > deadline) {
          throw new ActionError(
            `the download of ${url.href} broke at byte ${offset} of ${total} and could not be resumed: ${reason}`,
          );
        }
        await sleep(Math.min(resumeDelayMaxMs, resumeDelayMinMs * 2 ** Math.min(tries++, 8)), undefined, {
          signal,
        });
        const resumed = await resumeAt(url, offset, total, signal).catch((e: unknown) => {
          if (signal.aborted) throw e;
          return e instanceof Error ? e.message : String(e);
        });
        if (typeof resumed === 'string') continue;
        options.onResume?.(`the download broke at byte ${offset} (${reason}); resumed from there`);
        body = resumed;
        break;
      }
    }
  }
}

/** A Range request for the rest of the image: the body from `offset`, or why not. */
async function resumeAt(url: URL, offset: number, total: number, signal: AbortSignal): Promise<Readable> {
  const response = await fetch(url, { signal, redirect: 'follow', headers: { range: `bytes=${offset}-` } });
  const range = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(response.headers.get('content-range') ?? '');
  if (
    response.status !== 206 ||
    response.body === null ||
    range === null ||
    Number(range[1]) !== offset ||
    Number(range[3]) !== total
  ) {
    await response.body?.cancel().catch(() => undefined);
    throw new Error(
      `the server answered ${response.status} to a range request for bytes ${offset}- of ${total}`,
    );
  }
  return Readable.fromWeb(response.body as ReadableStream<Uint8Array>);
}

// Streams a byte range of an open file to an HTTP response, and owns the handle from then on:
// whatever happens to the response, the handle is closed.
import type { FileHandle } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';

/**
 * Streams [start, end] of the file to the response; resolves once the response has closed, and
 * the handle is closed by then or soon after (the read stream closes it as it ends). A client
 * that went away while the file was being opened has already closed its response, which will
 * not say so again: the handle is closed at once, not left to the garbage collector (under a
 * boot storm, clients that time out leak a descriptor each that way).
 */
export async function pipeFile(
  handle: FileHandle,
  response: ServerResponse,
  start: number,
  end: number,
): Promise<void> {
  if (response.destroyed) {
    await handle.close();
    return;
  }
  await new Promise<void>((resolve, reject) => {
    const stream = handle.createReadStream({ start, end, autoClose: true });
    stream.on('error', (error) => {
      response.destroy(error);
      reject(error);
    });
    response.on('close', () => {
      stream.destroy();
      resolve();
    });
    stream.pipe(response);
  });
}

// A rename (or a new file) is durable only once its directory's entry is on disk: fsync the
// directory itself after fsyncing the file.
import { open } from 'node:fs/promises';

export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

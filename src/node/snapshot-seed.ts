// `slipway snapshot restore`, offline (docs/decisions/0021): checks a snapshot file
// (src/wire/snapshot-file.ts) down to whether its state loads, and seeds a new member's data
// directory from it. The CLI loads this module only for a restore: it opens the raft log store
// and the state machine, which no client command needs.
import { readdirSync, readFileSync } from 'node:fs';
import { syncDirectory } from '../platform/sync-directory.js';
import type { Member, SnapshotMeta } from '../raft/core/types.js';
import { openLogStore } from '../raft/storage/level-log-store.js';
import { ReplicatedState } from '../state/replicated-state.js';
import { parseSnapshotFile, SnapshotFileError, type SnapshotFile } from '../wire/snapshot-file.js';

export { SnapshotFileError };

/** Reads and checks a snapshot file: magic, header, length, checksum, and that the state decodes. */
export function readSnapshotFile(path: string): SnapshotFile {
  let raw: Buffer;
  try {
    raw = readFileSync(path);
  } catch (err) {
    throw new SnapshotFileError(`cannot read ${path}: ${(err as Error).message}`);
  }
  const file = parseSnapshotFile(path, raw);
  try {
    new ReplicatedState().restore(file.data);
  } catch (err) {
    throw new SnapshotFileError(`${path}: the state does not load: ${(err as Error).message}`);
  }
  return file;
}

/**
 * Seeds `dataDir` from a snapshot so that `slipway server --data-dir DIR --id ID` starts from
 * it as a member of a new cluster of `voters`: a raft log whose snapshot is the file's state at
 * its index and term, with the new membership, and that index committed. The directory must be
 * new or empty.
 */
export async function seedDataDir(
  dataDir: string,
  file: SnapshotFile,
  voters: readonly Member[],
): Promise<SnapshotMeta> {
  let entries: string[] = [];
  try {
    entries = readdirSync(dataDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new SnapshotFileError(`cannot read the data directory ${dataDir}: ${(err as Error).message}`);
    }
  }
  if (entries.length > 0) {
    throw new SnapshotFileError(
      `the data directory ${dataDir} is not empty; restore seeds a new member only (move it aside first)`,
    );
  }
  const meta: SnapshotMeta = {
    index: file.header.index,
    term: file.header.term,
    membership: { voters: [...voters], learners: [] },
  };
  const store = await openLogStore(dataDir);
  try {
    await store.load();
    await store.save({
      hardState: { term: meta.term, vote: '', commit: meta.index },
      entries: [],
      snapshot: { meta, data: file.data },
    });
  } finally {
    await store.close();
  }
  await syncDirectory(dataDir);
  return meta;
}

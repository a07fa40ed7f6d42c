// The LogStore contract (src/raft/storage/log-store.ts) over a SimDisk, for the real RaftNode
// under simulation: every write takes the disk's simulated time and resolves only once durable;
// a crash of the process loses what was not written yet (and may tear the write in progress),
// and the promises of the dead incarnation never settle, as in a killed process.
import type { LoadedState, LogStore, SaveBatch, Snapshot } from '../../src/raft/storage/log-store.js';
import type { SimDisk } from './disk.js';
import type { SimProcess } from './sim-process.js';

/** Deliberate defects, for the tests that prove the checks can fail. Never set in normal runs. */
export type StoreBug =
  /** save() resolves before the write is durable. */
  'ackBeforePersist';

export class SimLogStore implements LogStore {
  private readonly disk: SimDisk;
  private readonly proc: SimProcess;

  private readonly bug: StoreBug | undefined;

  constructor(disk: SimDisk, proc: SimProcess, bug?: StoreBug) {
    this.disk = disk;
    this.proc = proc;
    this.bug = bug;
  }

  load(): Promise<LoadedState> {
    const { initial, snapshotData } = this.disk.load();
    const state: LoadedState = {
      ...initial,
      snapshotData: initial.snapshot.index > 0 ? snapshotData : null,
      truncatedTornTailAt: null,
    };
    return new Promise((resolve) => this.proc.clock.defer(() => resolve(state)));
  }

  save(batch: SaveBatch): Promise<void> {
    return new Promise((resolve) => {
      this.disk.write(
        { kind: 'batch', hardState: batch.hardState, entries: batch.entries, snapshot: batch.snapshot },
        this.proc.guard(resolve),
      );
      if (this.bug === 'ackBeforePersist') resolve();
    });
  }

  saveLocalSnapshot(snapshot: Snapshot, compactTo: number): Promise<void> {
    return new Promise((resolve) => {
      this.disk.write({ kind: 'localSnapshot', snapshot, compactTo }, this.proc.guard(resolve));
    });
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

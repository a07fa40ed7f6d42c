// The contract between the raft node's apply loop and whatever state it replicates.
// Invariant 2 (deterministic apply) lives here: every replica applies the same committed
// entries in the same order and must end in byte-identical state.

export interface StateMachine {
  /**
   * Applies the committed entry at `index` and returns the encoded result for the proposer.
   *
   * Ordering: indexes are strictly increasing (gaps are allowed: raft's own no-op and
   * configuration entries never reach the machine). An index at or below `appliedIndex` is a
   * programmer error and throws.
   *
   * Determinism: the result and the new state depend only on the prior state, `index` and
   * `command`. No clock, randomness or I/O; time comes only from the leader-stamped field
   * inside the command.
   *
   * Bad input: malformed or invalid command bytes produce an encoded error result and change
   * nothing except `appliedIndex`. Throwing is for what the machine cannot apply the way every
   * other replica does (an entry from a newer build, a programmer error): it then changes
   * nothing, and the node stops applying rather than diverge.
   *
   * Ownership: the machine copies what it keeps from `command`; the caller may reuse the buffer.
   */
  apply(index: number, command: Uint8Array): Uint8Array;

  /** The whole state, including `appliedIndex`, in a self-checking encoding. */
  snapshot(): Uint8Array;

  /**
   * Optional: the state as of now, cheaply, to be encoded later in slices while apply goes on.
   * `encode` gives the bytes snapshot() would have given at the capture; it awaits `pause`
   * between slices so that a large state does not stall the event loop.
   */
  captureSnapshot?(): SnapshotCapture;

  /**
   * Replaces the whole state with a snapshot's. Corrupted or invalid data throws an error that
   * says what is wrong and leaves the current state untouched. After restore, applying the same
   * entries as the snapshot's source yields byte-identical snapshots.
   */
  restore(data: Uint8Array): void;

  /**
   * Optional: restore() in slices, awaiting `pause` between them, so that a large snapshot does
   * not stall the event loop. Same outcome and errors as restore(); the state is replaced at the
   * end, in one step, and the caller applies nothing until the promise settles.
   */
  restoreInSlices?(data: Uint8Array, pause: () => Promise<void>): Promise<void>;

  /** The index of the last entry applied (or restored from a snapshot); 0 when empty. */
  readonly appliedIndex: number;
}

/** A state captured at `appliedIndex`, not yet encoded. */
export interface SnapshotCapture {
  readonly appliedIndex: number;
  encode(pause: () => Promise<void>): Promise<Uint8Array>;
}

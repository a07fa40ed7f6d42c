// Long encodings written as generators that yield between slices of work, so one code path
// serves both a snapshot taken at once (tests, restore checks) and one taken in slices between
// which the event loop runs (the raft node's periodic snapshots, where a multi-megabyte encoding
// in one go would stall heartbeats and requests for tens of milliseconds).

/** A computation that yields (nothing) wherever it may be paused, and returns T at the end. */
export type Sliced<T> = Generator<void, T, void>;

/** Runs a sliced computation to its end without pausing. */
export function runAtOnce<T>(work: Sliced<T>): T {
  for (;;) {
    const step = work.next();
    if (step.done === true) return step.value;
  }
}

/** Runs a sliced computation, awaiting `pause` at every slice boundary. */
export async function runInSlices<T>(work: Sliced<T>, pause: () => Promise<void>): Promise<T> {
  for (;;) {
    const step = work.next();
    if (step.done === true) return step.value;
    await pause();
  }
}

/** Counts units of work and says when a slice is full. */
export class SliceBudget {
  readonly #unitsPerSlice: number;
  #used = 0;

  constructor(unitsPerSlice: number) {
    this.#unitsPerSlice = unitsPerSlice;
  }

  /** Spends `units`; true when the slice is full (the budget starts over). */
  spend(units = 1): boolean {
    this.#used += units;
    if (this.#used < this.#unitsPerSlice) return false;
    this.#used = 0;
    return true;
  }
}

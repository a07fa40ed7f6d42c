// The state digest of Status: the SHA-256 of the state machine's snapshot encoding. An encoding
// costs a pass over the whole state, so a node runs at most one at a time, concurrent asks at one
// applied index share it, and later asks reuse its result until the index moves. The state at
// an applied index is fixed (invariant 2: deterministic apply), so a kept digest is never stale
// for its index.
import { createHash } from 'node:crypto';
import type { ReplicatedState } from '../state/replicated-state.js';

/** What a digest is taken of: the store (a seam for unit tests). */
export type DigestSource = Pick<ReplicatedState, 'appliedIndex' | 'captureSnapshot'>;

/** A digest, with what the caller took in the turn the state was captured at. */
export interface Digested<T> {
  readonly taken: T;
  readonly digest: string;
}

interface Computation {
  readonly applied: number;
  readonly digest: Promise<string>;
  settled: boolean;
}

export class StateDigests {
  readonly #source: DigestSource;
  /** Lets timers and I/O run between slices of an encoding. */
  readonly #pause: () => Promise<void>;
  #last: Computation | undefined;
  #computations = 0;

  constructor(source: DigestSource, pause: () => Promise<void>) {
    this.#source = source;
    this.#pause = pause;
  }

  /** How many encodings this node started: one per applied index that was asked about. */
  get computations(): number {
    return this.#computations;
  }

  /**
   * The digest of the state as it is when `take` runs: `take` is called in the same turn of the
   * event loop as the state the digest covers is captured (or found already digested), so what
   * it reads (the applied index, say) matches the digest.
   */
  async current<T>(take: () => T): Promise<Digested<T>> {
    for (;;) {
      const last = this.#last;
      const applied = this.#source.appliedIndex;
      if (last !== undefined && last.applied === applied) {
        const taken = take();
        return { taken, digest: await last.digest };
      }
      if (last !== undefined && !last.settled) {
        // An encoding of an older index is running: wait for it rather than run two at once,
        // then look again (the index will have moved on, and the asks waiting here share one).
        await last.digest.catch(() => undefined);
        continue;
      }
      const taken = take();
      return { taken, digest: await this.#start(applied).digest };
    }
  }

  #start(applied: number): Computation {
    this.#computations++;
    const capture = this.#source.captureSnapshot();
    const computation: Computation = {
      applied,
      settled: false,
      digest: capture.encode(this.#pause).then((bytes) => createHash('sha256').update(bytes).digest('hex')),
    };
    const settle = (): void => {
      computation.settled = true;
    };
    computation.digest.then(settle, () => {
      settle();
      // A failed encoding is not kept: the next ask tries again.
      if (this.#last === computation) this.#last = undefined;
    });
    this.#last = computation;
    return computation;
  }
}

// Runs CPU-heavy request work (rendering a workflow's template: a few ms each) one job per turn
// of the event loop. Requests that become ready together (a burst of creates whose reads were
// confirmed by the same heartbeat) would otherwise run back to back in one microtask checkpoint,
// and a burst of 32 holds off every timer, stream and raft message for ~100 ms. setImmediate
// callbacks queued during the check phase wait for the next loop iteration, after I/O is polled.

export class TurnQueue {
  readonly #jobs: (() => void)[] = [];
  #scheduled = false;

  /** Runs `work` in a later turn of the event loop, after the jobs queued before it. */
  run<T>(work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#jobs.push(() => {
        try {
          resolve(work());
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
      this.#schedule();
    });
  }

  /** Jobs waiting for their turn. */
  get pending(): number {
    return this.#jobs.length;
  }

  #schedule(): void {
    if (this.#scheduled || this.#jobs.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#jobs.shift()?.();
      this.#schedule();
    });
  }
}

// The terms of a contiguous span of log indices, kept as one run per term change. The store
// uses it to check a write against the log's terms (a snapshot's (index, term) match, terms
// never decreasing) without reading the disk; it stays tiny because terms change rarely.
// Pure: no I/O.

export class TermRuns {
  /** starts[k] is the first index of the k-th run, whose entries all have terms[k]. */
  readonly #starts: number[] = [];
  readonly #terms: number[] = [];
  /** The last index covered; the span is [starts[0], last] when starts is non-empty. */
  #last = 0;

  get first(): number | undefined {
    return this.#starts[0];
  }

  get last(): number | undefined {
    return this.#starts.length === 0 ? undefined : this.#last;
  }

  /** The term at `index`, or undefined when the index is outside the span. */
  termAt(index: number): number | undefined {
    const starts = this.#starts;
    if (starts.length === 0 || index < starts[0]! || index > this.#last) return undefined;
    // Lookups cluster near the end of the log, so scan backwards.
    let k = starts.length - 1;
    while (starts[k]! > index) k--;
    return this.#terms[k];
  }

  /** Extends the span by one index; it must directly follow the span (or start an empty one). */
  append(index: number, term: number): void {
    const n = this.#starts.length;
    if (n > 0 && index !== this.#last + 1) {
      throw new RangeError(`term runs end at ${this.#last}; cannot append index ${index}`);
    }
    if (n === 0 || this.#terms[n - 1] !== term) {
      this.#starts.push(index);
      this.#terms.push(term);
    }
    this.#last = index;
  }

  /** Forgets every index >= `index`. */
  truncateFrom(index: number): void {
    const starts = this.#starts;
    while (starts.length > 0 && starts[starts.length - 1]! >= index) {
      starts.pop();
      this.#terms.pop();
    }
    if (starts.length > 0 && this.#last >= index) this.#last = index - 1;
  }

  /** Forgets every index <= `index`. */
  dropThrough(index: number): void {
    if (this.#starts.length === 0) return;
    if (index >= this.#last) {
      this.clear();
      return;
    }
    let drop = 0;
    while (drop + 1 < this.#starts.length && this.#starts[drop + 1]! <= index + 1) drop++;
    this.#starts.splice(0, drop);
    this.#terms.splice(0, drop);
    if (this.#starts[0]! <= index) this.#starts[0] = index + 1;
  }

  clear(): void {
    this.#starts.length = 0;
    this.#terms.length = 0;
    this.#last = 0;
  }
}

// The keys of one namespace in sorted order, for range queries and canonical snapshots.
// A list of sorted chunks (the "sorted list" layout): a lookup is a binary search over chunk
// ends then within a chunk, and an insert or delete moves at most one chunk's elements. With
// chunks of a few hundred keys this is O(log n) comparisons plus a short memmove, and stays
// fast at a million keys without the pointer-chasing of a balanced tree.
//
// Order is JavaScript string order (UTF-16 code units). Any total order would do; it only has
// to be the same on every replica.

const chunkLengthMax = 512;
/** A chunk shorter than this merges into a neighbour, so deletes cannot leave many tiny chunks. */
const chunkLengthMin = chunkLengthMax / 4;

export class SortedKeys {
  #chunks: string[][] = [];
  #size = 0;

  /** Builds from keys already in strictly ascending order (as a snapshot stores them). */
  static fromSorted(keys: readonly string[]): SortedKeys {
    const set = new SortedKeys();
    for (let i = 1; i < keys.length; i++) {
      if (!(keys[i - 1]! < keys[i]!))
        throw new RangeError(`keys are not strictly ascending at position ${i}`);
    }
    for (let i = 0; i < keys.length; i += chunkLengthMax / 2) {
      set.#chunks.push(keys.slice(i, i + chunkLengthMax / 2));
    }
    set.#size = keys.length;
    return set;
  }

  get size(): number {
    return this.#size;
  }

  /** Adds the key; false when it was already present. */
  add(key: string): boolean {
    if (this.#chunks.length === 0) {
      this.#chunks.push([key]);
      this.#size = 1;
      return true;
    }
    // Past the last chunk's end: append to the last chunk.
    const c = Math.min(this.#chunkFor(key), this.#chunks.length - 1);
    const chunk = this.#chunks[c]!;
    const i = lowerBound(chunk, key);
    if (chunk[i] === key) return false;
    chunk.splice(i, 0, key);
    this.#size++;
    if (chunk.length > chunkLengthMax) this.#chunks.splice(c + 1, 0, chunk.splice(chunkLengthMax / 2));
    return true;
  }

  /** Removes the key; false when it was absent. */
  delete(key: string): boolean {
    const c = this.#chunkFor(key);
    const chunk = this.#chunks[c];
    if (chunk === undefined) return false;
    const i = lowerBound(chunk, key);
    if (chunk[i] !== key) return false;
    chunk.splice(i, 1);
    this.#size--;
    if (chunk.length === 0) this.#chunks.splice(c, 1);
    else if (chunk.length < chunkLengthMin) this.#mergeSmall(c);
    return true;
  }

  /** Keys >= start, ascending. The set must not change while iterating. */
  *from(start: string): Generator<string, void, undefined> {
    let c = this.#chunkFor(start);
    const first = this.#chunks[c];
    if (first === undefined) return;
    for (let i = lowerBound(first, start); i < first.length; i++) yield first[i]!;
    for (c++; c < this.#chunks.length; c++) yield* this.#chunks[c]!;
  }

  /** All keys, ascending. */
  *[Symbol.iterator](): Generator<string, void, undefined> {
    for (const chunk of this.#chunks) yield* chunk;
  }

  /** The first chunk whose last key is >= key; chunks.length when key is past every chunk. */
  #chunkFor(key: string): number {
    let lo = 0;
    let hi = this.#chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const chunk = this.#chunks[mid]!;
      if (chunk[chunk.length - 1]! < key) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  #mergeSmall(c: number): void {
    const chunk = this.#chunks[c]!;
    const next = this.#chunks[c + 1];
    if (next !== undefined && chunk.length + next.length <= chunkLengthMax) {
      chunk.push(...next);
      this.#chunks.splice(c + 1, 1);
      return;
    }
    const before = this.#chunks[c - 1];
    if (before !== undefined && before.length + chunk.length <= chunkLengthMax) {
      before.push(...chunk);
      this.#chunks.splice(c, 1);
    }
  }
}

/** The first position in the sorted array whose element is >= key. */
function lowerBound(sorted: readonly string[], key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

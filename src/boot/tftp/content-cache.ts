// A small LRU cache of whole file contents, bounded by total bytes. Boot storms fetch the same
// few iPXE binaries (< 2 MB each) from hundreds of machines; reading them once saves the disk
// and the event loop. Entries carry a version (inode, size, mtime) so a replaced file is never
// served stale.

export interface CachedContent {
  readonly version: string;
  readonly content: Uint8Array;
}

export class ContentCache {
  readonly #bytesMax: number;
  // A Map iterates in insertion order; re-inserting on every hit keeps the oldest entry first.
  readonly #entries = new Map<string, CachedContent>();
  #bytes = 0;

  constructor(bytesMax: number) {
    this.#bytesMax = bytesMax;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The content cached under key if its version still matches; marks it most recently used. */
  get(key: string, version: string): Uint8Array | null {
    const entry = this.#entries.get(key);
    if (entry === undefined) return null;
    this.#entries.delete(key);
    if (entry.version !== version) {
      this.#bytes -= entry.content.length;
      return null;
    }
    this.#entries.set(key, entry);
    return entry.content;
  }

  /** Stores content, evicting least recently used entries; content larger than the whole budget is not kept. */
  set(key: string, version: string, content: Uint8Array): void {
    const previous = this.#entries.get(key);
    if (previous !== undefined) {
      this.#entries.delete(key);
      this.#bytes -= previous.content.length;
    }
    if (content.length > this.#bytesMax) return;
    while (this.#bytes + content.length > this.#bytesMax) {
      const oldest = this.#entries.entries().next();
      if (oldest.done === true) break;
      const [oldestKey, oldestEntry] = oldest.value;
      this.#entries.delete(oldestKey);
      this.#bytes -= oldestEntry.content.length;
    }
    this.#entries.set(key, { version, content });
    this.#bytes += content.length;
  }
}

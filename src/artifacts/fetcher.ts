// Fetches artifact content this node lacks from its peers, by digest, in ranges. A node learns
// that it needs a digest when an artifact.put is applied or at start; the fetcher asks the other
// nodes for the content a chunk at a time, writes it through the content store (which verifies
// size and SHA-256 before anything is stored under the digest), and:
//
//   - a peer that fails mid-way (unreachable, NOT_FOUND, a short or long answer) is left and
//     the next one is asked from the same offset, so a large file survives a node going away;
//   - content that does not match its digest (a corrupted chunk, a peer with a bad disk) is
//     thrown away whole and the fetch starts over with the next peer first;
//   - when no peer gives a verified copy the digest is reported missing with every peer's
//     reason, logged as an error, and tried again behind a growing pause while it is wanted.
//
// At most `concurrency` digests are fetched at once. The state of each wanted digest is
// present, fetching (the first attempt is under way) or missing (with why); a retry in the
// background leaves it missing until it succeeds, so readers are never kept waiting on a digest
// that no node has.
import type { Logger } from 'pino';
import { ContentMismatchError, type ContentStore } from './content-store.js';

/** Another node that may hold content. */
export interface ArtifactPeer {
  readonly id: string;
  readonly addr: string;
}

/** How the fetcher reaches other nodes (src/artifacts/peer-client.ts over gRPC; fakes in tests). */
export interface PeerReader {
  /** The other nodes, in the order to ask them. */
  peers(): readonly ArtifactPeer[];
  /** Up to `length` bytes of the content at `offset`; throws when the peer cannot answer. */
  read(peer: ArtifactPeer, sha256: string, offset: number, length: number): Promise<Uint8Array>;
}

export type ContentState =
  | { readonly kind: 'present' }
  | { readonly kind: 'fetching' }
  | { readonly kind: 'missing'; readonly error: string };

export interface ArtifactFetcherOptions {
  readonly store: ContentStore;
  readonly peers: PeerReader;
  readonly logger: Logger;
  /** Digests fetched at once. Default 2. */
  readonly concurrency?: number;
  /** Bytes asked of a peer per call. Default 1 MiB. */
  readonly chunkBytes?: number;
  /** Pause before the first retry of a missing digest, doubling to retryMsMax. */
  readonly retryMsMin?: number;
  readonly retryMsMax?: number;
}

export const fetchChunkBytes = 1 << 20;

interface Wanted {
  readonly bytes: number;
  state: ContentState;
  /** Called whenever state changes. */
  readonly waiters: Set<() => void>;
  retryMs: number;
  timer: NodeJS.Timeout | undefined;
  queued: boolean;
}

const presentState: ContentState = Object.freeze({ kind: 'present' });
const fetchingState: ContentState = Object.freeze({ kind: 'fetching' });

export class ArtifactFetcher {
  readonly #store: ContentStore;
  readonly #peers: PeerReader;
  readonly #logger: Logger;
  readonly #concurrency: number;
  readonly #chunkBytes: number;
  readonly #retryMsMin: number;
  readonly #retryMsMax: number;
  readonly #wanted = new Map<string, Wanted>();
  readonly #queue: string[] = [];
  #running = 0;
  #stopped = false;

  constructor(options: ArtifactFetcherOptions) {
    this.#store = options.store;
    this.#peers = options.peers;
    this.#logger = options.logger;
    this.#concurrency = options.concurrency ?? 2;
    this.#chunkBytes = options.chunkBytes ?? fetchChunkBytes;
    this.#retryMsMin = options.retryMsMin ?? 1000;
    this.#retryMsMax = options.retryMsMax ?? 30_000;
  }

  /** Makes sure the content of `sha256` (`bytes` long) is here, fetching it when it is not. */
  ensure(sha256: string, bytes: number): void {
    if (this.#stopped || this.#wanted.has(sha256)) return;
    const wanted: Wanted = {
      bytes,
      state: fetchingState,
      waiters: new Set(),
      retryMs: this.#retryMsMin,
      timer: undefined,
      queued: false,
    };
    this.#wanted.set(sha256, wanted);
    this.#enqueue(sha256, wanted);
  }

  /** No registered artifact needs `sha256` any more: stop retrying it (its file stays). */
  forget(sha256: string): void {
    const wanted = this.#wanted.get(sha256);
    if (wanted === undefined) return;
    clearTimeout(wanted.timer);
    this.#wanted.delete(sha256);
    for (const wake of wanted.waiters) wake();
  }

  /** The digests wanted now. */
  wantedDigests(): string[] {
    return [...this.#wanted.keys()];
  }

  /** Where a wanted digest stands; undefined when it is not wanted. */
  state(sha256: string): ContentState | undefined {
    return this.#wanted.get(sha256)?.state;
  }

  /**
   * The digest's state once it is no longer being fetched for the first time, or `fetching`
   * after `timeoutMs`. Undefined when the digest is not (or no longer) wanted.
   */
  settled(sha256: string, timeoutMs: number): Promise<ContentState | undefined> {
    const wanted = this.#wanted.get(sha256);
    if (wanted === undefined || wanted.state.kind !== 'fetching') return Promise.resolve(wanted?.state);
    return new Promise((resolve) => {
      const done = (): void => {
        const now = this.#wanted.get(sha256);
        if (now !== undefined && now.state.kind === 'fetching' && !this.#stopped) return;
        clearTimeout(timer);
        wanted.waiters.delete(done);
        resolve(now?.state);
      };
      const timer = setTimeout(() => {
        wanted.waiters.delete(done);
        resolve(this.#wanted.get(sha256)?.state);
      }, timeoutMs);
      wanted.waiters.add(done);
    });
  }

  stop(): void {
    this.#stopped = true;
    for (const wanted of this.#wanted.values()) {
      clearTimeout(wanted.timer);
      for (const wake of wanted.waiters) wake();
    }
    this.#queue.length = 0;
  }

  #enqueue(sha256: string, wanted: Wanted): void {
    if (wanted.queued || this.#stopped) return;
    wanted.queued = true;
    this.#queue.push(sha256);
    this.#pump();
  }

  #pump(): void {
    while (this.#running < this.#concurrency && this.#queue.length > 0) {
      const sha256 = this.#queue.shift();
      const wanted = sha256 === undefined ? undefined : this.#wanted.get(sha256);
      if (sha256 === undefined || wanted === undefined) continue;
      wanted.queued = false;
      this.#running += 1;
      void this.#run(sha256, wanted).finally(() => {
        this.#running -= 1;
        this.#pump();
      });
    }
  }

  async #run(sha256: string, wanted: Wanted): Promise<void> {
    const started = Date.now();
    let outcome: { ok: true; from: readonly string[] } | { ok: false; error: string };
    try {
      outcome = { ok: true, from: await this.#obtain(sha256, wanted.bytes) };
    } catch (err) {
      outcome = { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    if (this.#wanted.get(sha256) !== wanted || this.#stopped) return;
    if (outcome.ok) {
      if (outcome.from.length > 0) {
        this.#logger.info(
          { sha256, bytes: wanted.bytes, from: outcome.from, ms: Date.now() - started },
          'artifact content fetched from peers and verified',
        );
      }
      this.#set(wanted, presentState);
      return;
    }
    this.#logger.error(
      { sha256, bytes: wanted.bytes, retryInMs: wanted.retryMs, err: outcome.error },
      'artifact content is missing on this node; it will not be served until a peer has a verified copy',
    );
    this.#set(wanted, { kind: 'missing', error: outcome.error });
    wanted.timer = setTimeout(() => {
      wanted.timer = undefined;
      this.#enqueue(sha256, wanted);
    }, wanted.retryMs);
    wanted.timer.unref();
    wanted.retryMs = Math.min(wanted.retryMs * 2, this.#retryMsMax);
  }

  #set(wanted: Wanted, state: ContentState): void {
    wanted.state = state;
    for (const wake of [...wanted.waiters]) wake();
  }

  /**
   * Gets a verified copy into the store; resolves with the peers that supplied it (none when it
   * was here already). Throws an Error naming every peer's problem when none could.
   */
  async #obtain(sha256: string, bytes: number): Promise<readonly string[]> {
    if (await this.#store.has(sha256, bytes)) return [];
    const peers = this.#peers.peers();
    if (peers.length === 0) throw new Error(`no other node to fetch sha256 ${sha256} from`);
    const problems: string[] = [];
    // Each round starts with the next peer, so a peer whose content does not verify is not the
    // first one asked again; within a round a failing peer hands over to the next at the offset.
    for (let first = 0; first < peers.length; first++) {
      const writer = await this.#store.writer(sha256, bytes);
      const used: string[] = [];
      let asked = 0;
      while (writer.written < bytes && asked < peers.length) {
        const peer = peers[(first + asked) % peers.length];
        asked += 1;
        if (peer === undefined) continue;
        try {
          while (writer.written < bytes) {
            if (this.#stopped) throw new Error('the node is stopping');
            const want = Math.min(this.#chunkBytes, bytes - writer.written);
            const data = await this.#peers.read(peer, sha256, writer.written, want);
            if (data.length === 0 || data.length > want) {
              throw new Error(`answered ${data.length} bytes at offset ${writer.written} for ${want} asked`);
            }
            if (!used.includes(peer.id)) used.push(peer.id);
            await writer.write(data);
          }
        } catch (err) {
          problems.push(`${peer.id}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
      if (writer.written < bytes) {
        // Every peer failed somewhere in this round: another round would ask the same ones.
        await writer.abort();
        break;
      }
      try {
        await writer.finish();
        return used;
      } catch (err) {
        if (!(err instanceof ContentMismatchError)) throw err;
        problems.push(`content from ${used.join(', ')} did not verify: ${err.message}`);
      }
    }
    throw new Error(`no peer has a verified copy of sha256 ${sha256} (${problems.join('; ')})`);
  }
}

// This node's view of the registered artifacts: which digests the replicated state names (and
// so which the fetcher must hold here), and what the HTTP boot server may serve for a name.
// Fed by ControlState's artifact and restore changes; sync() is cheap (a pass over at most
// artifactsMax records), so every change simply re-derives the wanted set.
import type { Artifact } from '../model/records.js';
import type { RegisteredArtifacts, RegisteredContent } from '../boot/http/server.js';
import type { ContentStore } from './content-store.js';
import type { ArtifactFetcher, ContentState } from './fetcher.js';

/** What the catalogue reads of the replicated state. */
export interface ArtifactRegistry {
  artifact(name: string): Artifact | undefined;
  artifacts(): Artifact[];
}

/** How soon a client should ask again: while fetching, soon; while missing, a little later. */
const retryAfterFetchingS = 5;
const retryAfterMissingS = 30;

export class ArtifactCatalogue implements RegisteredArtifacts {
  readonly #registry: ArtifactRegistry;
  readonly #fetcher: ArtifactFetcher;
  readonly #store: ContentStore;

  constructor(registry: ArtifactRegistry, fetcher: ArtifactFetcher, store: ContentStore) {
    this.#registry = registry;
    this.#fetcher = fetcher;
    this.#store = store;
  }

  /** Wants every registered digest and drops the ones no artifact names any more. */
  sync(): void {
    const registered = new Set<string>();
    for (const artifact of this.#registry.artifacts()) {
      registered.add(artifact.sha256);
      this.#fetcher.ensure(artifact.sha256, artifact.bytes);
    }
    for (const sha256 of this.#fetcher.wantedDigests()) {
      if (!registered.has(sha256)) this.#fetcher.forget(sha256);
    }
  }

  /** This node's copy of a registered artifact's content. */
  local(artifact: Artifact): ContentState {
    this.#fetcher.ensure(artifact.sha256, artifact.bytes);
    return this.#fetcher.state(artifact.sha256) ?? { kind: 'fetching' };
  }

  async resolve(name: string, waitMs: number): Promise<RegisteredContent | undefined> {
    const artifact = this.#registry.artifact(name);
    if (artifact === undefined) return undefined;
    this.#fetcher.ensure(artifact.sha256, artifact.bytes);
    const state = (await this.#fetcher.settled(artifact.sha256, waitMs)) ?? { kind: 'fetching' };
    switch (state.kind) {
      case 'present':
        return {
          kind: 'file',
          path: this.#store.pathOf(artifact.sha256),
          sha256: artifact.sha256,
          bytes: artifact.bytes,
        };
      case 'fetching':
        return {
          kind: 'unavailable',
          reason: `artifact "${name}" is still being fetched from a peer; retry shortly`,
          retryAfterS: retryAfterFetchingS,
        };
      case 'missing':
        return {
          kind: 'unavailable',
          reason: `artifact "${name}" (sha256 ${artifact.sha256}) is missing on this node: ${state.error}`,
          retryAfterS: retryAfterMissingS,
        };
    }
  }
}

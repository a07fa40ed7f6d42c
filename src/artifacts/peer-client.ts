// The fetcher's way to other nodes: ArtifactRead on their raft address over the Internal
// service, with the node's own certificate when the cluster uses mutual TLS, as forwarded
// proposals do (src/api/proposer.ts). Peers come from the current raft membership.
import { Metadata } from '@grpc/grpc-js';
import { InternalClient } from '../gen/internal.js';
import type { RaftNode } from '../raft/node.js';
import { peerChannelCredentials, type PeerTls } from '../platform/peer-tls.js';
import type { ArtifactPeer, PeerReader } from './fetcher.js';

/** One chunk's call; a peer slower than this is left for the next. */
const readDeadlineMs = 30_000;

export class GrpcPeerReader implements PeerReader {
  readonly #node: RaftNode;
  readonly #tls: PeerTls | undefined;
  readonly #clients = new Map<string, InternalClient>();

  constructor(node: RaftNode, tls: PeerTls | undefined) {
    this.#node = node;
    this.#tls = tls;
  }

  peers(): readonly ArtifactPeer[] {
    const m = this.#node.membership();
    return [...m.voters, ...m.learners]
      .filter((member) => member.id !== this.#node.id)
      .map((member) => ({ id: member.id, addr: member.addr }));
  }

  read(peer: ArtifactPeer, sha256: string, offset: number, length: number): Promise<Uint8Array> {
    return new Promise((resolve, reject) => {
      this.#client(peer.addr).artifactRead(
        { sha256, offset, length },
        new Metadata(),
        { deadline: Date.now() + readDeadlineMs },
        (err, res) => {
          if (err === null) resolve(res.data);
          else reject(new Error(err.details || err.message));
        },
      );
    });
  }

  close(): void {
    for (const client of this.#clients.values()) client.close();
    this.#clients.clear();
  }

  #client(addr: string): InternalClient {
    let client = this.#clients.get(addr);
    if (client === undefined) {
      client = new InternalClient(addr, peerChannelCredentials(this.#tls), {
        'grpc.max_receive_message_length': 4 << 20,
      });
      this.#clients.set(addr, client);
    }
    return client;
  }
}

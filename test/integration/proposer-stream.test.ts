// Goal: a follower forwards its writes to the leader on one long-lived ProposeStream (each
// event-loop turn's writes as one request, answered by id), and still gets them applied by a
// leader of an older version that serves only ProposeBatch and Propose (a rolling upgrade).
// Method: two real Proposers on loopback gRPC servers, each on a stand-in raft node (a fixed
// role and leader, a log that is an array); the old leader is an Internal service without
// ProposeStream, so grpc-js answers it UNIMPLEMENTED as an older build would.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { credentials, Server, ServerCredentials, status } from '@grpc/grpc-js';
import type { ServiceError, UntypedServiceImplementation } from '@grpc/grpc-js';
import pino from 'pino';
import {
  InternalClient,
  InternalService,
  type InternalServer,
  type ProposeStreamResponse,
} from '../../src/gen/internal.js';
import { Proposer, type ProposerNode } from '../../src/api/proposer.js';
import type { Member, SoftState } from '../../src/raft/core/types.js';
import {
  decodeCommand,
  encodeCommand,
  encodeResult,
  type Command,
  type CommandResult,
} from '../../src/state/store-command.js';

const silent = pino({ level: 'silent' });

/** A raft node that never changes role; as leader its log is `proposed`, each put applied at once. */
class StandInNode implements ProposerNode {
  readonly proposed: Command[] = [];
  softStateChanges = 0;
  readonly id: string;
  leader: Member | null;
  constructor(id: string, leader: Member | null) {
    this.id = id;
    this.leader = leader;
  }
  softState(): SoftState {
    return {
      role: this.leader?.id === this.id ? 'leader' : 'follower',
      leader: this.leader?.id ?? '',
      term: 1,
    };
  }
  leaderMember(): Member | null {
    return this.leader;
  }
  softStateChange(): Promise<void> {
    return Promise.resolve();
  }
  propose(command: Uint8Array): Promise<Uint8Array> {
    this.proposed.push(decodeCommand(command));
    return Promise.resolve(encodeResult({ type: 'put', revision: this.proposed.length }));
  }
}

const put = (key: string): Command => ({
  type: 'put',
  ns: 'operator',
  key,
  value: new TextEncoder().encode(key),
  stampMs: 0,
});

/** Serves `impl` as the Internal service on a free loopback port. */
async function serve(impl: UntypedServiceImplementation): Promise<{ addr: string; server: Server }> {
  const server = new Server();
  server.addService(InternalService, impl);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) =>
      err === null ? resolve(p) : reject(err),
    ),
  );
  return { addr: `127.0.0.1:${port}`, server };
}

const servers: Server[] = [];
const proposers: Proposer[] = [];
after(() => {
  for (const p of proposers) p.close();
  for (const s of servers) s.forceShutdown();
});

/** A leader serving `impl` (by default a real Proposer's handlers) and a follower forwarding to it. */
async function pair(
  impl?: (leaderProposer: Proposer) => UntypedServiceImplementation,
): Promise<{ leader: StandInNode; follower: Proposer; server: Server }> {
  const placeholder: Member = { id: 'n1', addr: '', apiAddr: '' };
  const leaderNode = new StandInNode('n1', placeholder);
  const leaderProposer = new Proposer(leaderNode, silent);
  proposers.push(leaderProposer);
  const { addr, server } = await serve(impl === undefined ? leaderProposer.handlers() : impl(leaderProposer));
  servers.push(server);
  const leader: Member = { id: 'n1', addr, apiAddr: '' };
  leaderNode.leader = leader;
  const follower = new Proposer(new StandInNode('n2', leader), silent);
  proposers.push(follower);
  return { leader: leaderNode, follower, server };
}

const revisionOf = (r: CommandResult): number => (r.type === 'put' ? r.revision : -1);

describe('forwarding on a ProposeStream', () => {
  it("sends each turn's writes as one request on one stream, each answered with its own result", async () => {
    const { leader, follower } = await pair();
    const first = await Promise.all(['a', 'b', 'c'].map((k) => follower.propose(put(k))));
    const second = await Promise.all(['d', 'e'].map((k) => follower.propose(put(k))));
    assert.deepEqual(
      [...first, ...second].map(revisionOf).sort((x, y) => x - y),
      [1, 2, 3, 4, 5],
    );
    assert.deepEqual(
      leader.proposed.map((c) => (c.type === 'put' ? c.key : c.type)),
      ['a', 'b', 'c', 'd', 'e'],
    );
    // The leader stamped its clock into each command it proposed.
    assert.ok(leader.proposed.every((c) => c.type === 'put' && c.stampMs > 0));
    assert.deepEqual(follower.forwarding, { commands: 5, calls: 2 });
  });

  it('answers a command that does not decode with INVALID_ARGUMENT, and the others of its request as usual', async () => {
    const placeholder: Member = { id: 'n1', addr: '', apiAddr: '' };
    const leaderProposer = new Proposer(new StandInNode('n1', placeholder), silent);
    proposers.push(leaderProposer);
    const { addr, server } = await serve(leaderProposer.handlers());
    servers.push(server);
    const client = new InternalClient(addr, credentials.createInsecure());
    try {
      const stream = client.proposeStream();
      const answered = new Promise<ProposeStreamResponse>((resolve, reject) => {
        stream.once('data', resolve);
        stream.once('error', reject);
      });
      const garbage = Buffer.from([0xba, 0x84, 0x14]);
      stream.write({ id: 7, commands: [garbage, Buffer.from(encodeCommand(put('ok')))] });
      const res = await answered;
      stream.end();
      assert.equal(res.id, 7);
      assert.deepEqual(
        res.outcomes.map((o) => o.code),
        [status.INVALID_ARGUMENT, status.OK],
      );
      assert.match(res.outcomes[0]?.details ?? '', /^the forwarded command does not decode: /);
    } finally {
      client.close();
    }
  });

  it('falls back to ProposeBatch, then Propose, with a leader that predates the stream', async () => {
    const calls: string[] = [];
    const { leader, follower } = await pair((p) => {
      const h = p.handlers();
      // An older build: no ProposeStream (grpc-js answers UNIMPLEMENTED).
      return {
        propose: (...[call, cb]: Parameters<InternalServer['propose']>) => {
          calls.push('propose');
          h.propose(call, cb);
        },
        proposeBatch: (...[call, cb]: Parameters<InternalServer['proposeBatch']>) => {
          calls.push(`proposeBatch(${call.request.commands.length})`);
          h.proposeBatch(call, cb);
        },
      };
    });
    const results = await Promise.all(['a', 'b'].map((k) => follower.propose(put(k))));
    assert.deepEqual(results.map(revisionOf).sort(), [1, 2]);
    const alone = await follower.propose(put('c'));
    assert.equal(revisionOf(alone), 3);
    assert.deepEqual(calls, ['proposeBatch(2)', 'propose']);
    assert.equal(leader.proposed.length, 3, 'each command was proposed once');
  });

  it('rejects what a leader that goes away had not answered, and opens a new stream for the next write', async () => {
    let streams = 0;
    const { leader, follower } = await pair((p) => {
      const h = p.handlers();
      return {
        ...h,
        proposeStream: (call: Parameters<InternalServer['proposeStream']>[0]) => {
          streams++;
          if (streams > 1) {
            h.proposeStream(call);
            return;
          }
          // The first stream's request is never proposed: the stream is cancelled with it in hand,
          // as when the leader's process stops.
          call.once('data', () => {
            call.emit('cancelled', 'cancelled');
            call.end();
          });
        },
      };
    });
    await assert.rejects(follower.propose(put('lost')), (err: ServiceError) => {
      assert.notEqual(err.code, status.OK);
      assert.match(err.message, /may or may not have been applied/);
      return true;
    });
    assert.equal(leader.proposed.length, 0);
    assert.equal(revisionOf(await follower.propose(put('next'))), 1);
    assert.equal(streams, 2);
  });
});

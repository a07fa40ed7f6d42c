// Goal: a proposal this node made as leader always gets an outcome, also when it loses
// leadership and a snapshot from the new leader then covers the proposal's index (nothing there
// is applied one by one any more), or the new leader's log ends before that index. Left
// waiting, a caller such as the power executor keeps its machine busy for the life of the
// process (the simulation's seed 327 with slow faults). Likewise a read the leader has
// confirmed is released when a snapshot brings this node past the read's index.
// Method: the real RaftNode on a real LevelLogStore in a temp dir; the test plays its two
// peers through a transport that records what the node sends and hands it what they say, on a
// clock the test advances, so the node is elected, deposed and sent a snapshot exactly.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import pino from 'pino';
import type { Clock } from '../../src/platform/clock.js';
import { message, RaftError, type Member, type Message } from '../../src/raft/core/types.js';
import { RaftNode } from '../../src/raft/node.js';
import type { StateMachine } from '../../src/raft/state-machine.js';
import { openLogStore } from '../../src/raft/storage/level-log-store.js';
import type { TransportHandlers, Transport } from '../../src/raft/transport/transport.js';
import { waitFor } from '../support/wait.js';

const members: Member[] = ['n1', 'n2', 'n3'].map((id) => ({ id, addr: `${id}:1`, apiAddr: '' }));
const tickMs = 10;

/** Timers that fire only when the test advances time; deferred work runs on the event loop. */
class StepClock implements Clock {
  #now = 0;
  readonly #timers: { at: number; every: number; fn: () => void; live: boolean }[] = [];
  now(): number {
    return this.#now;
  }
  every(ms: number, fn: () => void): () => void {
    return this.#add(ms, ms, fn);
  }
  after(ms: number, fn: () => void): () => void {
    return this.#add(ms, 0, fn);
  }
  defer(fn: () => void): void {
    setImmediate(fn);
  }
  advance(ms: number): void {
    this.#now += ms;
    for (const t of [...this.#timers]) {
      while (t.live && t.at <= this.#now) {
        if (t.every > 0) t.at += t.every;
        else t.live = false;
        t.fn();
      }
    }
  }
  #add(ms: number, every: number, fn: () => void): () => void {
    const t = { at: this.#now + ms, every, fn, live: true };
    this.#timers.push(t);
    return () => {
      t.live = false;
    };
  }
}

/** The node's peers as the test plays them: what it sent, and a way to answer. */
class PeersByHand implements Transport {
  handlers: TransportHandlers | undefined;
  readonly sent: Message[] = [];
  start(handlers: TransportHandlers): Promise<void> {
    this.handlers = handlers;
    return Promise.resolve();
  }
  setPeers(): void {}
  send(msgs: readonly Message[]): void {
    this.sent.push(...msgs);
  }
  sendSnapshot(): Promise<void> {
    return Promise.resolve();
  }
  takeUnreachable(): string[] {
    return [];
  }
  stop(): Promise<void> {
    return Promise.resolve();
  }
}

/** Counts applied commands; its snapshot is the applied index. */
class Counter implements StateMachine {
  appliedIndex = 0;
  apply(index: number, command: Uint8Array): Uint8Array {
    this.appliedIndex = index;
    return command;
  }
  snapshot(): Uint8Array {
    return new TextEncoder().encode(String(this.appliedIndex));
  }
  restore(data: Uint8Array): void {
    this.appliedIndex = Number(new TextDecoder().decode(data));
  }
}

/** n1 on a real store, its peers played by the test. */
async function startN1(t: TestContext): Promise<{
  node: RaftNode;
  peers: PeersByHand;
  clock: StepClock;
  deliver: (m: Message) => void;
}> {
  const dir = await mkdtemp(join(tmpdir(), 'slipway-raft-snap-proposals-'));
  const store = await openLogStore(dir);
  const clock = new StepClock();
  const peers = new PeersByHand();
  const node = new RaftNode({
    id: 'n1',
    store,
    transport: peers,
    stateMachine: new Counter(),
    logger: pino({ level: 'silent' }),
    bootstrapPeers: members,
    tickMs,
    clock,
    random: { int: () => 0 },
    raft: { electionTicks: 5, heartbeatTicks: 1, preVote: false, checkQuorum: false },
    snapshotEntries: 0,
  });
  t.after(async () => {
    await node.stop();
    await rm(dir, { recursive: true, force: true });
  });
  await node.start();
  const deliver = (m: Message): void => {
    peers.handlers!.onMessage(m);
  };
  return { node, peers, clock, deliver };
}

/** Elects n1 (n2 grants the vote it asks for) and returns its term. */
async function electN1({
  node,
  peers,
  clock,
  deliver,
}: Awaited<ReturnType<typeof startN1>>): Promise<number> {
  await waitFor('n1 to ask for votes', () => {
    clock.advance(tickMs);
    return peers.sent.some((m) => m.type === 'vote');
  });
  const term = peers.sent.find((m) => m.type === 'vote')!.term;
  deliver(message({ type: 'voteResp', from: 'n2', to: 'n1', term }));
  await waitFor('n1 to lead', () => node.softState().role === 'leader');
  return term;
}

/** A proposal no peer acknowledges, the index it went out at, and its outcome once it has one. */
async function proposeUnacknowledged({ node, peers }: Awaited<ReturnType<typeof startN1>>): Promise<{
  proposedAt: number;
  outcome: () => unknown;
}> {
  let settled: unknown;
  void node.propose(new TextEncoder().encode('claim')).then(
    () => (settled = 'applied'),
    (err: unknown) => (settled = err),
  );
  await waitFor('the proposal to be sent', () =>
    peers.sent.some((m) => m.type === 'app' && m.entries.some((e) => e.type === 'normal')),
  );
  const proposedAt = peers.sent
    .flatMap((m) => (m.type === 'app' ? m.entries : []))
    .find((e) => e.type === 'normal')!.index;
  return { proposedAt, outcome: () => settled };
}

async function assertDropped(outcome: () => unknown): Promise<void> {
  await waitFor('the proposal to get an outcome', () => outcome() !== undefined, 2000);
  const settled = outcome();
  assert.ok(settled instanceof RaftError, `the proposal ended with ${String(settled)}`);
  assert.equal(settled.code, 'E_PROPOSAL_DROPPED');
}

test('a proposal a snapshot from the next leader covers is rejected, not left waiting', async (t) => {
  const n1 = await startN1(t);
  const { node, peers, deliver } = n1;
  const term = await electN1(n1);
  const { proposedAt, outcome } = await proposeUnacknowledged(n1);

  // n2 leads a later term and, its log compacted past that index, sends a snapshot.
  deliver(message({ type: 'heartbeat', from: 'n2', to: 'n1', term: term + 1 }));
  await waitFor('n1 to follow n2', () => node.softState().leader === 'n2');
  const meta = {
    index: proposedAt + 5,
    term: term + 1,
    membership: { voters: members, learners: [] },
  };
  await peers.handlers!.onSnapshot('n2', {
    meta,
    data: new TextEncoder().encode(String(meta.index)),
  });
  await waitFor('the snapshot to be installed', () => node.status().appliedToStateMachine === meta.index);
  await assertDropped(outcome);
});

test('a proposal past the end of the log of the next leader is rejected once that leader commits', async (t) => {
  const n1 = await startN1(t);
  const { node, peers, deliver } = n1;
  const term = await electN1(n1);
  const { proposedAt, outcome } = await proposeUnacknowledged(n1);

  // n2 was elected in the next term without n1's no-op: its log ends where n1's leadership
  // began. It writes its own no-op there and commits it; n1's entries after that point are gone,
  // and n2's log, on a quiet cluster, may not reach the proposal's index for a long time.
  const firstAsLeader = peers.sent.find((m) => m.type === 'app')!;
  assert.ok(firstAsLeader.index < proposedAt, 'n1 wrote its no-op before the proposal');
  const n2NoOp = firstAsLeader.index + 1;
  deliver(
    message({
      type: 'app',
      from: 'n2',
      to: 'n1',
      term: term + 1,
      index: firstAsLeader.index,
      logTerm: firstAsLeader.logTerm,
      entries: [{ index: n2NoOp, term: term + 1, type: 'noop', data: new Uint8Array() }],
      commit: n2NoOp,
    }),
  );
  await waitFor('the no-op of n2 to be applied', () => node.status().appliedToStateMachine === n2NoOp);
  assert.ok(proposedAt > n2NoOp, 'the proposal lies past the end of the log of n2');
  await assertDropped(outcome);
});

test('a read the leader confirmed is released when a snapshot takes this node past its index', async (t) => {
  const n1 = await startN1(t);
  const { node, peers, deliver } = n1;
  deliver(message({ type: 'heartbeat', from: 'n2', to: 'n1', term: 2 }));
  // Its answer is sent once the node has taken in the new leader (a read asked before that is
  // refused as asked of the old one).
  await waitFor('n1 to answer n2 as its leader', () => peers.sent.some((m) => m.type === 'heartbeatResp'));

  let released = false;
  void node.linearizableRead().then(() => (released = true));
  await waitFor('the read to be forwarded to n2', () => peers.sent.some((m) => m.type === 'readIndex'));
  const asked = peers.sent.find((m) => m.type === 'readIndex')!;
  const readAt = node.status().appliedToStateMachine + 10;
  deliver(
    message({ type: 'readIndexResp', from: 'n2', to: 'n1', term: 2, index: readAt, context: asked.context }),
  );
  // Confirmed but not yet applied here: the read waits.
  await waitFor('the answer of n2 to be taken in', () => {
    const status = node.status();
    return status.appliedToStateMachine < readAt && !released;
  });

  const meta = { index: readAt + 5, term: 2, membership: { voters: members, learners: [] } };
  await peers.handlers!.onSnapshot('n2', { meta, data: new TextEncoder().encode(String(meta.index)) });
  await waitFor('the snapshot to be installed', () => node.status().appliedToStateMachine === meta.index);
  await waitFor('the read to be released', () => released, 2000);
});

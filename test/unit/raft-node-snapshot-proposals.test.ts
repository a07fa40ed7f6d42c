// Goal: a proposal this node made as leader always gets an outcome, also when it loses
// leadership and a snapshot from the new leader then covers the proposal's index (nothing there
// is applied one by one any more). Left waiting, a caller such as the power executor keeps its
// machine busy for the life of the process (the simulation's seed 327 with slow faults).
// Method: the real RaftNode on a real LevelLogStore in a temp dir; the test plays its two
// peers through a transport that records what the node sends and hands it what they say, on a
// clock the test advances, so the node is elected, deposed and sent a snapshot exactly.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
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

test('a proposal a snapshot from the next leader covers is rejected, not left waiting', async (t) => {
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

  // Elected: n2 grants the vote n1 asks for once its election timeout passes.
  await waitFor('n1 to ask for votes', () => {
    clock.advance(tickMs);
    return peers.sent.some((m) => m.type === 'vote');
  });
  const term = peers.sent.find((m) => m.type === 'vote')!.term;
  deliver(message({ type: 'voteResp', from: 'n2', to: 'n1', term }));
  await waitFor('n1 to lead', () => node.softState().role === 'leader');

  // A proposal that never commits: no peer acknowledges it.
  const outcome = node.propose(new TextEncoder().encode('claim')).then(
    () => 'applied',
    (err: unknown) => err,
  );
  let settled: unknown;
  void outcome.then((o) => (settled = o));
  await waitFor('the proposal to be sent', () =>
    peers.sent.some((m) => m.type === 'app' && m.entries.some((e) => e.type === 'normal')),
  );
  const proposedAt = peers.sent
    .flatMap((m) => (m.type === 'app' ? m.entries : []))
    .find((e) => e.type === 'normal')!.index;

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

  await waitFor('the proposal to get an outcome', () => settled !== undefined, 2000);
  assert.ok(settled instanceof RaftError, `the proposal ended with ${String(settled)}`);
  assert.equal(settled.code, 'E_PROPOSAL_DROPPED');
});

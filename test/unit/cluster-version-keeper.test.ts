// The leader's cluster version keeper (src/node/cluster-version-keeper.ts) on a hand-driven clock:
// a cluster just started is raised on the leader's first round, a fraction of a second after it
// leads (it was every two seconds, so a new cluster refused the newer commands for its first
// seconds); a voter that does not answer holds the version and makes the rounds back off to two
// seconds; a voter whose build is older holds it (past what it supports) with rounds every two
// seconds; the rounds stop with the keeper.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { ClusterVersionKeeper } from '../../src/node/cluster-version-keeper.js';
import type { RaftNode } from '../../src/raft/node.js';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import type { ControlState } from '../../src/state/control/control-state.js';
import { stateVersionOfThisBuild } from '../../src/state/versions.js';
import { HandClock } from '../support/hand-clock.js';

interface Rig {
  readonly clock: HandClock;
  readonly keeper: ClusterVersionKeeper;
  readonly state: { clusterVersion: number };
  role: 'leader' | 'follower';
  /** Each voter's answer: a state version, or undefined for no answer. */
  readonly answers: Map<string, number | undefined>;
  /** When each Status round asked n2. */
  readonly asked: number[];
  /** When the raise was proposed. */
  readonly raisedAt: number[];
}

function rig(answers: Record<string, number | undefined>): Rig {
  const clock = new HandClock();
  const state = { clusterVersion: 1 };
  const r: Rig = {
    clock,
    state,
    role: 'leader',
    answers: new Map(Object.entries(answers)),
    asked: [],
    raisedAt: [],
    keeper: undefined as unknown as ClusterVersionKeeper,
  };
  const node = {
    id: 'n1',
    softState: () => ({ role: r.role }),
    membership: () => ({ voters: [{ id: 'n1' }, ...[...r.answers.keys()].map((id) => ({ id }))] }),
  } as unknown as RaftNode;
  const keeper = new ClusterVersionKeeper({
    node,
    control: state as unknown as ControlState,
    stateVersionOf: (member) => {
      if (member.id === 'n2') r.asked.push(clock.nowMs);
      const v = r.answers.get(member.id);
      return v === undefined ? Promise.reject(new Error('unavailable')) : Promise.resolve(v);
    },
    propose: (command: ControlCommand): Promise<ControlResult> => {
      assert.equal(command.type, 'cluster.version');
      if (command.type !== 'cluster.version') throw new Error('unexpected');
      r.raisedAt.push(clock.nowMs);
      state.clusterVersion = command.version;
      return Promise.resolve({ type: 'clusterVersion', version: command.version });
    },
    logger: pino({ level: 'silent' }),
    clock,
  });
  (r as { keeper: ClusterVersionKeeper }).keeper = keeper;
  return r;
}

describe('the cluster version keeper', () => {
  it('raises a new cluster on its leader’s first round, 200 ms after it starts', async () => {
    const r = rig({ n2: stateVersionOfThisBuild, n3: stateVersionOfThisBuild });
    r.keeper.start();
    await r.clock.runUntil(200);
    assert.deepEqual(r.raisedAt, [200]);
    assert.equal(r.state.clusterVersion, stateVersionOfThisBuild);
    // At this build's version there is nothing to ask: the rounds go on every two seconds.
    await r.clock.runUntil(10_000);
    assert.deepEqual(r.asked, [200]);
    r.keeper.stop();
    assert.equal(r.clock.pending, 0);
  });

  it('asks within 200 ms of becoming the leader', async () => {
    const r = rig({ n2: stateVersionOfThisBuild });
    r.role = 'follower';
    r.keeper.start();
    await r.clock.runUntil(5_000);
    assert.deepEqual(r.asked, []);
    r.role = 'leader';
    await r.clock.runUntil(5_200);
    assert.deepEqual(r.raisedAt, [5_200]);
    r.keeper.stop();
  });

  it('holds the version while a voter does not answer, backing off to two seconds; raises once it does', async () => {
    const r = rig({ n2: undefined, n3: stateVersionOfThisBuild });
    r.keeper.start();
    await r.clock.runUntil(9_000);
    assert.equal(r.state.clusterVersion, 1);
    assert.deepEqual(r.asked, [200, 600, 1_400, 3_000, 5_000, 7_000, 9_000]);
    r.answers.set('n2', stateVersionOfThisBuild);
    await r.clock.runUntil(11_000);
    assert.deepEqual(r.raisedAt, [11_000]);
    r.keeper.stop();
  });

  it('a voter on an older build holds it, asked every two seconds until it runs this build', async () => {
    const r = rig({ n2: 2, n3: stateVersionOfThisBuild });
    r.keeper.start();
    await r.clock.runUntil(4_500);
    // Raised to what every voter supports, asked again soon for the rest, then held.
    assert.deepEqual(r.raisedAt, [200]);
    assert.deepEqual(r.asked, [200, 400, 2_400, 4_400]);
    assert.equal(r.state.clusterVersion, 2);
    r.answers.set('n2', stateVersionOfThisBuild);
    await r.clock.runUntil(6_400);
    assert.deepEqual(r.raisedAt, [200, 6_400]);
    assert.equal(r.state.clusterVersion, stateVersionOfThisBuild);
    r.keeper.stop();
  });
});

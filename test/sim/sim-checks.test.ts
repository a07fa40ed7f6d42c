// Goal: prove that the simulation's checks can fail and that a run replays exactly from its
// seed, so that the thousands of passing seeds in sim.test.ts mean something; and that the
// simulated disk keeps LevelDB's promises, and the simulated worker stream a stream's, and no more.
// Method: (1) the same seed run twice gives the identical trace and result; (2) whole runs with
// a deliberate defect injected through the test-only `bug` option (a disk that acknowledges a
// synced write before it is durable, a node that reads locally without ReadIndex, a state
// machine that applies a different command than the log holds, a deadline scanner that fires a
// deadline twice as if apply did not re-check it, a power executor that carries out its last
// step again when it next leads, a worker service that acknowledges a result before it is
// committed, an agent that forgets its journal when it restarts) must each be reported as the
// matching violation within a bounded range of seeds; (3) the Monitor and the ControlMonitor
// are fed tampered observations directly and must name each violation; (4) the production
// LevelLogStore over a SimLevelDisk keeps synced writes through a power loss, may lose unsynced
// ones, and truncates a torn tail on load; (5) the simulated worker stream delivers in order
// each way under long delays, and ends when the server process dies or the service ends the call.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { encodeConfChange } from '../../src/raft/core/membership.js';
import type { Entry } from '../../src/raft/core/types.js';
import { LevelLogStore } from '../../src/raft/storage/level-log-store.js';
import { Prng } from '../../src/platform/prng.js';
import { ReplicatedState } from '../../src/state/replicated-state.js';
import type { WorkflowEvent } from '../../src/model/records.js';
import { ControlMonitor, noControlStats } from './control-workload.js';
import { runDriverSim, type DriverSimBug } from './driver-sim.js';
import { Monitor, SimViolation, type ViolationKind } from './monitor.js';
import { Scheduler } from './scheduler.js';
import { SimLevelDisk, type DiskFaults } from './sim-level-disk.js';
import { SimProcess } from './sim-process.js';
import { SimNetwork } from './network.js';
import { SimWorkerLink, type SimServerStream } from './sim-worker-stream.js';
import type { ConnectRequest, ConnectResponse } from '../../src/gen/worker.js';
import { status } from '@grpc/grpc-js';

describe('replay', () => {
  for (const seed of [23, 1812]) {
    test(`seed ${seed} replays to the same trace and result`, async () => {
      const run = async (): Promise<{ lines: string[]; result: string }> => {
        const lines: string[] = [];
        const r = await runDriverSim(seed, { trace: (l) => lines.push(l) });
        return { lines, result: JSON.stringify(r) };
      };
      const a = await run();
      const b = await run();
      const first = await runDriverSim(seed);
      assert.ok(first.stats.events > 300, `a real run has many events (${first.stats.events})`);
      assert.ok(a.lines.length > 3, `the trace names the faults (${a.lines.length} lines)`);
      // Seed 23 runs machine m1 by a simulated agent over the worker stream: that replays too.
      if (seed === 23)
        assert.ok(first.agents.executed > 0, `the agent ran actions (${first.agents.executed})`);
      assert.deepEqual(b.lines, a.lines);
      assert.equal(b.result, a.result);
      // Tracing only observes: the untraced run ends in the same state.
      assert.equal(JSON.stringify(first), a.result);
    });
  }
});

describe('injected defects are caught', () => {
  const cases: {
    bug: DriverSimBug;
    expect: ViolationKind;
    seedsMax: number;
    /** What the failure must say beyond its kind. */
    says?: RegExp;
    /** Runs with slow faults: the ones in which deadlines pass. */
    slowFaults?: boolean;
    /** Runs machine m1 by a simulated agent over the worker stream (sim-agent.ts). */
    agents?: boolean;
  }[] = [
    { bug: 'ackBeforePersist', expect: 'committed-entry-lost', seedsMax: 50 },
    { bug: 'staleRead', expect: 'linearizability', seedsMax: 50 },
    { bug: 'tamperApply', expect: 'state-machine-safety', seedsMax: 50 },
    {
      bug: 'deadlineTwice',
      expect: 'control-plane',
      seedsMax: 20,
      says: /timed out at [\d.]+ ms, before its deadline/,
      slowFaults: true,
    },
    { bug: 'powerStepTwice', expect: 'power', seedsMax: 50, says: /began at the BMC after step/ },
    {
      bug: 'ackBeforeCommit',
      expect: 'control-plane',
      seedsMax: 20,
      says: /was acknowledged but is not recorded/,
      agents: true,
    },
    { bug: 'forgetJournal', expect: 'control-plane', seedsMax: 30, says: /executed twice/, agents: true },
  ];
  for (const c of cases) {
    test(`${c.bug} is reported as ${c.expect}`, async () => {
      const seen: string[] = [];
      for (let seed = 1; seed <= c.seedsMax; seed++) {
        const r = await runDriverSim(seed, {
          bug: c.bug,
          ...(c.slowFaults === true ? { slowFaults: true } : {}),
          ...(c.agents === true ? { agents: true } : {}),
        });
        if (r.ok) continue;
        seen.push(`${seed}:${r.kind ?? ''}`);
        if (r.kind === c.expect && (c.says === undefined || c.says.test(r.failure ?? ''))) {
          assert.match(r.failure ?? '', new RegExp(`^${c.expect}: `));
          return;
        }
      }
      assert.fail(`no ${c.expect} in seeds 1-${c.seedsMax}; violations seen: ${seen.join(' ') || 'none'}`);
    });
  }
});

describe('the monitor names tampered observations', () => {
  const enc = new TextEncoder();
  const entry = (index: number, term: number, text: string): Entry => ({
    index,
    term,
    type: 'normal',
    data: enc.encode(text),
  });
  const throwsKind = (kind: ViolationKind, fn: () => void): void => {
    assert.throws(fn, (e: unknown) => e instanceof SimViolation && e.kind === kind);
  };

  test('two leaders in one term, including the same node after a restart', () => {
    const m = new Monitor();
    m.onLeader('n1', 1, 3);
    m.onLeader('n1', 1, 3);
    m.onLeader('n2', 1, 4);
    throwsKind('election-safety', () => m.onLeader('n3', 1, 3));
    throwsKind('election-safety', () => m.onLeader('n2', 2, 4));
  });

  test('a vote granted twice in one term', () => {
    const m = new Monitor();
    m.onVoteGranted('n1', 5, 'n2');
    m.onVoteGranted('n1', 5, 'n2');
    m.onVoteGranted('n1', 6, 'n3');
    throwsKind('double-vote', () => m.onVoteGranted('n1', 5, 'n3'));
  });

  test('one (index, term) with different data or a different predecessor', () => {
    const m = new Monitor();
    m.onEntries('n1', [entry(2, 2, 'a'), entry(3, 2, 'b')], 1);
    m.onEntries('n2', [entry(3, 2, 'b')], 2);
    throwsKind('log-matching', () => m.onEntries('n3', [entry(3, 2, 'tampered')], 2));
    throwsKind('log-matching', () => m.onEntries('n3', [entry(3, 2, 'b')], 1));
  });

  test('different entries committed, or applied, at one index', () => {
    const m = new Monitor();
    m.onCommitted('n1', entry(2, 2, 'a'), 2);
    m.onApply('n1', entry(2, 2, 'a'));
    throwsKind('committed-mismatch', () => m.onCommitted('n2', entry(2, 3, 'a'), 3));
    throwsKind('committed-mismatch', () => m.onCommitted('n2', entry(2, 2, 'tampered'), 3));
    throwsKind('state-machine-safety', () => m.onApply('n2', entry(2, 2, 'tampered')));
    throwsKind('state-machine-safety', () => m.onApply('n2', entry(3, 2, 'never committed')));
  });

  test('a new leader without an entry committed in an earlier term', () => {
    const m = new Monitor();
    m.onCommitted('n1', entry(1, 1, 'a'), 1);
    m.onCommitted('n1', entry(2, 2, 'b'), 2);
    const log = new Map([
      [1, 1],
      [2, 3],
    ]);
    // Committed in term 2: a leader of term 2 itself need not be checked against it ...
    m.checkLeaderCompleteness('n2', 2, 0, (i) => log.get(i));
    // ... but a leader of term 3 holding another entry there is wrong, unless a snapshot covers it.
    throwsKind('leader-completeness', () => m.checkLeaderCompleteness('n2', 3, 0, (i) => log.get(i)));
    m.checkLeaderCompleteness('n2', 3, 2, (i) => log.get(i));
  });

  test('a committed entry on too few disks', () => {
    const ids = ['n1', 'n2', 'n3'];
    const boot: Entry = {
      index: 1,
      term: 1,
      type: 'conf',
      data: encodeConfChange({
        type: 'bootstrap',
        voters: ids.map((id) => ({ id, addr: `${id}:7000`, apiAddr: '' })),
      }),
    };
    const held = new Map(ids.map((id) => [id, new Set<string>()]));
    const disks = new Map(
      ids.map((id) => [
        id,
        { covers: (index: number, term: number) => held.get(id)!.has(`${index}:${term}`) },
      ]),
    );
    const m = new Monitor();
    m.onCommitted('n1', boot, 1);
    // The bootstrap configuration is every initial voter's own: never counted as lost.
    m.checkDurability(disks);
    const e2 = entry(2, 2, 'x');
    m.onCommitted('n1', e2, 2);
    // Entry 2 is committed but written nowhere: 3 voters need 2 holders.
    throwsKind('committed-entry-lost', () => m.checkDurability(disks));
    held.get('n1')!.add('2:2');
    throwsKind('committed-entry-lost', () => m.checkDurability(disks));
    held.get('n2')!.add('2:2');
    m.checkDurability(disks);
  });
});
describe('the control monitor names each violation', () => {
  const event = (seq: number, extra: Partial<WorkflowEvent> = {}): WorkflowEvent => ({
    seq,
    workflowId: 'w0',
    type: 'action.started',
    stampMs: 1,
    actionIndex: 0,
    attempt: seq,
    ...extra,
  });
  let now = 0;
  const watched = (): { feed: (id: string, e: WorkflowEvent) => void; failures: string[] } => {
    const failures: string[] = [];
    const monitor = new ControlMonitor(
      (m) => failures.push(m),
      () => now,
    );
    const stats = noControlStats();
    const stores = new Map<string, ReplicatedState>();
    const feed = (id: string, e: WorkflowEvent): void => {
      let kv = stores.get(id);
      if (kv === undefined) {
        kv = new ReplicatedState();
        monitor.watch(id, kv, stats);
        stores.set(id, kv);
      }
      kv.control.changes.publish({ kind: 'workflowEvent', event: e });
    };
    return { feed, failures };
  };

  test('a gap in a changefeed', () => {
    const { feed, failures } = watched();
    feed('n1', event(1));
    feed('n1', event(3));
    assert.match(failures.join('\n'), /n1's changefeed went from seq 1 to 3/);
  });

  test('a duplicate in a changefeed', () => {
    const { feed, failures } = watched();
    feed('n1', event(1));
    feed('n1', event(1));
    assert.match(failures.join('\n'), /went from seq 1 to 1/);
  });

  test('two nodes with different events at one seq', () => {
    const { feed, failures } = watched();
    feed('n1', event(1));
    feed('n2', event(1, { type: 'workflow.created' }));
    assert.match(failures.join('\n'), /n2 has event .* at seq 1, another node/);
  });

  test('an attempt started twice, and one recorded twice', () => {
    const { feed, failures } = watched();
    feed('n1', event(1, { attempt: 1 }));
    feed('n1', event(2, { attempt: 1 }));
    feed('n1', event(3, { type: 'action.succeeded', attempt: 1 }));
    feed('n1', event(4, { type: 'action.failed', attempt: 1 }));
    assert.equal(failures.length, 2, failures.join('\n'));
    assert.match(failures[0]!, /attempt w0\/0\/1 started at seq 1 and again at seq 2/);
    assert.match(failures[1]!, /attempt w0\/0\/1 recorded at seq 3 and again at seq 4/);
  });

  test('a timeout before its deadline: the attempt’s own, or its workflow’s', () => {
    const { feed, failures } = watched();
    now = 100;
    feed('n1', event(1, { type: 'workflow.running', stampMs: 100 }));
    feed('n1', event(2, { attempt: 1, stampMs: 100 }));
    now = 1_100; // the attempt's deadline: on time
    feed('n1', event(3, { type: 'action.timeout', attempt: 1, stampMs: 1_100 }));
    feed('n1', event(4, { attempt: 2, stampMs: 1_150 }));
    now = 1_200; // a second firing of the same deadline times out the next attempt early
    feed('n1', event(5, { type: 'action.timeout', attempt: 2, stampMs: 1_200 }));
    // Its last attempt timing out ends the workflow: not a deadline of its own.
    feed('n1', event(6, { type: 'workflow.timeout', stampMs: 1_200 }));
    feed('n1', event(7, { attempt: 3, stampMs: 1_250 }));
    now = 1_300;
    feed('n1', event(8, { type: 'workflow.timeout', stampMs: 1_300 }));
    assert.equal(failures.length, 2, failures.join('\n'));
    assert.match(failures[0]!, /attempt w0\/0\/2 timed out at 1200.0 ms, before its deadline at 2150 ms/);
    assert.match(failures[1]!, /workflow w0 timed out at 1300.0 ms, before its deadline at 30100 ms/);
  });
});

describe('the simulated disk keeps what LevelDB promises', () => {
  const faults = (over: Partial<DiskFaults>): DiskFaults => ({
    latencyMinMs: 1,
    latencyMaxMs: 1,
    spikeP: 0,
    spikeMaxMs: 0,
    spikesUntil: 0,
    powerLossP: 0,
    tornP: 0,
    ...over,
  });
  const enc = new TextEncoder();
  const entry = (index: number): Entry => ({ index, term: 1, type: 'normal', data: enc.encode(`e${index}`) });
  /** Runs the scheduler until the promise settles. */
  const drive = async <T>(sched: Scheduler, p: Promise<T>): Promise<T> => {
    let done = false;
    const settled = p.finally(() => {
      done = true;
    });
    for (let i = 0; i < 10_000 && !done; i++) {
      sched.step();
      for (let j = 0; j < 8; j++) await Promise.resolve();
    }
    assert.ok(done, 'the operation settled');
    return settled;
  };
  const open = (sched: Scheduler, disk: SimLevelDisk): LevelLogStore =>
    new LevelLogStore({ dir: `sim/${disk.name}`, db: disk.open(new SimProcess(sched)) });

  test('a synced write survives a power loss; a commit-only write may not; a kill keeps both', async () => {
    const outcomes = new Set<string>();
    for (let seed = 1; seed <= 20; seed++) {
      for (const powerLossP of [0, 1]) {
        const sched = new Scheduler();
        const disk = new SimLevelDisk('n1', sched, new Prng(seed), faults({ powerLossP }));
        const store = open(sched, disk);
        await drive(sched, store.load());
        await drive(
          sched,
          store.save({
            hardState: { term: 1, vote: '', commit: 0 },
            entries: [entry(1), entry(2)],
            snapshot: null,
          }),
        );
        // A new commit index alone is written without fsync (LevelLogStore's commitOnly).
        await drive(
          sched,
          store.save({ hardState: { term: 1, vote: '', commit: 2 }, entries: [], snapshot: null }),
        );
        disk.crash();
        const loaded = await drive(sched, open(sched, disk).load());
        assert.deepEqual(
          loaded.entries.map((e) => e.index),
          [1, 2],
        );
        assert.ok(disk.covers(2, 1) && !disk.covers(2, 2) && !disk.covers(3, 1));
        if (powerLossP === 0) assert.equal(loaded.hardState.commit, 2, 'a kill loses nothing written');
        else outcomes.add(`commit ${loaded.hardState.commit}`);
      }
    }
    assert.deepEqual(
      [...outcomes].sort(),
      ['commit 0', 'commit 2'],
      'a power loss sometimes loses the unsynced write',
    );
  });

  test('a write torn at a crash leaves a tail that load() truncates', async () => {
    const sched = new Scheduler();
    const disk = new SimLevelDisk('n1', sched, new Prng(3), faults({ tornP: 1 }));
    const store = open(sched, disk);
    await drive(sched, store.load());
    await drive(
      sched,
      store.save({ hardState: { term: 1, vote: 'n1', commit: 1 }, entries: [entry(1)], snapshot: null }),
    );
    // The next write is on its way to the disk when the process dies.
    void store.save({
      hardState: { term: 1, vote: 'n1', commit: 1 },
      entries: [entry(2), entry(3)],
      snapshot: null,
    });
    disk.crash();
    assert.equal(disk.stats.tornWrites, 1);
    const loaded = await drive(sched, open(sched, disk).load());
    assert.equal(loaded.truncatedTornTailAt, 3);
    assert.deepEqual(
      loaded.entries.map((e) => e.index),
      [1, 2],
    );
  });

  test('writes that never started are lost whole, and a dead process never hears back', async () => {
    const sched = new Scheduler();
    const disk = new SimLevelDisk('n1', sched, new Prng(5), faults({}));
    const proc = new SimProcess(sched);
    const store = new LevelLogStore({ dir: 'sim/n1', db: disk.open(proc) });
    await drive(sched, store.load());
    let heard = false;
    void store
      .save({ hardState: { term: 1, vote: '', commit: 0 }, entries: [entry(1)], snapshot: null })
      .then(() => {
        heard = true;
      });
    proc.alive = false;
    disk.crash();
    while (sched.step()) await Promise.resolve();
    assert.equal(heard, false);
    assert.equal(disk.covers(1, 1), disk.stats.lostWrites === 0);
  });
});

describe('the simulated worker stream keeps a stream’s promises and no more', () => {
  const setup = (): {
    sched: Scheduler;
    proc: SimProcess;
    link: SimWorkerLink;
    got: string[];
    closed: { why: string; code: number }[];
    server: SimServerStream[];
  } => {
    const sched = new Scheduler();
    const net = new SimNetwork(sched, Prng.derive(1, 'net'), {
      dropP: 0,
      dupP: 0,
      delayMinMs: 0.5,
      delayMaxMs: 6,
      longDelayP: 0.5,
      longDelayMaxMs: 40,
    });
    const proc = new SimProcess(sched);
    const got: string[] = [];
    const closed: { why: string; code: number }[] = [];
    const server: SimServerStream[] = [];
    const link = new SimWorkerLink(
      { sched, net, rng: Prng.derive(1, 'stream') },
      'm1',
      'n1',
      proc,
      {
        onData: (msg) => got.push(msg.kind?.$case === 'cancel' ? (msg.kind.value.reason ?? '') : ''),
        onClosed: (why, code) => closed.push({ why, code }),
      },
      (s) => {
        s.on('data', (msg: ConnectRequest) => {
          if (msg.kind?.$case === 'progress') got.push(`server:${msg.kind.value.message}`);
        });
        server.push(s);
      },
    );
    return { sched, proc, link, got, closed, server };
  };
  const progress = (message: string): ConnectRequest => ({
    kind: { $case: 'progress', value: { attempt: undefined, message } },
  });
  const cancel = (reason: string): ConnectResponse => ({
    kind: { $case: 'cancel', value: { attempt: undefined, reason } },
  });

  test('messages arrive in order each way, however the network delays them', () => {
    const { sched, link, got, server } = setup();
    for (let i = 0; i < 20; i++) link.toServer(progress(`${i}`));
    while (sched.step()) {
      if (server.length === 1 && got.length === 20) break;
    }
    assert.equal(server.length, 1, 'the server took the call');
    for (let i = 0; i < 20; i++) server[0]!.write(cancel(`${i}`));
    while (sched.step());
    const expected = [...Array(20).keys()];
    assert.deepEqual(got, [...expected.map((i) => `server:${i}`), ...expected.map(String)]);
  });

  test('the server process dying breaks it; the service ending the call tells the agent why', () => {
    const a = setup();
    while (a.sched.step());
    a.proc.alive = false;
    a.link.toServer(progress('lost'));
    while (a.sched.step());
    assert.deepEqual(
      a.closed.map((c) => c.code),
      [status.UNAVAILABLE],
    );
    assert.ok(!a.got.includes('server:lost'), 'nothing reaches a dead process');
    const b = setup();
    while (b.sched.step());
    b.server[0]!.emit('error', { code: status.RESOURCE_EXHAUSTED, details: 'too many streams' });
    b.link.toServer(progress('after'));
    while (b.sched.step());
    assert.deepEqual(b.closed, [{ why: 'too many streams', code: status.RESOURCE_EXHAUSTED }]);
    assert.ok(!b.got.includes('server:after'), 'an ended call carries nothing more');
  });
});

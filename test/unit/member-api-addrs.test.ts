// Goal: prove the replicated members' API addresses (docs/decisions/0038-member-api-addresses.md).
// member.apiAddr needs state version 3 (refused by the gate before then); it records the address a
// member says it serves on, replacing an older one, keeps the list sorted by id, drops the
// addresses of members outside the membership the proposer saw, and refuses a bad id, address or
// member list, changing nothing. The list goes into the snapshot last, in format 6 only, only when
// not empty; one that breaks the rules is refused on restore. The node's keeper proposes the
// command only when the state lacks its own address or names another.
// Method: ControlState through apply() with explicit leader stamps (through the codec, as the log
// carries commands); snapshots compared byte for byte; the keeper's due() on a real ControlState
// with a stand-in for the raft node's membership and leader (pure decision); its rounds on a
// hand-driven clock: every 250 ms while the state lacks the address (so it follows the cluster
// version's raise at once), every 2 s once the state holds it.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { DecodeError } from '../../src/state/binary.js';
import { decodeControlCommand, encodeControlCommand } from '../../src/state/control/codec.js';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { clusterVersionRefusal, controlCommandVersion } from '../../src/state/versions.js';
import { ApiAddressKeeper } from '../../src/node/api-address-keeper.js';
import type { RaftNode } from '../../src/raft/node.js';
import { realClock } from '../../src/platform/clock.js';
import { HandClock } from '../support/hand-clock.js';

class Harness {
  readonly state = new ControlState();
  index = 0;

  constructor(version = 3) {
    if (version >= 2) this.run({ type: 'cluster.version', version });
  }

  run(command: ControlCommand): ControlResult {
    this.index += 1;
    return this.state.apply(this.index, 1_000_000, decodeControlCommand(encodeControlCommand(command)));
  }

  say(id: string, apiAddr: string, members = ['n1', 'n2', 'n3']): ControlResult {
    return this.run({ type: 'member.apiAddr', id, apiAddr, members });
  }
}

describe('member.apiAddr in the replicated state', () => {
  it('needs state version 3: refused by the proposer check and by apply at version 2', () => {
    const command: ControlCommand = {
      type: 'member.apiAddr',
      id: 'n1',
      apiAddr: '10.0.0.1:7001',
      members: ['n1'],
    };
    assert.equal(controlCommandVersion(command), 3);
    assert.match(clusterVersionRefusal(command, 2) ?? '', /member\.apiAddr needs cluster version 3/);
    const h = new Harness(2);
    assert.equal(h.say('n1', '10.0.0.1:7001').type, 'error');
    assert.deepEqual(h.state.memberApiAddrs, []);
  });

  it('records each member’s address, sorted by id; a new one replaces the old', () => {
    const h = new Harness();
    h.say('n3', '10.0.0.3:7001');
    h.say('n1', '10.0.0.1:7001');
    assert.deepEqual(h.say('n2', '[fd00::2]:7001'), {
      type: 'memberApiAddrs',
      members: [
        { id: 'n1', apiAddr: '10.0.0.1:7001' },
        { id: 'n2', apiAddr: '[fd00::2]:7001' },
        { id: 'n3', apiAddr: '10.0.0.3:7001' },
      ],
    });
    h.say('n1', 'n1.example.net:7101');
    assert.equal(h.state.memberApiAddrs[0]?.apiAddr, 'n1.example.net:7101');
    assert.equal(h.state.memberApiAddrs.length, 3);
  });

  it('drops the addresses of members outside the membership the proposer saw', () => {
    const h = new Harness();
    h.say('n1', '10.0.0.1:7001');
    h.say('n2', '10.0.0.2:7001');
    h.say('n3', '10.0.0.3:7001', ['n1', 'n3']);
    assert.deepEqual(
      h.state.memberApiAddrs.map((m) => m.id),
      ['n1', 'n3'],
    );
  });

  it('refuses a bad id, address or member list, changing nothing', () => {
    const h = new Harness();
    h.say('n1', '10.0.0.1:7001');
    const before = h.state.memberApiAddrs;
    for (const [id, apiAddr, members, why] of [
      ['n/1', '10.0.0.1:7001', ['n/1'], /member id/],
      ['n1', '10.0.0.1', ['n1'], /must be HOST:PORT/],
      ['n1', '10.0.0.1:70000', ['n1'], /must be HOST:PORT/],
      ['n1', 'a b:1', ['n1'], /must be HOST:PORT/],
      ['n1', `${'h'.repeat(300)}:1`, ['n1'], /must be HOST:PORT/],
      ['n4', '10.0.0.4:7001', ['n1', 'n2'], /not among the members named/],
      ['n1', '10.0.0.1:7002', ['n2', 'n1'], /out of order or repeated/],
    ] as const) {
      const r = h.say(id, apiAddr, [...members]);
      assert.equal(r.type, 'error', `${id} ${apiAddr}`);
      assert.match(r.type === 'error' ? r.message : '', why);
      assert.equal(h.state.memberApiAddrs, before);
    }
  });

  it('goes into the snapshot last, only when not empty, and restores; a broken list is refused', () => {
    const h = new Harness();
    const without = new TextDecoder().decode(h.state.snapshot());
    assert.ok(!without.includes('memberApiAddrs'));
    h.say('n2', '10.0.0.2:7001');
    h.say('n1', '10.0.0.1:7001');
    const text = new TextDecoder().decode(h.state.snapshot());
    assert.ok(
      text.endsWith(
        ',"memberApiAddrs":[{"id":"n1","apiAddr":"10.0.0.1:7001"},{"id":"n2","apiAddr":"10.0.0.2:7001"}]}',
      ),
      text.slice(-120),
    );
    const copy = new ControlState();
    copy.restore(h.state.snapshot());
    assert.deepEqual(copy.snapshot(), h.state.snapshot());
    assert.deepEqual(copy.memberApiAddrs, h.state.memberApiAddrs);
    for (const bad of [
      text.replace('"id":"n1"', '"id":"n3"'),
      text.replace('10.0.0.1:7001', 'nowhere'),
      text.replace(/,"memberApiAddrs":\[.*\]\}$/, ',"memberApiAddrs":[]}'),
      text.replace('"clusterVersion":3', '"clusterVersion":2'),
    ]) {
      const target = new ControlState();
      assert.throws(() => target.restore(new TextEncoder().encode(bad)), DecodeError, bad.slice(-100));
      assert.deepEqual(target.memberApiAddrs, []);
    }
  });
});

describe('the API address keeper', () => {
  const nodeWith = (leader: string, ids: string[]): RaftNode =>
    ({
      id: 'n1',
      softState: () => ({ leader, role: 'follower', term: 2 }),
      membership: () => ({
        voters: ids.map((id) => ({ id, addr: `${id}:7011`, apiAddr: '' })),
        learners: [],
      }),
    }) as unknown as RaftNode;
  const keeper = (h: Harness, node: RaftNode, apiAddr = '10.0.0.1:7001'): ApiAddressKeeper =>
    new ApiAddressKeeper({
      node,
      control: h.state,
      apiAddr,
      propose: () => Promise.reject(new Error('not in this test')),
      logger: pino({ level: 'silent' }),
      clock: realClock,
    });

  it('proposes its own address only while it is missing or different, at version 3, with a leader', () => {
    const h = new Harness();
    assert.deepEqual(keeper(h, nodeWith('n2', ['n3', 'n1', 'n2'])).due(), {
      type: 'member.apiAddr',
      id: 'n1',
      apiAddr: '10.0.0.1:7001',
      members: ['n1', 'n2', 'n3'],
    });
    assert.equal(keeper(h, nodeWith('', ['n1', 'n2'])).due(), undefined, 'no leader known');
    assert.equal(keeper(h, nodeWith('n2', ['n2', 'n3'])).due(), undefined, 'not a member');
    assert.equal(keeper(new Harness(2), nodeWith('n2', ['n1', 'n2'])).due(), undefined, 'below version 3');
    h.say('n1', '10.0.0.1:7001');
    assert.equal(keeper(h, nodeWith('n2', ['n1', 'n2', 'n3'])).due(), undefined, 'recorded already');
    assert.equal(
      keeper(h, nodeWith('n2', ['n1', 'n2', 'n3']), '10.0.0.9:7001').due()?.type,
      'member.apiAddr',
    );
  });
  it('rounds every 250 ms while the state lacks the address, so it follows the version at once; 2 s after', async () => {
    const h = new Harness(2);
    const clock = new HandClock();
    const proposed: ControlCommand[] = [];
    const k = new ApiAddressKeeper({
      node: nodeWith('n1', ['n1', 'n2', 'n3']),
      control: h.state,
      apiAddr: '10.0.0.1:7001',
      propose: (command) => {
        proposed.push(command);
        return Promise.resolve(h.run(command));
      },
      logger: pino({ level: 'silent' }),
      clock,
    });
    k.start();
    await clock.runUntil(1000);
    assert.equal(proposed.length, 0, 'nothing below version 3');
    assert.equal(clock.nextAtMs, 1250, 'rounds every 250 ms while the address is missing');
    h.run({ type: 'cluster.version', version: 3 });
    await clock.runUntil(1250);
    assert.equal(proposed.length, 1, 'proposed at the first round after the raise');
    assert.equal(k.recorded(), true);
    assert.equal(clock.nextAtMs, 3250, 'then every 2 s');
    await clock.runUntil(3250);
    assert.equal(proposed.length, 1, 'nothing more once recorded');
    assert.equal(clock.nextAtMs, 5250);
    k.stop();
    assert.equal(clock.pending, 0, 'stopped: no timer left');
  });
});

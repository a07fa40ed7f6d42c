// Goal: lb/haproxy-membership.ts turns the membership and HAProxy's runtime view into the right
// runtime commands: a new voter is added with its checks on and put into rotation; a member that
// left is drained, and deleted once it carries no stream or its grace has passed; learners,
// members without an API address or with a host name HAProxy cannot add are left out with a
// reason; servers an operator put in maintenance are left alone; nothing is removed on an empty
// membership; and `show servers state` / `show stat` answers are read as HAProxy 2.6 writes them.
// Method: a table of inputs and the plan each must give, on fake data (pure logic, no socket);
// the answers parsed are copies of real HAProxy 2.6.12 output.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { FollowSettings, Member, RuntimeServer } from '../../lb/haproxy-membership.js';
import { parseRuntimeServers, planFollow, wantedServers } from '../../lb/haproxy-membership.js';

const settings: FollowSettings = {
  backend: 'be',
  serverOptions: 'proto h2 check',
  drainGraceMs: 10_000,
  serverId: (id) => Number(id.replace(/\D/g, '')) || 99,
};
const voter = (id: string, apiAddr: string): Member => ({ id, apiAddr, voter: true });
const server = (
  name: string,
  addr: string,
  admin: RuntimeServer['admin'] = 'ready',
  sessions = 0,
): RuntimeServer => ({
  name,
  addr,
  admin,
  sessions,
});
const three = [voter('n1', '127.0.0.1:7001'), voter('n2', '127.0.0.1:7002'), voter('n3', '127.0.0.1:7003')];
const threeServers = [
  server('n1', '127.0.0.1:7001'),
  server('n2', '127.0.0.1:7002'),
  server('n3', '127.0.0.1:7003'),
];

function plan(
  members: readonly Member[],
  current: readonly RuntimeServer[],
  held: ReadonlyMap<string, number> = new Map(),
  now = 1000,
): ReturnType<typeof planFollow> {
  return planFollow({ members, current, held, now, settings });
}
const texts = (p: ReturnType<typeof planFollow>): string[] =>
  p.changes.flatMap((c) => c.commands.map((x) => x.text));

describe('planning', () => {
  test('in step: no command', () => {
    const p = plan(three, threeServers);
    assert.deepEqual(p.changes, []);
    assert.deepEqual(p.skipped, []);
  });

  test('a new voter is added with its id and options, its checks on, then put into rotation', () => {
    const p = plan([...three, voter('n4', '127.0.0.1:7004')], threeServers);
    assert.deepEqual(texts(p), [
      'add server be/n4 127.0.0.1:7004 id 4 proto h2 check',
      'enable health be/n4',
      'set server be/n4 state ready',
    ]);
    assert.equal(p.changes[0]!.kind, 'add');
    assert.ok(p.changes[0]!.commands[0]!.ok.test('New server registered.'));
    assert.ok(!p.changes[0]!.commands[0]!.ok.test('No such backend.'));
    assert.ok(p.changes[0]!.commands[1]!.ok.test(''));
    assert.equal(p.held.get('n4'), 1000, 'held until it is seen ready');
    // Seen ready: no longer held, nothing to do.
    const next = plan(
      [...three, voter('n4', '127.0.0.1:7004')],
      [...threeServers, server('n4', '127.0.0.1:7004')],
      p.held,
    );
    assert.deepEqual(next.changes, []);
    assert.equal(next.held.has('n4'), false);
  });

  test('a server added without checks gets no enable health (HAProxy would refuse it)', () => {
    const p = planFollow({
      members: [...three, voter('n4', '127.0.0.1:7004')],
      current: threeServers,
      held: new Map(),
      now: 0,
      settings: { ...settings, serverOptions: 'proto h2 no-checks' },
    });
    assert.deepEqual(texts(p), [
      'add server be/n4 127.0.0.1:7004 id 4 proto h2 no-checks',
      'set server be/n4 state ready',
    ]);
  });

  test('an add that stopped half-way (left in maintenance) is finished next round', () => {
    const held = new Map([['n4', 500]]);
    const p = plan(
      [...three, voter('n4', '127.0.0.1:7004')],
      [...threeServers, server('n4', '127.0.0.1:7004', 'maint')],
      held,
    );
    assert.deepEqual(texts(p), ['enable health be/n4', 'set server be/n4 state ready']);
    assert.equal(p.changes[0]!.kind, 'ready');
  });

  test('a server an operator put in maintenance or drain stays so while its member is in', () => {
    const current = [
      server('n1', '127.0.0.1:7001', 'maint'),
      server('n2', '127.0.0.1:7002', 'drain'),
      threeServers[2]!,
    ];
    assert.deepEqual(plan(three, current).changes, []);
  });

  test('a member that left is drained first; its streams go on', () => {
    const p = plan(three.slice(0, 2), threeServers, new Map(), 2000);
    assert.deepEqual(texts(p), ['set server be/n3 state drain']);
    assert.equal(p.changes[0]!.kind, 'drain');
    assert.equal(p.held.get('n3'), 2000);
  });

  test('a drained server is deleted once it carries no stream', () => {
    const held = new Map([['n3', 2000]]);
    const busy = [...threeServers.slice(0, 2), server('n3', '127.0.0.1:7003', 'drain', 2)];
    assert.deepEqual(plan(three.slice(0, 2), busy, held, 3000).changes, [], 'streams left, grace not over');
    const idle = [...threeServers.slice(0, 2), server('n3', '127.0.0.1:7003', 'drain', 0)];
    const p = plan(three.slice(0, 2), idle, held, 3000);
    assert.deepEqual(texts(p), ['set server be/n3 state maint', 'del server be/n3']);
    assert.ok(p.changes[0]!.commands[1]!.ok.test('Server deleted.'));
    assert.ok(
      !p.changes[0]!.commands[1]!.ok.test('Server still has connections attached to it, cannot remove it.'),
    );
  });

  test('after the grace its remaining streams are cut, then it is deleted', () => {
    const held = new Map([['n3', 2000]]);
    const busy = [...threeServers.slice(0, 2), server('n3', '127.0.0.1:7003', 'drain', 2)];
    const p = plan(three.slice(0, 2), busy, held, 2000 + settings.drainGraceMs);
    assert.deepEqual(texts(p), [
      'set server be/n3 state maint',
      'shutdown sessions server be/n3',
      'del server be/n3',
    ]);
    assert.equal(p.changes[0]!.kind, 'delete');
  });

  test('a server left draining by an earlier follower gets its grace from now; a failed delete keeps it', () => {
    const busy = [...threeServers.slice(0, 2), server('n3', '127.0.0.1:7003', 'maint', 1)];
    const p = plan(three.slice(0, 2), busy, new Map(), 5000);
    assert.deepEqual(p.changes, []);
    assert.equal(p.held.get('n3'), 5000);
    // The grace counts from that first sight, not from each round.
    const later = plan(three.slice(0, 2), busy, p.held, 5000 + settings.drainGraceMs);
    assert.equal(later.changes[0]?.kind, 'delete');
    assert.equal(later.held.get('n3'), 5000, 'kept until the server is seen gone');
    const gone = plan(three.slice(0, 2), threeServers.slice(0, 2), later.held, 20_000);
    assert.equal(gone.held.has('n3'), false);
  });

  test('a member back before its server was deleted returns to rotation', () => {
    const held = new Map([['n3', 2000]]);
    const p = plan(three, [...threeServers.slice(0, 2), server('n3', '127.0.0.1:7003', 'drain', 1)], held);
    assert.deepEqual(texts(p), ['enable health be/n3', 'set server be/n3 state ready']);
  });

  test('adds come before drains, so the backend never runs short', () => {
    const p = plan([three[0]!, three[1]!, voter('n4', '127.0.0.1:7004')], threeServers);
    assert.deepEqual(
      p.changes.map((c) => `${c.kind} ${c.server}`),
      ['add n4', 'drain n3'],
    );
  });

  test('a member whose API address changed is moved there', () => {
    const p = plan([three[0]!, three[1]!, voter('n3', '[::1]:7013')], threeServers);
    assert.deepEqual(texts(p), ['set server be/n3 addr ::1 port 7013']);
    assert.ok(p.changes[0]!.commands[0]!.ok.test("IP changed from '127.0.0.1' to '::1'"));
  });

  test('a member without an API address (the first members, from --peers) keeps its server', () => {
    const p = plan([three[0]!, voter('n2', ''), { id: 'n3', apiAddr: '', voter: false }], threeServers);
    assert.deepEqual(p.changes, []);
    assert.deepEqual(p.skipped, [], 'they are balanced: by the servers they have');
    const fresh = plan([three[0]!, voter('n2', '')], threeServers.slice(0, 1));
    assert.deepEqual(fresh.changes, []);
    assert.deepEqual(
      fresh.skipped.map((x) => x.member),
      ['n2'],
      'without a server, it is named as not balanced',
    );
  });

  test('an empty membership (no voter with an API address) changes nothing', () => {
    const learners = three.map((m) => ({ ...m, voter: false }));
    const p = plan(learners, threeServers);
    assert.deepEqual(p.changes, []);
  });

  test('a server from the file by host name stays; a new member by host name is not added', () => {
    const members = [three[0]!, voter('n2', 'localhost:7002'), voter('n5', 'node5.example:7005')];
    const p = plan(members, threeServers.slice(0, 2));
    assert.deepEqual(texts(p), [], 'n2 kept as resolved at start, n5 not added');
    assert.deepEqual(p.skipped, [
      { member: 'n5', reason: 'HAProxy adds servers by IP address only, not "node5.example:7005"' },
    ]);
  });
});

describe('who is balanced', () => {
  test('voters with an API address; the rest are named with the reason', () => {
    const { wanted, skipped } = wantedServers(
      [
        voter('n1', '127.0.0.1:7001'),
        { id: 'l1', apiAddr: '127.0.0.1:7009', voter: false },
        voter('n2', ''),
        voter('bad id', '127.0.0.1:7008'),
        voter('n7', 'not-an-address'),
        // The same server id as n1 under this test's serverId.
        voter('x1', '127.0.0.1:7010'),
      ],
      settings.serverId,
    );
    assert.deepEqual(
      wanted.map((w) => w.id),
      ['n1'],
    );
    assert.deepEqual(skipped, [
      { member: 'bad id', reason: 'its id is not a valid HAProxy server name' },
      { member: 'l1', reason: 'a learner: taken once it is a voter' },
      { member: 'n2', reason: 'no API address in the membership (first members, from --peers, have none)' },
      { member: 'n7', reason: 'API address "not-an-address" is not HOST:PORT' },
      { member: 'x1', reason: "its HAProxy server id 1 is n1's too" },
    ]);
  });
});

describe("reading HAProxy's answers", () => {
  // `show servers state be` and `show stat be 4 -1` from HAProxy 2.6.12 (columns cut after scur
  // in the CSV would not matter: they are read by name).
  const state =
    '1\n' +
    '# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n' +
    '2 be 5 a 127.0.0.1 2 0 1 1 2 8 2 0 6 0 0 1 - 19001 - 0 0 - - 0\n' +
    '2 be 77 b 127.0.0.1 0 1 1 1 0 1 0 0 6 0 0 1 - 19002 - 0 0 - - 0\n' +
    '2 be 78 c ::1 2 8 1 1 0 1 0 0 6 0 0 1 - 19003 - 0 0 - - 0\n' +
    '2 be 79 d 127.0.0.1 2 4 1 1 0 1 0 0 6 0 0 1 - 19004 - 0 0 - - 0\n';
  const stat =
    '# pxname,svname,qcur,qmax,scur,smax,slim,stot,status\n' +
    'be,a,0,0,3,4,,9,UP\n' +
    'be,b,0,0,0,0,,0,MAINT\n' +
    'be,c,0,0,1,1,,1,DRAIN\n';

  test('name, address, admin state and streams of each server', () => {
    assert.deepEqual(parseRuntimeServers(state, stat), [
      { name: 'a', addr: '127.0.0.1:19001', admin: 'ready', sessions: 3 },
      { name: 'b', addr: '127.0.0.1:19002', admin: 'maint', sessions: 0 },
      { name: 'c', addr: '[::1]:19003', admin: 'drain', sessions: 1 },
      { name: 'd', addr: '127.0.0.1:19004', admin: 'maint', sessions: 0 },
    ]);
  });

  test('an answer without a header gives no servers', () => {
    assert.deepEqual(parseRuntimeServers("Can't find backend.", 'No such proxy.'), []);
  });
});

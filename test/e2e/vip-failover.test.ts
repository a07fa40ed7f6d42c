// Goal: the VIP follows the raft leader (invariant 5) on real `slipway server` nodes with
// --vip-interface: exactly one node holds it, the leader; neighbours are told by gratuitous ARP
// when it moves; a node SIGKILLed while holding it leaves it behind (nothing in the process can
// run) and removes it when it starts again as a follower; a node stopped with SIGTERM hands
// leadership over and lets the VIP go, and the new leader takes it; a leader cut off from the
// others steps down when it loses quorum and lets the VIP go.
// Method: a network-namespace lab. Namespace lan holds bridge br0; n1-n3 each run one node on a
// veth on br0 (10.80.0.11-13/24, raft and API on that address, HTTP boot on 0.0.0.0:8080 so that
// it answers on the VIP too, metrics on :9100); ops (10.80.0.5) runs the CLI and curl and keeps
// an ARP entry for the VIP, whose MAC says which node neighbours send VIP traffic to. Who holds
// the VIP is read from each namespace's eth0 with `ip -j addr`. Every wait has a deadline.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NetnsLab, requireCommands } from '../support/netns.js';
import { addNodeLan, NetnsCluster, type NetnsNode } from '../support/netns-cluster.js';
import { waitFor } from '../support/wait.js';

const vip = '10.80.0.100';
const opsAddress = '10.80.0.5';
const nodeAddresses = { n1: '10.80.0.11', n2: '10.80.0.12', n3: '10.80.0.13' };
/** Election after a SIGKILL plus CLI round trips on a busy machine. */
const electionTimeoutMs = 30_000;
/** The VIP follows leadership within a round (100 ms) once the node knows its role. */
const vipMoveTimeoutMs = 15_000;

let created: NetnsLab | undefined;
let cluster: NetnsCluster;
const ns = { lan: '', n1: '', n2: '', n3: '', ops: '' };

before(async () => {
  await requireCommands({ ip: 'iproute2', curl: 'curl', arping: 'iputils-arping' });
  created = await NetnsLab.create();
  const lab = created;
  Object.assign(ns, await addNodeLan(lab, nodeAddresses, 24, { ops: { addresses: [`${opsAddress}/24`] } }));
  cluster = await NetnsCluster.startOnLan(lab, ns, nodeAddresses, (_id, address) => [
    ...['--vip', vip, '--vip-interface', 'eth0', '--http-addr', '0.0.0.0:8080'],
    ...['--metrics-addr', `${address}:9100`],
  ]);
});

after(async () => {
  await created?.destroy();
});

function theLab(): NetnsLab {
  if (created === undefined) throw new Error('the lab was not created');
  return created;
}

/** Whether `node`'s namespace has the VIP on eth0. */
async function hasVip(node: NetnsNode): Promise<boolean> {
  const out = await theLab().check(node.spec.ns, ['ip', '-j', 'addr', 'show', 'dev', 'eth0']);
  const links = JSON.parse(out) as { addr_info: { family: string; local: string }[] }[];
  return links.some((l) => l.addr_info.some((a) => a.family === 'inet' && a.local === vip));
}

/** The ids of the nodes whose namespace has the VIP. */
async function holders(): Promise<string[]> {
  const held = await Promise.all(cluster.nodes.map(async (n) => ((await hasVip(n)) ? [n.id] : [])));
  return held.flat();
}

async function macOf(namespace: string): Promise<string> {
  const out = await theLab().check(namespace, ['ip', '-j', 'link', 'show', 'dev', 'eth0']);
  const [link] = JSON.parse(out) as { address: string }[];
  assert.ok(link !== undefined);
  return link.address;
}

/** The MAC that ops's ARP entry for the VIP points at, if it has one. */
async function opsNeighbourMac(): Promise<string | undefined> {
  const out = await theLab().check(ns.ops, ['ip', '-j', 'neigh', 'show', vip, 'dev', 'eth0']);
  const [entry] = JSON.parse(out) as { lladdr?: string }[];
  return entry?.lladdr;
}

/** An HTTP request from ops to the VIP: the iPXE script of a machine nobody registered (404). */
async function curlVip(): Promise<{ code: number | null; status: string }> {
  const url = `http://${vip}:8080/ipxe/52:54:00:79:00:01`;
  const r = await theLab().run(ns.ops, [
    'curl',
    '-sS',
    '-o',
    '/dev/null',
    '--max-time',
    '5',
    '-w',
    '%{http_code}',
    url,
  ]);
  return { code: r.code, status: r.stdout };
}

async function metric(node: NetnsNode, name: string): Promise<string | undefined> {
  const out = await theLab().check(ns.ops, [
    'curl',
    '-sS',
    '--max-time',
    '5',
    `http://${node.address}:9100/metrics`,
  ]);
  return out.split('\n').find((l) => l.startsWith(`${name} `));
}

/** Waits until exactly one node holds the VIP and `ok` accepts it; the failure names the holders. */
async function waitForSoleHolder(what: string, ok: (holder: string) => boolean): Promise<void> {
  let last: string[] = [];
  await waitFor(
    what,
    async () => {
      last = await holders();
      return last.length === 1 && ok(last[0] ?? '');
    },
    vipMoveTimeoutMs,
    100,
  ).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; holders: [${last.join(', ')}]`);
  });
}

function waitForHolder(expected: NetnsNode): Promise<void> {
  return waitForSoleHolder(`the VIP on ${expected.id} alone`, (holder) => holder === expected.id);
}

describe('the VIP follows the leader', () => {
  let leader: NetnsNode;

  it('is held by the leader alone, answers HTTP, and the metric says who holds it', async () => {
    leader = await cluster.waitForLeader(ns.ops, electionTimeoutMs);
    await waitForHolder(leader);
    const reply = await curlVip();
    assert.equal(reply.code, 0);
    assert.equal(reply.status, '404', 'an unknown machine has no script, from the node holding the VIP');
    assert.equal(await opsNeighbourMac(), await macOf(leader.spec.ns));
    assert.equal(await metric(leader, 'slipway_vip_held'), 'slipway_vip_held 1');
    for (const follower of cluster.followersOf(leader))
      assert.equal(await metric(follower, 'slipway_vip_held'), 'slipway_vip_held 0');
  });

  it('moves to the new leader when the holder is SIGKILLed; neighbours learn it by gratuitous ARP', async () => {
    const killed = leader;
    await cluster.kill(killed);
    leader = await cluster.waitForLeader(ns.ops, electionTimeoutMs, killed);
    const newMac = await macOf(leader.spec.ns);
    await waitFor('the new leader to take the VIP', () => hasVip(leader), vipMoveTimeoutMs, 100);
    // Nothing ran in the killed process: the address stays in its namespace until it restarts.
    assert.equal(await hasVip(killed), true);
    await waitFor(
      'ops to send VIP traffic to the new leader',
      async () => (await opsNeighbourMac()) === newMac,
      10_000,
      100,
    );
    const reply = await curlVip();
    assert.equal(reply.code, 0);
    assert.equal(reply.status, '404');

    // Started again, it is a follower, and it removes the VIP it left behind.
    await cluster.restart(killed);
    await waitForHolder(leader);
  });

  it('is let go by a leader stopped with SIGTERM and taken by the leader it hands over to', async () => {
    const stopped = leader;
    await cluster.kill(stopped, 'SIGTERM');
    assert.equal(await hasVip(stopped), false, 'a node that stops lets the VIP go');
    leader = await cluster.waitForLeader(ns.ops, electionTimeoutMs, stopped);
    await waitForHolder(leader);
    const newMac = await macOf(leader.spec.ns);
    await waitFor(
      'ops to send VIP traffic to the new leader',
      async () => (await opsNeighbourMac()) === newMac,
      10_000,
      100,
    );
    assert.equal((await curlVip()).status, '404');
    await cluster.restart(stopped);
  });

  it('is let go by a leader cut off from the others (it loses quorum), and taken by the new leader', async () => {
    await waitForHolder(leader);
    const cut = leader;
    const cable = `p-${cut.id}`; // its veth's end on the bridge
    await theLab().check(ns.lan, ['ip', 'link', 'set', cable, 'down']);
    try {
      await waitForSoleHolder(
        'the cut-off leader to let the VIP go and another node to take it',
        (holder) => holder !== cut.id,
      );
    } finally {
      await theLab().check(ns.lan, ['ip', 'link', 'set', cable, 'up']);
    }
    leader = await cluster.waitForLeader(ns.ops, electionTimeoutMs);
    await waitForHolder(leader);
  });
});

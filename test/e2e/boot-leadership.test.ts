// Goal: leadership follows the node that can serve boot, as keepalived's track_interface moves a
// VIP. A leader whose provisioning link loses carrier hands leadership (and so the VIP and DHCP)
// to a caught-up follower whose boot services serve, and a machine gets its lease from the new
// leader; the link coming back moves nothing; a follower whose link is cut does not take
// leadership; and with no healthy peer the unhealthy leader keeps leading.
// Method: one lab with two segments: management (bridge br0 in namespace lan: raft and the API
// on 10.80.0.11-13, the CLI in ops at 10.80.0.5) and provisioning (bridge br0 in namespace plan: prov0 on 10.81.0.11-13, the
// VIP 10.81.0.100, DHCP on prov0); c1 holds a machine's veth on the provisioning segment and runs
// busybox udhcpc. A link is cut by setting its port on the provisioning bridge down (a pulled
// cable: the node's prov0 loses carrier, raft carries on over management). Every wait has a
// deadline; the time from a cut to the machine's lease from the new leader is printed.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NetnsLab, requireCommands } from '../support/netns.js';
import {
  addProvisioningLan,
  NetnsCluster,
  setProvisioningLink,
  type NetnsNode,
} from '../support/netns-cluster.js';
import { waitFor } from '../support/wait.js';

const ids = ['n1', 'n2', 'n3'] as const;
type Id = (typeof ids)[number];
const mgmt: Record<Id, string> = { n1: '10.80.0.11', n2: '10.80.0.12', n3: '10.80.0.13' };
const prov: Record<Id, string> = { n1: '10.81.0.11', n2: '10.81.0.12', n3: '10.81.0.13' };
const vip = '10.81.0.100';
const machine = { id: 'm1', mac: '52:54:00:81:00:10', ip: '10.81.0.50' };
/** A handover: the round (250 ms), the Status asks, the transfer; generous for a loaded machine. */
const handoverMs = 10_000;

let lab: NetnsLab;
let cluster: NetnsCluster;
const ns: Record<string, string> = {};

before(async () => {
  await requireCommands({ ip: 'iproute2', busybox: 'busybox-static' });
  lab = await NetnsLab.create();
  Object.assign(
    ns,
    await lab.addLan({
      ...Object.fromEntries(ids.map((id) => [id, { addresses: [`${mgmt[id]}/24`] }])),
      ops: { addresses: ['10.80.0.5/24'] },
    }),
  );
  Object.assign(ns, await addProvisioningLan(lab, ns as Record<Id, string>, prov, { mac: machine.mac }));
  cluster = await NetnsCluster.start(
    lab,
    ids.map((id) => ({
      id,
      ns: ns[id]!,
      address: mgmt[id],
      args: [
        '--dhcp-interface',
        'prov0',
        '--vip',
        vip,
        '--vip-interface',
        'prov0',
        '--http-addr',
        '0.0.0.0:8080',
      ],
    })),
  );
});

after(async () => {
  await lab.destroy();
});

async function setLink(id: Id, up: boolean): Promise<void> {
  await setProvisioningLink(lab, ns['plan']!, id, up);
}

const nodeOf = (id: string): NetnsNode => cluster.nodes.find((n) => n.id === id)!;

async function leaderId(): Promise<string> {
  return (await cluster.waitForLeader(ns['ops']!, 30_000)).id;
}

/** One lease for c1 (DISCOVERs a second apart); returns which node answered and how long it took. */
async function lease(): Promise<{ ms: number; serverid: string; by: string[] }> {
  const before = new Map(cluster.nodes.map((n) => [n.id, n.logsFor('DHCP reply sent', machine.mac).length]));
  const t0 = Date.now();
  const r = await lab.run(
    ns['c1']!,
    ['busybox', 'udhcpc', '-i', 'eth0', '-n', '-q', '-t', '15', '-T', '1', '-s', '/bin/true'],
    30_000,
  );
  const ms = Date.now() - t0;
  assert.equal(r.code, 0, `no lease:\n${r.stdout}${r.stderr}`);
  const serverid = /obtained from (\d+\.\d+\.\d+\.\d+)/.exec(r.stdout + r.stderr)?.[1] ?? '';
  await waitFor(
    'the answer logged',
    () =>
      cluster.nodes.some((n) => n.logsFor('DHCP reply sent', machine.mac).length > (before.get(n.id) ?? 0)),
    5000,
    50,
  );
  const by = cluster.nodes
    .filter((n) => n.logsFor('DHCP reply sent', machine.mac).length > (before.get(n.id) ?? 0))
    .map((n) => n.id);
  return { ms, serverid, by };
}

describe('leadership follows boot health', { concurrency: 1 }, () => {
  let first = '';

  it('a leader whose provisioning link is cut hands leadership to a follower that serves', async () => {
    first = await leaderId();
    await cluster.slipwayOk(ns['ops']!, [
      'hardware',
      'create',
      '--id',
      machine.id,
      '--mac',
      machine.mac,
      '--ip',
      `${machine.ip}/24`,
    ]);
    const steady = await lease();
    assert.deepEqual(steady.by, [first], 'only the leader answers');
    const t0 = Date.now();
    await setLink(first as Id, false);
    let next = '';
    await waitFor(
      'another leader',
      async () => {
        next =
          (await cluster.status(ns['ops']!)).find((r) => r.leader !== '' && r.leader !== first)?.leader ?? '';
        return next !== '';
      },
      handoverMs,
      100,
    );
    const handedMs = Date.now() - t0;
    const got = await lease();
    console.log(
      `leader ${first} cut: leadership moved to ${next} after ${handedMs} ms; lease ${Date.now() - t0} ms after the cut`,
    );
    assert.deepEqual(got.by, [next], 'the new leader answers');
    assert.equal(got.serverid, vip);
    assert.ok(
      nodeOf(first)
        .logRecords()
        .some((r) => r.msg === 'leadership handed to a node whose boot services serve'),
      'the old leader handed leadership over (not a quorum loss)',
    );
  });

  it('the link coming back moves nothing; a follower whose link is cut does not lead', async () => {
    const now = await leaderId();
    await setLink(first as Id, true);
    await waitFor(
      'all serving',
      async () => (await cluster.status(ns['ops']!)).every((r) => r.health === 'ok'),
      10_000,
      100,
    );
    assert.equal(await leaderId(), now, 'no move back when the old leader recovers');
    const follower = ids.find((id) => id !== now)!;
    await setLink(follower, false);
    await waitFor(
      'the follower holds its elections',
      () =>
        nodeOf(follower)
          .logRecords()
          .some(
            (r) => r.msg === 'boot services not serving here: no election started while these peers serve',
          ),
      handoverMs,
      100,
    );
    assert.equal(await leaderId(), now);
    await setLink(follower, true);
  });

  it('with no peer that serves, the unhealthy leader keeps leading', async () => {
    const now = await leaderId();
    // The followers first: cut while a follower still served, the leader would rightly hand over.
    const followers = ids.filter((id) => id !== now);
    for (const id of followers) await setLink(id, false);
    await waitFor(
      'the followers waiting',
      async () =>
        (await cluster.status(ns['ops']!)).filter((r) => /dhcp waiting/.test(r.reason)).length ===
        followers.length,
      10_000,
      100,
    );
    await setLink(now as Id, false);
    await waitFor(
      'every node waiting',
      async () => (await cluster.status(ns['ops']!)).every((r) => /dhcp waiting/.test(r.reason)),
      10_000,
      100,
    );
    // Over a dozen rounds of the boot leadership check (250 ms each), the leader stays.
    const t0 = Date.now();
    while (Date.now() - t0 < 3000) assert.equal(await leaderId(), now);
    for (const id of ids) await setLink(id, true);
  });
});

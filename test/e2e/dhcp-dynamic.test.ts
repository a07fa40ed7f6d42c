// Goal: dynamic mode on real `slipway server` nodes: machines no hardware record knows get pool
// addresses from the leader, each lease committed through Raft before the ACK (every node's
// applied state has it); two real clients (busybox udhcpc, ISC dhclient) get different
// addresses with the pool's netmask, router and lease time; after the leader is SIGKILLed, a
// client that renews keeps its address from the new leader, never promised more than committed;
// a RELEASE ends the lease in the state but keeps the address for that machine.
// Method: a network-namespace lab like node-boot.test.ts. Namespace lan holds bridge br0;
// n1-n3 run one node each on a veth (10.79.0.11-13/24, DHCP on that veth in dynamic mode with
// the pool 10.79.0.100-109); ops (10.79.0.5) runs the CLI; c1 and c2 hold the clients' veths.
// The replicated leases are read with `slipway lease list -o json` (linearizable), and per node
// with --local. Every wait has a deadline.
import assert from 'node:assert/strict';
import { chmod, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { NetnsLab, requireCommands, type LabProcess } from '../support/netns.js';
import { addNodeLan, NetnsCluster, slipwayBin, type NetnsNode } from '../support/netns-cluster.js';

const nodeAddresses = { n1: '10.79.0.11', n2: '10.79.0.12', n3: '10.79.0.13' };
const router = '10.79.0.1';
const pool = { first: 100, last: 109, spec: `10.79.0.100-10.79.0.109/24,router=${router}` };
const leaseTimeS = 600;
const macs = { c1: '52:54:00:79:00:01', c2: '52:54:00:79:00:02' };
const electionTimeoutMs = 30_000;

let created: NetnsLab | undefined;
let cluster: NetnsCluster;
let leader: NetnsNode;
const ns = { lan: '', n1: '', n2: '', n3: '', ops: '', c1: '', c2: '' };
let hooks: { udhcpc: string; dhclient: string };
/** The address c1 got first. */
let c1Address = '';

interface LeaseDoc {
  ip: string;
  mac: string;
  state: string;
  expiresMs: number;
  active: boolean;
}

before(async () => {
  await requireCommands({ ip: 'iproute2', busybox: 'busybox-static', dhclient: 'isc-dhcp-client' });
  created = await NetnsLab.create();
  const lab = created;
  Object.assign(
    ns,
    await addNodeLan(lab, nodeAddresses, 24, {
      ops: { addresses: ['10.79.0.5/24'] },
      c1: { mac: macs.c1 },
      c2: { mac: macs.c2 },
    }),
  );

  hooks = { udhcpc: path.join(lab.dir, 'udhcpc.sh'), dhclient: path.join(lab.dir, 'dhclient.sh') };
  // udhcpc configures its address: a renewal is unicast from ciaddr, and ACKed to it.
  await writeFile(
    hooks.udhcpc,
    [
      '#!/bin/sh',
      'echo "udhcpc event=$1 ip=$ip mask=$mask router=$router lease=$lease serverid=$serverid"',
      'case "$1" in',
      '  bound|renew) ip addr replace "$ip/$mask" dev "$interface" ;;',
      '  deconfig) ip addr flush dev "$interface" ;;',
      'esac',
      '',
    ].join('\n'),
  );
  await writeFile(
    hooks.dhclient,
    '#!/bin/sh\necho "dhclient reason=$reason ip=$new_ip_address mask=$new_subnet_mask ' +
      'routers=$new_routers lease=$new_dhcp_lease_time server=$new_dhcp_server_identifier"\n',
  );
  await chmod(hooks.udhcpc, 0o755);
  await chmod(hooks.dhclient, 0o755);

  cluster = await NetnsCluster.startOnLan(lab, ns, nodeAddresses, () => [
    ...['--dhcp-interface', 'eth0', '--dhcp-mode', 'dynamic', '--dhcp-pool', pool.spec],
    ...['--dhcp-lease-time', String(leaseTimeS)],
  ]);
  leader = await cluster.waitForLeader(ns.ops, electionTimeoutMs);
});

after(async () => {
  await created?.destroy();
});

function theLab(): NetnsLab {
  if (created === undefined) throw new Error('the lab was not created');
  return created;
}

function fields(output: string, prefix: string): Record<string, string> {
  const line = output.split('\n').find((l) => l.startsWith(prefix));
  assert.ok(line !== undefined, `no "${prefix}" in:\n${output}`);
  return Object.fromEntries(
    [...line.matchAll(/(\w+)=(\S*)/g)].map((m): [string, string] => [m[1] ?? '', m[2] ?? '']),
  );
}

function inPool(ip: string | undefined): boolean {
  const parts = ip?.split('.') ?? [];
  const last = Number(parts[3]);
  return parts.slice(0, 3).join('.') === '10.79.0' && last >= pool.first && last <= pool.last;
}

async function leases(): Promise<LeaseDoc[]> {
  return (
    JSON.parse(await cluster.slipwayOk(ns.ops, ['-o', 'json', 'lease', 'list'])) as { leases: LeaseDoc[] }
  ).leases;
}

/** Each live node's applied leases (--local), polled until `done` holds for all or the deadline. */
async function everyNodeHas(done: (list: readonly LeaseDoc[]) => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const views: LeaseDoc[][] = [];
    for (const node of cluster.nodes.filter((n) => n.running)) {
      const argv = [
        process.execPath,
        slipwayBin,
        '--server',
        node.apiAddr,
        '-o',
        'json',
        'lease',
        'list',
        '--local',
      ];
      const result = await theLab().run(ns.ops, argv, 15_000);
      views.push(result.code === 0 ? (JSON.parse(result.stdout) as { leases: LeaseDoc[] }).leases : []);
    }
    if (views.every(done)) return;
    if (Date.now() >= deadline) throw new Error(`not every node has the lease: ${JSON.stringify(views)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('dynamic DHCP on a 3-node cluster', { concurrency: 1 }, () => {
  it('udhcpc gets a pool address, committed on every node, from the leader only', async () => {
    const argv = [
      'busybox',
      'udhcpc',
      '-i',
      'eth0',
      '-n',
      '-q',
      '-s',
      hooks.udhcpc,
      '-t',
      '5',
      '-T',
      '1',
      '-A',
      '1',
    ];
    const result = await theLab().run(ns.c1, argv, 30_000);
    assert.equal(result.code, 0, `udhcpc: ${result.stdout}${result.stderr}`);
    const bound = fields(result.stdout, 'udhcpc event=bound ');
    assert.ok(inPool(bound['ip']), `a pool address: ${bound['ip']}`);
    assert.deepEqual(
      [bound['mask'], bound['router'], bound['lease'], bound['serverid']],
      ['24', router, String(leaseTimeS), leader.address],
    );
    c1Address = bound['ip'] ?? '';
    const list = await leases();
    assert.deepEqual(
      list.map((l) => [l.ip, l.mac, l.state, l.active]),
      [[c1Address, macs.c1, 'bound', true]],
    );
    await everyNodeHas((view) => view.some((l) => l.ip === c1Address && l.mac === macs.c1), 10_000);
    for (const node of cluster.followersOf(leader)) {
      assert.equal(node.logsFor('DHCP reply sent', macs.c1).length, 0, `${node.id} stays silent`);
    }
  });

  it('dhclient gets another pool address with the same settings', async () => {
    const files = [
      '-lf',
      path.join(theLab().dir, 'dhclient.leases'),
      '-pf',
      path.join(theLab().dir, 'dhclient.pid'),
    ];
    const client = theLab().spawn(ns.c2, [
      'dhclient',
      '-d',
      '-1',
      '-v',
      '-4',
      '-sf',
      hooks.dhclient,
      ...files,
      'eth0',
    ]);
    try {
      const output = await client.waitForOutput(
        (text) => text.includes('reason=BOUND'),
        30_000,
        'a BOUND lease',
      );
      const bound = fields(output, 'dhclient reason=BOUND ');
      assert.ok(inPool(bound['ip']), `a pool address: ${bound['ip']}`);
      assert.notEqual(bound['ip'], c1Address);
      // The answering server is the leader of now: on a loaded machine an election may have
      // moved leadership since the suite began.
      leader = await cluster.waitForLeader(ns.ops, electionTimeoutMs);
      assert.deepEqual(
        [bound['mask'], bound['routers'], bound['lease'], bound['server']],
        ['255.255.255.0', router, String(leaseTimeS), leader.address],
      );
      const list = await leases();
      assert.deepEqual(list.find((l) => l.mac === macs.c2)?.ip, bound['ip']);
      assert.equal(list.length, 2);
    } finally {
      await client.stop();
    }
  });

  it('after the leader is SIGKILLed, a renewing client keeps its address from the committed lease', async () => {
    const argv = [
      'busybox',
      'udhcpc',
      '-f',
      '-i',
      'eth0',
      '-s',
      hooks.udhcpc,
      '-t',
      '5',
      '-T',
      '1',
      '-A',
      '1',
    ];
    const client: LabProcess = theLab().spawn(ns.c1, argv);
    try {
      await client.waitForOutput((o) => o.includes('udhcpc event=bound '), 15_000, 'a lease');
      assert.equal(fields(client.output, 'udhcpc event=bound ')['ip'], c1Address, 'its old address again');
      const before = (await leases()).find((l) => l.mac === macs.c1);
      assert.ok(before !== undefined);

      const old = leader;
      await cluster.kill(old);
      leader = await cluster.waitForLeader(ns.ops, electionTimeoutMs, old);
      // The ACK comes after this moment, so what it promises must end by the committed expiry.
      const renewAsked = Date.now();
      client.child.kill('SIGUSR1');
      await client.waitForOutput((o) => o.includes('udhcpc event=renew '), 20_000, 'a renewed lease');
      const renewed = fields(client.output, 'udhcpc event=renew ');
      assert.deepEqual([renewed['ip'], renewed['serverid']], [c1Address, leader.address]);
      const after = (await leases()).find((l) => l.mac === macs.c1);
      assert.equal(after?.ip, c1Address);
      // Early in the lease the new leader ACKs what is committed (no extension yet); it never
      // promises more than the replicated lease holds.
      assert.ok((after?.expiresMs ?? 0) >= before.expiresMs, 'the committed lease stands');
      const promisedS = Number(renewed['lease']);
      assert.ok(
        promisedS > 0 && renewAsked + promisedS * 1000 <= (after?.expiresMs ?? 0) + 1000,
        `lease ${renewed['lease']} s`,
      );
    } finally {
      await client.stop();
    }
  });

  it('a RELEASE ends the lease in the state and keeps the address for the machine', async () => {
    const argv = [
      'busybox',
      'udhcpc',
      '-f',
      '-i',
      'eth0',
      '-s',
      hooks.udhcpc,
      '-t',
      '5',
      '-T',
      '1',
      '-A',
      '1',
    ];
    const client: LabProcess = theLab().spawn(ns.c1, argv);
    try {
      await client.waitForOutput((o) => o.includes('udhcpc event=bound '), 15_000, 'a lease');
      assert.equal(fields(client.output, 'udhcpc event=bound ')['ip'], c1Address);
      client.child.kill('SIGUSR2'); // busybox udhcpc: release the lease
      await client.waitForOutput((o) => o.includes('unicasting a release'), 10_000, 'a RELEASE sent');
      await everyNodeHas(
        (view) => view.some((l) => l.mac === macs.c1 && l.ip === c1Address && !l.active),
        10_000,
      );
    } finally {
      await client.stop();
    }
  });
});

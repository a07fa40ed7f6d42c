// Goal: the boot services of real `slipway server` nodes answer from the replicated state, and
// only the raft leader answers DHCP: a machine registered with `slipway hardware create` gets
// its reservation (address, netmask, router, lease time, server id = the leader) from committed
// state; exactly one node answers; a MAC registered while the cluster runs is answered from then
// on, with nothing restarted; after the leader is SIGKILLed the client renews its address from
// the new leader; every node serves the same iPXE script (the worker id and token from the
// state), and `--replace` with allowPXE off takes the script and the DHCP boot file away.
// Method: a network-namespace lab. Namespace lan holds bridge br0; namespaces n1-n3 each run one
// `slipway server` on a veth on br0 (10.78.0.11-13/24; raft, API, DHCP on that veth, TFTP :69,
// HTTP :8080; no --vip, so each node advertises its own address and the server id names the
// node that answered). Namespace ops (10.78.0.5) runs the CLI, curl and an offer probe that
// broadcasts a DISCOVER and lists every OFFER heard; c1 and c2 hold the clients' veths with the
// machines' MACs, where busybox udhcpc runs with a hook that prints what it was given. Per-node
// evidence comes from the nodes' debug logs ("DHCP reply sent"). Every wait has a deadline.
import assert from 'node:assert/strict';
import { chmod, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { NetnsLab, requireCommands, type LabProcess, type RunResult } from '../support/netns.js';
import {
  addNodeLan,
  NetnsCluster,
  apiPort,
  collectOffers,
  type NetnsNode,
} from '../support/netns-cluster.js';

const subnet = { prefix: 24, gateway: '10.78.0.1', ops: '10.78.0.5' };
const nodeAddresses = { n1: '10.78.0.11', n2: '10.78.0.12', n3: '10.78.0.13' };
const machine = {
  /** Registered at the start, with a document (lease time, DNS, hostname). */
  early: { id: 'rack1-a', mac: '52:54:00:78:00:10', ip: '10.78.0.50', leaseTimeS: 600 },
  /** Unknown at first, registered with flags while the cluster runs. */
  late: { id: 'rack1-b', mac: '52:54:00:78:00:11', ip: '10.78.0.51' },
};
/** What a BIOS PXE ROM sends as option 60; it makes the DHCP answer carry a boot file. */
const pxeVendorClass = 'PXEClient:Arch:00000:UNDI:002001';
/** Election after a SIGKILL: the default ticks (50 ms x 6) plus CLI round trips on a busy machine. */
const electionTimeoutMs = 30_000;

let created: NetnsLab | undefined;
let cluster: NetnsCluster;
let leader: NetnsNode;
const ns = { lan: '', n1: '', n2: '', n3: '', ops: '', c1: '', c2: '' };
let hooks: { print: string; configure: string };

before(async () => {
  await requireCommands({ ip: 'iproute2', busybox: 'busybox-static', curl: 'curl' });
  created = await NetnsLab.create();
  const lab = created;
  Object.assign(
    ns,
    await addNodeLan(lab, nodeAddresses, subnet.prefix, {
      ops: { addresses: [`${subnet.ops}/${subnet.prefix}`] },
      c1: { mac: machine.early.mac },
      c2: { mac: machine.late.mac },
    }),
  );

  hooks = { print: path.join(lab.dir, 'print.sh'), configure: path.join(lab.dir, 'configure.sh') };
  const report =
    'echo "udhcpc event=$1 ip=$ip mask=$mask router=$router dns=$dns host=$hostname lease=$lease ' +
    'serverid=$serverid siaddr=$siaddr boot_file=$boot_file"';
  await writeFile(hooks.print, `#!/bin/sh\n${report}\n`);
  // The renewing client needs its address configured: the new leader ACKs a renewal to ciaddr.
  await writeFile(
    hooks.configure,
    [
      '#!/bin/sh',
      report,
      'case "$1" in',
      '  bound|renew) ip addr replace "$ip/$mask" dev "$interface" ;;',
      '  deconfig) ip addr flush dev "$interface" ;;',
      'esac',
      '',
    ].join('\n'),
  );
  await chmod(hooks.print, 0o755);
  await chmod(hooks.configure, 0o755);

  cluster = await NetnsCluster.startOnLan(lab, ns, nodeAddresses, (_id, address) => [
    ...['--dhcp-interface', 'eth0', '--tftp-addr', `${address}:69`, '--http-addr', `${address}:8080`],
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

/** One udhcpc run: at most `tries` DISCOVERs a second apart, then exit (-n) or quit with a lease (-q). */
function udhcpc(namespace: string, tries: number, extra: readonly string[] = []): Promise<RunResult> {
  const argv = ['busybox', 'udhcpc', '-i', 'eth0', '-n', '-q', '-s', hooks.print, ...extra];
  return theLab().run(namespace, [...argv, '-t', String(tries), '-T', '1', '-A', '1'], 30_000);
}

/** The hook's line for `event`, as fields. */
function hookLine(output: string, event: string): Record<string, string> {
  const line = output.split('\n').find((l) => l.startsWith(`udhcpc event=${event} `));
  assert.ok(line !== undefined, `no "${event}" in udhcpc output:\n${output}`);
  return Object.fromEntries(
    [...line.matchAll(/(\w+)=(\S*)/g)].map((m): [string, string] => [m[1] ?? '', m[2] ?? '']),
  );
}

/** How many DHCP replies each node logged for `mac`, by node id. */
function repliesByNode(mac: string): Record<string, number> {
  return Object.fromEntries(cluster.nodes.map((n) => [n.id, n.logsFor('DHCP reply sent', mac).length]));
}

async function curl(url: string): Promise<{ status: string; body: string }> {
  const result = await theLab().run(ns.ops, ['curl', '-sS', '--max-time', '10', '-w', '\n%{http_code}', url]);
  assert.equal(result.code, 0, `curl ${url}: ${result.stderr}`);
  const cut = result.stdout.lastIndexOf('\n');
  return { status: result.stdout.slice(cut + 1), body: result.stdout.slice(0, cut) };
}

/** Polls `url` until `done(reply)` holds or the deadline passes; returns the last reply. */
async function curlUntil(
  url: string,
  done: (reply: { status: string; body: string }) => boolean,
  timeoutMs: number,
): Promise<{ status: string; body: string }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const reply = await curl(url);
    if (done(reply) || Date.now() >= deadline) return reply;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('boot services on a 3-node cluster', { concurrency: 1 }, () => {
  it('every node serves DHCP on its veth, and they agree on one leader', () => {
    for (const node of cluster.nodes) {
      const listening = node.logRecords().find((r) => r.msg === 'DHCP server listening');
      assert.ok(listening !== undefined, `${node.id} logs its DHCP listener`);
      assert.equal(listening['interface'], 'eth0');
      assert.equal(listening['serverAddress'], node.address, 'no --vip: each node advertises itself');
    }
    assert.equal(cluster.followersOf(leader).length, 2);
  });

  it('a machine created with the CLI gets its reservation from the leader, and from no other node', async () => {
    const { early } = machine;
    const document = path.join(theLab().dir, `${early.id}.json`);
    await writeFile(
      document,
      JSON.stringify({
        id: early.id,
        arch: 'x86_64',
        uefi: false,
        interfaces: [
          {
            mac: early.mac,
            ip: `${early.ip}/${subnet.prefix}`,
            gateway: subnet.gateway,
            dns: [subnet.gateway],
            hostname: early.id,
            leaseTime: early.leaseTimeS,
          },
        ],
        netboot: { allowPXE: true, allowWorkflow: true },
      }),
    );
    await cluster.slipwayOk(ns.ops, ['hardware', 'create', '-f', document]);

    const result = await udhcpc(ns.c1, 5, ['-V', pxeVendorClass]);
    assert.equal(result.code, 0, `udhcpc: ${result.stdout}${result.stderr}`);
    const bound = hookLine(result.stdout, 'bound');
    assert.deepEqual(
      [bound['ip'], bound['mask'], bound['router'], bound['dns'], bound['host'], bound['lease']],
      [early.ip, String(subnet.prefix), subnet.gateway, subnet.gateway, early.id, String(early.leaseTimeS)],
    );
    assert.equal(bound['serverid'], leader.address, 'the leader answered');
    assert.equal(bound['boot_file'], 'undionly.kpxe', 'a BIOS PXE client is sent the iPXE binary');
    assert.equal(bound['siaddr'], leader.address, 'next-server is the answering node');

    // A client takes the first offer; the probe hears them all.
    const offers = await collectOffers(theLab(), {
      ns: ns.ops,
      ifname: 'eth0',
      mac: early.mac,
      firstOfferTimeoutMs: 5000,
      listenMs: 2000,
    });
    assert.deepEqual(offers, [{ serverId: leader.address, yiaddr: early.ip, from: leader.address }]);
    const replies = repliesByNode(early.mac);
    for (const follower of cluster.followersOf(leader)) assert.equal(replies[follower.id], 0, follower.id);
    // OFFER and ACK to udhcpc, OFFER to the probe (more if udhcpc retransmitted on a slow machine).
    assert.ok((replies[leader.id] ?? 0) >= 3, JSON.stringify(replies));
  });

  it('an unregistered MAC gets no answer; once created, it gets its lease with nothing restarted', async () => {
    const { late } = machine;
    const pids = cluster.nodes.map((n) => n.process.pid);
    const refused = await udhcpc(ns.c2, 2);
    assert.equal(refused.code, 1, `udhcpc -n exits 1 without a lease:\n${refused.stdout}`);
    assert.doesNotMatch(refused.stdout, /event=bound/);
    const ignored = await leader.waitForLogs('DHCP request not answered', late.mac, 5_000);
    assert.match(String(ignored[0]?.['reason']), /no hardware has MAC/);

    const addr = `${late.ip}/${subnet.prefix}`;
    const created = ['hardware', 'create', '--id', late.id, '--mac', late.mac, '--ip', addr];
    await cluster.slipwayOk(ns.ops, [...created, '--gateway', subnet.gateway]);
    const result = await udhcpc(ns.c2, 5);
    assert.equal(result.code, 0, `udhcpc: ${result.stdout}${result.stderr}`);
    const bound = hookLine(result.stdout, 'bound');
    assert.deepEqual(
      [bound['ip'], bound['mask'], bound['router'], bound['lease'], bound['serverid']],
      [late.ip, String(subnet.prefix), subnet.gateway, '86400', leader.address],
    );
    assert.deepEqual(
      cluster.nodes.map((n) => [n.process.pid, n.running]),
      pids.map((pid) => [pid, true]),
      'the same processes, all still running',
    );
  });

  it('after the leader is SIGKILLed, the client renews its address from the new leader', async () => {
    const { early } = machine;
    const argv = ['busybox', 'udhcpc', '-f', '-i', 'eth0', '-s', hooks.configure, '-V', pxeVendorClass];
    const client: LabProcess = theLab().spawn(ns.c1, [...argv, '-t', '5', '-T', '1', '-A', '1']);
    try {
      await client.waitForOutput((o) => o.includes('udhcpc event=bound '), 15_000, 'a first lease');
      assert.equal(hookLine(client.output, 'bound')['serverid'], leader.address);

      const old = leader;
      await cluster.kill(old);
      leader = await cluster.waitForLeader(ns.ops, electionTimeoutMs, old);
      // SIGUSR1: renew now. The unicast REQUEST to the dead node goes unanswered; the client
      // then rebinds with a broadcast REQUEST, which only the new leader answers.
      client.child.kill('SIGUSR1');
      await client.waitForOutput((o) => o.includes('udhcpc event=renew '), 20_000, 'a renewed lease');
      const renewed = hookLine(client.output, 'renew');
      assert.equal(renewed['ip'], early.ip, 'the same address');
      assert.equal(renewed['lease'], String(early.leaseTimeS));
      assert.equal(renewed['serverid'], leader.address, 'answered by the new leader');
      assert.notEqual(leader, old);
      const answers = await leader.waitForLogs('DHCP reply sent', early.mac, 5_000);
      assert.ok(
        answers.every((r) => r['reply'] === 'ACK' && r['via'] === 'client-address'),
        `the new leader's answers are ACKs of the rebinding REQUEST, to ciaddr: ${JSON.stringify(answers)}`,
      );
      for (const follower of cluster.followersOf(leader)) {
        assert.equal(follower.logsFor('DHCP reply sent', early.mac).length, 0, follower.id);
      }
    } finally {
      await client.stop();
    }
  });

  it('every node serves the same iPXE script with the worker id and no token; --replace with allowPXE off takes it away', async () => {
    const { early } = machine;
    const token = (await cluster.slipwayOk(ns.ops, ['hardware', 'token', early.id])).trim();
    assert.match(token, /^\S{16,}$/);
    const live = cluster.nodes.filter((n) => n.running);
    assert.equal(live.length, 2);
    const scripts: string[] = [];
    for (const node of live) {
      const reply = await curl(`http://${node.address}:8080/ipxe/${early.mac}`);
      assert.equal(reply.status, '200', `${node.id}: ${reply.body}`);
      assert.ok(reply.body.includes(` slipway.worker_id=${early.id} `), reply.body);
      // Nothing secret on the boot wire (invariant 7): the booted worker claims its credential.
      assert.ok(!reply.body.includes(token), reply.body);
      assert.ok(reply.body.includes(` slipway.http=http://${node.address}:8080 `), reply.body);
      assert.ok(
        reply.body.includes(` slipway.server=${node.address}:${apiPort} `),
        'no --vip: the node itself',
      );
      // Without a VIP the URLs name the serving node; everything else must be identical.
      scripts.push(reply.body.replaceAll(node.address, 'NODE'));
    }
    assert.equal(scripts[0], scripts[1], `follower and leader scripts differ:\n${scripts.join('\n---\n')}`);

    const document = path.join(theLab().dir, `${early.id}-nopxe.json`);
    await writeFile(
      document,
      JSON.stringify({
        id: early.id,
        interfaces: [
          {
            mac: early.mac,
            ip: `${early.ip}/${subnet.prefix}`,
            gateway: subnet.gateway,
            leaseTime: early.leaseTimeS,
          },
        ],
        netboot: { allowPXE: false, allowWorkflow: true },
      }),
    );
    await cluster.slipwayOk(ns.ops, ['hardware', 'create', '--replace', '-f', document]);
    for (const node of live) {
      // A follower applies the commit a moment after the leader acknowledged it.
      const reply = await curlUntil(
        `http://${node.address}:8080/ipxe/${early.mac}`,
        (r) => r.status !== '200',
        10_000,
      );
      assert.equal(reply.status, '404', `${node.id}: ${reply.body}`);
      assert.match(reply.body, /network boot is off/);
    }
    const result = await udhcpc(ns.c1, 5, ['-V', pxeVendorClass]);
    assert.equal(result.code, 0, `udhcpc: ${result.stdout}${result.stderr}`);
    const bound = hookLine(result.stdout, 'bound');
    assert.equal(bound['ip'], early.ip, 'still its reservation');
    assert.equal(bound['serverid'], leader.address);
    assert.equal(bound['boot_file'], '', 'no boot file with allowPXE off');
  });
});

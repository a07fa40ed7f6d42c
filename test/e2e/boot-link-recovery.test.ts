// Goal: a node whose provisioning link has no carrier when it starts (a bridge without a port
// up, a switch port still down) is not half-started and not silently broken: it runs, reports
// DHCP as waiting with the reason in `cluster status` and metrics, and serves as soon as the
// carrier comes; a link that goes down and up again has DHCP answering a real client within 2 s
// of the carrier coming back; the address replacing the node's own while it runs is followed;
// a client renewing with the server identifier (the VIP) gets its answer from the VIP, as
// firmware that accepts replies only from the address it asked requires; and the interface
// renamed and back, or deleted and made again, brings DHCP and the VIP back by themselves; and
// requests relayed over another link are answered while the provisioning link is down.
// Method: one lab. Namespace lan holds bridge br0; n1 runs a one-node `slipway server` on eth0
// (10.79.0.11/24, --dhcp-interface eth0, the VIP 10.79.0.100 on eth0 while leading, metrics);
// c1 holds a machine's veth. The link is cut and restored by setting br0's port to n1 (p-n1)
// down and up, as a pulled cable would. The CLI and curl run inside n1 (the node's address is
// local there with or without carrier). c1 runs busybox udhcpc; for the renewal, iptables in c1
// drops any DHCP reply not sent from the VIP (udhcpc renews over a kernel socket, which the
// filter sees). ISC dhcrelay in namespace relay, on a routed link to n1 (rly0), relays for far's
// client on a segment of its own. Every wait has a deadline.
import assert from 'node:assert/strict';
import { chmod, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { NetnsLab, requireCommands, type LabProcess } from '../support/netns.js';
import { NetnsCluster, type NetnsNode } from '../support/netns-cluster.js';
import { waitFor } from '../support/wait.js';

const node = { id: 'n1', address: '10.79.0.11', moved: '10.79.0.12', vip: '10.79.0.100' };
const machine = { id: 'm1', mac: '52:54:00:79:00:10', ip: '10.79.0.50' };
/** Behind a relay on a routed link to the node (rly0), on a segment of its own. */
const far = { id: 'm2', mac: '52:54:00:79:02:10', ip: '10.79.2.50', giaddr: '10.79.2.1' };
/** The target: DHCP answers within 2 s of the carrier coming back. */
const answerAfterCarrierMs = 2000;

let lab: NetnsLab;
let cluster: NetnsCluster;
let n1: NetnsNode;
const ns = { lan: '', n1: '', c1: '', relay: '', far: '' };
let hook = '';

before(async () => {
  await requireCommands({
    ip: 'iproute2',
    busybox: 'busybox-static',
    curl: 'curl',
    iptables: 'iptables',
    dhcrelay: 'isc-dhcp-relay',
  });
  lab = await NetnsLab.create();
  Object.assign(
    ns,
    await lab.addLan({ n1: { addresses: [`${node.address}/24`] }, c1: { mac: machine.mac } }),
  );
  // A relay reaching the node over a link of its own, and a machine behind it.
  ns.relay = await lab.addNamespace('relay');
  ns.far = await lab.addNamespace('far');
  await lab.connect(
    { ns: ns.n1, ifname: 'rly0', addresses: ['10.79.9.1/30'] },
    { ns: ns.relay, ifname: 'up0', addresses: ['10.79.9.2/30'] },
  );
  await lab.addBridge(ns.relay, 'br1', [`${far.giaddr}/24`]);
  await lab.connect(
    { ns: ns.relay, ifname: 'p-far', bridge: 'br1' },
    { ns: ns.far, ifname: 'eth0', mac: far.mac },
  );
  await lab.addRoute(ns.relay, '10.79.0.0/24', '10.79.9.1');
  await lab.addRoute(ns.n1, '10.79.2.0/24', '10.79.9.2');
  hook = path.join(lab.dir, 'udhcpc.sh');
  await writeFile(
    hook,
    [
      '#!/bin/sh',
      'echo "udhcpc event=$1 ip=$ip serverid=$serverid"',
      'case "$1" in',
      '  bound|renew) ip addr replace "$ip/$mask" dev "$interface" ;;',
      'esac',
      '',
    ].join('\n'),
  );
  await chmod(hook, 0o755);
  // No carrier on the node's eth0 before it starts.
  await setCarrier(false);
  cluster = await NetnsCluster.start(lab, [
    {
      id: node.id,
      ns: ns.n1,
      address: node.address,
      args: [
        ...['--dhcp-interface', 'eth0', '--vip', node.vip, '--vip-interface', 'eth0'],
        ...['--tftp-addr', '0.0.0.0:69', '--http-addr', '0.0.0.0:8080'],
        ...['--metrics-addr', `${node.address}:9100`],
      ],
    },
  ]);
  n1 = cluster.nodes[0]!;
});

after(async () => {
  await lab.destroy();
});

/** Carrier on the node's eth0: its peer on br0 up or down. */
async function setCarrier(up: boolean): Promise<void> {
  await lab.check(ns.lan, ['ip', 'link', 'set', 'p-n1', up ? 'up' : 'down']);
}

async function statusRow(): Promise<{ health: string; reason: string; boot?: string } | undefined> {
  return (await cluster.status(ns.n1))[0];
}

async function metrics(): Promise<string> {
  return lab.check(ns.n1, ['curl', '-sS', '--max-time', '5', `http://${node.address}:9100/metrics`]);
}

/** udhcpc in c1 for one lease (-q), DISCOVERs a second apart. */
function lease(tries: number): Promise<{ code: number | null; stdout: string; ms: number }> {
  const started = Date.now();
  const argv = ['busybox', 'udhcpc', '-i', 'eth0', '-n', '-q', '-s', hook, '-t', String(tries), '-T', '1'];
  return lab
    .run(ns.c1, argv, 30_000)
    .then((r) => ({ code: r.code, stdout: r.stdout, ms: Date.now() - started }));
}

describe('boot services across link faults', { concurrency: 1 }, () => {
  it('starts with the link down, says DHCP waits and why, and stays out of "ok"', async () => {
    await waitFor('leader known', async () => (await statusRow())?.health !== 'no-leader', 30_000, 200);
    const row = await statusRow();
    assert.equal(row?.health, 'degraded');
    assert.match(row?.reason ?? '', /dhcp waiting: interface eth0 has no carrier/);
    assert.equal(row?.boot, 'dhcp waiting, tftp serving, http serving');
    const text = await metrics();
    assert.match(text, /slipway_boot_service_state\{service="dhcp",state="waiting"\} 1/);
    assert.match(text, /slipway_boot_service_state\{service="dhcp",state="serving"\} 0/);
    assert.match(text, /slipway_boot_service_state\{service="tftp",state="serving"\} 1/);
    assert.ok(
      n1.logRecords().some((r) => r.msg === 'DHCP waiting' && /no carrier/.test(String(r['reason']))),
      'the wait is logged with its reason',
    );
    await cluster.slipwayOk(ns.n1, [
      ...['hardware', 'create', '--id', machine.id, '--mac', machine.mac, '--ip', `${machine.ip}/24`],
    ]);
  });

  it('serves once the carrier comes, and answers within 2 s of every return of the carrier', async () => {
    for (let round = 1; round <= 2; round++) {
      await setCarrier(true);
      const got = await lease(5);
      assert.equal(got.code, 0, `round ${round}: udhcpc got no lease:\n${got.stdout}`);
      assert.match(
        got.stdout,
        new RegExp(`event=bound ip=${machine.ip.replaceAll('.', '\\.')} serverid=${node.vip}`),
      );
      assert.ok(
        got.ms < answerAfterCarrierMs,
        `round ${round}: a lease ${got.ms} ms after the carrier came back`,
      );
      console.log(`round ${round}: udhcpc bound ${got.ms} ms after the carrier came back`);
      await waitFor('ok', async () => (await statusRow())?.health === 'ok', 5000, 100);
      await setCarrier(false);
      await waitFor(
        'waiting again',
        async () => /dhcp waiting: interface eth0 has no carrier/.test((await statusRow())?.reason ?? ''),
        5000,
        100,
      );
    }
    // The VIP was taken long ago (its re-announcements are past): an announcement now is the
    // carrier's return, which a holder announces again since what went out without it was lost.
    const announced = (): number =>
      n1
        .logRecords()
        .filter(
          (r) =>
            r.msg === 'announced the VIP (gratuitous ARP)' || r.msg === 'gratuitous ARP for the VIP failed',
        ).length;
    const before = announced();
    await setCarrier(true);
    await waitFor('the VIP announced again on the carrier back', () => announced() > before, 2000, 20);
    await waitFor('ok', async () => (await statusRow())?.health === 'ok', 5000, 100);
    const logged = n1.logRecords().filter((r) => r.msg === 'DHCP serving' || r.msg === 'DHCP waiting');
    assert.deepEqual(
      logged.map((r) => r.msg),
      ['DHCP waiting', 'DHCP serving', 'DHCP waiting', 'DHCP serving', 'DHCP waiting', 'DHCP serving'].slice(
        -logged.length,
      ),
      'each change of state logged once',
    );
  });

  it('answers a renewal sent to the VIP from the VIP', async () => {
    await lab.check(ns.c1, [
      ...['iptables', '-A', 'INPUT', '-p', 'udp', '--sport', '67', '--dport', '68'],
      ...['!', '-s', node.vip, '-j', 'DROP'],
    ]);
    const argv = ['busybox', 'udhcpc', '-i', 'eth0', '-f', '-s', hook, '-t', '5', '-T', '1'];
    const client: LabProcess = lab.spawn(ns.c1, argv);
    try {
      await client.waitForOutput((o) => o.includes('event=bound'), 15_000, 'a lease');
      assert.match(client.output, new RegExp(`serverid=${node.vip}`));
      // SIGUSR1: renew now, a REQUEST unicast to the server identifier from the leased address.
      client.child.kill('SIGUSR1');
      await client.waitForOutput(
        (o) => o.includes('event=renew'),
        10_000,
        'the renewal answered from the VIP',
      );
      // The node's log comes through a pipe: the client may hear the ACK before the test reads
      // the line that logs it.
      const renewals = (): number =>
        n1
          .logRecords()
          .filter(
            (r) =>
              r.msg === 'DHCP reply sent' &&
              r['mac'] === machine.mac &&
              (r['to'] as { address?: string })?.address === machine.ip,
          ).length;
      await waitFor('the node logged the ACK to the client address', () => renewals() >= 1, 5000, 20);
    } finally {
      await client.stop();
      await lab.check(ns.c1, ['iptables', '-F', 'INPUT']);
    }
  });

  it('answers relayed requests while its own provisioning link is down', async () => {
    await cluster.slipwayOk(ns.n1, [
      ...['hardware', 'create', '--id', far.id, '--mac', far.mac, '--ip', `${far.ip}/24`],
    ]);
    const relay = lab.spawn(ns.relay, [
      'dhcrelay',
      '-d',
      '-4',
      '-a',
      '-iu',
      'up0',
      '-id',
      'br1',
      node.address,
    ]);
    try {
      await relay.waitForOutput((o) => o.includes('Sending on   Socket/fallback'), 10_000, 'dhcrelay ready');
      await setCarrier(false);
      await waitFor(
        'DHCP waiting without carrier',
        async () => /dhcp waiting: interface eth0 has no carrier/.test((await statusRow())?.reason ?? ''),
        5000,
        100,
      );
      const argv = ['busybox', 'udhcpc', '-i', 'eth0', '-n', '-q', '-s', hook, '-t', '5', '-T', '1'];
      const got = await lab.run(ns.far, argv, 30_000);
      assert.equal(got.code, 0, `no lease through the relay:\n${got.stdout}${got.stderr}`);
      assert.match(got.stdout, new RegExp(`event=bound ip=${far.ip.replaceAll('.', '\\.')}`));
      const relayed = n1.logsFor('DHCP reply sent', far.mac);
      assert.ok(
        relayed.some((r) => r['via'] === 'relay'),
        'answered to the relay',
      );
    } finally {
      await relay.stop();
      await setCarrier(true);
    }
  });

  it('follows its interface renamed and back, and deleted and made again: DHCP and the VIP return', async () => {
    const waitingFor = (reason: RegExp, after: number): Promise<void> =>
      waitFor(
        `DHCP waiting: ${String(reason)}`,
        () =>
          n1
            .logRecords()
            .slice(after)
            .some((r) => r.msg === 'DHCP waiting' && reason.test(String(r['reason']))),
        5000,
        50,
      );
    const vipOnEth0 = async (): Promise<boolean> =>
      (await lab.run(ns.n1, ['ip', '-4', 'addr', 'show', 'dev', 'eth0'])).stdout.includes(`${node.vip}/32`);
    const backAndServing = async (what: string): Promise<void> => {
      await waitFor(`${what}: the VIP on eth0 again`, vipOnEth0, 10_000, 100);
      await waitFor(`${what}: ok`, async () => (await statusRow())?.health === 'ok', 10_000, 100);
      const got = await lease(5);
      assert.equal(got.code, 0, `${what}: no lease:\n${got.stdout}`);
      assert.match(got.stdout, new RegExp(`serverid=${node.vip}`));
    };

    let mark = n1.logRecords().length;
    await lab.check(ns.n1, ['ip', 'link', 'set', 'eth0', 'down']);
    await lab.check(ns.n1, ['ip', 'link', 'set', 'eth0', 'name', 'prov9']);
    await lab.check(ns.n1, ['ip', 'link', 'set', 'prov9', 'up']);
    await waitingFor(/interface eth0 does not exist/, mark);
    await lab.check(ns.n1, ['ip', 'link', 'set', 'prov9', 'down']);
    await lab.check(ns.n1, ['ip', 'link', 'set', 'prov9', 'name', 'eth0']);
    await lab.check(ns.n1, ['ip', 'link', 'set', 'eth0', 'up']);
    await backAndServing('renamed back');

    mark = n1.logRecords().length;
    await lab.check(ns.n1, ['ip', 'link', 'del', 'eth0']);
    await waitingFor(/interface eth0 does not exist/, mark);
    await lab.connect(
      { ns: ns.lan, ifname: 'p-n1', bridge: 'br0' },
      { ns: ns.n1, ifname: 'eth0', addresses: [`${node.address}/24`] },
    );
    await backAndServing('made again');
  });

  it("follows the node's own address replaced on the provisioning interface while it runs", async () => {
    // Deleting a primary address takes its secondaries with it unless they are promoted.
    await lab.check(ns.n1, ['sysctl', '-q', '-w', 'net.ipv4.conf.eth0.promote_secondaries=1']);
    await lab.check(ns.n1, ['ip', 'addr', 'add', `${node.moved}/24`, 'dev', 'eth0']);
    await lab.check(ns.n1, ['ip', 'addr', 'del', `${node.address}/24`, 'dev', 'eth0']);
    await waitFor(
      'DHCP on the new address',
      () => n1.logRecords().some((r) => r.msg === 'DHCP server listening' && r['address'] === node.moved),
      5000,
      50,
    );
    const got = await lease(5);
    assert.equal(got.code, 0, `udhcpc got no lease after the address moved:\n${got.stdout}`);
    assert.match(got.stdout, /event=bound/);
  });
});

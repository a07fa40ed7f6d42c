// Goal: real DHCP clients get their reservations from Slipway's DHCP server: busybox udhcpc
// and ISC dhclient receive the reserved address, netmask, router and lease time; a MAC the
// inventory does not know gets no answer; a client behind ISC dhcrelay gets its lease through
// the relay, the reply going to giaddr with option 82 echoed; perfdhcp's full DORA exchanges
// at a modest rate see no drops.
// Method: a network-namespace lab. Namespace srv holds bridge br0 (10.77.1.1/24) and the boot
// services process (DHCP on br0, reservation mode, an in-memory inventory). Namespace cli has
// three veths on br0 (two reserved MACs, one unknown); perf has a veth with 10.77.1.3 for
// perfdhcp (which puts that address in giaddr); relay has up0 (10.77.1.2) on br0 and its own
// bridge br1 (10.77.2.1/24), where namespace far's client sits, and runs dhcrelay -a between
// them. Client hook scripts only print what they were given. Waits are bounded by each
// client's retry settings and by deadlines on the services' event stream.
import assert from 'node:assert/strict';
import { chmod, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  BootServicesProcess,
  NetnsLab,
  hardwareRecord,
  requireCommands,
  type LabProcess,
  type RunResult,
} from '../support/netns.js';

const mac = {
  udhcpc: '52:54:00:77:00:10',
  dhclient: '52:54:00:77:00:11',
  unknown: '52:54:00:77:00:12',
  relayed: '52:54:00:77:02:10',
};
/** perfdhcp's clients: a MAC list (-M) that the inventory reserves one address for each. */
const perfMacs = Array.from({ length: 64 }, (_, i) => `52:54:00:88:00:${i.toString(16).padStart(2, '0')}`);

const hardware = [
  hardwareRecord({
    id: 'udhcpc-1',
    mac: mac.udhcpc,
    ip: '10.77.1.50/24',
    gateway: '10.77.1.1',
    dns: ['10.77.1.1'],
    hostname: 'udhcpc-1',
  }),
  hardwareRecord({
    id: 'dhclient-1',
    mac: mac.dhclient,
    ip: '10.77.1.51/25',
    gateway: '10.77.1.1',
    leaseTimeS: 1800,
  }),
  hardwareRecord({
    id: 'relayed-1',
    mac: mac.relayed,
    ip: '10.77.2.50/24',
    gateway: '10.77.2.1',
    leaseTimeS: 600,
  }),
  ...perfMacs.map((m, i) => hardwareRecord({ id: `perf-${i}`, mac: m, ip: `10.77.1.${100 + i}/24` })),
];

let created: NetnsLab | undefined;
let boot: BootServicesProcess;
let dhcrelay: LabProcess;
const ns = { srv: '', cli: '', perf: '', relay: '', far: '' };
let hooks: { udhcpc: string; dhclient: string };

before(async () => {
  await requireCommands({
    ip: 'iproute2',
    busybox: 'busybox-static',
    dhclient: 'isc-dhcp-client',
    dhcrelay: 'isc-dhcp-relay',
    perfdhcp: 'kea-admin',
  });
  created = await NetnsLab.create();
  const lab = created;
  for (const role of Object.keys(ns) as (keyof typeof ns)[]) ns[role] = await lab.addNamespace(role);
  await lab.addBridge(ns.srv, 'br0', ['10.77.1.1/24']);
  await lab.connect(
    { ns: ns.srv, ifname: 'p-cli0', bridge: 'br0' },
    { ns: ns.cli, ifname: 'eth0', mac: mac.udhcpc },
  );
  await lab.connect(
    { ns: ns.srv, ifname: 'p-cli1', bridge: 'br0' },
    { ns: ns.cli, ifname: 'eth1', mac: mac.dhclient },
  );
  await lab.connect(
    { ns: ns.srv, ifname: 'p-cli2', bridge: 'br0' },
    { ns: ns.cli, ifname: 'eth2', mac: mac.unknown },
  );
  await lab.connect(
    { ns: ns.srv, ifname: 'p-perf', bridge: 'br0' },
    { ns: ns.perf, ifname: 'perf0', addresses: ['10.77.1.3/24'] },
  );
  await lab.connect(
    { ns: ns.srv, ifname: 'p-relay', bridge: 'br0' },
    { ns: ns.relay, ifname: 'up0', addresses: ['10.77.1.2/24'] },
  );
  await lab.addBridge(ns.relay, 'br1', ['10.77.2.1/24']);
  await lab.connect(
    { ns: ns.relay, ifname: 'p-far', bridge: 'br1' },
    { ns: ns.far, ifname: 'eth0', mac: mac.relayed },
  );
  // Replies to the relay go to giaddr 10.77.2.1, behind the relay's upstream address.
  await lab.addRoute(ns.srv, '10.77.2.0/24', '10.77.1.2');

  boot = await BootServicesProcess.start(lab, ns.srv, {
    hardware,
    httpBaseUrl: 'http://10.77.1.1:8080',
    dhcp: { serverAddress: '10.77.1.1', mode: 'reservation', interfaceName: 'br0' },
  });
  dhcrelay = lab.spawn(ns.relay, ['dhcrelay', '-d', '-4', '-a', '-iu', 'up0', '-id', 'br1', '10.77.1.1']);
  await dhcrelay.waitForOutput(
    (output) => output.includes('Sending on   Socket/fallback'),
    10_000,
    'dhcrelay ready',
  );

  hooks = { udhcpc: path.join(lab.dir, 'udhcpc.sh'), dhclient: path.join(lab.dir, 'dhclient.sh') };
  await writeFile(
    hooks.udhcpc,
    '#!/bin/sh\necho "udhcpc event=$1 ip=$ip mask=$mask router=$router dns=$dns serverid=$serverid lease=$lease host=$hostname"\n',
  );
  await writeFile(
    hooks.dhclient,
    '#!/bin/sh\necho "dhclient reason=$reason ip=$new_ip_address mask=$new_subnet_mask ' +
      'routers=$new_routers lease=$new_dhcp_lease_time server=$new_dhcp_server_identifier"\n',
  );
  await chmod(hooks.udhcpc, 0o755);
  await chmod(hooks.dhclient, 0o755);
});

after(async () => {
  await created?.destroy();
});

function theLab(): NetnsLab {
  if (created === undefined) throw new Error('the lab was not created');
  return created;
}

/** One udhcpc run: at most `tries` discovers a second apart, then exit (-n) or quit with a lease (-q). */
function udhcpc(namespace: string, ifname: string, tries: number): Promise<RunResult> {
  const argv = ['busybox', 'udhcpc', '-i', ifname, '-n', '-q', '-s', hooks.udhcpc];
  return theLab().run(namespace, [...argv, '-t', String(tries), '-T', '1', '-A', '1'], 30_000);
}

describe('real clients on the server’s segment', () => {
  it('busybox udhcpc gets its reservation with netmask, router, DNS, hostname and lease time', async () => {
    const result = await udhcpc(ns.cli, 'eth0', 5);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /^udhcpc event=bound ip=10\.77\.1\.50 mask=24 router=10\.77\.1\.1 dns=10\.77\.1\.1 serverid=10\.77\.1\.1 lease=3600 host=udhcpc-1$/m,
    );
  });

  it('ISC dhclient gets its reservation with netmask, router and lease time', async () => {
    const leases = path.join(theLab().dir, 'dhclient.leases');
    const files = ['-lf', leases, '-pf', path.join(theLab().dir, 'dhclient.pid')];
    // -d: stay in the foreground (the lab stops it by PID); -1: one attempt; -sf: the print-only hook.
    const argv = ['dhclient', '-d', '-1', '-v', '-4', '-sf', hooks.dhclient, ...files, 'eth1'];
    const dhclient = theLab().spawn(ns.cli, argv);
    try {
      const output = await dhclient.waitForOutput(
        (text) => text.includes('reason=BOUND'),
        30_000,
        'a BOUND lease',
      );
      assert.match(
        output,
        /^dhclient reason=BOUND ip=10\.77\.1\.51 mask=255\.255\.255\.128 routers=10\.77\.1\.1 lease=1800 server=10\.77\.1\.1$/m,
      );
    } finally {
      await dhclient.stop();
    }
  });

  it('an unknown MAC gets no answer', async () => {
    const result = await udhcpc(ns.cli, 'eth2', 2);
    assert.equal(result.code, 1, 'udhcpc -n exits 1 when no lease came');
    assert.doesNotMatch(result.stdout, /event=bound/);
    const ignored = await boot.waitFor(
      'dhcp-ignore',
      (e) => e.mac === mac.unknown,
      5000,
      'the ignored DISCOVER',
    );
    assert.match(ignored.reason, /no hardware has MAC/);
    assert.equal(boot.eventsOf('dhcp-reply').filter((e) => e.mac === mac.unknown).length, 0);
  });
});

describe('through a relay', () => {
  it('a client behind dhcrelay gets its lease; replies go to giaddr with option 82 echoed', async () => {
    const result = await udhcpc(ns.far, 'eth0', 5);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /event=bound ip=10\.77\.2\.50 mask=24 router=10\.77\.2\.1 .*lease=600/);
    const replies = boot.eventsOf('dhcp-reply').filter((e) => e.mac === mac.relayed);
    assert.deepEqual(
      replies.map((e) => [e.request, e.reply, e.via, e.to]),
      [
        ['DISCOVER', 'OFFER', 'relay', '10.77.2.1:67'],
        ['REQUEST', 'ACK', 'relay', '10.77.2.1:67'],
      ],
    );
    for (const reply of replies) {
      assert.notEqual(reply.requestAgentInfo, null, 'dhcrelay -a adds option 82');
      assert.equal(reply.replyAgentInfo, reply.requestAgentInfo);
    }
    // dhcrelay drops replies whose option 82 does not name one of its interfaces.
    assert.match(dhcrelay.output, new RegExp(`Forwarded BOOTREPLY for ${mac.relayed}`));
  });
});

describe('load', () => {
  it('perfdhcp completes every DORA exchange at 100 per second', async () => {
    const macList = path.join(theLab().dir, 'perfdhcp-macs.txt');
    await writeFile(macList, `${perfMacs.join('\n')}\n`);
    const perfdhcp = [
      ...['perfdhcp', '-4', '-l', 'perf0', '-g', 'single', '-M', macList],
      // 400 exchanges at 100/s; wait 1 s for late replies at the end; an exchange counts as
      // dropped only after 2 s, so a busy CI machine's hiccup is not a drop.
      ...['-r', '100', '-n', '400', '-W', '1000000', '-d', '2'],
      '10.77.1.1',
    ];
    const result = await theLab().run(ns.perf, perfdhcp, 60_000);
    assert.equal(result.code, 0, `perfdhcp exit ${result.code}: ${result.stdout}${result.stderr}`);
    const sent = [...result.stdout.matchAll(/^sent packets: (\d+)$/gm)].map((m) => Number(m[1]));
    const drops = [...result.stdout.matchAll(/^drops: (\d+)$/gm)].map((m) => Number(m[1]));
    assert.deepEqual(sent, [400, 400], 'DISCOVER-OFFER and REQUEST-ACK exchanges');
    assert.deepEqual(drops, [0, 0]);
  });
});

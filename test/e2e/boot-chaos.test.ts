// Goal: a boot storm survives its leader's provisioning link being cut. While 30 simulated
// machines (bench/storm-fleet.ts: PXE and UEFI HTTP boot, iPXE, the boot OS, the credential
// claim, a workflow on a worker stream through the VIP) boot against a 3-node cluster, the
// leader's provisioning link is cut and restored, twice, then a follower's once. Every machine
// provisions (every workflow SUCCESS), no action runs twice (once per machine by the fleet's count,
// on its first attempt by the cluster's records), leadership leaves each cut leader while a
// follower serves, a cut follower does not take it, and the DHCP outage a machine saw is printed.
// Method: two segments. Provisioning: namespace lan's bridge br0, eth0 everywhere on
// 10.214.0.0/16 (the fleet's machines are 10.214.16.x), the VIP 10.214.0.100, DHCP, TFTP, HTTP and
// each node's HAProxy (7070, the workers' server) there. Management: namespace mgmt's bridge, mgmt0
// on 10.216.0.0/24, raft and the API, the CLI (ops) and the fleet's own calls (setup, the final
// check). A cut is `ip link set p-NODE down` on the provisioning bridge: a pulled cable, the node's
// eth0 loses carrier, raft goes on over management. A probe machine broadcasts a DISCOVER every
// 50 ms (bench/dhcp-probe.ts); the outage of a cut is the time to the first offer from another node.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { defaultHealthCheck } from '../../src/model/balancer-spec.js';
import { renderHaproxyConfig } from '../../lb/haproxy.js';
import type { HeardOffer } from '../../bench/dhcp-probe.js';
import { fleetArgv, writeStandIns } from '../../bench/storm.js';
import { fleetResultOf, type FleetConfig } from '../../bench/storm-fleet.js';
import { NetnsLab, requireCommands, type LabProcess } from '../support/netns.js';
import { NetnsCluster, type NetnsNode } from '../support/netns-cluster.js';
import { waitFor } from '../support/wait.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const ids = ['n1', 'n2', 'n3'] as const;
type Id = (typeof ids)[number];
const mgmt: Record<Id, string> = { n1: '10.216.0.11', n2: '10.216.0.12', n3: '10.216.0.13' };
const prov: Record<Id, string> = { n1: '10.214.0.11', n2: '10.214.0.12', n3: '10.214.0.13' };
const vip = '10.214.0.100';
const balancerPort = 7070;
const probe = { mac: '52:54:00:d6:00:10', address: '10.214.0.6', reserved: '10.214.0.50' };
const machines = 30;
/**
 * Each machine's workflow: 4 actions held about 1.5 s each, so workflows run through the cuts.
 * The machines start at random over 30 s: the three cuts take 5-10 s each on a loaded machine,
 * and with 8 s the last machines had finished before the third cut once.
 */
const fleetShape = { actions: 4, holdMs: 1500, rampMs: 30_000 };
/** A handover: the boot leadership round (250 ms), the Status asks, the transfer; loaded machine. */
const handoverMs = 10_000;
/** A cut lasts this long after leadership has moved: machines boot against the new leader. */
const cutHoldMs = 2000;
const stormMs = 90_000;

let lab: NetnsLab;
let cluster: NetnsCluster;
const ns: Record<string, string> = {};

before(async () => {
  await requireCommands({ ip: 'iproute2', haproxy: 'haproxy' });
  lab = await NetnsLab.create();
  Object.assign(
    ns,
    await lab.addLan({
      ...Object.fromEntries(ids.map((id) => [id, { addresses: [`${prov[id]}/16`] }])),
      fleet: { addresses: ['10.214.0.5/16'] },
      probe: { addresses: [`${probe.address}/16`], mac: probe.mac },
    }),
  );
  ns['mgmt'] = await lab.addNamespace('mgmt');
  await lab.addBridge(ns['mgmt'], 'br0');
  ns['ops'] = await lab.addNamespace('ops');
  const onMgmt = async (role: string, address: string): Promise<void> => {
    await lab.connect(
      { ns: ns['mgmt']!, ifname: `m-${role}`, bridge: 'br0' },
      { ns: ns[role]!, ifname: 'mgmt0', addresses: [`${address}/24`] },
    );
  };
  for (const id of ids) await onMgmt(id, mgmt[id]);
  await onMgmt('ops', '10.216.0.5');
  await onMgmt('fleet', '10.216.0.6');
  const files = writeStandIns(lab.dir, 64);
  cluster = await NetnsCluster.start(
    lab,
    ids.map((id) => ({
      id,
      ns: ns[id]!,
      address: mgmt[id],
      args: [
        ...['--dhcp-interface', 'eth0', '--vip', vip, '--vip-interface', 'eth0'],
        ...['--http-addr', '0.0.0.0:8080', '--tftp-addr', '0.0.0.0:69', '--tftp-root', files.tftpRoot],
        ...['--worker-server', `${vip}:${String(balancerPort)}`],
      ],
    })),
  );
  const haproxyConfig = path.join(lab.dir, 'haproxy.cfg');
  writeFileSync(
    haproxyConfig,
    renderHaproxyConfig({
      listenAddr: `0.0.0.0:${String(balancerPort)}`,
      nodes: ids.map((id) => ({ id, apiAddr: `${mgmt[id]}:7001` })),
      healthCheck: defaultHealthCheck,
    }),
  );
  for (const id of ids) lab.spawn(ns[id]!, ['haproxy', '-f', haproxyConfig, '-db']);
  fleetConfig = {
    machines,
    ...fleetShape,
    deadlineMs: 0,
    apiServers: ids.map((id) => `${mgmt[id]}:7001`),
    subnetPrefix: 16,
    kernelFile: files.kernelFile,
    initrdFile: files.initrdFile,
    firmware: 'mixed',
    binarySha256: Object.fromEntries(
      Object.entries(files.binaries).map(([name, b]) => [name, createHash('sha256').update(b).digest('hex')]),
    ),
    seed: 0xc4a05,
    addressFile: path.join(lab.dir, 'addresses.batch'),
    resultFile: path.join(lab.dir, 'fleet-result.json'),
  };
});

after(async () => {
  await lab.destroy();
});

let fleetConfig: FleetConfig;

async function setLink(id: Id, up: boolean): Promise<void> {
  await lab.check(ns['lan']!, ['ip', 'link', 'set', `p-${id}`, up ? 'up' : 'down']);
}

async function holdsVip(id: Id): Promise<boolean> {
  const r = await lab.run(ns[id]!, ['ip', '-4', '-o', 'addr', 'show', 'dev', 'eth0']);
  return r.stdout.includes(` ${vip}/`);
}

/** The leader every live node names, from `cluster status` on the management segment. */
async function leaderId(): Promise<Id> {
  return (await cluster.waitForLeader(ns['ops']!, 30_000)).id as Id;
}

async function allServing(): Promise<void> {
  await waitFor(
    'every node serving boot',
    async () => {
      const rows = await cluster.status(ns['ops']!);
      return rows.length === ids.length && rows.every((r) => r.health === 'ok');
    },
    30_000,
    200,
  );
}

function offers(p: LabProcess): HeardOffer[] {
  return p.output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as HeardOffer);
}

interface Cut {
  readonly who: Id;
  readonly role: 'leader' | 'follower';
  readonly at: number;
  readonly leaderAfter: Id;
  readonly vipMovedMs: number | null;
  readonly dhcpOutageMs: number | null;
}

/**
 * Cuts `who`'s provisioning link; for a leader, waits until the VIP is on another node (and reads
 * who leads then); holds the cut a while, restores it and waits until every node serves again.
 */
async function cut(who: Id, role: Cut['role'], probeProcess: LabProcess): Promise<Cut> {
  const at = Date.now();
  await setLink(who, false);
  let vipMoved: number | null = null;
  if (role === 'leader') {
    // Polled on the interfaces (a fork each), not through the CLI, so the figure is the VIP's.
    await waitFor(
      `the VIP off ${who}`,
      async () => {
        for (const id of ids) if (id !== who && (await holdsVip(id))) return !(await holdsVip(who));
        return false;
      },
      handoverMs,
      20,
    );
    vipMoved = Date.now() - at;
  } else {
    await waitFor(
      `${who} reporting DHCP waiting`,
      async () =>
        /dhcp waiting/.test((await cluster.status(ns['ops']!)).find((r) => r.node === who)?.reason ?? ''),
      handoverMs,
      100,
    );
  }
  const cutAddress = prov[who];
  await waitFor(
    'an offer from another node',
    () => offers(probeProcess).some((o) => o.atMs > at && o.from !== cutAddress),
    handoverMs,
    50,
  );
  const first = offers(probeProcess).find((o) => o.atMs > at && o.from !== cutAddress);
  const leaderNow = await leaderId();
  const holdUntil = Date.now() + cutHoldMs;
  await waitFor('the cut held', () => Date.now() >= holdUntil, cutHoldMs + 1000, 100);
  await setLink(who, true);
  await allServing();
  return {
    who,
    role,
    at,
    leaderAfter: leaderNow,
    vipMovedMs: vipMoved,
    dhcpOutageMs: first === undefined ? null : first.atMs - at,
  };
}

it('a boot storm provisions every machine once while leader and follower links are cut', async () => {
  await allServing();
  await cluster.slipwayOk(ns['ops']!, [
    ...['hardware', 'create', '--id', 'probe', '--mac', probe.mac, '--ip', `${probe.reserved}/16`],
  ]);
  const configFile = path.join(lab.dir, 'fleet.json');
  writeFileSync(configFile, JSON.stringify(fleetConfig));
  const setup = lab.spawn(ns['fleet']!, fleetArgv('setup', configFile), { cwd: repoRoot });
  await setup.waitForOutput((out) => out.includes('"event":"setup"'), 120_000, 'the fleet set up');
  await setup.exited;
  const probeProcess = lab.spawn(
    ns['probe']!,
    [process.execPath, '--import', 'tsx', 'bench/dhcp-probe.ts', probe.address, probe.mac, '50', '600000'],
    { cwd: repoRoot },
  );
  await probeProcess.waitForOutput((out) => out.includes('"atMs"'), 30_000, 'a first offer to the probe');

  const stormStart = Date.now();
  writeFileSync(configFile, JSON.stringify({ ...fleetConfig, deadlineMs: stormStart + stormMs }));
  const fleet = lab.spawn(ns['fleet']!, fleetArgv('run', configFile), { cwd: repoRoot });
  // The first cut once machines are well into their boot: the first sixth holds its credential.
  const claimed = (out: string): number =>
    Math.max(0, ...[...out.matchAll(/"event":"claimed","count":(\d+)/g)].map((m) => Number(m[1])));
  await fleet.waitForOutput((out) => claimed(out) >= machines / 6, 60_000, 'the storm under way');
  const cuts: Cut[] = [];
  for (let round = 0; round < 2; round++) cuts.push(await cut(await leaderId(), 'leader', probeProcess));
  const leader = await leaderId();
  cuts.push(
    await cut(
      ids.find((id) => id !== leader)!,
      'follower',
      probeProcess,
    ),
  );

  await fleet.waitForOutput((out) => out.includes('"event":"result"'), stormMs + 30_000, 'the storm result');
  await fleet.exited;
  const checker = lab.spawn(ns['fleet']!, fleetArgv('check', configFile), { cwd: repoRoot });
  const said = await checker.waitForOutput((out) => out.includes('"event":"check"'), 60_000, 'the check');
  const result = fleetResultOf(fleetConfig, 1, said);
  const dhcpKinds = new Set(['dhcp_pxe', 'dhcp_http_boot', 'dhcp_ipxe', 'dhcp_bootos']);
  // What the storm's machines saw: of the DHCP exchanges under way in a cut's outage (from the cut
  // to the probe's first offer from another node), the longest wait from the cut to its answer.
  const machinesOutageMs = cuts.map((c) => {
    const end = c.at + (c.dhcpOutageMs ?? 0);
    const waits = result.samples
      .filter(([kind, done, ms]) => dhcpKinds.has(kind) && done - ms <= end && done > c.at)
      .map(([, done, ms]) => done - Math.max(c.at, done - ms));
    return { exchanges: waits.length, longestMs: Math.max(0, ...waits) };
  });
  // Machines still provisioning at each cut: the storm was under way.
  const booting = cuts.map(
    (c) => result.machines.filter((m) => m.startMs <= c.at && (m.doneMs ?? Infinity) > c.at).length,
  );
  console.log(
    JSON.stringify({
      cuts: cuts.map((c, i) => ({
        who: c.who,
        role: c.role,
        leaderAfter: c.leaderAfter,
        vipMovedMs: c.vipMovedMs,
        probeDhcpOutageMs: c.dhcpOutageMs,
        machinesProvisioning: booting[i],
        stormDhcpInOutage: machinesOutageMs[i],
      })),
      stormS: (Date.now() - stormStart) / 1000,
      succeeded: result.check.succeeded,
      actionsRun: result.actionsRun,
      reconnects: result.machines.reduce((n, m) => n + m.reconnects, 0),
      retransmits: result.machines.reduce((n, m) => n + m.retransmits, 0),
    }),
  );

  const failed = result.machines.filter((m) => m.error !== null).map((m) => m.error);
  assert.deepEqual(failed, [], 'every machine booted and ran its workflow');
  assert.equal(result.check.workflows, machines);
  assert.equal(result.check.succeeded, machines, `not SUCCESS: ${result.check.notSucceeded.join('; ')}`);
  assert.equal(result.ranTwice, 0, 'no action ran twice on a machine');
  assert.equal(result.actionsRun, machines * fleetShape.actions, 'every action ran, once');
  assert.equal(result.check.retriedActions, 0, 'every action done on its first attempt');
  assert.equal(
    result.machines.reduce((n, m) => n + m.tftpOtherSource, 0),
    0,
    'TFTP answered from the VIP',
  );
  for (const c of cuts.filter((x) => x.role === 'leader'))
    assert.notEqual(c.leaderAfter, c.who, `leadership left ${c.who} while a follower served`);
  const followerCut = cuts.find((c) => c.role === 'follower')!;
  assert.notEqual(followerCut.leaderAfter, followerCut.who, 'a cut follower does not lead');
  assert.equal(followerCut.leaderAfter, leader, 'a follower cut moves no leadership');
  for (const c of cuts) assert.ok(c.dhcpOutageMs !== null && c.dhcpOutageMs < handoverMs);
  for (const [i, n] of booting.entries()) assert.ok(n > 0, `cut ${String(i + 1)} came during the storm`);
  const nodeOf = (id: string): NetnsNode => cluster.nodes.find((n) => n.id === id)!;
  for (const c of cuts.filter((x) => x.role === 'leader')) {
    assert.ok(
      nodeOf(c.who)
        .logRecords()
        .some((r) => r.msg === 'leadership handed to a node whose boot services serve'),
      `${c.who} handed leadership over (not a quorum loss)`,
    );
  }
});

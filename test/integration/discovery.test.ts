// Goal: discovery end to end on a real `slipway server --discovery` (docs/decisions/0029): a
// machine whose MAC no machine has gets a DHCP offer pointing at the boot (a pool address and the
// iPXE binary), and its iPXE script boots the boot OS in inventory mode under the id it will be
// enrolled as; the worker agent in inventory mode (`slipway worker --inventory`, the collector
// reading a fixture tree because this host has no spare machine) claims its inventory-boot
// credential from the machine's own address and reports; `hardware list --state enrolled` shows
// the machine with that inventory; `hardware accept` makes it ready, and a second accept is a
// clear error. `hardware inspect` boots the known machine into inventory mode again: facts that
// held make it ready, and memory that went missing puts it in maintenance with the drift named.
// With the auto-accept rule set (`hardware accept-rule set`, docs/decisions/0037), the machine,
// forgotten and discovered again, is ready as soon as its report is applied, "accepted by rule".
// Method: a network-namespace lab like test/e2e/dhcp-dynamic.test.ts, with one node: namespace
// lan holds bridge br0; n1 runs the node on a veth (10.81.0.11/24: raft, API, dynamic DHCP with
// the pool 10.81.0.100-109, HTTP :8080); ops (10.81.0.5) runs the CLI and curl; c1 holds the
// machine's veth with its MAC, where busybox udhcpc (a PXE vendor class) takes the address and
// the agent then runs. Every wait has a deadline.
import assert from 'node:assert/strict';
import { chmod, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { NetnsLab, requireCommands, type RunResult } from '../support/netns.js';
import { addNodeLan, NetnsCluster, apiPort, slipwayBin, type NetnsNode } from '../support/netns-cluster.js';
import { buildFixture } from '../support/sysfs-fixture.js';

const nodeAddresses = { n1: '10.81.0.11' };
const pool = '10.81.0.100-10.81.0.109/24,router=10.81.0.1';
const mac = '52:54:00:81:00:01';
const discoveredId = 'discovered-525400810001';
const pxeVendorClass = 'PXEClient:Arch:00000:UNDI:002001';

let created: NetnsLab | undefined;
let cluster: NetnsCluster;
let node: NetnsNode;
const ns = { lan: '', n1: '', ops: '', c1: '' };
let hook = '';
let fixtureRoot = '';

before(async () => {
  await requireCommands({ ip: 'iproute2', busybox: 'busybox-static', curl: 'curl' });
  created = await NetnsLab.create();
  const lab = created;
  Object.assign(
    ns,
    await addNodeLan(lab, nodeAddresses, 24, { ops: { addresses: ['10.81.0.5/24'] }, c1: { mac } }),
  );
  hook = path.join(lab.dir, 'udhcpc.sh');
  await writeFile(
    hook,
    [
      '#!/bin/sh',
      'echo "udhcpc event=$1 ip=$ip mask=$mask serverid=$serverid siaddr=$siaddr boot_file=$boot_file"',
      'case "$1" in',
      '  bound|renew) ip addr replace "$ip/$mask" dev "$interface" ;;',
      '  deconfig) ip addr flush dev "$interface" ;;',
      'esac',
      '',
    ].join('\n'),
  );
  await chmod(hook, 0o755);
  fixtureRoot = path.join(lab.dir, 'machine-root');
  buildFixture(fixtureRoot);
  cluster = await NetnsCluster.startOnLan(lab, ns, nodeAddresses, (_id, address) => [
    ...['--dhcp-interface', 'eth0', '--dhcp-mode', 'dynamic', '--dhcp-pool', pool],
    ...['--http-addr', `${address}:8080`, '--discovery'],
  ]);
  node = await cluster.waitForLeader(ns.ops, 30_000);
});

after(async () => {
  await created?.destroy();
});

function theLab(): NetnsLab {
  if (created === undefined) throw new Error('the lab was not created');
  return created;
}

function hookLine(output: string, event: string): Record<string, string> {
  const line = output.split('\n').find((l) => l.startsWith(`udhcpc event=${event} `));
  assert.ok(line !== undefined, `no "${event}" in udhcpc output:\n${output}`);
  return Object.fromEntries(
    [...line.matchAll(/(\w+)=(\S*)/g)].map((m): [string, string] => [m[1] ?? '', m[2] ?? '']),
  );
}

/** The machine's agent in inventory mode, in its namespace, from the address DHCP gave it. */
function inventoryAgent(id: string, extra: readonly string[] = []): Promise<RunResult> {
  const argv = [
    ...[process.execPath, slipwayBin, 'worker', '--inventory', '--id', id],
    ...['--server', `${node.address}:${apiPort}`, '--claim-url', `http://${node.address}:8080/credential`],
    ...['--mac', mac, '--inventory-root', fixtureRoot, '--insecure-allow-network', ...extra],
  ];
  return theLab().run(ns.c1, argv, 60_000);
}

interface HardwareDoc {
  id: string;
  inventory?: { system: { serial?: string }; disks: { path: string; serial?: string }[] };
  lifecycle?: { state: string; reason?: string };
}

async function listed(state: string): Promise<HardwareDoc[]> {
  const out = await cluster.slipwayOk(ns.ops, ['-o', 'json', 'hardware', 'list', '--state', state]);
  const parsed = JSON.parse(out) as HardwareDoc[] | { hardware: HardwareDoc[] };
  return Array.isArray(parsed) ? parsed : parsed.hardware;
}

describe('discovery on a real node', { concurrency: 1 }, () => {
  it('an unknown MAC is offered a pool address and the iPXE binary', async () => {
    // The cluster reaches state version 3 (discovery's gate) shortly after its first election.
    const deadline = Date.now() + 30_000;
    let result: RunResult;
    for (;;) {
      const argv = ['busybox', 'udhcpc', '-i', 'eth0', '-n', '-q', '-s', hook, '-V', pxeVendorClass];
      result = await theLab().run(ns.c1, [...argv, '-t', '3', '-T', '1', '-A', '1'], 30_000);
      if (/boot_file=\S/.test(result.stdout) || Date.now() > deadline) break;
    }
    assert.equal(result.code, 0, `udhcpc: ${result.stdout}${result.stderr}`);
    const bound = hookLine(result.stdout, 'bound');
    assert.match(bound['ip'] ?? '', /^10\.81\.0\.10\d$/);
    assert.equal(bound['boot_file'], 'undionly.kpxe');
    assert.equal(bound['siaddr'], node.address);
  });

  it('its iPXE script boots the boot OS in inventory mode, under the id it will be enrolled as', async () => {
    const url = `http://${node.address}:8080/ipxe/${mac}`;
    const result = await theLab().run(ns.ops, ['curl', '-sS', '--max-time', '10', url]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /slipway\.mode=inventory/);
    assert.match(result.stdout, new RegExp(`slipway\\.worker_id=${discoveredId} `));
    assert.match(result.stdout, new RegExp(`slipway\\.mac=${mac}`));
  });

  it('the agent in inventory mode reports, and the machine is enrolled with its inventory', async () => {
    const started = Date.now();
    const kept = ['--credential-file', path.join(theLab().dir, 'inventory-credential')];
    const result = await inventoryAgent(discoveredId, kept);
    assert.equal(result.code, 0, `worker --inventory: ${result.stdout}${result.stderr}`);
    assert.equal(result.stdout.trim(), discoveredId);
    const took = Date.now() - started;
    // The same report again with the same credential, as an agent whose answer was lost sends
    // it: answered as recorded, so the boot OS goes on to its worker.
    const again = await inventoryAgent(discoveredId, kept);
    assert.equal(again.code, 0, `worker --inventory again: ${again.stdout}${again.stderr}`);
    assert.equal(again.stdout.trim(), discoveredId);
    const enrolled = await listed('enrolled');
    const machine = enrolled.find((m) => m.id === discoveredId);
    assert.ok(machine !== undefined, JSON.stringify(enrolled));
    assert.equal(machine.inventory?.system.serial, 'lab-m1');
    assert.deepEqual(
      machine.inventory?.disks.map((d) => d.serial),
      ['scsi-serial-3', 'sata-serial-2', 'vblk-serial-1', 'nvme-serial-4'],
    );
    assert.match(machine.lifecycle?.reason ?? '', /discovered: booted from 52:54:00:81:00:01/);
    process.stdout.write(`# discovery: claim + collect + report in ${took} ms\n`);
  });

  it('hardware accept makes it ready; a second accept is a clear error', async () => {
    await cluster.slipwayOk(ns.ops, ['hardware', 'accept', discoveredId, '--reason', 'checked']);
    const ready = await listed('ready');
    assert.deepEqual(
      ready.map((m) => m.id),
      [discoveredId],
    );
    const again = await cluster.slipway(ns.ops, ['hardware', 'accept', discoveredId, '--reason', 'twice']);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /is ready; accept is not one of its moves/);
  });
  it('inspect boots it into inventory mode again: facts that held make it ready', async () => {
    await cluster.slipwayOk(ns.ops, ['hardware', 'inspect', discoveredId, '--reason', 'recheck']);
    const url = `http://${node.address}:8080/ipxe/${mac}`;
    const script = await theLab().run(ns.ops, ['curl', '-sS', '--max-time', '10', url]);
    assert.match(script.stdout, /slipway\.mode=inventory/);
    const result = await inventoryAgent(discoveredId);
    assert.equal(result.code, 0, `worker --inventory: ${result.stdout}${result.stderr}`);
    assert.deepEqual(
      (await listed('ready')).map((m) => m.id),
      [discoveredId],
    );
    // Ready again: its next boot is an ordinary one.
    const after = await theLab().run(ns.ops, ['curl', '-sS', '--max-time', '10', url]);
    assert.doesNotMatch(after.stdout, /slipway\.mode=inventory/);
  });

  it('an inspection whose memory shrank puts the machine in maintenance, the drift named', async () => {
    await cluster.slipwayOk(ns.ops, ['hardware', 'inspect', discoveredId, '--reason', 'after a repair']);
    // Half the memory blocks gone: what the kernel keeps (MemTotal) is then the most it can tell.
    for (let n = 8; n < 16; n++) {
      await rm(path.join(fixtureRoot, `sys/devices/system/memory/memory${n}`), { recursive: true });
    }
    const result = await inventoryAgent(discoveredId);
    assert.equal(result.code, 0, `worker --inventory: ${result.stdout}${result.stderr}`);
    const held = (await listed('maintenance')).find((m) => m.id === discoveredId);
    assert.match(held?.lifecycle?.reason ?? '', /^inventory drifted: memory 2Gi → 1.92Gi/);
  });

  it('the auto-accept rule makes a matching machine ready when its report is applied', async () => {
    // The machine is forgotten, so its next inventory boot is a discovery again.
    await cluster.slipwayOk(ns.ops, ['hardware', 'delete', discoveredId]);
    const bad = await cluster.slipway(ns.ops, ['hardware', 'accept-rule', 'set', 'memory>=1Gx']);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(await cluster.slipwayOk(ns.ops, ['hardware', 'accept-rule', 'get']), /\(none\)/);
    const set = await cluster.slipwayOk(ns.ops, [
      '-o',
      'json',
      'hardware',
      'accept-rule',
      'set',
      'memory >= 1Gi, cpu.cores>=2',
    ]);
    assert.deepEqual(JSON.parse(set), { selector: 'memory>=1Gi,cpu.cores>=2' });
    const result = await inventoryAgent(discoveredId);
    assert.equal(result.code, 0, `worker --inventory: ${result.stdout}${result.stderr}`);
    const ready = (await listed('ready')).find((m) => m.id === discoveredId);
    assert.equal(ready?.lifecycle?.reason, 'accepted by rule memory>=1Gi,cpu.cores>=2');
    const history = JSON.parse(
      await cluster.slipwayOk(ns.ops, ['-o', 'json', 'hardware', 'history', discoveredId]),
    ) as { events: { from: string; to: string; trigger: string; by: string }[] };
    const last = history.events.at(-1);
    assert.deepEqual([last?.from, last?.to, last?.trigger], ['enrolled', 'ready', 'accept']);
    assert.match(last?.by ?? '', /^accept rule/);
    await cluster.slipwayOk(ns.ops, ['hardware', 'accept-rule', 'clear']);
    assert.match(await cluster.slipwayOk(ns.ops, ['hardware', 'accept-rule', 'get']), /\(none\)/);
  });
});

// Goal: a machine provisioned for real, end to end, through the VIP while the node holding it
// dies. Three `slipway server` nodes on a LAN hold the VIP by leadership (--vip-interface) and
// each runs HAProxy in front of the API as `slipway balancer config` renders it. A QEMU VM with
// an empty disk sits behind OpenIPMI's BMC simulator. Through the CLI only, the operator
// registers the machine with its MAC and BMC, creates a template (image2disk of a small
// bootable disk image, writefile of a file the installed system prints, reboot) and a workflow
// with --netboot. Slipway powers the VM on into PXE through the BMC; it boots the boot OS
// against the VIP; the worker claims its credential and connects through the balancer. While
// image2disk runs, the node holding the VIP is SIGKILLed. Pass: the VIP and the worker move, the
// workflow succeeds with every action run once (attempt 1; the image fetched whole once, at
// most resumed), allowPXE is off afterwards, and the VM reboots from its own disk and prints
// both marker lines.
// Method: network namespaces lan (bridge br0 with the BMC's address 10.81.0.2, radvd, and the
// VM's tap, shaped to 48 Mbit/s so the image download spans the failover), n1-n3 (nodes and
// their HAProxy) and ops (the CLI). QEMU runs TCG, started by ipmi_sim's chassis control, its
// serial console in a file. Every wait has a deadline; everything is stopped by PID.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, readFile, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildBootableDiskImage, diskImageMarkers, type DiskImage } from '../support/disk-image.js';
import { IpmiSim, ipmiSimMissing } from '../support/ipmi-sim.js';
import { NetnsLab, requireCommands } from '../support/netns.js';
import {
  addNodeLan,
  NetnsCluster,
  slipwayBin,
  workflowEndLine,
  type NetnsNode,
} from '../support/netns-cluster.js';
import { waitFor } from '../support/wait.js';
import { sharedBootOs } from '../support/shared-boot-os.js';

const vip = '10.81.0.100';
const bmcAddress = '10.81.0.2';
const opsAddress = '10.81.0.5';
const machineAddress = '10.81.0.60';
const nodeAddresses = { n1: '10.81.0.11', n2: '10.81.0.12', n3: '10.81.0.13' };
const balancerPort = 7070;
const bmcUser = 'admin';
const bmcPassword = 'e2e-Bmc-pw1';
const ovmfCode = '/usr/share/OVMF/OVMF_CODE_4M.fd';
const ovmfVars = '/usr/share/OVMF/OVMF_VARS_4M.fd';

interface Firmware {
  readonly name: 'bios' | 'uefi';
  readonly mac: string;
  readonly uefi: boolean;
  /** QEMU's firmware and NIC arguments. */
  vm(dir: string): Promise<string>;
}

const bios: Firmware = {
  name: 'bios',
  mac: '52:54:00:81:00:02',
  uefi: false,
  vm: () => Promise.resolve('-device e1000,netdev=n0,mac=52:54:00:81:00:02'),
};

const uefi: Firmware = {
  name: 'uefi',
  mac: '52:54:00:81:00:03',
  uefi: true,
  vm: async (dir) => {
    const vars = path.join(dir, 'OVMF_VARS.fd');
    await copyFile(ovmfVars, vars);
    return [
      `-drive if=pflash,format=raw,readonly=on,file=${ovmfCode}`,
      `-drive if=pflash,format=raw,file=${vars}`,
      '-device virtio-net-pci,netdev=n0,mac=52:54:00:81:00:03,romfile=',
    ].join(' ');
  },
};

interface WorkflowView {
  readonly state: string;
  readonly actions: readonly {
    readonly name: string;
    readonly state: string;
    readonly attempt: number;
    readonly outputTail?: string;
  }[];
}

let bootOsDir = '';
let image: DiskImage | undefined;
let shared: NetnsLab | undefined;

describe('a machine provisioned end to end through the VIP', { concurrency: 1 }, () => {
  before(async () => {
    await requireCommands({
      ip: 'iproute2',
      tc: 'iproute2',
      radvd: 'radvd',
      haproxy: 'haproxy',
      arping: 'iputils-arping',
      'qemu-system-x86_64': 'qemu-system-x86',
    });
    assert.equal(ipmiSimMissing(), undefined);
    // One build of the boot OS and of the disk image for both firmwares.
    shared = await NetnsLab.create();
    bootOsDir = await sharedBootOs();
    image = await buildBootableDiskImage({
      dir: path.join(shared.dir, 'image'),
      marker: 'slipway-e2e: the installed system booted',
      filePath: '/slipway/installed.txt',
    });
  });
  after(async () => {
    await shared?.destroy();
  });

  for (const firmware of [bios, uefi]) {
    it(
      `${firmware.name}: PXE through the VIP, image2disk across a failover, boot from disk`,
      { timeout: 600_000 },
      async () => {
        assert.ok(image !== undefined);
        await provision(firmware, image);
      },
    );
  }
});

async function provision(firmware: Firmware, disk: DiskImage): Promise<void> {
  const lab = await NetnsLab.create();
  let sim: IpmiSim | undefined;
  try {
    const ns = await addNodeLan(lab, nodeAddresses, 24, { ops: { addresses: [`${opsAddress}/24`] } });
    // The LAN's own namespace holds the BMC and the VM: an address for the BMC, IPv6 router
    // advertisements (iPXE waits ~15 s in IPv6 autoconf without one), the VM's tap, shaped.
    await lab.check(ns.lan, ['ip', 'addr', 'add', `${bmcAddress}/24`, 'dev', 'br0']);
    await lab.check(ns.lan, ['ip', 'addr', 'add', 'fd81::2/64', 'dev', 'br0']);
    await lab.advertiseIpv6(ns.lan, 'br0', 'fd81::/64');
    await lab.addTap(ns.lan, 'tap0', 'br0');
    await lab.check(ns.lan, [
      'tc',
      'qdisc',
      'add',
      'dev',
      'tap0',
      'root',
      'tbf',
      'rate',
      '48mbit',
      'burst',
      '64kb',
      'latency',
      '500ms',
    ]);

    // Each node serves the same boot OS and the disk image as an artifact (one file each).
    const artifacts = path.join(lab.dir, 'artifacts');
    await mkdir(artifacts);
    await copyFile(disk.image, path.join(artifacts, 'disk.raw'));

    // HAProxy on every node in front of the API, as `slipway balancer config` renders it. Each
    // with its runtime socket in the lab: the default, /run/haproxy/admin.sock, needs a directory
    // only the haproxy service makes, and the three would take it from one another.
    const nodes = Object.entries(nodeAddresses)
      .map(([id, address]) => `${id}=${address}:7001`)
      .join(',');
    for (const id of Object.keys(nodeAddresses) as (keyof typeof nodeAddresses)[]) {
      const config = await lab.check(ns.ops, [
        process.execPath,
        slipwayBin,
        ...['balancer', 'config', '--listen', `0.0.0.0:${balancerPort}`, '--nodes', nodes],
        ...['--haproxy-socket', path.join(lab.dir, `haproxy-${id}.sock`)],
      ]);
      const configFile = path.join(lab.dir, `haproxy-${id}.cfg`);
      await writeFile(configFile, config);
      lab.spawn(ns[id], ['haproxy', '-f', configFile, '-db']);
    }

    const cluster = await NetnsCluster.startOnLan(lab, ns, nodeAddresses, () => [
      ...['--vip', vip, '--vip-interface', 'eth0', '--dhcp-interface', 'eth0'],
      ...['--http-addr', '0.0.0.0:8080', '--tftp-addr', '0.0.0.0:69'],
      ...['--bootos-dir', bootOsDir, '--artifacts-dir', artifacts],
      ...['--worker-server', `${vip}:${balancerPort}`, '--kernel-arg', 'console=ttyS0'],
    ]);
    await cluster.waitForLeader(ns.ops, 30_000);
    await waitFor(
      'a node to hold the VIP',
      async () => (await holder(lab, cluster)) !== undefined,
      20_000,
      200,
    );

    // The machine: an empty disk behind a BMC whose chassis control starts QEMU.
    const emptyDisk = path.join(lab.dir, 'vda.raw');
    await writeFile(emptyDisk, '');
    await truncate(emptyDisk, 128 * 1024 * 1024);
    const console = path.join(lab.dir, 'console.log');
    sim = await IpmiSim.start({
      mode: 'chassis-control',
      netns: ns.lan,
      host: bmcAddress,
      port: 623,
      username: bmcUser,
      password: bmcPassword,
      vm: [
        '-m 1024 -netdev tap,id=n0,ifname=tap0,script=no,downscript=no',
        await firmware.vm(lab.dir),
        `-drive file=${emptyDisk},format=raw,if=virtio -serial file:${console}`,
      ].join(' '),
      // PXE, then the disk: after the reboot, Slipway no longer answers the machine's PXE.
      bootOrder: { pxe: 'order=nc', disk: 'order=c' },
      probe: async () =>
        (
          await lab.run(ns.ops, [
            ...['env', `IPMI_PASSWORD=${bmcPassword}`, 'ipmitool', '-I', 'lanplus', '-C', '3'],
            ...['-H', bmcAddress, '-p', '623', '-U', bmcUser, '-E', '-N', '1', '-R', '1', 'power', 'status'],
          ])
        ).code === 0,
    });

    // The operator's steps, through the CLI in ops.
    const credentials = path.join(lab.dir, 'bmc.cred');
    await writeFile(credentials, `${bmcUser}:${bmcPassword}\n`, { mode: 0o600 });
    await cluster.slipwayOk(ns.ops, [
      ...['hardware', 'create', '--id', 'vm1', '--mac', firmware.mac, '--ip', `${machineAddress}/24`],
      ...['--bmc', `ipmi://${bmcAddress}:623`, '--bmc-credentials-file', credentials],
      ...(firmware.uefi ? ['--uefi'] : []),
    ]);
    const contents = `written-by-writefile-${randomBytes(4).toString('hex')}`;
    const templateFile = path.join(lab.dir, 'template.yaml');
    await writeFile(templateFile, template(disk, contents));
    await cluster.slipwayOk(ns.ops, ['template', 'create', '-f', templateFile]);
    const created = Date.now();
    const id = (
      await cluster.slipwayOk(ns.ops, [
        'workflow',
        'create',
        '--template',
        'install',
        '--hardware',
        'vm1',
        '--netboot',
      ])
    ).trim();

    // While image2disk runs, the node holding the VIP dies. One `workflow events --follow`
    // watches the workflow from here to its end, across the kill (it survives the loss of the
    // node serving it), instead of a CLI run per poll: each run starts a Node process, CPU that
    // QEMU's emulation needs.
    const get = async (): Promise<WorkflowView> =>
      JSON.parse(await cluster.slipwayOk(ns.ops, ['-o', 'json', 'workflow', 'get', id])) as WorkflowView;
    const events = cluster.spawnSlipway(ns.ops, ['workflow', 'events', id, '--follow']);
    let view: WorkflowView;
    let workerConnectedMs: number;
    let vipMove: string;
    try {
      await events.waitForOutput(
        (out) => / action\.started\b/.test(out) || workflowEndLine.test(out),
        300_000,
        'image2disk to start on the machine',
      );
      view = await get();
      workerConnectedMs = Date.now() - created;
      assert.equal(view.actions[0]?.state, 'RUNNING', `${JSON.stringify(view)}\n${await tail(console)}`);
      const doomed = await holder(lab, cluster);
      assert.ok(doomed !== undefined, 'a node holds the VIP');
      await cluster.kill(doomed);
      await waitFor(
        'the VIP to move to a live node',
        async () => {
          const now = await holder(lab, cluster, doomed);
          return now !== undefined;
        },
        30_000,
        200,
      );
      const newHolder = await holder(lab, cluster, doomed);
      // The follower ends when the workflow does.
      await events.waitForOutput((out) => workflowEndLine.test(out), 300_000, 'the workflow to finish');
      view = await get();
      vipMove = `${doomed.id} -> ${newHolder?.id ?? '?'}`;
    } finally {
      if (events.running) events.child.kill('SIGTERM');
      await events.exited;
    }
    const doneMs = Date.now() - created;
    assert.equal(view.state, 'SUCCESS', `${JSON.stringify(view, null, 1)}\n${await tail(console)}`);
    assert.deepEqual(
      view.actions.map((a) => [a.name, a.state, a.attempt]),
      [
        ['image', 'SUCCESS', 1],
        ['installed-file', 'SUCCESS', 1],
        ['reboot', 'SUCCESS', 1],
      ],
    );
    // The image was fetched whole once: one full GET, or a GET cut by the failover and resumed.
    const fetches = cluster.nodes.flatMap((n) =>
      n.logRecords().filter((r) => r.msg === 'HTTP boot request' && r['url'] === '/artifacts/disk.raw'),
    );
    const full = fetches.filter((r) => r['status'] === 200 && r['method'] === 'GET').length;
    const resumed = (view.actions[0]?.outputTail ?? '').match(/resumed from there/g)?.length ?? 0;
    assert.ok(full + resumed >= 1 && full <= 1, `image fetches: ${JSON.stringify(fetches)}`);
    assert.match(view.actions[0]?.outputTail ?? '', /SHA-256 verified/);

    const hardware = JSON.parse(
      await cluster.slipwayOk(ns.ops, ['-o', 'json', 'hardware', 'get', 'vm1']),
    ) as {
      netboot?: { allowPXE?: boolean };
      allowPxe?: boolean;
    };
    assert.equal(hardware.netboot?.allowPXE ?? hardware.allowPxe, false, JSON.stringify(hardware));

    // The VM reboots from its own disk and prints both lines.
    await waitFor(
      'the installed system to print its marker lines',
      async () => {
        const text = await readFile(console, 'utf8').catch(() => '');
        return text.includes(`${diskImageMarkers.installedFile} ${contents}`);
      },
      240_000,
      500,
    );
    const text = await readFile(console, 'utf8');
    assert.ok(text.includes('slipway-e2e: the installed system booted'), await tail(console));
    process.stdout.write(
      `# ${firmware.name}: workflow create to worker running ${workerConnectedMs} ms, to workflow done ${doneMs} ms, ` +
        `to the installed system's marker ${Date.now() - created} ms; VIP ${vipMove}, ` +
        `image fetched ${full} time(s) whole, resumed ${resumed} time(s)\n`,
    );
  } finally {
    await sim?.stop();
    await lab.destroy();
  }
}

function template(disk: DiskImage, contents: string): string {
  return `version: "0.1"
name: install
global_timeout: 1200
tasks:
  - name: install
    actions:
      - name: image
        action: image2disk
        timeout: 600
        environment:
          IMG_URL: http://${vip}:8080/artifacts/disk.raw
          DEST_DISK: /dev/vda
          IMG_SHA256: ${disk.sha256}
      - name: installed-file
        action: writefile
        timeout: 120
        environment:
          DEST_DISK: /dev/vda${disk.partition}
          FS_TYPE: ${disk.fsType}
          DEST_PATH: /slipway/installed.txt
          CONTENTS: ${contents}
      - name: reboot
        action: reboot
        timeout: 60
`;
}

/** The live node whose namespace holds the VIP (other than `except`). */
async function holder(
  lab: NetnsLab,
  cluster: NetnsCluster,
  except?: NetnsNode,
): Promise<NetnsNode | undefined> {
  for (const node of cluster.nodes) {
    if (!node.running || node === except) continue;
    const out = await lab.check(node.spec.ns, ['ip', '-j', 'addr', 'show', 'dev', 'eth0']);
    const links = JSON.parse(out) as { addr_info: { family: string; local: string }[] }[];
    if (links.some((l) => l.addr_info.some((a) => a.family === 'inet' && a.local === vip))) return node;
  }
  return undefined;
}

async function tail(file: string): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '(no console)');
  return `console:\n${text.slice(-5000)}`;
}

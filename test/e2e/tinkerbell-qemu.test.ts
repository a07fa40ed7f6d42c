// Goal: a Tinkerbell user's objects run unchanged on a real machine (issue 24 item 4). Tinkerbell's
// Hardware, Rufio Machine with its Secret, a Template and a Workflow, written the way Tinkerbell's
// docs write them (Go-template lookups of the machine's disk, hub action images, no KERNEL_PATH
// for kexec, bootOptions.bootMode netboot), go in with `slipway import -f DIR`. Slipway powers the
// QEMU VM on through its BMC (OpenIPMI's simulator) into PXE; the boot OS runs image2disk (a
// bootable disk image whose /boot/grub/grub.cfg names its kernel, initrd and command line),
// writefile (a file the installed system prints), cexec chrooted into the new system (appending
// to that file with the system's own /bin/sh) and kexec, which reads the kernel from grub.cfg.
// Pass: the workflow succeeds with every action run once, and the VM, without a firmware reboot,
// is in its installed system: it booted with grub.cfg's command line (which the disk's own
// SYSLINUX does not have) and prints what writefile and cexec wrote.
// Method: one network namespace (bridge br0 with the node's address, the BMC's and radvd; the
// VM's tap), a single-node cluster serving DHCP, HTTP (the boot OS, the disk image as an
// artifact) on br0; the operator's steps through the CLI. QEMU runs TCG, started by ipmi_sim's
// chassis control, its serial console in a file. Every wait has a deadline; stopped by PID.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, readFile, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  buildBootableDiskImage,
  busyboxBinary,
  diskImageMarkers,
  putFileInImage,
  rehashImage,
} from '../support/disk-image.js';
import { IpmiSim, ipmiSimMissing } from '../support/ipmi-sim.js';
import { NetnsLab, requireCommands } from '../support/netns.js';
import { NetnsCluster } from '../support/netns-cluster.js';
import { stateVersionOfThisBuild } from '../../src/state/versions.js';
import { waitFor } from '../support/wait.js';
import { sharedBootOs } from '../support/shared-boot-os.js';

const nodeAddress = '10.77.5.1';
const bmcAddress = '10.77.5.2';
const machineAddress = '10.77.5.60';
const mac = '52:54:00:77:05:02';
const bmcUser = 'admin';
const bmcPassword = 'tink-Bmc-pw1';
/** On grub.cfg's kernel command line only: the installed system booted through kexec's reading of it. */
const grubArg = 'slipway.booted_by=grub-cfg-kexec';

interface WorkflowView {
  readonly id: string;
  readonly state: string;
  readonly hardwareId: string;
  readonly actions: readonly {
    readonly name: string;
    readonly state: string;
    readonly attempt: number;
    readonly outputTail?: string;
  }[];
}

let lab: NetnsLab | undefined;

describe("Tinkerbell's objects imported and run on a QEMU machine", { concurrency: 1 }, () => {
  before(async () => {
    await requireCommands({
      ip: 'iproute2',
      radvd: 'radvd',
      kexec: 'kexec-tools',
      'qemu-system-x86_64': 'qemu-system-x86',
    });
    assert.equal(ipmiSimMissing(), undefined);
    lab = await NetnsLab.create();
  });
  after(async () => {
    await lab?.destroy();
  });

  it(
    'image2disk, writefile, cexec and kexec through grub.cfg end in the installed system',
    { timeout: 600_000 },
    async () => {
      assert.ok(lab !== undefined);
      const bootOsDir = await sharedBootOs();
      // The disk: bootable by itself (SYSLINUX), plus what a Debian install has for kexec and
      // cexec: /boot/grub/grub.cfg, and a shell at /bin/sh.
      let disk = await buildBootableDiskImage({
        dir: path.join(lab.dir, 'image'),
        marker: 'slipway-tinkerbell: the installed system booted',
        filePath: '/slipway/installed.txt',
        sizeMiB: 48,
      });
      await putFileInImage(disk, '/boot/grub/grub.cfg', grubCfg());
      await putFileInImage(disk, '/bin/sh', await busyboxBinary());
      disk = await rehashImage(disk);

      const ns = await lab.addNamespace('tk');
      await lab.addBridge(ns, 'br0', [`${nodeAddress}/24`, `${bmcAddress}/24`, 'fd77:5::1/64']);
      await lab.addTap(ns, 'tap0', 'br0');
      await lab.advertiseIpv6(ns, 'br0', 'fd77:5::/64');
      const artifacts = path.join(lab.dir, 'artifacts');
      await mkdir(artifacts);
      await copyFile(disk.image, path.join(artifacts, 'debian.raw'));
      const cluster = await NetnsCluster.start(lab, [
        {
          id: 'n1',
          ns,
          address: nodeAddress,
          args: [
            ...['--dhcp-interface', 'br0', '--http-addr', `${nodeAddress}:8080`],
            ...['--bootos-dir', bootOsDir, '--artifacts-dir', artifacts, '--kernel-arg', 'console=ttyS0'],
          ],
        },
      ]);
      await cluster.waitForLeader(ns, 20_000);
      // The import creates a workflow, which the cluster takes once it runs at this build's version.
      await cluster.waitForClusterVersion(ns, stateVersionOfThisBuild, 30_000);

      // The machine: an empty disk behind a BMC whose chassis control starts QEMU.
      const emptyDisk = path.join(lab.dir, 'vda.raw');
      await writeFile(emptyDisk, '');
      await truncate(emptyDisk, 96 * 1024 * 1024);
      const console = path.join(lab.dir, 'console.log');
      const sim = await IpmiSim.start({
        mode: 'chassis-control',
        netns: ns,
        host: bmcAddress,
        port: 623,
        username: bmcUser,
        password: bmcPassword,
        vm: [
          '-m 1024 -netdev tap,id=n0,ifname=tap0,script=no,downscript=no',
          `-device e1000,netdev=n0,mac=${mac}`,
          `-drive file=${emptyDisk},format=raw,if=virtio -serial file:${console}`,
        ].join(' '),
        bootOrder: { pxe: 'order=nc', disk: 'order=c' },
        probe: async () =>
          (
            await lab!.run(ns, [
              ...['env', `IPMI_PASSWORD=${bmcPassword}`, 'ipmitool', '-I', 'lanplus', '-C', '3'],
              ...[
                '-H',
                bmcAddress,
                '-p',
                '623',
                '-U',
                bmcUser,
                '-E',
                '-N',
                '1',
                '-R',
                '1',
                'power',
                'status',
              ],
            ])
          ).code === 0,
      });
      try {
        // Tinkerbell's objects, as files in a directory, imported as they are.
        const contents = `written-by-writefile-${randomBytes(4).toString('hex')}`;
        const objects = path.join(lab.dir, 'tinkerbell');
        await mkdir(objects);
        await writeFile(path.join(objects, 'hardware.yaml'), hardwareYaml());
        await writeFile(path.join(objects, 'bmc.yaml'), bmcYaml());
        await writeFile(path.join(objects, 'template.yaml'), templateYaml(contents));
        await writeFile(path.join(objects, 'workflow.yaml'), workflowYaml());
        const dryRun = await cluster.slipwayOk(ns, ['import', '-f', objects, '--dry-run']);
        assert.match(dryRun, /vm1/, dryRun);
        const imported = await cluster.slipwayOk(ns, ['import', '-f', objects]);
        const again = await cluster.slipwayOk(ns, ['import', '-f', objects]);
        assert.match(imported, /created/, imported);
        assert.match(again, /^nothing to change: all \d+ objects are imported already$/m, again);
        const created = Date.now();

        const workflows = (
          JSON.parse(
            await cluster.slipwayOk(ns, ['-o', 'json', 'workflow', 'list', '--hardware', 'vm1']),
          ) as {
            workflows: { id: string; hardware: string }[];
          }
        ).workflows;
        assert.equal(workflows.length, 1, `one workflow from the import: ${JSON.stringify(workflows)}`);
        const id = workflows[0]?.id ?? '';
        // One `workflow events --follow` until it ends, not a CLI run per poll.
        await cluster.waitForWorkflowEnd(ns, id, 420_000);
        const view = JSON.parse(
          await cluster.slipwayOk(ns, ['-o', 'json', 'workflow', 'get', id]),
        ) as WorkflowView;
        const doneMs = Date.now() - created;
        assert.equal(view.state, 'SUCCESS', `${JSON.stringify(view, null, 1)}\n${await tail(console)}`);
        assert.deepEqual(
          view.actions.map((a) => [a.name, a.state, a.attempt]),
          [
            ['stream-debian-image', 'SUCCESS', 1],
            ['write-marker', 'SUCCESS', 1],
            ['append-from-the-new-system', 'SUCCESS', 1],
            ['kexec-debian', 'SUCCESS', 1],
          ],
        );
        assert.match(view.actions[3]?.outputTail ?? '', /grub\.cfg/);

        // kexec'd, not rebooted through the firmware: grub.cfg's command line, what both wrote.
        await waitFor(
          'the installed system to print what writefile and cexec wrote',
          async () => {
            const text = await readFile(console, 'utf8').catch(() => '');
            return text.includes(`${diskImageMarkers.installedFile} ${contents} and-cexec-ran`);
          },
          180_000,
          500,
        );
        const text = await readFile(console, 'utf8');
        assert.ok(text.includes('slipway-tinkerbell: the installed system booted'), await tail(console));
        const cmdline = text.split('\n').find((l) => l.startsWith('slipway-disk-image: cmdline'));
        assert.ok(
          cmdline?.includes(grubArg),
          `booted without grub.cfg's command line: ${cmdline ?? '(none)'}`,
        );
        process.stdout.write(
          `# Tinkerbell objects on QEMU (TCG): import to workflow done ${doneMs} ms, to the installed system's lines ${Date.now() - created} ms\n`,
        );
      } finally {
        await sim.stop();
      }
    },
  );
});

/** What a Debian install leaves in /boot/grub/grub.cfg, reduced to one entry and the default. */
function grubCfg(): string {
  return `# generated by grub-mkconfig, reduced
set default="0"
set timeout=5
menuentry 'Debian GNU/Linux' --class debian --class gnu-linux --class os {
	insmod part_msdos
	insmod fat
	echo	'Loading Linux ...'
	linux	/vmlinuz console=ttyS0 panic=-1 ${grubArg}
	echo	'Loading initial ramdisk ...'
	initrd	/initrd
}
`;
}

function hardwareYaml(): string {
  return `apiVersion: "tinkerbell.org/v1alpha1"
kind: Hardware
metadata:
  name: vm1
  namespace: tink-system
spec:
  bmcRef:
    apiGroup: bmc.tinkerbell.org
    kind: Machine
    name: bmc-vm1
  disks:
    - device: /dev/vda
  metadata:
    instance:
      hostname: vm1
      id: "${mac}"
      operating_system:
        distro: debian
        version: "13"
  interfaces:
    - dhcp:
        arch: x86_64
        hostname: vm1
        ip:
          address: ${machineAddress}
          gateway: ${nodeAddress}
          netmask: 255.255.255.0
        lease_time: 86400
        mac: ${mac}
        uefi: false
      netboot:
        allowPXE: true
        allowWorkflow: true
`;
}

function bmcYaml(): string {
  const b64 = (s: string): string => Buffer.from(s).toString('base64');
  return `apiVersion: bmc.tinkerbell.org/v1alpha1
kind: Machine
metadata:
  name: bmc-vm1
  namespace: tink-system
spec:
  connection:
    host: ${bmcAddress}
    port: 623
    authSecretRef:
      name: bmc-vm1-auth
      namespace: tink-system
    insecureTLS: true
---
apiVersion: v1
kind: Secret
metadata:
  name: bmc-vm1-auth
  namespace: tink-system
type: kubernetes.io/basic-auth
data:
  username: ${b64(bmcUser)}
  password: ${b64(bmcPassword)}
`;
}

/**
 * As Tinkerbell's docs write a Debian install: hub actions, the disk looked up from the Hardware.
 * writefile names no UID, GID or MODE: the partition is FAT, which keeps no owners or modes.
 */
function templateYaml(contents: string): string {
  return `apiVersion: "tinkerbell.org/v1alpha1"
kind: Template
metadata:
  name: debian
  namespace: tink-system
spec:
  data: |
    version: "0.1"
    name: debian_provisioning
    global_timeout: 1800
    tasks:
      - name: "os-installation"
        worker: "{{.device_1}}"
        volumes:
          - /dev:/dev
          - /dev/console:/dev/console
        actions:
          - name: "stream-debian-image"
            image: quay.io/tinkerbell/actions/image2disk:v1.0.0
            timeout: 600
            environment:
              DEST_DISK: {{ index .Hardware.Disks 0 }}
              IMG_URL: "http://${nodeAddress}:8080/artifacts/debian.raw"
              COMPRESSED: false
          - name: "write-marker"
            image: quay.io/tinkerbell/actions/writefile:v1.0.0
            timeout: 90
            environment:
              DEST_DISK: {{ formatPartition ( index .Hardware.Disks 0 ) 1 }}
              FS_TYPE: vfat
              DEST_PATH: /slipway/installed.txt
              CONTENTS: ${contents}
          - name: "append-from-the-new-system"
            image: quay.io/tinkerbell/actions/cexec:v1.0.0
            timeout: 90
            environment:
              BLOCK_DEVICE: {{ formatPartition ( index .Hardware.Disks 0 ) 1 }}
              FS_TYPE: vfat
              CHROOT: y
              DEFAULT_INTERPRETER: "/bin/sh -c"
              CMD_LINE: "read line < /slipway/installed.txt; echo \\"$line and-cexec-ran\\" > /slipway/installed.txt"
          - name: "kexec-debian"
            image: quay.io/tinkerbell/actions/kexec:v1.0.0
            timeout: 90
            pid: host
            environment:
              BLOCK_DEVICE: {{ formatPartition ( index .Hardware.Disks 0 ) 1 }}
              FS_TYPE: vfat
`;
}

function workflowYaml(): string {
  return `apiVersion: "tinkerbell.org/v1alpha1"
kind: Workflow
metadata:
  name: vm1-debian
  namespace: tink-system
spec:
  templateRef: debian
  hardwareRef: vm1
  hardwareMap:
    device_1: ${mac}
  bootOptions:
    toggleAllowNetboot: true
    bootMode: netboot
`;
}

async function tail(file: string): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '(no console)');
  return `console:\n${text.slice(-5000)}`;
}

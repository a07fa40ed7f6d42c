// Goal: the boot OS is real. `slipway bootos build` makes a kernel and a zstd initramfs from
// Debian's packages, byte for byte the same when built twice; a QEMU machine network-boots it
// from a `slipway server` node (BIOS, iPXE ROM, the generated script, /boot/ over HTTP); its
// init brings up the network by DHCP, its worker claims a per-boot credential (no secret on the
// kernel command line or in the script) and runs the machine's workflow to SUCCESS.
// Method: the build the e2e tests share (test/support/shared-boot-os.ts), then a second into
// another directory, compared by SHA-256. One lab:
// namespace srv with bridge br0 (10.77.3.1/24 + an IPv6 prefix advertised by radvd, which iPXE
// waits for), a tap for QEMU, a single-node cluster on 10.77.3.1 serving DHCP on br0 and HTTP
// on :8080 from the built boot OS. The operator's steps go through the CLI. The evidence: the
// workflow's state and events, the action's output tail, the served script, the console.
// QEMU runs TCG, one VM.
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildBootOs, type BootOsManifest } from '../../src/bootos/build.js';
import { bootOsMarkers } from '../../src/bootos/init-script.js';
import { openingKey } from '../../src/platform/sealed-box.js';
import { NetnsLab, requireCommands } from '../support/netns.js';
import { NetnsCluster } from '../support/netns-cluster.js';
import { sharedBootOs } from '../support/shared-boot-os.js';

const nodeAddress = '10.77.3.1';
const machineAddress = '10.77.3.60';
const mac = '52:54:00:77:03:02';

const template = `version: "0.1"
name: bootos-smoke
global_timeout: 600
tasks:
  - name: inspect
    actions:
      - name: whoami
        command: ["/bin/sh", "-c", "echo inside-the-boot-os; uname -r; cat /proc/cmdline"]
        timeout: 60
`;

interface WorkflowView {
  readonly state: string;
  readonly actions: readonly {
    readonly state: string;
    readonly outputTail?: string;
    readonly attempt: number;
  }[];
}

describe('the boot OS', { concurrency: 1 }, () => {
  let lab: NetnsLab;
  let manifest: BootOsManifest;
  let bootOsDir = '';

  before(async () => {
    await requireCommands({
      ip: 'iproute2',
      radvd: 'radvd',
      'qemu-system-x86_64': 'qemu-system-x86',
      zstd: 'zstd',
    });
    lab = await NetnsLab.create();
  });
  after(async () => {
    await lab.destroy();
  });

  it('builds reproducibly: two builds give the same bytes', { timeout: 240_000 }, async () => {
    // The build the other tests share (test/support/shared-boot-os.ts), made now or earlier from
    // the same inputs, against a build made here: the same bytes.
    bootOsDir = await sharedBootOs();
    manifest = JSON.parse(await readFile(path.join(bootOsDir, 'manifest.json'), 'utf8')) as BootOsManifest;
    const again = await buildBootOs({ outDir: path.join(lab.dir, 'bootos-again') });
    assert.equal(again.initramfs.sha256, manifest.initramfs.sha256);
    assert.equal(again.kernel.sha256, manifest.kernel.sha256);
    assert.ok(
      // 40 MiB until the hub actions' tools came in (qemu-img and its libraries, sfdisk, the
      // mkfs programs, syslinux, mtools): 43.6 MiB with them.
      manifest.initramfs.bytes <= 48 * 1024 * 1024,
      `initramfs ${manifest.initramfs.bytes} B > 48 MiB`,
    );
    assert.ok(manifest.modules >= 10, 'NIC, disk and filesystem modules are in');
    const written = JSON.parse(
      await readFile(path.join(lab.dir, 'bootos-again', 'manifest.json'), 'utf8'),
    ) as unknown;
    assert.deepEqual(written, again);
    assert.equal(again.modules, manifest.modules);
  });

  it(
    'a QEMU machine PXE-boots it, claims its credential and runs its workflow',
    { timeout: 420_000 },
    async () => {
      assert.ok(manifest !== undefined, 'the build ran');
      const srv = await lab.addNamespace('srv');
      await lab.addBridge(srv, 'br0', [`${nodeAddress}/24`, 'fd77:3::1/64']);
      await lab.addTap(srv, 'tap0', 'br0');
      await lab.advertiseIpv6(srv, 'br0', 'fd77:3::/64');
      const cluster = await NetnsCluster.start(lab, [
        {
          id: 'n1',
          ns: srv,
          address: nodeAddress,
          args: [
            ...['--dhcp-interface', 'br0', '--http-addr', `${nodeAddress}:8080`],
            ...['--bootos-dir', bootOsDir, '--kernel-arg', 'console=ttyS0'],
          ],
        },
      ]);
      await cluster.waitForLeader(srv, 20_000);
      await cluster.slipwayOk(srv, [
        ...['hardware', 'create', '--id', 'vm1', '--mac', mac, '--ip', `${machineAddress}/24`],
        ...['--gateway', nodeAddress],
      ]);
      const templateFile = path.join(lab.dir, 'template.yaml');
      await writeFile(templateFile, template);
      await cluster.slipwayOk(srv, ['template', 'create', '-f', templateFile]);
      const created = JSON.parse(
        await cluster.slipwayOk(srv, [
          '-o',
          'json',
          'workflow',
          'create',
          '--template',
          'bootos-smoke',
          '--hardware',
          'vm1',
        ]),
      ) as { id: string };

      // Nobody but the machine, from its own address, gets a credential: a claim from the
      // node's address with the machine's MAC is refused before anything is proposed.
      const forged = await lab.run(srv, [
        ...['curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', '-X', 'POST'],
        ...['-H', 'content-type: application/json', `http://${nodeAddress}:8080/credential`],
        ...['--data', JSON.stringify({ workerId: 'vm1', mac, publicKey: openingKey().publicKey })],
      ]);
      assert.equal(forged.stdout, '403');

      const started = Date.now();
      const qemu = lab.spawn(srv, [
        'qemu-system-x86_64',
        ...['-accel', 'tcg', '-m', '1024', '-display', 'none', '-serial', 'stdio', '-monitor', 'none'],
        ...['-no-reboot', '-boot', 'n', '-netdev', 'tap,id=n0,ifname=tap0,script=no,downscript=no'],
        ...['-device', `e1000,netdev=n0,mac=${mac}`],
      ]);
      let view: WorkflowView | undefined;
      try {
        await qemu.waitForOutput(
          (out) => out.includes(bootOsMarkers.worker),
          240_000,
          'the boot OS starting its worker',
        );
        const workerStartedMs = Date.now() - started;
        // One `workflow events --follow` until it ends, not a CLI run per poll.
        await cluster.waitForWorkflowEnd(srv, created.id, 180_000);
        view = JSON.parse(
          await cluster.slipwayOk(srv, ['-o', 'json', 'workflow', 'get', created.id]),
        ) as WorkflowView;
        process.stdout.write(
          `# boot OS under QEMU (TCG): power on to worker started ${workerStartedMs} ms, to workflow done ${Date.now() - started} ms\n`,
        );
      } catch (error) {
        throw new Error(`${String(error)}\nconsole:\n${qemu.output.slice(-6000)}`);
      } finally {
        await qemu.stop();
      }
      assert.equal(view?.state, 'SUCCESS', qemu.output.slice(-4000));
      const action = view.actions[0];
      assert.equal(action?.attempt, 1);
      assert.match(action?.outputTail ?? '', /inside-the-boot-os/);
      // `uname -r` printed the built kernel's version (Debian 13's has a '+': compared as text).
      assert.ok(
        (action?.outputTail ?? '').split('\n').includes(manifest.kernelVersion),
        `kernel ${manifest.kernelVersion} in ${JSON.stringify(action?.outputTail)}`,
      );
      // The kernel command line the machine booted with carries no credential.
      assert.match(action?.outputTail ?? '', /slipway\.worker_id=vm1 /);
      assert.doesNotMatch(action?.outputTail ?? '', /token/);
      const events = (await cluster.slipwayOk(srv, ['-o', 'json', 'workflow', 'events', created.id]))
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as { type: string });
      const types = events.map((e) => e.type);
      assert.ok(types.includes('credential.issued'), types.join(', '));
      assert.ok(!types.includes('credential.refused'), types.join(', '));
      assert.ok(qemu.output.includes(bootOsMarkers.started), 'the init ran');
      assert.ok(
        qemu.output.includes(`${bootOsMarkers.addressed} ${machineAddress}/24`),
        'the init got its reservation',
      );
    },
  );
});

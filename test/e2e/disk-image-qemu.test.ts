// Goal: the disk image the end-to-end provisioning test installs is bootable from the machine's
// own disk, under BIOS and under UEFI, and the installed system reads the file writefile puts in
// its first partition. Built here from Debian packages by test/support/disk-image.ts.
// Method: build the image twice (same bytes); then per firmware a copy of it with a file put in
// partition 1 by mtools (standing in for writefile; its contents name the firmware, so the
// system is seen reading the disk at boot), booted by QEMU (TCG, 256 MiB, virtio-blk disk, no
// network): SeaBIOS, then OVMF with a copy of its variable store. Passing means the console
// shows the marker and `slipway-installed-file: <contents>`, and QEMU exits by itself (the
// installed system powers off) within a bound. QEMU is stopped by PID in any case.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LabProcess } from '../../cluster/netns-lab.js';
import {
  buildBootableDiskImage,
  diskImageMarkers,
  putFileInImage,
  requireDiskImageTools,
  type DiskImage,
} from '../support/disk-image.js';
import { requireCommands } from '../support/netns.js';
import { waitFor } from '../support/wait.js';

const ovmfCode = '/usr/share/OVMF/OVMF_CODE_4M.fd';
const ovmfVars = '/usr/share/OVMF/OVMF_VARS_4M.fd';
const marker = 'slipway-installed-system: booted from its own disk';
const filePath = '/slipway/installed.txt';

interface Firmware {
  readonly name: 'bios' | 'uefi';
  /** Bound on QEMU start to its own exit, with room for a loaded 2-core machine. */
  readonly bootTimeoutMs: number;
  qemuArgs(dir: string): Promise<string[]>;
}

const bios: Firmware = { name: 'bios', bootTimeoutMs: 60_000, qemuArgs: () => Promise.resolve([]) };

const uefi: Firmware = {
  name: 'uefi',
  bootTimeoutMs: 120_000,
  qemuArgs: async (dir) => {
    const vars = path.join(dir, 'OVMF_VARS.fd');
    await copyFile(ovmfVars, vars);
    return [
      ...['-drive', `if=pflash,format=raw,readonly=on,file=${ovmfCode}`],
      ...['-drive', `if=pflash,format=raw,file=${vars}`],
    ];
  },
};

/** The console's lines without terminal escapes or carriage returns. */
function consoleLines(output: string): string[] {
  return (
    output
      // eslint-disable-next-line no-control-regex -- terminal escapes are control characters
      .replace(/\x1b(\[[0-9;=?]*[A-Za-z]|c)/g, '')
      .split(/\r?\n|\r/)
      .map((line) => line.trim())
      .filter((line) => line !== '')
  );
}

describe('the bootable disk image for provisioning tests', { concurrency: 1 }, () => {
  let dir: string;
  let image: DiskImage;

  before(async () => {
    await requireCommands({ 'qemu-system-x86_64': 'qemu-system-x86' });
    requireDiskImageTools();
    for (const file of [ovmfCode, ovmfVars]) {
      assert.ok(existsSync(file), `${file} is missing: apt-get install ovmf (.ci/run installs it)`);
    }
    dir = await mkdtemp(path.join(tmpdir(), 'slipway-disk-image-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('builds reproducibly: two builds give the same bytes', { timeout: 120_000 }, async () => {
    const started = Date.now();
    image = await buildBootableDiskImage({ dir: path.join(dir, 'a'), marker, filePath });
    const builtMs = Date.now() - started;
    const again = await buildBootableDiskImage({ dir: path.join(dir, 'b'), marker, filePath });
    assert.equal(again.sha256, image.sha256);
    assert.equal(image.bytes, 64 * 1024 * 1024);
    assert.equal(image.partition, 1);
    assert.equal(image.fsType, 'vfat');
    assert.equal(image.partitionOffset, 1024 * 1024);
    await rm(path.join(dir, 'b'), { recursive: true, force: true });
    process.stdout.write(`# disk image: ${image.bytes} B built in ${builtMs} ms, sha256 ${image.sha256}\n`);
  });

  for (const firmware of [bios, uefi]) {
    it(
      `${firmware.name}: boots from its disk and prints the file put in partition 1`,
      {
        timeout: firmware.bootTimeoutMs + 30_000,
      },
      async () => {
        assert.ok(image !== undefined, 'the build ran');
        const bootDir = path.join(dir, firmware.name);
        await mkdir(bootDir);
        const disk: DiskImage = {
          ...image,
          image: path.join(bootDir, 'disk.img'),
          mtoolsImage: `${path.join(bootDir, 'disk.img')}@@${image.partitionOffset}`,
        };
        await copyFile(image.image, disk.image);
        const contents = `written for the ${firmware.name} boot`;
        await putFileInImage(disk, filePath, contents);

        const started = Date.now();
        const args = [
          ...['-accel', 'tcg', '-m', '256', '-display', 'none', '-serial', 'stdio', '-monitor', 'none'],
          ...['-no-reboot', '-nic', 'none', '-drive', `file=${disk.image},format=raw,if=virtio`],
          ...(await firmware.qemuArgs(bootDir)),
        ];
        const qemu = new LabProcess(
          `qemu-${firmware.name}`,
          spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'pipe', 'pipe'] }),
        );
        let exit: { readonly code: number | null; readonly signal: NodeJS.Signals | null } | undefined;
        try {
          // The installed system powers off by itself; the deadline bounds the wait.
          const poweredOff = await waitFor(
            'QEMU to power off',
            () => qemu.child.exitCode !== null || qemu.child.signalCode !== null,
            firmware.bootTimeoutMs,
            100,
          ).then(
            () => true,
            () => false,
          );
          if (poweredOff) exit = await qemu.exited;
        } finally {
          await qemu.stop();
        }
        const bootMs = Date.now() - started;
        const lines = consoleLines(qemu.output);
        const tail = lines.slice(-40).join('\n');
        assert.ok(exit !== undefined, `QEMU still running after ${firmware.bootTimeoutMs} ms:\n${tail}`);
        assert.deepEqual(exit, { code: 0, signal: null }, tail);
        const at = lines.indexOf(marker);
        assert.ok(at >= 0, `no marker line on the console:\n${tail}`);
        assert.equal(lines[at + 1], `${diskImageMarkers.installedFile} ${contents}`, tail);
        assert.ok(
          lines.includes('slipway-disk-image: mounted /dev/vda1'),
          `the system read its own partition 1:\n${tail}`,
        );
        process.stdout.write(`# ${firmware.name}: power on to power off ${bootMs} ms\n`);
      },
    );
  }
});

// Goal: real firmware network-boots against Slipway's DHCP, TFTP and HTTP servers and runs
// the generated iPXE script:
// - BIOS: SeaBIOS with Debian's iPXE e1000 ROM. The ROM is iPXE, so DHCP sends it straight to
//   the per-MAC HTTP script (no TFTP);
// - UEFI: OVMF with the virtio-net ROM disabled (romfile=), so EDK2's own PXE client gets
//   ipxe.efi over our TFTP, then iPXE asks DHCP again and fetches the HTTP script.
// Passing means the HTTP server saw GET of the script for the VM's MAC and then the script's
// own fetch of the kernel artifact (a marker file: it is not a kernel, and the boot stops
// there); QEMU is then killed by PID.
// Method: one lab per boot. Namespace srv holds bridge br0 (10.77.1.1/24, fd77:1::1/64) with
// radvd advertising the IPv6 prefix (without an RA, iPXE waits ~15 s in autoconf), a tap for
// QEMU, and the boot services process (DHCP on br0, TFTP on :69, HTTP on :8080). QEMU runs
// TCG (this machine's /dev/kvm is unusable), one VM at a time. The TFTP root is a copy of
// Debian's iPXE binaries: /usr/lib/ipxe/ipxe.efi is a symlink to /boot, which the TFTP server
// rightly refuses to follow out of its root.
import assert from 'node:assert/strict';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { BootServicesProcess, NetnsLab, hardwareRecord, requireCommands } from '../support/netns.js';

const bridgeAddress = '10.77.1.1';
const httpBase = `http://${bridgeAddress}:8080`;
const ipxeBinaries = ['ipxe.efi', 'undionly.kpxe', 'snponly.efi'];
const ovmfCode = '/usr/share/OVMF/OVMF_CODE_4M.fd';
const ovmfVars = '/usr/share/OVMF/OVMF_VARS_4M.fd';

interface Firmware {
  readonly name: 'bios' | 'uefi';
  readonly mac: string;
  /** Bound on QEMU start to the kernel fetch, with room for a loaded 2-core machine. */
  readonly bootTimeoutMs: number;
  qemuArgs(dir: string): Promise<string[]>;
}

const bios: Firmware = {
  name: 'bios',
  mac: '52:54:00:77:01:02',
  bootTimeoutMs: 30_000,
  qemuArgs: () => Promise.resolve(['-device', 'e1000,netdev=n0,mac=52:54:00:77:01:02']),
};

const uefi: Firmware = {
  name: 'uefi',
  mac: '52:54:00:77:01:03',
  bootTimeoutMs: 90_000,
  qemuArgs: async (dir) => {
    const vars = path.join(dir, 'OVMF_VARS.fd');
    await copyFile(ovmfVars, vars);
    return [
      '-drive',
      `if=pflash,format=raw,readonly=on,file=${ovmfCode}`,
      '-drive',
      `if=pflash,format=raw,file=${vars}`,
      '-device',
      'virtio-net-pci,netdev=n0,mac=52:54:00:77:01:03,romfile=',
    ];
  },
};

/** Runs one VM's network boot in a fresh lab and returns the boot services' events. */
async function networkBoot(firmware: Firmware): Promise<BootServicesProcess> {
  await requireCommands({ ip: 'iproute2', radvd: 'radvd', 'qemu-system-x86_64': 'qemu-system-x86' });
  const lab = await NetnsLab.create();
  try {
    const srv = await lab.addNamespace('srv');
    await lab.addBridge(srv, 'br0', [`${bridgeAddress}/24`, 'fd77:1::1/64']);
    await lab.addTap(srv, 'tap0', 'br0');
    await lab.advertiseIpv6(srv, 'br0', 'fd77:1::/64');

    const tftpRoot = path.join(lab.dir, 'tftp');
    const artifacts = path.join(lab.dir, 'artifacts');
    await mkdir(tftpRoot);
    await mkdir(artifacts);
    for (const name of ipxeBinaries)
      await copyFile(path.join('/usr/lib/ipxe', name), path.join(tftpRoot, name));
    await writeFile(path.join(artifacts, 'vmlinuz-x86_64'), 'marker: the script ran\n');
    await writeFile(path.join(artifacts, 'initramfs-x86_64'), 'marker\n');

    const boot = await BootServicesProcess.start(lab, srv, {
      hardware: [
        hardwareRecord({
          id: `vm-${firmware.name}`,
          mac: firmware.mac,
          ip: '10.77.1.60/24',
          gateway: bridgeAddress,
        }),
      ],
      httpBaseUrl: httpBase,
      dhcp: { serverAddress: bridgeAddress, mode: 'reservation', interfaceName: 'br0' },
      tftp: { root: tftpRoot, port: 69 },
      http: {
        apiAddress: `${bridgeAddress}:7001`,
        port: 8080,
        artifactsDir: artifacts,
        binariesDir: tftpRoot,
      },
    });
    const qemu = lab.spawn(srv, [
      'qemu-system-x86_64',
      ...['-accel', 'tcg', '-m', '256', '-display', 'none', '-serial', 'stdio', '-monitor', 'none'],
      ...['-no-reboot', '-boot', 'n', '-netdev', 'tap,id=n0,ifname=tap0,script=no,downscript=no'],
      ...(await firmware.qemuArgs(lab.dir)),
    ]);
    try {
      await boot.waitFor(
        'http',
        (e) => e.url === '/artifacts/vmlinuz-x86_64' && e.status === 200,
        firmware.bootTimeoutMs,
        `${firmware.name} boot reaching the kernel fetch`,
      );
    } catch (error) {
      const events = boot.events().map((e) => JSON.stringify(e));
      throw new Error(
        `${String(error)}\nevents:\n${events.join('\n')}\nconsole:\n${qemu.output.slice(-3000)}`,
      );
    } finally {
      await qemu.stop();
    }
    await boot.stop();
    return boot;
  } finally {
    await lab.destroy();
  }
}

function scriptFetches(boot: BootServicesProcess, mac: string): number {
  const encoded = encodeURIComponent(mac);
  return boot
    .eventsOf('http')
    .filter((e) => (e.url === `/ipxe/${mac}` || e.url === `/ipxe/${encoded}`) && e.status === 200).length;
}

describe('PXE boot under QEMU', { concurrency: 1 }, () => {
  it('BIOS: the iPXE ROM goes straight to the HTTP script', { timeout: 180_000 }, async () => {
    const boot = await networkBoot(bios);
    const replies = boot.eventsOf('dhcp-reply').filter((e) => e.mac === bios.mac);
    assert.ok(replies.some((e) => e.reply === 'ACK' && e.yiaddr === '10.77.1.60'));
    assert.ok(
      replies.every((e) => e.bootfile === `${httpBase}/ipxe/${bios.mac}`),
      'every iPXE offer names the script',
    );
    assert.equal(scriptFetches(boot, bios.mac), 1);
    assert.equal(boot.eventsOf('tftp-start').length, 0, 'an iPXE ROM needs no TFTP');
  });

  it(
    'UEFI: EDK2 PXE fetches ipxe.efi over TFTP, then iPXE fetches the HTTP script',
    { timeout: 240_000 },
    async () => {
      const boot = await networkBoot(uefi);
      const bootfiles = boot
        .eventsOf('dhcp-reply')
        .filter((e) => e.mac === uefi.mac && e.reply === 'ACK')
        .map((e) => e.bootfile);
      assert.equal(bootfiles[0], 'ipxe.efi', 'EDK2 (client architecture 7) is sent the iPXE EFI binary');
      assert.ok(bootfiles.includes(`${httpBase}/ipxe/${uefi.mac}`), 'the chained iPXE is sent to the script');
      const transfers = boot.eventsOf('tftp-end').filter((e) => e.filename === 'ipxe.efi');
      assert.ok(
        transfers.some((e) => e.outcome === 'completed'),
        JSON.stringify(transfers),
      );
      assert.equal(scriptFetches(boot, uefi.mac), 1);
    },
  );
});

// Goal: real firmware network-boots from a real `slipway server` node, the machine registered
// with `slipway hardware create`, and runs the iPXE script generated from the replicated state:
// - BIOS: SeaBIOS with Debian's iPXE e1000 ROM. The ROM is iPXE, so DHCP sends it straight to
//   the per-MAC HTTP script (no TFTP);
// - UEFI: OVMF with the virtio-net ROM disabled (romfile=), so EDK2's own PXE client gets
//   ipxe.efi over TFTP from the node's default TFTP root (its copy of Debian's iPXE binaries),
//   then iPXE asks DHCP again and fetches the HTTP script.
// Passing means the node answered DHCP with the reservation, served the generated script for
// the VM's MAC once, and the firmware reports the script's own fetch of the kernel artifact as
// done (a marker file: it is not a kernel, and the boot stops there); QEMU is then stopped by PID.
// Method: one lab per boot. Namespace srv holds bridge br0 (10.77.1.1/24, fd77:1::1/64) with
// radvd advertising the IPv6 prefix (without an RA, iPXE waits ~15 s in autoconf), a tap for
// QEMU, and a single-node cluster on 10.77.1.1 (DHCP on br0, TFTP :69, HTTP :8080, no
// --tftp-root). The firmware's console is read from QEMU's serial port: OVMF mirrors its console
// there, and SeaBIOS does when given etc/sercon-port, which covers the iPXE ROM's output too.
// Server-side evidence is the node's debug log. QEMU runs TCG (this machine's /dev/kvm is
// unusable), one VM at a time.
import assert from 'node:assert/strict';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { NetnsLab, requireCommands } from '../support/netns.js';
import { NetnsCluster, type LogRecord } from '../support/netns-cluster.js';

const nodeAddress = '10.77.1.1';
const machineAddress = '10.77.1.60';
const httpBase = `http://${nodeAddress}:8080`;
const ovmfCode = '/usr/share/OVMF/OVMF_CODE_4M.fd';
const ovmfVars = '/usr/share/OVMF/OVMF_VARS_4M.fd';
/** COM1's I/O port, little-endian, as SeaBIOS reads etc/sercon-port. */
const com1Port = Buffer.from([0xf8, 0x03]);

interface Firmware {
  readonly name: 'bios' | 'uefi';
  readonly mac: string;
  /** Bound on QEMU start to the kernel fetch, with room for a loaded 2-core machine. */
  readonly bootTimeoutMs: number;
  readonly uefi: boolean;
  qemuArgs(dir: string): Promise<string[]>;
}

const bios: Firmware = {
  name: 'bios',
  mac: '52:54:00:77:01:02',
  bootTimeoutMs: 45_000,
  uefi: false,
  qemuArgs: async (dir) => {
    const sercon = path.join(dir, 'sercon-port');
    await writeFile(sercon, com1Port);
    return [
      // SeaBIOS copies the VGA text console (where the iPXE ROM writes) to COM1.
      ...['-fw_cfg', `name=etc/sercon-port,file=${sercon}`],
      ...['-device', 'e1000,netdev=n0,mac=52:54:00:77:01:02'],
    ];
  },
};

const uefi: Firmware = {
  name: 'uefi',
  mac: '52:54:00:77:01:03',
  bootTimeoutMs: 120_000,
  uefi: true,
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

interface BootRecord {
  /** The firmware's serial console, terminal escapes removed, one entry per line. */
  readonly console: readonly string[];
  /** The node's log. */
  readonly logs: readonly LogRecord[];
}

/** Runs one VM's network boot against a fresh single-node cluster. */
async function networkBoot(firmware: Firmware): Promise<BootRecord> {
  await requireCommands({ ip: 'iproute2', radvd: 'radvd', 'qemu-system-x86_64': 'qemu-system-x86' });
  const lab = await NetnsLab.create();
  try {
    const srv = await lab.addNamespace('srv');
    await lab.addBridge(srv, 'br0', [`${nodeAddress}/24`, 'fd77:1::1/64']);
    await lab.addTap(srv, 'tap0', 'br0');
    await lab.advertiseIpv6(srv, 'br0', 'fd77:1::/64');

    // Stand-ins for the boot OS (test/e2e/bootos-qemu.test.ts boots the real one).
    const bootOs = path.join(lab.dir, 'bootos');
    await mkdir(bootOs);
    await writeFile(path.join(bootOs, 'vmlinuz-x86_64'), 'marker: the script ran\n');
    await writeFile(path.join(bootOs, 'initramfs-x86_64'), 'marker\n');

    const cluster = await NetnsCluster.start(lab, [
      {
        id: 'n1',
        ns: srv,
        address: nodeAddress,
        args: [
          ...['--dhcp-interface', 'br0', '--tftp-addr', `${nodeAddress}:69`],
          ...['--http-addr', `${nodeAddress}:8080`, '--bootos-dir', bootOs],
        ],
      },
    ]);
    await cluster.waitForLeader(srv, 20_000);
    const machine = ['--id', `vm-${firmware.name}`, '--mac', firmware.mac, '--ip', `${machineAddress}/24`];
    await cluster.slipwayOk(srv, [
      ...['hardware', 'create', ...machine, '--gateway', nodeAddress],
      ...(firmware.uefi ? ['--uefi'] : []),
    ]);

    const qemu = lab.spawn(srv, [
      'qemu-system-x86_64',
      ...['-accel', 'tcg', '-m', '256', '-display', 'none', '-serial', 'stdio', '-monitor', 'none'],
      ...['-no-reboot', '-boot', 'n', '-netdev', 'tap,id=n0,ifname=tap0,script=no,downscript=no'],
      ...(await firmware.qemuArgs(lab.dir)),
    ]);
    try {
      await qemu.waitForOutput(
        // Complete lines only: a line still being written could later run into QEMU's own
        // "terminating on signal" message once it is stopped.
        (output) =>
          consoleLines(output.slice(0, output.lastIndexOf('\n') + 1)).includes(
            `${httpBase}/boot/vmlinuz-x86_64... ok`,
          ),
        firmware.bootTimeoutMs,
        `${firmware.name} boot reaching the kernel fetch`,
      );
    } catch (error) {
      const logs = cluster.nodes[0]?.process.output.slice(-4000) ?? '';
      throw new Error(`${String(error)}\nnode log:\n${logs}`);
    } finally {
      await qemu.stop();
    }
    return { console: consoleLines(qemu.output), logs: cluster.nodes[0]?.logRecords() ?? [] };
  } finally {
    await lab.destroy();
  }
}

/** The console's lines without terminal escapes, carriage returns or backspaced spinners. */
function consoleLines(output: string): string[] {
  return (
    output
      // eslint-disable-next-line no-control-regex -- terminal escapes are control characters
      .replace(/\x1b(\[[0-9;=?]*[A-Za-z]|c)/g, '')
      // eslint-disable-next-line no-control-regex -- and so is the spinner's backspace
      .replace(/.\x08/g, '')
      .split(/\r?\n|\r/)
      .map((line) => line.trim())
      .filter((line) => line !== '')
  );
}

function acks(boot: BootRecord, mac: string): LogRecord[] {
  return boot.logs.filter((r) => r.msg === 'DHCP reply sent' && r['mac'] === mac && r['reply'] === 'ACK');
}

function scriptsServed(boot: BootRecord, mac: string): LogRecord[] {
  return boot.logs.filter((r) => r.msg === 'iPXE script served' && r['mac'] === mac);
}

/** What iPXE prints from DHCP until the kernel fetch, for the machine `mac` named `id`. */
function ipxeRun(mac: string, id: string): string[] {
  return [
    `Next server: ${nodeAddress}`,
    `Filename: ${httpBase}/ipxe/${mac}`,
    `Slipway: booting ${id} (${mac})`,
    `${httpBase}/boot/vmlinuz-x86_64... ok`,
  ];
}

/** The lines of `expected` appear in `lines`, in that order. */
function assertInOrder(lines: readonly string[], expected: readonly string[]): void {
  let from = 0;
  for (const line of expected) {
    const at = lines.indexOf(line, from);
    assert.ok(at >= 0, `console lacks "${line}" (after line ${from}):\n${lines.join('\n')}`);
    from = at + 1;
  }
}

describe('PXE boot under QEMU from a slipway server node', { concurrency: 1 }, () => {
  it('BIOS: the iPXE ROM goes straight to the HTTP script', { timeout: 180_000 }, async () => {
    const boot = await networkBoot(bios);
    assertInOrder(boot.console, [
      `net0: ${machineAddress}/255.255.255.0 gw ${nodeAddress}`,
      ...ipxeRun(bios.mac, 'vm-bios'),
    ]);
    assert.ok(!boot.console.some((l) => l.startsWith('NBP filename')), 'an iPXE ROM needs no TFTP');
    const acked = acks(boot, bios.mac);
    assert.ok(acked.length >= 1, 'the node logged its ACK');
    assert.ok(acked.every((r) => r['reason'] === `ACK of reserved ${machineAddress}`));
    const served = scriptsServed(boot, bios.mac);
    assert.deepEqual(
      served.map((r) => [r['hardware'], r['kind']]),
      [['vm-bios', 'generated']],
    );
  });

  it(
    'UEFI: EDK2 PXE fetches ipxe.efi over TFTP, then iPXE fetches the HTTP script',
    { timeout: 240_000 },
    async () => {
      const boot = await networkBoot(uefi);
      assertInOrder(boot.console, [
        `Station IP address is ${machineAddress}`,
        `Server IP address is ${nodeAddress}`,
        'NBP filename is ipxe.efi',
        'NBP file downloaded successfully.',
        ...ipxeRun(uefi.mac, 'vm-uefi'),
      ]);
      const rounds = new Set(acks(boot, uefi.mac).map((r) => r['xid']));
      assert.ok(rounds.size >= 2, 'a DHCP exchange for EDK2, another for the chained iPXE');
      const served = scriptsServed(boot, uefi.mac);
      assert.deepEqual(
        served.map((r) => [r['hardware'], r['kind']]),
        [['vm-uefi', 'generated']],
      );
    },
  );
});

// Goal: real firmware network-boots from a real `slipway server` node, the machine registered
// with `slipway hardware create`, and runs the iPXE script generated from the replicated state:
// - BIOS: SeaBIOS with Debian's iPXE e1000 ROM. The ROM is iPXE, so DHCP sends it straight to
//   the per-MAC HTTP script (no TFTP);
// - UEFI: OVMF with the virtio-net ROM disabled (romfile=), so EDK2's own PXE client gets
//   ipxe.efi over TFTP from the node's default TFTP root (its copy of Debian's iPXE binaries),
//   then iPXE asks DHCP again and fetches the HTTP script. This one goes through the VIP, held
//   by the node on br0, with TFTP and HTTP on 0.0.0.0 as an operator runs them: EDK2 accepts TFTP
//   replies only from the address it asked, so the boot proves every reply leaves from the VIP.
//   UEFI HTTP boot is not offered (the node's namespace drops DHCP requests of vendor class
//   HTTPClient), so a fallback to it cannot hide a failure, and the script must be fetched
//   within a bound; the time from power-on to the script is printed.
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
import { waitFor } from '../support/wait.js';

const nodeAddress = '10.77.1.1';
const vip = '10.77.1.100';
const machineAddress = '10.77.1.60';
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
  /** The address machines are sent to: the node's own, or the VIP the node holds. */
  readonly server: string;
  qemuArgs(dir: string): Promise<string[]>;
}

/** The node's flags for the address its machines use. */
function serverArgs(firmware: Firmware): string[] {
  return firmware.server === nodeAddress
    ? ['--tftp-addr', `${nodeAddress}:69`, '--http-addr', `${nodeAddress}:8080`]
    : [
        ...['--vip', firmware.server, '--vip-interface', 'br0'],
        ...['--tftp-addr', '0.0.0.0:69', '--http-addr', '0.0.0.0:8080'],
      ];
}

const httpBaseOf = (firmware: Firmware): string => `http://${firmware.server}:8080`;

/** Bound on power-on to the iPXE script's fetch for EDK2's PXE (dnsmasq's figure is 14.5 s). */
const uefiScriptTimeoutMs = 90_000;

const bios: Firmware = {
  name: 'bios',
  mac: '52:54:00:77:01:02',
  bootTimeoutMs: 45_000,
  uefi: false,
  server: nodeAddress,
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
  server: vip,
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
  /** When QEMU was started (ms since the epoch). */
  readonly poweredOnMs: number;
}

/** Runs one VM's network boot against a fresh single-node cluster. */
async function networkBoot(firmware: Firmware): Promise<BootRecord> {
  await requireCommands({
    ip: 'iproute2',
    radvd: 'radvd',
    'qemu-system-x86_64': 'qemu-system-x86',
    ...(firmware.uefi ? { iptables: 'iptables', arping: 'iputils-arping' } : {}),
  });
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
        args: [...['--dhcp-interface', 'br0', ...serverArgs(firmware), '--bootos-dir', bootOs]],
      },
    ]);
    await cluster.waitForLeader(srv, 20_000);
    if (firmware.uefi) await withoutUefiHttpBoot(lab, srv);
    if (firmware.server !== nodeAddress) await waitForAddress(lab, srv, firmware.server);
    const machine = ['--id', `vm-${firmware.name}`, '--mac', firmware.mac, '--ip', `${machineAddress}/24`];
    await cluster.slipwayOk(srv, [
      ...['hardware', 'create', ...machine, '--gateway', nodeAddress],
      ...(firmware.uefi ? ['--uefi'] : []),
    ]);

    const qemuArgs = await firmware.qemuArgs(lab.dir);
    const poweredOnMs = Date.now();
    const qemu = lab.spawn(srv, [
      'qemu-system-x86_64',
      ...['-accel', 'tcg', '-m', '256', '-display', 'none', '-serial', 'stdio', '-monitor', 'none'],
      ...['-no-reboot', '-boot', 'n', '-netdev', 'tap,id=n0,ifname=tap0,script=no,downscript=no'],
      ...qemuArgs,
    ]);
    try {
      await qemu.waitForOutput(
        // Complete lines only: a line still being written could later run into QEMU's own
        // "terminating on signal" message once it is stopped.
        (output) =>
          consoleLines(output.slice(0, output.lastIndexOf('\n') + 1)).includes(
            `${httpBaseOf(firmware)}/boot/vmlinuz-x86_64... ok`,
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
    return {
      console: consoleLines(qemu.output),
      logs: cluster.nodes[0]?.logRecords() ?? [],
      poweredOnMs,
    };
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
function ipxeRun(firmware: Firmware, id: string): string[] {
  const httpBase = httpBaseOf(firmware);
  return [
    `Next server: ${firmware.server}`,
    `Filename: ${httpBase}/ipxe/${firmware.mac}`,
    `Slipway: booting ${id} (${firmware.mac})`,
    `${httpBase}/boot/vmlinuz-x86_64... ok`,
  ];
}

/**
 * UEFI HTTP boot is not offered: the node never hears a DHCP request of vendor class
 * HTTPClient, so if EDK2's PXE fails, nothing else boots the machine.
 */
async function withoutUefiHttpBoot(lab: NetnsLab, ns: string): Promise<void> {
  await lab.check(ns, [
    ...['iptables', '-A', 'INPUT', '-p', 'udp', '--dport', '67'],
    ...['-m', 'string', '--string', 'HTTPClient', '--algo', 'bm', '-j', 'DROP'],
  ]);
}

/** Waits until `address` is on br0 (the node holds the VIP once it leads). */
async function waitForAddress(lab: NetnsLab, ns: string, address: string): Promise<void> {
  await waitFor(
    `${address} on br0`,
    async () => {
      const out = await lab.check(ns, ['ip', '-j', '-4', 'addr', 'show', 'dev', 'br0']);
      const links = JSON.parse(out) as { addr_info: { local: string }[] }[];
      return links.some((l) => l.addr_info.some((a) => a.local === address));
    },
    20_000,
    200,
  );
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
      ...ipxeRun(bios, 'vm-bios'),
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
    'UEFI: EDK2 PXE fetches ipxe.efi over TFTP from the VIP, HTTP boot not offered, then iPXE fetches the HTTP script',
    { timeout: 240_000 },
    async () => {
      const boot = await networkBoot(uefi);
      assertInOrder(boot.console, [
        `Station IP address is ${machineAddress}`,
        `Server IP address is ${vip}`,
        'NBP filename is ipxe.efi',
        'NBP file downloaded successfully.',
        ...ipxeRun(uefi, 'vm-uefi'),
      ]);
      assert.ok(!boot.console.some((l) => /HTTP Boot/i.test(l)), 'no UEFI HTTP boot was tried');
      assert.ok(
        !boot.logs.some(
          (r) =>
            r.msg === 'DHCP reply sent' &&
            typeof r['reason'] === 'string' &&
            r['reason'].includes('HTTP boot'),
        ),
        'no DHCP answer offered UEFI HTTP boot',
      );
      const rounds = new Set(acks(boot, uefi.mac).map((r) => r['xid']));
      assert.ok(rounds.size >= 2, 'a DHCP exchange for EDK2, another for the chained iPXE');
      const served = scriptsServed(boot, uefi.mac);
      assert.deepEqual(
        served.map((r) => [r['hardware'], r['kind']]),
        [['vm-uefi', 'generated']],
      );
      const scriptAfterMs = Number(served[0]?.['time']) - boot.poweredOnMs;
      process.stdout.write(
        `# uefi: power-on to the iPXE script ${scriptAfterMs} ms (EDK2 PXEv4, TFTP from the VIP)\n`,
      );
      assert.ok(
        scriptAfterMs > 0 && scriptAfterMs <= uefiScriptTimeoutMs,
        `the iPXE script was fetched ${scriptAfterMs} ms after power-on; the bound is ${uefiScriptTimeoutMs} ms`,
      );
    },
  );
});

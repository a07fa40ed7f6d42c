// `npm run bench -- uefi-pxe`: how long EDK2's own PXE client (OVMF under QEMU, virtio-net with
// no option ROM) takes from power-on to the iPXE script, when Slipway's DHCP and TFTP serve it
// ipxe.efi from the VIP, against Debian's dnsmasq serving the same ipxe.efi to the same VM.
//
// Each round builds a fresh lab: namespace srv with bridge br0 (10.78.0.1/24 and the VIP
// 10.78.0.100/32, as a node holds it), radvd (iPXE waits ~15 s in IPv6 autoconf without an RA),
// QEMU's tap, and a rule that drops DHCP requests of vendor class HTTPClient, so UEFI HTTP boot
// is offered by neither server. The iPXE script comes from Slipway's HTTP boot server in both
// cases (cluster/lab/boot-services.ts); what differs is who answers DHCP and TFTP:
// - slipway: the same boot-services process (DHCP on br0, server identifier the VIP; TFTP on
//   0.0.0.0 following the host's addresses, as a node runs it);
// - dnsmasq: DHCP and TFTP (`dnsmasq-base`), next-server the VIP, iPXE sent to the script URL.
// The time is from QEMU's start to the script's fetch, as the HTTP server reports it. QEMU runs
// without KVM (TCG); one VM at a time; every process is stopped by PID and every lab destroyed.
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { NetnsLab, type LabProcess } from '../cluster/netns-lab.js';
import { eventLinePrefix, type BootEvent, type BootServicesConfig } from '../cluster/lab/boot-services.js';
import type { Hardware } from '../src/model/records.js';
import { findExecutable } from '../src/platform/executable.js';
import { repoRoot } from './clusters.js';
import { median, ratio, round } from './stats.js';

const nodeAddress = '10.78.0.1';
const vip = '10.78.0.100';
const machineAddress = '10.78.0.60';
const mac = '52:54:00:78:00:03';
const ipxeEfi = '/usr/lib/ipxe/ipxe.efi';
const ovmfCode = '/usr/share/OVMF/OVMF_CODE_4M.fd';
const ovmfVars = '/usr/share/OVMF/OVMF_VARS_4M.fd';
const scriptUrl = `http://${vip}:8080/ipxe/${mac}`;

type Server = 'slipway' | 'dnsmasq';

interface Options {
  readonly rounds: number;
  readonly timeoutMs: number;
  readonly servers: readonly Server[];
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      rounds: { type: 'string', default: '1' },
      'timeout-s': { type: 'string', default: '180' },
      only: { type: 'string' },
    },
  });
  const rounds = Number(values.rounds);
  const timeoutS = Number(values['timeout-s']);
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > 10) throw new RangeError('--rounds: 1 to 10');
  if (!Number.isFinite(timeoutS) || timeoutS < 10 || timeoutS > 600) {
    throw new RangeError('--timeout-s: 10 to 600 seconds');
  }
  const only = values.only;
  if (only !== undefined && only !== 'slipway' && only !== 'dnsmasq') {
    throw new RangeError('--only: slipway or dnsmasq');
  }
  return {
    rounds,
    timeoutMs: timeoutS * 1000,
    servers: only === undefined ? ['slipway', 'dnsmasq'] : [only],
  };
}

function requireTools(servers: readonly Server[]): void {
  const tools: Record<string, string> = {
    ip: 'iproute2',
    radvd: 'radvd',
    iptables: 'iptables',
    'qemu-system-x86_64': 'qemu-system-x86',
    ...(servers.includes('dnsmasq') ? { dnsmasq: 'dnsmasq-base' } : {}),
  };
  const missing = Object.entries(tools).filter(
    ([command]) => findExecutable(command, [`/usr/sbin/${command}`, `/sbin/${command}`]) === undefined,
  );
  if (missing.length > 0) {
    throw new Error(`missing: ${missing.map(([c, p]) => `${c} (apt-get install ${p})`).join(', ')}`);
  }
}

const hardware: Hardware = {
  id: 'vm-uefi',
  interfaces: [
    { mac, ip: { address: machineAddress, prefix: 24 }, gateway: nodeAddress, dns: [], leaseTimeS: 3600 },
  ],
  arch: 'x86_64',
  uefi: true,
  netboot: { allowPXE: true, allowWorkflow: true },
  metadata: {},
  workerTokenSha256: '0'.repeat(64),
  createdMs: 0,
  updatedMs: 0,
  version: 1,
};

/** The lab both servers run in; returns the server namespace and the TFTP root. */
async function buildLab(lab: NetnsLab): Promise<{ srv: string; root: string }> {
  const srv = await lab.addNamespace('srv');
  await lab.addBridge(srv, 'br0', [`${nodeAddress}/24`, 'fd78::1/64']);
  await lab.check(srv, ['ip', 'addr', 'add', `${vip}/32`, 'dev', 'br0']);
  await lab.addTap(srv, 'tap0', 'br0');
  await lab.advertiseIpv6(srv, 'br0', 'fd78::/64');
  await lab.check(srv, [
    ...['iptables', '-A', 'INPUT', '-p', 'udp', '--dport', '67'],
    ...['-m', 'string', '--string', 'HTTPClient', '--algo', 'bm', '-j', 'DROP'],
  ]);
  const root = join(lab.dir, 'tftp-root');
  await mkdir(root);
  await copyFile(ipxeEfi, join(root, 'ipxe.efi'));
  return { srv, root };
}

function bootEvents(output: string): BootEvent[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith(eventLinePrefix))
    .flatMap((line) => {
      try {
        return [JSON.parse(line.slice(eventLinePrefix.length)) as BootEvent];
      } catch {
        return [];
      }
    });
}

/** Slipway's boot services in srv: HTTP always, DHCP and TFTP when Slipway is the server measured. */
async function startBootServices(
  lab: NetnsLab,
  srv: string,
  root: string,
  server: Server,
): Promise<LabProcess> {
  const config: BootServicesConfig = {
    hardware: [hardware],
    httpBaseUrl: `http://${vip}:8080`,
    http: { apiAddress: `${vip}:7001`, host: '0.0.0.0', port: 8080, binariesDir: root },
    ...(server === 'slipway'
      ? {
          dhcp: { serverAddress: vip, mode: 'reservation' as const, interfaceName: 'br0' },
          tftp: { root, host: '0.0.0.0', port: 69, followAddresses: true },
        }
      : {}),
  };
  const file = join(lab.dir, 'boot-services.json');
  await writeFile(file, JSON.stringify(config));
  const services = lab.spawn(
    srv,
    [process.execPath, '--import', 'tsx', 'cluster/lab/boot-services.ts', file],
    {
      cwd: repoRoot,
    },
  );
  await services.waitForOutput(
    (o) => bootEvents(o).some((e) => e.event === 'ready'),
    60_000,
    'boot services ready',
  );
  if (server === 'slipway') {
    const vipListened = (o: string): boolean =>
      bootEvents(o).some((e) => e.event === 'tftp-listening' && e.addresses.includes(vip));
    await services.waitForOutput(vipListened, 10_000, 'a TFTP listener on the VIP');
  }
  return services;
}

/** dnsmasq answering DHCP and TFTP on br0 as Slipway would: ipxe.efi from the VIP, then the script. */
async function startDnsmasq(lab: NetnsLab, srv: string, root: string): Promise<LabProcess> {
  const conf = join(lab.dir, 'dnsmasq.conf');
  await writeFile(
    conf,
    [
      'port=0',
      'interface=br0',
      'bind-interfaces',
      'user=root',
      `dhcp-leasefile=${join(lab.dir, 'dnsmasq.leases')}`,
      `dhcp-range=${nodeAddress},static,255.255.255.0`,
      `dhcp-host=${mac},${machineAddress}`,
      'dhcp-userclass=set:ipxe,iPXE',
      `dhcp-boot=tag:!ipxe,ipxe.efi,,${vip}`,
      `dhcp-boot=tag:ipxe,${scriptUrl}`,
      'enable-tftp',
      `tftp-root=${root}`,
      '',
    ].join('\n'),
  );
  const dnsmasq = lab.spawn(srv, [
    'dnsmasq',
    '--keep-in-foreground',
    '--log-facility=-',
    `--conf-file=${conf}`,
  ]);
  await dnsmasq.waitForOutput((o) => /TFTP root is/.test(o), 10_000, 'dnsmasq started');
  return dnsmasq;
}

/** One power-on of the VM; the milliseconds from QEMU's start to the script's fetch. */
async function bootOnce(server: Server, timeoutMs: number): Promise<number> {
  const lab = await NetnsLab.create();
  try {
    const { srv, root } = await buildLab(lab);
    const services = await startBootServices(lab, srv, root, server);
    if (server === 'dnsmasq') await startDnsmasq(lab, srv, root);
    const vars = join(lab.dir, 'OVMF_VARS.fd');
    await copyFile(ovmfVars, vars);
    const poweredOn = Date.now();
    const qemu = lab.spawn(srv, [
      'qemu-system-x86_64',
      ...['-accel', 'tcg', '-m', '256', '-display', 'none', '-serial', 'stdio', '-monitor', 'none'],
      ...['-no-reboot', '-boot', 'n', '-netdev', 'tap,id=n0,ifname=tap0,script=no,downscript=no'],
      ...['-drive', `if=pflash,format=raw,readonly=on,file=${ovmfCode}`],
      ...['-drive', `if=pflash,format=raw,file=${vars}`],
      ...['-device', `virtio-net-pci,netdev=n0,mac=${mac},romfile=`],
    ]);
    const fetched = (o: string): boolean =>
      bootEvents(o).some(
        (e) => e.event === 'http' && decodeURIComponent(e.url) === `/ipxe/${mac}` && e.status === 200,
      );
    try {
      await services.waitForOutput(fetched, timeoutMs, `${server}: the iPXE script fetched`);
    } catch (error) {
      throw new Error(`${String(error)}\nconsole:\n${qemu.output.slice(-3000)}`);
    }
    return Date.now() - poweredOn;
  } finally {
    await lab.destroy();
  }
}

export async function runUefiPxeBench(argv: readonly string[]): Promise<void> {
  const o = parseOptions(argv);
  requireTools(o.servers);
  const times: Record<Server, number[]> = { slipway: [], dnsmasq: [] };
  for (let round_ = 1; round_ <= o.rounds; round_++) {
    for (const server of o.servers) {
      process.stderr.write(`uefi-pxe: round ${round_}, ${server}\n`);
      times[server].push(await bootOnce(server, o.timeoutMs));
    }
  }
  const s = (xs: readonly number[]): number | null => (xs.length === 0 ? null : round(median(xs) / 1000, 1));
  process.stdout.write(
    `${JSON.stringify({
      bench: 'uefi-pxe',
      what: 'OVMF PXEv4 (TCG, virtio-net without ROM), power-on to the iPXE script; ipxe.efi over TFTP from the VIP, UEFI HTTP boot not offered',
      rounds: o.rounds,
      slipway_s: times.slipway.map((ms) => round(ms / 1000, 1)),
      dnsmasq_s: times.dnsmasq.map((ms) => round(ms / 1000, 1)),
      slipway_median_s: s(times.slipway),
      dnsmasq_median_s: s(times.dnsmasq),
      slipway_over_dnsmasq: ratio(s(times.slipway), s(times.dnsmasq)),
    })}\n`,
  );
}

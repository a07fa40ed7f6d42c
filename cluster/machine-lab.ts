// The machine lab (`slipway lab up`): on one computer, what a provisioning site has. Three
// `slipway server` nodes on a LAN hold the VIP by leadership and serve DHCP, TFTP, HTTP (the
// boot OS) and the API, each with HAProxy in front as `slipway balancer config` renders it; N
// QEMU machines with empty disks sit on the same LAN, each behind OpenIPMI's BMC simulator, and
// are registered with their MAC, address and BMC. The host reaches the LAN through a veth, so
// the CLI works from an ordinary shell.
//
// Every machine has an identity a real one has, so discovery can be checked against what QEMU
// was given: SMBIOS type 1 (vendor, product, serial, UUID), a disk serial (virtio-blk, or a
// SCSI disk with a model and a WWN), its own memory and disk size, and the KCS interface to its
// BMC (/dev/ipmi0 in the guest), whose LAN settings name the BMC's address and MAC. With
// `unregistered`, the machines are not registered: the nodes run DHCP with a pool and
// --discovery, and a machine powered on into PXE enrols itself (docs/decisions/0029).
//
// Layout (all inside the lab's own network namespaces, plus the host's veth):
//   LAN 10.213.0.0/24 or the /24 given (br0 in namespace lan): host .1, BMCs .2 (port 6230+i),
//   ops .5, nodes n1-n3 .11-.13 (raft :7000, API :7001, HAProxy :7070, HTTP :8080, TFTP :69),
//   VIP .100, machines .61+ (registered) or the pool .150-.199 (unregistered). IPv6 router
//   advertisements on br0 (iPXE waits for one).
// Everything it starts is its child, stopped by PID; down() deletes the namespaces.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { renderHaproxyConfig } from '../lb/haproxy.js';
import { defaultHealthCheck } from '../src/model/balancer-spec.js';
import { buildBootOs } from '../src/bootos/index.js';
import { packageFile } from '../src/platform/package-file.js';
import { IpmiSim } from './bmc-sim.js';
import { labPrefix, NetnsLab, type LabProcess } from './netns-lab.js';

const run = promisify(execFile);

/** The LAN's first three octets unless told otherwise. */
export const labSubnetDefault = '10.213.0';
const nodeIds = ['n1', 'n2', 'n3'] as const;
const balancerPort = 7070;
const bmcUser = 'admin';
const ovmfCode = '/usr/share/OVMF/OVMF_CODE_4M.fd';
const ovmfVars = '/usr/share/OVMF/OVMF_VARS_4M.fd';
// From the package root whether this runs from the sources or from dist/.
const slipwayBin = fileURLToPath(packageFile('bin/slipway.js'));
const nodeReadyMs = 60_000;

/** The lab's addresses on its /24 (the layout above). */
export interface LabAddresses {
  readonly subnet: string;
  readonly host: string;
  readonly bmc: string;
  readonly ops: string;
  readonly vip: string;
  /** Dynamic DHCP's pool for unregistered machines, as --dhcp-pool takes it. */
  readonly pool: string;
  readonly nodes: readonly string[];
  /** Machine i's reserved address, when registered. */
  machine(i: number): string;
}

export function labAddresses(subnet: string): LabAddresses {
  if (!/^10\.(25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})\.(25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})$/.test(subnet)) {
    throw new Error(`the lab's subnet is three octets of 10.0.0.0/8 (e.g. 10.213.0), got "${subnet}"`);
  }
  return {
    subnet,
    host: `${subnet}.1`,
    bmc: `${subnet}.2`,
    ops: `${subnet}.5`,
    vip: `${subnet}.100`,
    pool: `${subnet}.150-${subnet}.199/24`,
    nodes: nodeIds.map((_, i) => `${subnet}.${11 + i}`),
    machine: (i) => `${subnet}.${61 + i}`,
  };
}
/** The SMBIOS identity every lab machine's firmware reports (its serial and UUID are its own). */
export const labSystemVendor = 'Slipway Lab';
export const labSystemProduct = 'QEMU lab machine';
/** What QEMU's SCSI disk reports as its model when the lab gives it one. */
const scsiDiskVendor = 'SLIPWAY';
const scsiDiskProduct = 'LAB DISK';

export type Firmware = 'bios' | 'uefi';
/** virtio: virtio-blk (a serial, no model); scsi: a SCSI disk on virtio-scsi (serial, model, WWN). */
export type LabDiskBus = 'virtio' | 'scsi';

/** One machine's hardware; what is left out takes the lab's default. */
export interface LabMachineSpec {
  /**
   * MiB, a multiple of 128 (Linux counts installed memory in 128 MiB blocks on x86, so the
   * inventory then says exactly this). Default 1024 (the boot OS unpacks ~120 MB into RAM and
   * runs Node.js).
   */
  readonly memoryMiB?: number;
  /** Default 8 GiB. */
  readonly diskBytes?: number;
  readonly diskBus?: LabDiskBus;
  readonly firmware?: Firmware;
}

export const labMemoryMiBMin = 768;
const labMemoryBlockMiB = 128;
export const labMemoryMiBMax = 16_384;
export const labDiskBytesMin = 16 * 1024 * 1024;
export const labDiskBytesMax = 2 * 1024 ** 4;

export interface MachineLabOptions {
  readonly machines: number;
  readonly firmware?: Firmware;
  /** A boot OS already built (`slipway bootos build --out DIR`); otherwise one is built. */
  readonly bootOsDir?: string;
  /** Memory per machine, MiB, where its spec says nothing. Default 1024. */
  readonly memoryMiB?: number;
  /** Machine i's hardware is specs[i]; past the end, the last one (none: the defaults). */
  readonly specs?: readonly LabMachineSpec[];
  /**
   * Do not register the machines: the nodes run dynamic DHCP with a pool and --discovery, and
   * each machine enrols itself when it network-boots.
   */
  readonly unregistered?: boolean;
  /** The LAN's first three octets (default 10.213.0): two labs on one host need two. */
  readonly subnet?: string;
  /** Told each step, for the operator. */
  readonly progress?: (line: string) => void;
}

/** What the machine's firmware and devices report: what its inventory must say. */
export interface LabMachineIdentity {
  readonly firmware: Firmware;
  readonly memoryMiB: number;
  readonly diskBytes: number;
  readonly diskBus: LabDiskBus;
  readonly diskSerial: string;
  /** A SCSI disk's model (its SCSI product) and WWN; a virtio-blk disk has neither. */
  readonly diskModel?: string;
  readonly diskWwn?: string;
  /** The NIC's Linux driver: e1000 under SeaBIOS, virtio_net under OVMF. */
  readonly nicDriver: string;
  readonly system: {
    readonly vendor: string;
    readonly product: string;
    readonly serial: string;
    readonly uuid: string;
  };
  /** The BMC's LAN settings, as `ipmitool lan print` reads them through /dev/ipmi0. */
  readonly bmcLan: { readonly address: string; readonly mac: string };
}

export interface LabNode {
  readonly id: string;
  readonly address: string;
  readonly ns: string;
  readonly process: LabProcess;
}

export interface LabMachine {
  /** Its hardware id: m1, m2, ... when registered; as discovery names it otherwise. */
  readonly id: string;
  readonly mac: string;
  /** Its reserved address when registered; unregistered, DHCP gives one from the pool. */
  readonly address: string;
  readonly identity: LabMachineIdentity;
  readonly bmc: IpmiSim;
  /** The BMC as `hardware create --bmc` names it. */
  readonly bmcUrl: string;
  /** The machine's serial console (QEMU writes it once the BMC has powered it on). */
  readonly console: string;
  readonly disk: string;
}

export class MachineLab {
  readonly lab: NetnsLab;
  readonly nodes: readonly LabNode[];
  readonly machines: readonly LabMachine[];
  /** The namespace with the CLI's view of the LAN (no services). */
  readonly ops: string;
  /** The veth on the host side, removed by down(). */
  readonly hostVeth: string;
  readonly net: LabAddresses;
  readonly registered: boolean;
  #down = false;

  private constructor(
    lab: NetnsLab,
    nodes: LabNode[],
    machines: LabMachine[],
    ops: string,
    hostVeth: string,
    net: LabAddresses,
    registered: boolean,
  ) {
    this.net = net;
    this.lab = lab;
    this.registered = registered;
    this.nodes = nodes;
    this.machines = machines;
    this.ops = ops;
    this.hostVeth = hostVeth;
  }

  /** The nodes' API addresses (the CLI's --server list, reachable from the host). */
  get servers(): string {
    return this.nodes.map((n) => `${n.address}:7001`).join(',');
  }

  get vip(): string {
    return this.net.vip;
  }

  /** The balancer on the VIP, which machines' workers dial. */
  get balancer(): string {
    return `${this.net.vip}:${balancerPort}`;
  }

  static async up(o: MachineLabOptions): Promise<MachineLab> {
    if (!Number.isInteger(o.machines) || o.machines < 1 || o.machines > 20) {
      throw new Error(`--machines must be 1-20, got ${o.machines}`);
    }
    for (const spec of o.specs ?? []) {
      const problem = labSpecProblem(spec);
      if (problem !== undefined) throw new Error(problem);
    }
    const say = o.progress ?? ((): void => undefined);
    const net = labAddresses(o.subnet ?? labSubnetDefault);
    await refuseTakenSubnet(net);
    const lab = await NetnsLab.create();
    const bmcs: IpmiSim[] = [];
    let hostVeth = '';
    try {
      const ns = await lab.addLan({
        n1: { addresses: [`${net.nodes[0]}/24`] },
        n2: { addresses: [`${net.nodes[1]}/24`] },
        n3: { addresses: [`${net.nodes[2]}/24`] },
        ops: { addresses: [`${net.ops}/24`] },
      });
      await lab.check(ns.lan, ['ip', 'addr', 'add', `${net.bmc}/24`, 'dev', 'br0']);
      await lab.check(ns.lan, ['ip', 'addr', 'add', 'fdd5::2/64', 'dev', 'br0']);
      await lab.advertiseIpv6(ns.lan, 'br0', 'fdd5::/64');
      hostVeth = `${lab.id}-h`;
      await connectHost(ns.lan, hostVeth, net);
      say(`LAN ${net.subnet}.0/24 in namespaces ${lab.id}-*; the host is ${net.host} (${hostVeth})`);

      const bootOs = o.bootOsDir ?? path.join(lab.dir, 'bootos');
      if (o.bootOsDir === undefined || !existsSync(path.join(bootOs, 'initramfs-x86_64'))) {
        say('building the boot OS (slipway bootos build)');
        await buildBootOs({ outDir: bootOs });
      }
      const nodes = await startNodes(lab, ns, net, bootOs, o.unregistered === true);
      say('3 nodes serving; HAProxy in front of each');

      const machines: LabMachine[] = [];
      for (let i = 0; i < o.machines; i++) {
        const machine = await startMachine(lab, ns, net, i, o);
        bmcs.push(machine.bmc);
        machines.push(machine);
      }
      const registered = o.unregistered !== true;
      const lab_ = new MachineLab(lab, nodes, machines, ns.ops, hostVeth, net, registered);
      await lab_.#waitForCluster();
      if (registered) {
        await lab_.#register();
        say(`${machines.length} machine(s) registered, each behind its BMC`);
      } else {
        say(`${machines.length} machine(s) unregistered, each behind its BMC: power one on to discover it`);
      }
      return lab_;
    } catch (error) {
      await Promise.all(bmcs.map((b) => b.stop()));
      if (hostVeth !== '') await run('ip', ['link', 'del', hostVeth]).catch(() => undefined);
      await lab.destroy();
      throw error;
    }
  }

  /** Runs the CLI against the nodes from the host. */
  async slipway(args: readonly string[]): Promise<string> {
    const { stdout } = await run(process.execPath, [slipwayBin, '--server', this.servers, ...args], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    return stdout;
  }

  async down(): Promise<void> {
    if (this.#down) return;
    this.#down = true;
    await Promise.all(this.machines.map((m) => m.bmc.stop()));
    await run('ip', ['link', 'del', this.hostVeth]).catch(() => undefined);
    await this.lab.destroy();
  }

  /**
   * Powers a machine on into PXE through its BMC, as an operator would before Slipway knows it
   * (`ipmitool chassis bootdev pxe; power on`): an unregistered machine then discovers itself.
   */
  async netboot(machine: LabMachine): Promise<void> {
    const ipmitool = async (...command: string[]): Promise<void> => {
      await run(
        'ip',
        ['netns', 'exec', this.ops, ...ipmitoolArgs(this.net.bmc, machine.bmc.port), ...command],
        {
          env: { ...process.env, IPMI_PASSWORD: machine.bmc.password },
          timeout: 20_000,
        },
      );
    };
    await ipmitool('chassis', 'bootdev', 'pxe');
    await ipmitool('power', 'on');
  }

  async #waitForCluster(): Promise<void> {
    await waitUntil(async () => {
      try {
        await this.slipway(['kv', 'put', 'lab', 'up']);
        return true;
      } catch {
        return false;
      }
    }, 30_000);
  }

  async #register(): Promise<void> {
    for (const m of this.machines) {
      const credentials = path.join(this.lab.dir, `${m.id}.bmc`);
      await writeFile(credentials, `${bmcUser}:${m.bmc.password}\n`, { mode: 0o600 });
      await this.slipway([
        ...['hardware', 'create', '--id', m.id, '--mac', m.mac, '--ip', `${m.address}/24`],
        ...['--bmc', m.bmcUrl, '--bmc-credentials-file', credentials],
        ...(m.identity.firmware === 'uefi' ? ['--uefi'] : []),
      ]);
    }
  }
}

/** The lab's namespaces by role (n1-n3, ops) and the LAN's own (lan). */
type LabNamespaces = Record<(typeof nodeIds)[number] | 'ops' | 'lan', string>;

/**
 * The three nodes, each serving the boot services with `bootOs` and holding the VIP by
 * leadership, each with HAProxy in front; resolves once every node says it is serving.
 */
async function startNodes(
  lab: NetnsLab,
  ns: LabNamespaces,
  net: LabAddresses,
  bootOs: string,
  discovery: boolean,
): Promise<LabNode[]> {
  const address = (i: number): string => net.nodes[i] ?? '';
  const peers = nodeIds.map((id, i) => `${id}=${address(i)}:7000`).join(',');
  const haproxyConfig = path.join(lab.dir, 'haproxy.cfg');
  await writeFile(
    haproxyConfig,
    renderHaproxyConfig({
      listenAddr: `0.0.0.0:${balancerPort}`,
      nodes: nodeIds.map((id, i) => ({ id, apiAddr: `${address(i)}:7001` })),
      healthCheck: defaultHealthCheck,
    }),
  );
  const nodes: LabNode[] = nodeIds.map((id, i) => {
    const nodeAddress = address(i);
    const process = lab.spawn(ns[id], [
      ...[globalThis.process.execPath, slipwayBin, 'server', '--id', id],
      ...['--data-dir', path.join(lab.dir, `data-${id}`), '--insecure', '--insecure-allow-network'],
      ...['--log-level', 'info'],
      ...['--raft-addr', `${nodeAddress}:7000`, '--api-addr', `${nodeAddress}:7001`, '--peers', peers],
      ...['--vip', net.vip, '--vip-interface', 'eth0', '--dhcp-interface', 'eth0'],
      ...['--http-addr', '0.0.0.0:8080', '--tftp-addr', '0.0.0.0:69', '--bootos-dir', bootOs],
      ...['--worker-server', `${net.vip}:${balancerPort}`, '--kernel-arg', 'console=ttyS0'],
      ...(discovery ? ['--dhcp-mode', 'dynamic', '--dhcp-pool', net.pool, '--discovery'] : []),
    ]);
    lab.spawn(ns[id], ['haproxy', '-f', haproxyConfig, '-db']);
    return { id, address: nodeAddress, ns: ns[id], process };
  });
  await Promise.all(
    nodes.map((n) =>
      n.process.waitForOutput((out) => out.includes('"msg":"node serving"'), nodeReadyMs, `${n.id} serving`),
    ),
  );
  return nodes;
}

/** Machine i's spec: its own, else the last one given, over the lab's defaults. */
function specOf(o: MachineLabOptions, i: number): Required<LabMachineSpec> {
  const specs = o.specs ?? [];
  const own = specs[Math.min(i, specs.length - 1)] ?? {};
  return {
    memoryMiB: own.memoryMiB ?? o.memoryMiB ?? 1024,
    diskBytes: own.diskBytes ?? 8 * 1024 ** 3,
    diskBus: own.diskBus ?? 'virtio',
    firmware: own.firmware ?? o.firmware ?? 'bios',
  };
}

/** What is wrong with a machine's spec (memory, disk), or undefined. */
export function labSpecProblem(spec: LabMachineSpec): string | undefined {
  const { memoryMiB, diskBytes } = spec;
  if (
    memoryMiB !== undefined &&
    (!Number.isInteger(memoryMiB) || memoryMiB < labMemoryMiBMin || memoryMiB > labMemoryMiBMax)
  ) {
    return `a machine's memory must be ${labMemoryMiBMin}-${labMemoryMiBMax} MiB (the boot OS runs in it), got ${memoryMiB}`;
  }
  if (memoryMiB !== undefined && memoryMiB % labMemoryBlockMiB !== 0) {
    return `a machine's memory must be a multiple of ${labMemoryBlockMiB} MiB (Linux's memory block, so its inventory says it exactly), got ${memoryMiB}`;
  }
  if (
    diskBytes !== undefined &&
    (!Number.isSafeInteger(diskBytes) ||
      diskBytes < labDiskBytesMin ||
      diskBytes > labDiskBytesMax ||
      diskBytes % 512 !== 0)
  ) {
    return `a machine's disk must be whole 512-byte sectors from 16Mi to 2Ti, got ${diskBytes} bytes`;
  }
  return undefined;
}

/** Machine i's identity: serials, UUID and the BMC's MAC derived from the lab's id and i. */
function identityOf(
  labId: string,
  net: LabAddresses,
  i: number,
  spec: Required<LabMachineSpec>,
): LabMachineIdentity {
  const n = (i + 1).toString(16).padStart(2, '0');
  const lab = labId.replace(labPrefix, '');
  const scsi = spec.diskBus === 'scsi';
  return {
    ...spec,
    diskSerial: `SLW${lab}D${n}`.toUpperCase(),
    ...(scsi ? { diskModel: scsiDiskProduct, diskWwn: `naa.5${lab}0000000${n}` } : {}),
    nicDriver: spec.firmware === 'uefi' ? 'virtio_net' : 'e1000',
    system: {
      vendor: labSystemVendor,
      product: labSystemProduct,
      serial: `SLW-${lab}-M${n}`.toUpperCase(),
      uuid: `${lab}00-5d1a-4000-8000-0000000000${n}`,
    },
    bmcLan: { address: net.bmc, mac: `52:54:00:d5:b0:${n}` },
  };
}

/** QEMU's arguments for the machine's disk, with the serial (and model, WWN) it reports. */
function diskArgs(file: string, identity: LabMachineIdentity): string {
  const drive = `-drive file=${file},format=raw,if=none,id=disk0`;
  if (identity.diskWwn === undefined) {
    return `${drive} -device virtio-blk-pci,drive=disk0,serial=${identity.diskSerial}`;
  }
  const wwn = `0x${identity.diskWwn.replace('naa.', '')}`;
  const scsiHd = [
    ...['scsi-hd', 'bus=scsi0.0', 'drive=disk0', `serial=${identity.diskSerial}`, `wwn=${wwn}`],
    ...[`vendor=${scsiDiskVendor}`, `product=${shellText(scsiDiskProduct)}`],
  ];
  return `${drive} -device virtio-scsi-pci,id=scsi0 -device ${scsiHd.join(',')}`;
}

/**
 * Machine i (m1, m2, ...): an empty disk of its size, a tap on the LAN, and a QEMU that its BMC
 * simulator starts when the BMC powers it on; resolves once the BMC answers.
 */
async function startMachine(
  lab: NetnsLab,
  ns: LabNamespaces,
  net: LabAddresses,
  i: number,
  o: MachineLabOptions,
): Promise<LabMachine> {
  const mac = `52:54:00:d5:00:${(i + 1).toString(16).padStart(2, '0')}`;
  const id = o.unregistered === true ? `discovered-${mac.replaceAll(':', '')}` : `m${i + 1}`;
  const spec = specOf(o, i);
  const identity = identityOf(lab.id, net, i, spec);
  const tap = `tap${i + 1}`;
  await lab.addTap(ns.lan, tap, 'br0');
  const disk = path.join(lab.dir, `m${i + 1}.disk`);
  await writeFile(disk, '');
  await truncate(disk, spec.diskBytes);
  const console = path.join(lab.dir, `m${i + 1}.console`);
  const port = 6230 + i;
  const password = `lab-m${i + 1}-pw`;
  const { system } = identity;
  // The last reason the probe below got, for the error when the BMC never answers.
  let refusal = 'no probe finished';
  const bmc = await IpmiSim.start({
    mode: 'chassis-control',
    netns: ns.lan,
    host: net.bmc,
    port,
    username: bmcUser,
    password,
    lan: identity.bmcLan,
    vm: [
      // -nodefaults: no CD-ROM, floppy or VGA the machine was not given, so its inventory is its spec.
      `-nodefaults -m ${spec.memoryMiB} -netdev tap,id=n0,ifname=${tap},script=no,downscript=no`,
      await firmwareArgs(spec.firmware, lab.dir, `m${i + 1}`, mac),
      `-smbios type=1,manufacturer=${shellText(system.vendor)},product=${shellText(system.product)},` +
        `serial=${system.serial},uuid=${system.uuid}`,
      diskArgs(disk, identity),
      `-serial file:${console}`,
    ].join(' '),
    bootOrder: { pxe: 'order=nc', disk: 'order=c' },
    probe: async () => {
      refusal = (await bmcRefusal(ns.ops, net.bmc, port, password)) ?? '';
      return refusal === '';
    },
    diagnose: () => bmcPathSeen(ns, net.bmc, port, password),
  }).catch((err: unknown) => {
    // ipmitool's last refusal first: the simulator's own report after it is long.
    throw new Error(
      `m${i + 1}'s BMC: ipmitool: ${refusal}; ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  });
  return {
    id,
    mac,
    address: net.machine(i),
    identity,
    bmc,
    bmcUrl: `ipmi://${net.bmc}:${port}`,
    console,
    disk,
  };
}

/** A value in QEMU's key=value lists inside vm.sh's unquoted command line: spaces escaped. */
function shellText(text: string): string {
  return text.replaceAll(' ', '\\ ');
}

async function firmwareArgs(firmware: Firmware, dir: string, id: string, mac: string): Promise<string> {
  if (firmware === 'bios') return `-device e1000,netdev=n0,mac=${mac}`;
  const vars = path.join(dir, `${id}.OVMF_VARS.fd`);
  await copyFile(ovmfVars, vars);
  return [
    `-drive if=pflash,format=raw,readonly=on,file=${ovmfCode}`,
    `-drive if=pflash,format=raw,file=${vars}`,
    `-device virtio-net-pci,netdev=n0,mac=${mac},romfile=`,
  ].join(' ');
}

/** The host side of the LAN: a veth into br0 with the host's lab address. */
async function connectHost(lanNs: string, hostVeth: string, net: LabAddresses): Promise<void> {
  await run('ip', ['link', 'add', hostVeth, 'type', 'veth', 'peer', 'name', 'p-host', 'netns', lanNs]);
  await run('ip', ['-n', lanNs, 'link', 'set', 'p-host', 'master', 'br0', 'up']);
  await run('ip', ['addr', 'add', `${net.host}/24`, 'dev', hostVeth]);
  await run('ip', ['link', 'set', hostVeth, 'up']);
}

/** The lab's subnet must be free on the host, or its routes would shadow a real network. */
async function refuseTakenSubnet(net: LabAddresses): Promise<void> {
  const { stdout } = await run('ip', ['-j', '-4', 'addr'], { encoding: 'utf8' });
  const links = JSON.parse(stdout) as { ifname: string; addr_info: { local: string }[] }[];
  const taken = links.find((l) => l.addr_info.some((a) => a.local.startsWith(`${net.subnet}.`)));
  if (taken !== undefined) {
    throw new Error(
      `${net.subnet}.0/24 is already on ${taken.ifname}: a machine lab is up (slipway lab down) or the host uses it`,
    );
  }
}

/** ipmitool over RMCP+ to a machine's BMC on `port`, the password from IPMI_PASSWORD. */
function ipmitoolArgs(bmc: string, port: number): string[] {
  return [
    ...['ipmitool', '-I', 'lanplus', '-C', '3', '-H', bmc, '-p', String(port)],
    ...['-U', bmcUser, '-E', '-N', '1', '-R', '1'],
  ];
}

/** Why the BMC does not answer ipmitool from `ns`, or undefined when it does. */
async function bmcRefusal(
  ns: string,
  bmc: string,
  port: number,
  password: string,
): Promise<string | undefined> {
  try {
    await run('ip', ['netns', 'exec', ns, ...ipmitoolArgs(bmc, port), 'power', 'status'], {
      env: { ...process.env, IPMI_PASSWORD: password },
      timeout: 10_000,
    });
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/**
 * The path from the operators' namespace to a silent BMC: both sides' neighbour entries, the
 * bridge's address, and one verbose ipmitool exchange (which step gets no answer).
 */
async function bmcPathSeen(
  ns: { readonly ops: string; readonly lan: string },
  bmc: string,
  port: number,
  password: string,
): Promise<string> {
  const said = async (argv: readonly string[], env?: NodeJS.ProcessEnv): Promise<string> => {
    try {
      const { stdout, stderr } = await run(argv[0]!, argv.slice(1), {
        encoding: 'utf8',
        timeout: 15_000,
        env,
      });
      return `${stdout}${stderr}`.trim();
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  };
  const [ipmitool = 'ipmitool', ...args] = ipmitoolArgs(bmc, port);
  const verbose = [ipmitool, '-v', '-v', ...args, 'power', 'status'];
  const exchange = await said(['ip', 'netns', 'exec', ns.ops, ...verbose], {
    ...process.env,
    IPMI_PASSWORD: password,
  });
  return [
    `ops neighbours: ${await said(['ip', '-n', ns.ops, 'neigh'])}`,
    `lan neighbours: ${await said(['ip', '-n', ns.lan, 'neigh'])}`,
    `br0: ${await said(['ip', '-n', ns.lan, '-br', 'link', 'show', 'br0'])}`,
    `verbose ipmitool: ${exchange.slice(-1500)}`,
  ].join('; ');
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`the lab's cluster did not answer within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

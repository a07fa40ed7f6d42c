// The machine lab (`slipway lab up`): on one computer, what a provisioning site has. Three
// `slipway server` nodes on a LAN hold the VIP by leadership and serve DHCP, TFTP, HTTP (the
// boot OS) and the API, each with HAProxy in front as `slipway balancer config` renders it; N
// QEMU machines with empty disks sit on the same LAN, each behind OpenIPMI's BMC simulator, and
// are registered with their MAC, address and BMC. The host reaches the LAN through a veth, so
// the CLI works from an ordinary shell.
//
// Layout (all inside the lab's own network namespaces, plus the host's veth):
//   LAN 10.213.0.0/24 (br0 in namespace lan): host .1, BMCs .2 (port 6230+i), ops .5,
//   nodes n1-n3 .11-.13 (raft :7000, API :7001, HAProxy :7070, HTTP :8080, TFTP :69),
//   VIP .100, machines .61+. IPv6 router advertisements on br0 (iPXE waits for one).
// Everything it starts is its child, stopped by PID; down() deletes the namespaces.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { renderHaproxyConfig } from '../lb/haproxy.js';
import { defaultHealthCheck } from '../lb/balancer-spec.js';
import { buildBootOs } from '../src/bootos/index.js';
import { packageFile } from '../src/platform/package-file.js';
import { IpmiSim } from './bmc-sim.js';
import { NetnsLab, type LabProcess } from './netns-lab.js';

const run = promisify(execFile);

export const labSubnet = '10.213.0';
export const labVip = `${labSubnet}.100`;
const hostAddress = `${labSubnet}.1`;
const bmcAddress = `${labSubnet}.2`;
const nodeIds = ['n1', 'n2', 'n3'] as const;
const balancerPort = 7070;
const bmcUser = 'admin';
const ovmfCode = '/usr/share/OVMF/OVMF_CODE_4M.fd';
const ovmfVars = '/usr/share/OVMF/OVMF_VARS_4M.fd';
// From the package root whether this runs from the sources or from dist/.
const slipwayBin = fileURLToPath(packageFile('bin/slipway.js'));
const nodeReadyMs = 60_000;

export type Firmware = 'bios' | 'uefi';

export interface MachineLabOptions {
  readonly machines: number;
  readonly firmware?: Firmware;
  /** A boot OS already built (`slipway bootos build --out DIR`); otherwise one is built. */
  readonly bootOsDir?: string;
  /** Memory per machine, MiB. Default 1024 (the boot OS unpacks ~110 MB into RAM). */
  readonly memoryMiB?: number;
  /** Told each step, for the operator. */
  readonly progress?: (line: string) => void;
}

export interface LabNode {
  readonly id: string;
  readonly address: string;
  readonly ns: string;
  readonly process: LabProcess;
}

export interface LabMachine {
  readonly id: string;
  readonly mac: string;
  readonly address: string;
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
  readonly vip = labVip;
  #down = false;

  private constructor(
    lab: NetnsLab,
    nodes: LabNode[],
    machines: LabMachine[],
    ops: string,
    hostVeth: string,
  ) {
    this.lab = lab;
    this.nodes = nodes;
    this.machines = machines;
    this.ops = ops;
    this.hostVeth = hostVeth;
  }

  /** The nodes' API addresses (the CLI's --server list, reachable from the host). */
  get servers(): string {
    return this.nodes.map((n) => `${n.address}:7001`).join(',');
  }

  /** The balancer on the VIP, which machines' workers dial. */
  get balancer(): string {
    return `${labVip}:${balancerPort}`;
  }

  static async up(o: MachineLabOptions): Promise<MachineLab> {
    if (!Number.isInteger(o.machines) || o.machines < 1 || o.machines > 20) {
      throw new Error(`--machines must be 1-20, got ${o.machines}`);
    }
    const say = o.progress ?? ((): void => undefined);
    await refuseTakenSubnet();
    const lab = await NetnsLab.create();
    const bmcs: IpmiSim[] = [];
    let hostVeth = '';
    try {
      const ns = await lab.addLan({
        n1: { addresses: [`${nodeAddress(0)}/24`] },
        n2: { addresses: [`${nodeAddress(1)}/24`] },
        n3: { addresses: [`${nodeAddress(2)}/24`] },
        ops: { addresses: [`${labSubnet}.5/24`] },
      });
      await lab.check(ns.lan, ['ip', 'addr', 'add', `${bmcAddress}/24`, 'dev', 'br0']);
      await lab.check(ns.lan, ['ip', 'addr', 'add', 'fdd5::2/64', 'dev', 'br0']);
      await lab.advertiseIpv6(ns.lan, 'br0', 'fdd5::/64');
      hostVeth = `${lab.id}-h`;
      await connectHost(ns.lan, hostVeth);
      say(`LAN ${labSubnet}.0/24 in namespaces ${lab.id}-*; the host is ${hostAddress} (${hostVeth})`);

      const bootOs = o.bootOsDir ?? path.join(lab.dir, 'bootos');
      if (o.bootOsDir === undefined || !existsSync(path.join(bootOs, 'initramfs-x86_64'))) {
        say('building the boot OS (slipway bootos build)');
        await buildBootOs({ outDir: bootOs });
      }
      const nodes = await startNodes(lab, ns, bootOs);
      say('3 nodes serving; HAProxy in front of each');

      const machines: LabMachine[] = [];
      for (let i = 0; i < o.machines; i++) {
        const machine = await startMachine(lab, ns, i, o);
        bmcs.push(machine.bmc);
        machines.push(machine);
      }
      const lab_ = new MachineLab(lab, nodes, machines, ns.ops, hostVeth);
      await lab_.#register(o.firmware ?? 'bios');
      say(`${machines.length} machine(s) registered, each behind its BMC`);
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

  async #register(firmware: Firmware): Promise<void> {
    await waitUntil(async () => {
      try {
        await this.slipway(['kv', 'put', 'lab', 'up']);
        return true;
      } catch {
        return false;
      }
    }, 30_000);
    for (const m of this.machines) {
      const credentials = path.join(this.lab.dir, `${m.id}.bmc`);
      await writeFile(credentials, `${bmcUser}:${m.bmc.password}\n`, { mode: 0o600 });
      await this.slipway([
        ...['hardware', 'create', '--id', m.id, '--mac', m.mac, '--ip', `${m.address}/24`],
        ...['--bmc', m.bmcUrl, '--bmc-credentials-file', credentials],
        ...(firmware === 'uefi' ? ['--uefi'] : []),
      ]);
    }
  }
}

function nodeAddress(i: number): string {
  return `${labSubnet}.${11 + i}`;
}

/** The lab's namespaces by role (n1-n3, ops) and the LAN's own (lan). */
type LabNamespaces = Record<(typeof nodeIds)[number] | 'ops' | 'lan', string>;

/**
 * The three nodes, each serving the boot services with `bootOs` and holding the VIP by
 * leadership, each with HAProxy in front; resolves once every node says it is serving.
 */
async function startNodes(lab: NetnsLab, ns: LabNamespaces, bootOs: string): Promise<LabNode[]> {
  const peers = nodeIds.map((id, i) => `${id}=${nodeAddress(i)}:7000`).join(',');
  const haproxyConfig = path.join(lab.dir, 'haproxy.cfg');
  await writeFile(
    haproxyConfig,
    renderHaproxyConfig({
      listenAddr: `0.0.0.0:${balancerPort}`,
      nodes: nodeIds.map((id, i) => ({ id, apiAddr: `${nodeAddress(i)}:7001` })),
      healthCheck: defaultHealthCheck,
    }),
  );
  const nodes: LabNode[] = nodeIds.map((id, i) => {
    const address = nodeAddress(i);
    const process = lab.spawn(ns[id], [
      ...[globalThis.process.execPath, slipwayBin, 'server', '--id', id],
      ...['--data-dir', path.join(lab.dir, `data-${id}`), '--insecure', '--insecure-allow-network'],
      ...['--log-level', 'info'],
      ...['--raft-addr', `${address}:7000`, '--api-addr', `${address}:7001`, '--peers', peers],
      ...['--vip', labVip, '--vip-interface', 'eth0', '--dhcp-interface', 'eth0'],
      ...['--http-addr', '0.0.0.0:8080', '--tftp-addr', '0.0.0.0:69', '--bootos-dir', bootOs],
      ...['--worker-server', `${labVip}:${balancerPort}`, '--kernel-arg', 'console=ttyS0'],
    ]);
    lab.spawn(ns[id], ['haproxy', '-f', haproxyConfig, '-db']);
    return { id, address, ns: ns[id], process };
  });
  await Promise.all(
    nodes.map((n) =>
      n.process.waitForOutput((out) => out.includes('"msg":"node serving"'), nodeReadyMs, `${n.id} serving`),
    ),
  );
  return nodes;
}

/**
 * Machine i (m1, m2, ...): an empty 8 GiB disk, a tap on the LAN, and a QEMU that its BMC
 * simulator starts when the BMC powers it on; resolves once the BMC answers.
 */
async function startMachine(
  lab: NetnsLab,
  ns: LabNamespaces,
  i: number,
  o: MachineLabOptions,
): Promise<LabMachine> {
  const id = `m${i + 1}`;
  const mac = `52:54:00:d5:00:${(i + 1).toString(16).padStart(2, '0')}`;
  const tap = `tap${i + 1}`;
  await lab.addTap(ns.lan, tap, 'br0');
  const disk = path.join(lab.dir, `${id}.disk`);
  await writeFile(disk, '');
  await truncate(disk, 8 * 1024 * 1024 * 1024);
  const console = path.join(lab.dir, `${id}.console`);
  const port = 6230 + i;
  const password = `lab-${id}-pw`;
  const firmware = await firmwareArgs(o.firmware ?? 'bios', lab.dir, id, mac);
  const bmc = await IpmiSim.start({
    mode: 'chassis-control',
    netns: ns.lan,
    host: bmcAddress,
    port,
    username: bmcUser,
    password,
    vm: [
      `-m ${o.memoryMiB ?? 1024} -netdev tap,id=n0,ifname=${tap},script=no,downscript=no`,
      firmware,
      `-drive file=${disk},format=raw,if=virtio -serial file:${console}`,
    ].join(' '),
    bootOrder: { pxe: 'order=nc', disk: 'order=c' },
    probe: async () => bmcAnswers(ns.ops, port, password),
  });
  return {
    id,
    mac,
    address: `${labSubnet}.${61 + i}`,
    bmc,
    bmcUrl: `ipmi://${bmcAddress}:${port}`,
    console,
    disk,
  };
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
async function connectHost(lanNs: string, hostVeth: string): Promise<void> {
  await run('ip', ['link', 'add', hostVeth, 'type', 'veth', 'peer', 'name', 'p-host', 'netns', lanNs]);
  await run('ip', ['-n', lanNs, 'link', 'set', 'p-host', 'master', 'br0', 'up']);
  await run('ip', ['addr', 'add', `${hostAddress}/24`, 'dev', hostVeth]);
  await run('ip', ['link', 'set', hostVeth, 'up']);
}

/** The lab's subnet must be free on the host, or its routes would shadow a real network. */
async function refuseTakenSubnet(): Promise<void> {
  const { stdout } = await run('ip', ['-j', '-4', 'addr'], { encoding: 'utf8' });
  const links = JSON.parse(stdout) as { ifname: string; addr_info: { local: string }[] }[];
  const taken = links.find((l) => l.addr_info.some((a) => a.local.startsWith(`${labSubnet}.`)));
  if (taken !== undefined) {
    throw new Error(
      `${labSubnet}.0/24 is already on ${taken.ifname}: a machine lab is up (slipway lab down) or the host uses it`,
    );
  }
}

async function bmcAnswers(ns: string, port: number, password: string): Promise<boolean> {
  try {
    await run(
      'ip',
      [
        ...[
          'netns',
          'exec',
          ns,
          'ipmitool',
          '-I',
          'lanplus',
          '-C',
          '3',
          '-H',
          bmcAddress,
          '-p',
          String(port),
        ],
        ...['-U', bmcUser, '-E', '-N', '1', '-R', '1', 'power', 'status'],
      ],
      { env: { ...process.env, IPMI_PASSWORD: password }, timeout: 10_000 },
    );
    return true;
  } catch {
    return false;
  }
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`the lab's cluster did not answer within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

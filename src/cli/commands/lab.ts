// `slipway lab up --machines N` / `slipway lab down`: the machine lab of cluster/machine-lab.ts
// (loaded through cluster/index.ts) on this computer (root, QEMU, OpenIPMI's ipmi_sim, HAProxy).
// `lab up` stays in the foreground holding every process it started; `lab down` (from another
// shell) or Ctrl-C stops it and removes the namespaces, the host's veth and the lab's files.
// DIR/lab.json records the `lab up` process and the lab's id, so `lab down` also cleans up after
// a `lab up` that was killed.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Command } from '@commander-js/extra-typings';
import { isRunningAs, stopRecordedProcess } from '../../platform/recorded-process.js';
import { wholeNumber } from '../flags.js';
import { UsageError } from '../output.js';
import type { LabDiskBus, LabMachineSpec, MachineLab } from '../../../cluster/index.js';

const run = promisify(execFile);
const defaultDir = '/run/slipway-lab';

interface LabFile {
  readonly pid: number;
  readonly labId: string;
  readonly hostVeth: string;
}

const isLabUp = (argv: readonly string[]): boolean => argv.includes('lab') && argv.includes('up');

export function labCommand(program: Command): void {
  const lab = program
    .command('lab')
    .description(
      'a whole provisioning site on this computer: 3 nodes, the VIP, HAProxy, QEMU machines behind BMCs',
    );
  lab
    .command('up')
    .description(
      'start the lab and stay in the foreground (root; needs qemu-system-x86, ovmf, ipxe-qemu, openipmi, ipmitool, ' +
        'haproxy, radvd, iputils-arping and the boot OS packages); Ctrl-C or `slipway lab down` stops it',
    )
    .option('--machines <n>', 'QEMU machines, each with an empty disk and its own BMC (1-20)', '1')
    .option('--firmware <kind>', 'bios (SeaBIOS + iPXE ROM) or uefi (OVMF)', 'bios')
    .option(
      '--memory <MiB>',
      'memory per machine in MiB (768-16384, a multiple of 128), or a list with one per machine (the last repeats)',
      '1024',
    )
    .option('--disk <size>', 'disk size per machine (512Mi, 8Gi, ...), or a list like --memory', '8Gi')
    .option(
      '--disk-bus <bus>',
      'virtio (virtio-blk, a serial) or scsi (a SCSI disk with a serial, model and WWN), or a list',
      'virtio',
    )
    .option(
      '--unregistered',
      'do not register the machines: the nodes run dynamic DHCP with --discovery, and a machine ' +
        'powered on into PXE enrols itself with its inventory (hardware list --state enrolled)',
    )
    .option('--bootos-dir <dir>', 'a boot OS already built with `slipway bootos build` (default: build one)')
    .option('--dir <dir>', 'where the lab records itself', defaultDir)
    .action(async (o) => {
      const machines = wholeNumber(o.machines, '--machines');
      if (machines < 1 || machines > 20) throw new UsageError('--machines must be 1-20');
      if (o.firmware !== 'bios' && o.firmware !== 'uefi')
        throw new UsageError('--firmware must be bios or uefi');
      const specs = await machineSpecs(o, machines);
      if (process.getuid?.() !== 0)
        throw new UsageError('lab up needs root (network namespaces, taps, a veth)');
      const dir = resolve(o.dir);
      const file = join(dir, 'lab.json');
      const previous = readLabFile(file);
      if (previous !== undefined && isRunningAs(previous.pid, isLabUp)) {
        throw new UsageError(
          `a lab is already up (pid ${previous.pid}); run \`slipway lab down --dir ${o.dir}\` first`,
        );
      }
      const { MachineLab } = await import('../../../cluster/index.js');
      const say = (line: string): void => void process.stderr.write(`lab: ${line}\n`);
      const up = await MachineLab.up({
        machines,
        firmware: o.firmware,
        specs,
        unregistered: o.unregistered === true,
        ...(o.bootosDir === undefined ? {} : { bootOsDir: o.bootosDir }),
        progress: say,
      });
      mkdirSync(dir, { recursive: true });
      const record: LabFile = { pid: process.pid, labId: up.lab.id, hostVeth: up.hostVeth };
      writeFileSync(file, `${JSON.stringify(record)}\n`);
      process.stdout.write(await labSummary(up, o.dir === defaultDir ? '' : ` --dir ${o.dir}`));
      await new Promise<void>((done) => {
        process.once('SIGINT', () => done());
        process.once('SIGTERM', () => done());
      });
      say('stopping');
      await up.down();
      rmSync(file, { force: true });
      say('down');
    });
  lab
    .command('down')
    .description('stop the lab `lab up` started and remove all of it')
    .option('--dir <dir>', 'where the lab recorded itself', defaultDir)
    .action(async (o) => {
      const file = join(resolve(o.dir), 'lab.json');
      const record = readLabFile(file);
      if (record === undefined) throw new UsageError(`no lab in ${o.dir} (no lab.json)`);
      // The lab up process tears down what it holds; then whatever a killed run left behind.
      await stopRecordedProcess(record.pid, isLabUp, 60_000);
      const { removeLab } = await import('../../../cluster/index.js');
      const left = await removeLab(record.labId);
      await run('ip', ['link', 'del', record.hostVeth]).catch(() => undefined);
      rmSync(file, { force: true });
      process.stdout.write(
        `lab ${record.labId} is down${left.length === 0 ? '' : ` (removed what was left: ${left.join(' ')})`}\n`,
      );
    });
}

/** Each machine's spec from the comma lists of --memory, --disk and --disk-bus. */
async function machineSpecs(
  o: { readonly memory: string; readonly disk: string; readonly diskBus: string },
  machines: number,
): Promise<LabMachineSpec[]> {
  const { parseBytes, labSpecProblem } = await import('../../../cluster/index.js');
  const memory = listFlag(o.memory, '--memory', machines).map((text) => wholeNumber(text, '--memory'));
  const disk = listFlag(o.disk, '--disk', machines).map((text) => {
    const bytes = parseBytes(text);
    if (typeof bytes === 'number') return bytes;
    throw new UsageError(
      `--disk ${text}: ${bytes.problem}${bytes.hint === undefined ? '' : ` (${bytes.hint})`}`,
    );
  });
  const bus = listFlag(o.diskBus, '--disk-bus', machines).map((text): LabDiskBus => {
    if (text === 'virtio' || text === 'scsi') return text;
    throw new UsageError(`--disk-bus must be virtio or scsi, got ${text}`);
  });
  const at = <T>(list: readonly T[], i: number): T => list[Math.min(i, list.length - 1)] as T;
  return Array.from({ length: machines }, (_, i) => {
    const spec = { memoryMiB: at(memory, i), diskBytes: at(disk, i), diskBus: at(bus, i) };
    const problem = labSpecProblem(spec);
    if (problem !== undefined) throw new UsageError(`machine ${i + 1}: ${problem} (--memory, --disk)`);
    return spec;
  });
}

/** A value or a comma list of at most one per machine. */
function listFlag(text: string, flag: string, machines: number): string[] {
  const items = text.split(',').map((item) => item.trim());
  if (items.some((item) => item === ''))
    throw new UsageError(`${flag} has an empty item in "${text}": give values separated by commas`);
  if (items.length > machines)
    throw new UsageError(`${flag} gives ${items.length} values for ${machines} machine(s)`);
  return items;
}

/** What `lab up` prints once the lab is up: what is there and what to type next. */
async function labSummary(up: MachineLab, dirFlag: string): Promise<string> {
  const { formatBytes } = await import('../../../cluster/index.js');
  const first = up.machines[0];
  const id = first?.id ?? 'm1';
  const head = [
    `Slipway lab ${up.lab.id}: nodes ${up.nodes.map((n) => `${n.id} ${n.address}`).join(', ')}; VIP ${up.vip};`,
    `workers dial the balancer at ${up.balancer}; ${up.machines.length} machine(s), powered off` +
      (up.registered ? ':' : ', unregistered (Slipway does not know them yet):'),
    ...up.machines.map((m) => {
      const { memoryMiB, diskBytes, diskBus, system } = m.identity;
      const hardware = `${memoryMiB} MiB, ${formatBytes(diskBytes)} ${diskBus} disk, serial ${system.serial}`;
      const place = up.registered ? `${m.address}  ` : '';
      return `  ${m.id}  ${m.mac}  ${place}BMC ${m.bmcUrl}  ${hardware}  console ${m.console}`;
    }),
    '',
    'Next, in another shell:',
    `  export SLIPWAY_SERVER=${up.servers}`,
  ];
  const registered = [
    '  slipway hardware list',
    '  slipway template create -f examples/lab-hello.yaml',
    `  slipway workflow create --template lab-hello --hardware ${id} --netboot   # powers it on into PXE`,
    '  slipway workflow events ID --follow',
    `  slipway power status ${id}`,
  ];
  const bmc =
    first === undefined
      ? ''
      : `-H ${first.bmc.host} -p ${first.bmc.port} -U ${first.bmc.username} -P ${first.bmc.password}`;
  const unregistered = [
    `  ipmitool -I lanplus -C 3 ${bmc} chassis bootdev pxe   # through its BMC, as Slipway cannot yet`,
    `  ipmitool -I lanplus -C 3 ${bmc} power on              # it boots into inventory mode`,
    '  slipway hardware list --state enrolled',
    `  slipway -o yaml hardware get ${id}                    # its inventory`,
    `  slipway hardware accept ${id} --reason "checked in the lab"`,
  ];
  return [
    ...head,
    ...(up.registered ? registered : unregistered),
    `  tail -f ${first?.console ?? ''}`,
    `  slipway lab down${dirFlag}     # or Ctrl-C here`,
    '',
  ].join('\n');
}

function readLabFile(file: string): LabFile | undefined {
  if (!existsSync(file)) return undefined;
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<LabFile>;
    if (
      typeof parsed.pid === 'number' &&
      typeof parsed.labId === 'string' &&
      typeof parsed.hostVeth === 'string'
    ) {
      return { pid: parsed.pid, labId: parsed.labId, hostVeth: parsed.hostVeth };
    }
  } catch {
    // A torn or foreign file: treated as no lab.
  }
  throw new UsageError(`${file} is not a lab record; remove it by hand`);
}

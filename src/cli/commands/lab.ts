// `slipway lab up --machines N` / `slipway lab down`: the machine lab of cluster/machine-lab.ts
// on this computer (root, QEMU, OpenIPMI's ipmi_sim, HAProxy). `lab up` stays in the foreground
// holding every process it started; `lab down` (from another shell) or Ctrl-C stops it and
// removes the namespaces, the host's veth and the lab's files. DIR/lab.json records the `lab up`
// process and the lab's id, so `lab down` also cleans up after a `lab up` that was killed.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Command } from '@commander-js/extra-typings';
import { isRunningAs, stopRecordedProcess } from '../../platform/recorded-process.js';
import { wholeNumber } from '../flags.js';
import { UsageError } from '../output.js';

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
    .option('--machines <n>', 'QEMU machines, each with an empty 8 GiB disk and its own BMC (1-20)', '1')
    .option('--firmware <kind>', 'bios (SeaBIOS + iPXE ROM) or uefi (OVMF)', 'bios')
    .option('--bootos-dir <dir>', 'a boot OS already built with `slipway bootos build` (default: build one)')
    .option('--dir <dir>', 'where the lab records itself', defaultDir)
    .action(async (o) => {
      const machines = wholeNumber(o.machines, '--machines');
      if (machines < 1 || machines > 20) throw new UsageError('--machines must be 1-20');
      if (o.firmware !== 'bios' && o.firmware !== 'uefi')
        throw new UsageError('--firmware must be bios or uefi');
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
      const { MachineLab } = await import('../../../cluster/machine-lab.js');
      const say = (line: string): void => void process.stderr.write(`lab: ${line}\n`);
      const up = await MachineLab.up({
        machines,
        firmware: o.firmware,
        ...(o.bootosDir === undefined ? {} : { bootOsDir: o.bootosDir }),
        progress: say,
      });
      mkdirSync(dir, { recursive: true });
      const record: LabFile = { pid: process.pid, labId: up.lab.id, hostVeth: up.hostVeth };
      writeFileSync(file, `${JSON.stringify(record)}\n`);
      const first = up.machines[0];
      process.stdout.write(
        [
          `Slipway lab ${up.lab.id}: nodes ${up.nodes.map((n) => `${n.id} ${n.address}`).join(', ')}; VIP ${up.vip};`,
          `workers dial the balancer at ${up.balancer}; ${up.machines.length} machine(s), powered off:`,
          ...up.machines.map(
            (m) => `  ${m.id}  ${m.mac}  ${m.address}  BMC ${m.bmcUrl}  console ${m.console}`,
          ),
          '',
          'Next, in another shell:',
          `  export SLIPWAY_SERVER=${up.servers}`,
          '  slipway hardware list',
          '  slipway template create -f examples/lab-hello.yaml',
          `  slipway workflow create --template lab-hello --hardware ${first?.id ?? 'm1'} --netboot   # powers it on into PXE`,
          '  slipway workflow events ID --follow',
          `  tail -f ${first?.console ?? ''}`,
          `  slipway power status ${first?.id ?? 'm1'}`,
          `  slipway lab down${o.dir === defaultDir ? '' : ` --dir ${o.dir}`}     # or Ctrl-C here`,
          '',
        ].join('\n'),
      );
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
      const { removeLab } = await import('../../../cluster/netns-lab.js');
      const left = await removeLab(record.labId);
      await run('ip', ['link', 'del', record.hostVeth]).catch(() => undefined);
      rmSync(file, { force: true });
      process.stdout.write(
        `lab ${record.labId} is down${left.length === 0 ? '' : ` (removed what was left: ${left.join(' ')})`}\n`,
      );
    });
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

// `npm run bench -- bootos [--rounds N] [--bootos-dir DIR]`: how fast the boot OS brings a
// machine to a connected worker under QEMU without KVM (TCG), the way this machine runs VMs.
//
// One network-namespace lab: bridge br0 (10.77.4.1/24) with a tap for QEMU and one `slipway
// server` node on it (DHCP with the machine's reservation, the boot HTTP server for the
// credential claim, the API). Each round boots the kernel and initramfs straight from QEMU
// (-kernel/-initrd: the PXE part is measured by the end-to-end test) with the kernel command
// line the iPXE script would give, and a workflow waiting for the machine. Times are taken
// from QEMU's start: the kernel's first line on the serial console ("Linux version"), the
// init's first line, its DHCP address, the worker's start, and the node's "worker connected".
// The figure is kernel start -> worker connected (target <= 15 s). One JSON line per
// round, then the medians.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildBootOs, bootOsMarkers } from '../src/bootos/index.js';
import { NetnsLab, type LabProcess } from '../cluster/netns-lab.js';

const nodeAddress = '10.77.4.1';
const machineAddress = '10.77.4.60';
const mac = '52:54:00:77:04:02';
const slipway = fileURLToPath(new URL('../bin/slipway.js', import.meta.url));
const roundTimeoutMs = 180_000;

interface Round {
  readonly round: number;
  readonly kernel_start_ms: number;
  readonly init_started_ms: number;
  readonly address_ms: number;
  readonly worker_started_ms: number;
  readonly worker_connected_ms: number;
  readonly kernel_start_to_worker_connected_ms: number;
}

export async function runBootOsBench(argv: readonly string[]): Promise<void> {
  const rounds = flag(argv, '--rounds', 3);
  const lab = await NetnsLab.create();
  const stop = (): void => {
    void lab.destroy().finally(() => process.exit(130));
  };
  process.once('SIGINT', stop);
  try {
    const given = value(argv, '--bootos-dir');
    const bootOs = given ?? path.join(lab.dir, 'bootos');
    if (given === undefined) {
      process.stderr.write('building the boot OS\n');
      await buildBootOs({ outDir: bootOs });
    }
    const srv = await lab.addNamespace('srv');
    await lab.addBridge(srv, 'br0', [`${nodeAddress}/24`]);
    await lab.addTap(srv, 'tap0', 'br0');
    const data = path.join(lab.dir, 'n1');
    await mkdir(data);
    const node = lab.spawn(srv, [
      process.execPath,
      slipway,
      ...['server', '--id', 'n1', '--data-dir', data, '--insecure', '--insecure-allow-network'],
      ...['--log-level', 'info'],
      ...['--raft-addr', `${nodeAddress}:7000`, '--api-addr', `${nodeAddress}:7001`],
      ...['--peers', `n1=${nodeAddress}:7000`, '--dhcp-interface', 'br0'],
      ...['--http-addr', `${nodeAddress}:8080`, '--bootos-dir', bootOs],
    ]);
    await node.waitForOutput((out) => out.includes('"node serving"'), 30_000, 'the node serving');
    const cli = (args: readonly string[]): Promise<string> =>
      lab.check(srv, [process.execPath, slipway, '--server', `${nodeAddress}:7001`, ...args]);
    await waitForLeader(cli);
    await cli(['hardware', 'create', '--id', 'vm1', '--mac', mac, '--ip', `${machineAddress}/24`]);
    const template = path.join(lab.dir, 'template.yaml');
    await writeFile(
      template,
      'version: "0.1"\nname: hold\nglobal_timeout: 3600\ntasks:\n  - name: t\n    actions:\n' +
        '      - name: wait\n        command: ["/bin/sh", "-c", "sleep 3600"]\n        timeout: 3600\n',
    );
    await cli(['template', 'create', '-f', template]);
    const results: Round[] = [];
    for (let round = 1; round <= rounds; round++) {
      // A workflow per round: the credential is claimed once per workflow.
      const id = (await cli(['workflow', 'create', '--template', 'hold', '--hardware', 'vm1'])).trim();
      results.push(await bootOnce(lab, srv, bootOs, node, round));
      await cli(['workflow', 'cancel', id]);
      process.stdout.write(`${JSON.stringify(results.at(-1))}\n`);
    }
    const median = (pick: (r: Round) => number): number => {
      const sorted = results.map(pick).sort((a, b) => a - b);
      return sorted[Math.floor(sorted.length / 2)] ?? 0;
    };
    const figure = median((r) => r.kernel_start_to_worker_connected_ms);
    process.stdout.write(
      `${JSON.stringify({
        bench: 'bootos',
        rounds,
        accel: 'tcg',
        median_kernel_start_ms: median((r) => r.kernel_start_ms),
        median_worker_connected_ms: median((r) => r.worker_connected_ms),
        median_kernel_start_to_worker_connected_ms: figure,
        target_ms: 15_000,
        met: figure <= 15_000,
      })}\n`,
    );
  } finally {
    process.off('SIGINT', stop);
    await lab.destroy();
  }
}

async function bootOnce(
  lab: NetnsLab,
  ns: string,
  bootOs: string,
  node: LabProcess,
  round: number,
): Promise<Round> {
  const connectedBefore = count(node.output, '"worker connected"');
  const args = [
    'console=ttyS0',
    'slipway.worker_id=vm1',
    `slipway.server=${nodeAddress}:7001`,
    `slipway.http=http://${nodeAddress}:8080`,
    `slipway.mac=${mac}`,
  ].join(' ');
  const started = Date.now();
  const seen = new Map<string, number>();
  const qemu = lab.spawn(ns, [
    'qemu-system-x86_64',
    ...['-accel', 'tcg', '-m', '1024', '-display', 'none', '-serial', 'stdio', '-monitor', 'none'],
    ...['-no-reboot', '-kernel', path.join(bootOs, 'vmlinuz-x86_64')],
    ...['-initrd', path.join(bootOs, 'initramfs-x86_64'), '-append', args],
    ...[
      '-netdev',
      'tap,id=n0,ifname=tap0,script=no,downscript=no',
      '-device',
      `virtio-net-pci,netdev=n0,mac=${mac}`,
    ],
  ]);
  const mark = (name: string, present: boolean): void => {
    if (present && !seen.has(name)) seen.set(name, Date.now() - started);
  };
  try {
    await waitUntil(() => {
      const out = qemu.output;
      mark('kernel', out.includes('Linux version'));
      mark('init', out.includes(bootOsMarkers.started));
      mark('address', out.includes(bootOsMarkers.addressed));
      mark('worker', out.includes(bootOsMarkers.worker));
      mark('connected', count(node.output, '"worker connected"') > connectedBefore);
      return seen.has('connected');
    }, roundTimeoutMs);
  } finally {
    await qemu.stop();
  }
  const at = (name: string): number => seen.get(name) ?? Number.NaN;
  return {
    round,
    kernel_start_ms: at('kernel'),
    init_started_ms: at('init'),
    address_ms: at('address'),
    worker_started_ms: at('worker'),
    worker_connected_ms: at('connected'),
    kernel_start_to_worker_connected_ms: at('connected') - at('kernel'),
  };
}

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

async function waitForLeader(cli: (args: readonly string[]) => Promise<string>): Promise<void> {
  await waitUntil(async () => {
    try {
      await cli(['kv', 'put', 'bench-ready', 'yes']);
      return true;
    } catch {
      return false;
    }
  }, 30_000);
}

/** Polls `check` until it holds; throws after `timeoutMs`. */
async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function value(argv: readonly string[], name: string): string | undefined {
  const i = argv.indexOf(name);
  return i < 0 ? undefined : argv[i + 1];
}

function flag(argv: readonly string[], name: string, fallback: number): number {
  const text = value(argv, name);
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 20) throw new Error(`${name} must be 1-20, got ${text}`);
  return n;
}

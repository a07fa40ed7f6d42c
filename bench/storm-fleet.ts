// The storm benchmark's fleet: N simulated machines in one process inside the lab's fleet
// namespace (bench/storm.ts starts it). Each machine boots as a real one does against the VIP —
// DHCP as a PXE ROM, the iPXE binary over TFTP, DHCP as iPXE, the iPXE script, the kernel and
// initrd from /boot/, DHCP as the boot OS, the credential claim from its own address — and then
// runs its workflow on a worker stream through the balancer, holding each action a short while.
// Like the real agent, it reconnects when a stream breaks, re-sends unacknowledged results in its
// hello and never runs an attempt it already ran; it also counts how often each action ran.
//
//   node --import tsx bench/storm-fleet.ts setup CONFIG             register everything, add the addresses
//   node --import tsx bench/storm-fleet.ts run CONFIG [SHARD COUNT]  the storm, for machines i with
//                                                                    i % COUNT == SHARD (default 0 1)
//   node --import tsx bench/storm-fleet.ts check CONFIG             what the cluster recorded
//
// Output lines (stdout): {"event":"setup",...}, {"event":"claimed","count":N} every 1 % of the
// shard's machines (bench/storm.ts kills the leader once the shards' counts add up to half the
// fleet), {"event":"result"} once the shard's ShardResult,
// with every sample, is in its file (shardResultFile), and {"event":"check",...} from check.
// A storm of thousands of machines runs as several shards, one process each, on the cores.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync, createReadStream } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { pathToFileURL } from 'node:url';
import { ClusterClient } from '../src/cli/index.js';
import type { WorkflowRecord } from '../src/gen/control.js';
import { allItems } from '../src/platform/pages.js';
import { openingKey } from '../src/platform/sealed-box.js';
import { Prng } from '../src/platform/prng.js';
import { pool } from './control.js';
import { round, sleep } from './stats.js';
import { FleetDhcp, tftpRead, type Firmware } from './storm-protocols.js';
import { httpUntil, openClaim, runWorkflow, sample, type Sample, type WorkerFleet } from './storm-worker.js';

export type { Sample, SampleKind } from './storm-worker.js';

export interface FleetConfig {
  readonly machines: number;
  readonly actions: number;
  /** Mean time a machine holds an action before it reports success (0.5 to 1.5 times). */
  readonly holdMs: number;
  /** Machines power on spread over this long (firmware POST times differ). */
  readonly rampMs: number;
  /** The storm gives up at this moment (ms since the epoch). */
  readonly deadlineMs: number;
  /** The nodes' API addresses (setup and the check at the end). */
  readonly apiServers: readonly string[];
  readonly subnetPrefix: number;
  /** Stand-ins for the boot OS: registered as artifacts, fetched by every machine. */
  readonly kernelFile: string;
  readonly initrdFile: string;
  /** Which machines PXE-boot over TFTP (bios) and which use UEFI HTTP boot; mixed: every other. */
  readonly firmware: 'bios' | 'uefi' | 'mixed';
  /** SHA-256 of the iPXE binary stand-ins (undionly.kpxe, ipxe.efi) by name. */
  readonly binarySha256: Readonly<Record<string, string>>;
  readonly seed: number;
  readonly addressFile: string;
  /** Where the run writes its FleetResult. */
  readonly resultFile: string;
}

export interface MachineOutcome {
  readonly startMs: number;
  readonly doneMs: number | null;
  readonly error: string | null;
  readonly reconnects: number;
  readonly retransmits: number;
  /** TFTP packets ignored because they came from another address than the one asked. */
  readonly tftpOtherSource: number;
}

/** What one shard of the fleet saw (bench/storm.ts adds the shards up). */
export interface ShardResult {
  readonly machines: readonly MachineOutcome[];
  readonly samples: readonly Sample[];
  /** Actions a machine ran more than once (distinct attempts of one action). */
  readonly ranTwice: number;
  readonly actionsRun: number;
  readonly refusedResults: number;
  /** DHCP ACKs and NAKs ignored because another server than the one asked sent them. */
  readonly dhcpOtherServer: number;
  /** The fleet's own CPU and event-loop delay: whether the simulator kept up. */
  readonly cpuS: number;
  readonly loopDelayMaxMs: number;
}

/** The whole fleet: its shards' results added up, and the cluster's records at the end. */
export interface FleetResult extends ShardResult {
  readonly check: FleetCheck;
}

/** What the cluster recorded, read once every shard is done. */
export interface FleetCheck {
  readonly workflows: number;
  readonly succeeded: number;
  readonly notSucceeded: readonly string[];
  /** Actions recorded with an attempt other than the first. */
  readonly retriedActions: number;
  readonly lastFinishedMs: number;
}

const run = promisify(execFile);
const template = 'storm';
const hardwareId = (i: number): string => `storm-${String(i).padStart(4, '0')}`;

export function machineMac(i: number): string {
  const hex = (n: number): string => n.toString(16).padStart(2, '0');
  return `52:54:00:5e:${hex(i >> 8)}:${hex(i & 255)}`;
}

/** 10.214.16.1 onwards, 250 to a third octet (no .0 or .255 anywhere). */
export function machineAddress(i: number): string {
  return `10.214.${String(16 + Math.floor(i / 250))}.${String(1 + (i % 250))}`;
}

export function firmwareOf(c: Pick<FleetConfig, 'firmware'>, i: number): Firmware {
  if (c.firmware !== 'mixed') return c.firmware;
  return i % 2 === 0 ? 'bios' : 'uefi';
}

export function say(line: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// ------------------------------------------------------------------------------ setup

/** A few tries: the cluster may change leader while a thousand records are written. */
export async function retried(write: () => Promise<unknown>): Promise<void> {
  for (let tries = 1; ; tries++) {
    try {
      await write();
      return;
    } catch (err) {
      if (tries >= 5) throw err;
      await sleep(500 * tries);
    }
  }
}

/**
 * The simulated fleet's workload: a template of `actions` short actions in one task, and the boot
 * OS stand-ins as the artifacts vmlinuz-x86_64 and initramfs-x86_64 (bench/fleet-machines.ts too).
 */
export async function registerWorkload(
  client: ClusterClient,
  w: {
    readonly template: string;
    readonly task: string;
    readonly actions: number;
    readonly kernelFile: string;
    readonly initrdFile: string;
  },
): Promise<void> {
  const actions = Array.from(
    { length: w.actions },
    (_, i) => `      - name: step-${String(i + 1)}\n        command: ["true"]\n        timeout: 120`,
  ).join('\n');
  await retried(() =>
    client.control('templateCreate', {
      source: `version: "0.1"\nname: ${w.template}\nglobal_timeout: 1800\ntasks:\n  - name: ${w.task}\n    actions:\n${actions}\n`,
      replace: true,
    }),
  );
  for (const [name, file] of [
    ['vmlinuz-x86_64', w.kernelFile],
    ['initramfs-x86_64', w.initrdFile],
  ] as const) {
    const content = readFileSync(file);
    await retried(() =>
      client.uploadArtifact(
        {
          name,
          bytes: content.length,
          sha256: createHash('sha256').update(content).digest('hex'),
          expectVersion: 0,
        },
        () => createReadStream(file),
      ),
    );
  }
}

async function setup(c: FleetConfig): Promise<void> {
  const started = Date.now();
  const client = new ClusterClient(c.apiServers, { timeoutMs: 30_000 });
  await registerWorkload(client, { template, task: 'provision', ...c });
  const ids = Array.from({ length: c.machines }, (_, i) => i);
  await pool(ids, 16, async (i) => {
    const doc = {
      id: hardwareId(i),
      arch: 'x86_64',
      uefi: firmwareOf(c, i) === 'uefi',
      interfaces: [{ mac: machineMac(i), ip: `${machineAddress(i)}/${String(c.subnetPrefix)}` }],
      netboot: { allowPXE: true, allowWorkflow: true },
    };
    // Replacing a record with itself changes nothing, so a write whose outcome a leader change
    // left unknown is simply sent again.
    await retried(() =>
      client.control('hardwareCreate', { documentJson: JSON.stringify(doc), replace: true }),
    );
  });
  await pool(ids, 16, async (i) => {
    const hardware = hardwareId(i);
    await retried(async () => {
      // A create is not idempotent: after an unknown outcome, look before creating again.
      const workflows = await workflowsOf(client, hardware);
      if (workflows.length > 0) return;
      await client.control('workflowCreate', {
        template,
        hardwareId: hardware,
        hardwareMap: {},
        netboot: false,
      });
    });
  });
  // The machines' own addresses, each the one its reservation names, and a route for DHCP's
  // limited broadcast (this namespace has no default route).
  const lines = ids.map((i) => `address add ${machineAddress(i)}/${String(c.subnetPrefix)} dev eth0`);
  writeFileSync(c.addressFile, `${lines.join('\n')}\nroute add 255.255.255.255/32 dev eth0\n`);
  await run('ip', ['-batch', c.addressFile]);
  await waitApplied(c.apiServers);
  client.close();
  say({ event: 'setup', machines: c.machines, ms: Date.now() - started });
}

/** Until every node has applied what the leader had committed when this began. */
export async function waitApplied(servers: readonly string[]): Promise<void> {
  const clients = servers.map((s) => new ClusterClient([s], { timeoutMs: 5000 }));
  const commit = Math.max(
    ...(await Promise.all(clients.map(async (cl) => (await cl.call('status', {})).commit))),
  );
  const deadline = Date.now() + 120_000;
  for (;;) {
    const applied = await Promise.all(clients.map(async (cl) => (await cl.call('status', {})).applied));
    if (applied.every((a) => a >= commit)) break;
    if (Date.now() > deadline)
      throw new Error(`the nodes applied ${applied.join(', ')} of ${String(commit)} in 2 minutes`);
    await sleep(200);
  }
  for (const cl of clients) cl.close();
}

// ------------------------------------------------------------------------------ the storm

interface Fleet extends WorkerFleet {
  readonly c: FleetConfig;
  readonly dhcp: FleetDhcp;
  /** The machines this shard simulates. */
  readonly share: number;
  claimed: number;
}

/** Which of the fleet's machines one process simulates: i % count === index. */
export interface Shard {
  readonly index: number;
  readonly count: number;
}

/** Where a shard writes its ShardResult. */
export function shardResultFile(c: Pick<FleetConfig, 'resultFile'>, index: number): string {
  return `${c.resultFile}.${String(index)}`;
}

/**
 * The whole fleet's result: each shard's file added up, with the cluster's records from the output
 * of `check`.
 */
export function fleetResultOf(
  c: Pick<FleetConfig, 'resultFile'>,
  shardCount: number,
  checkOutput: string,
): FleetResult {
  const checkLine = checkOutput.split('\n').find((line) => line.includes('"event":"check"'));
  if (checkLine === undefined) throw new Error('the fleet check printed no "check" line');
  const shards = Array.from(
    { length: shardCount },
    (_, index) => JSON.parse(readFileSync(shardResultFile(c, index), 'utf8')) as ShardResult,
  );
  return mergeShards(shards, JSON.parse(checkLine) as FleetCheck);
}

/** The fleet's shards added up, with what the cluster recorded. */
function mergeShards(shards: readonly ShardResult[], check: FleetCheck): FleetResult {
  const sum = (of: (r: ShardResult) => number): number => shards.reduce((n, r) => n + of(r), 0);
  return {
    machines: shards.flatMap((r) => r.machines),
    samples: shards.flatMap((r) => r.samples),
    ranTwice: sum((r) => r.ranTwice),
    actionsRun: sum((r) => r.actionsRun),
    refusedResults: sum((r) => r.refusedResults),
    dhcpOtherServer: sum((r) => r.dhcpOtherServer),
    cpuS: round(
      sum((r) => r.cpuS),
      1,
    ),
    loopDelayMaxMs: Math.max(0, ...shards.map((r) => r.loopDelayMaxMs)),
    check,
  };
}

/**
 * Fetches `url` and keeps only what a machine checks of it, its size and digest: a machine's
 * suspended boot keeps its locals alive, and at 10,000 machines their 1 MiB iPXE binaries and
 * boot files held the fleet's memory at gigabytes and its core busy collecting garbage.
 */
async function fetchDigest(
  f: Fleet,
  url: string,
  local: string,
): Promise<{ readonly bytes: number; readonly sha256: string }> {
  const body = await httpUntil(f, url, local, {});
  return { bytes: body.length, sha256: createHash('sha256').update(body).digest('hex') };
}

async function bootMachine(
  f: Fleet,
  i: number,
  outcome: { reconnects: number; retransmits: number; tftpOtherSource: number },
): Promise<void> {
  const { c } = f;
  const mac = Buffer.from(
    machineMac(i)
      .split(':')
      .map((h) => Number.parseInt(h, 16)),
  );
  const expected = machineAddress(i);
  const powerOn = Date.now();

  const firmware = firmwareOf(c, i);
  let t = Date.now();
  const pxe = await f.dhcp.lease(mac, 'pxe', firmware, c.deadlineMs);
  outcome.retransmits += pxe.retransmits;
  t = sample(f, firmware === 'bios' ? 'dhcp_pxe' : 'dhcp_http_boot', t);
  if (pxe.address !== expected) throw new Error(`DHCP gave ${pxe.address}, the reservation is ${expected}`);
  if (pxe.bootfile === '') throw new Error('the PXE offer named no boot file');
  const name = pxe.bootfile.slice(pxe.bootfile.lastIndexOf('/') + 1);
  let binarySha256: string;
  if (firmware === 'bios') {
    const binary = await tftpRead(expected, pxe.nextServer, pxe.bootfile, c.deadlineMs);
    outcome.retransmits += binary.retransmits;
    outcome.tftpOtherSource += binary.otherSource;
    binarySha256 = binary.sha256;
    t = sample(f, 'tftp', t);
  } else {
    if (!pxe.bootfile.startsWith('http://')) throw new Error(`UEFI HTTP boot was offered "${pxe.bootfile}"`);
    binarySha256 = (await fetchDigest(f, pxe.bootfile, expected)).sha256;
    t = sample(f, 'http_boot', t);
  }
  if (binarySha256 !== c.binarySha256[name]) throw new Error(`${pxe.bootfile}: not the iPXE binary`);

  const ipxe = await f.dhcp.lease(mac, 'ipxe', firmware, c.deadlineMs);
  outcome.retransmits += ipxe.retransmits;
  t = sample(f, 'dhcp_ipxe', t);
  if (!ipxe.bootfile.startsWith('http://'))
    throw new Error(`iPXE was offered "${ipxe.bootfile}", not a script URL`);
  const script = (await httpUntil(f, ipxe.bootfile, expected, {})).toString('utf8');
  t = sample(f, 'script', t);
  const kernelLine = /^kernel (\S+) (.*)$/m.exec(script);
  const initrdLine = /^initrd (\S+)$/m.exec(script);
  if (kernelLine === null || initrdLine === null)
    throw new Error(`the iPXE script boots nothing:\n${script}`);
  const args = new Map(
    (kernelLine[2] ?? '').split(' ').map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]),
  );
  const kernel = await fetchDigest(f, kernelLine[1] ?? '', expected);
  const initrd = await fetchDigest(f, initrdLine[1] ?? '', expected);
  t = sample(f, 'artifacts', t);
  if (kernel.bytes === 0 || initrd.bytes === 0) throw new Error('an empty kernel or initrd');

  const bootos = await f.dhcp.lease(mac, 'bootos', firmware, c.deadlineMs);
  outcome.retransmits += bootos.retransmits;
  t = sample(f, 'dhcp_bootos', t);
  const workerId = args.get('slipway.worker_id') ?? '';
  const server = args.get('slipway.server') ?? '';
  const http = args.get('slipway.http') ?? '';
  if (workerId !== hardwareId(i) || server === '' || http === '') {
    throw new Error(`the kernel command line lacks slipway.* arguments: ${kernelLine[2] ?? ''}`);
  }
  // One key for every try of the claim, as the boot OS's worker keeps it.
  const key = openingKey();
  const answer = await httpUntil(f, `${http}/credential`, bootos.address, {
    method: 'POST',
    json: () => ({ workerId, mac: machineMac(i), publicKey: key.publicKey }),
  });
  const credential = openClaim(key, answer);
  t = sample(f, 'claim', t);
  f.claimed++;
  // Every 1 %: bench/storm.ts adds the shards' counts up to kill the leader at half the fleet.
  if (f.claimed % Math.max(1, Math.floor(f.share / 100)) === 0) say({ event: 'claimed', count: f.claimed });
  sample(f, 'boot', powerOn);

  await runWorkflow(f, i, workerId, server, credential, outcome);
  sample(f, 'workflow', t);
}

async function storm(c: FleetConfig, shard: Shard): Promise<void> {
  const loop = monitorEventLoopDelay({ resolution: 20 });
  loop.enable();
  const cpu0 = process.cpuUsage();
  // Every shard's socket is bound to port 68 and gets a copy of each broadcast reply; each
  // matches only its own transaction ids, which start from its own seed.
  const dhcp = await FleetDhcp.open(c.seed + shard.index);
  const mine = Array.from({ length: c.machines }, (_, i) => i).filter((i) => i % shard.count === shard.index);
  const f: Fleet = {
    c,
    dhcp,
    share: mine.length,
    samples: [],
    runs: new Map(),
    claimed: 0,
    refusedResults: 0,
  };
  const rng = new Prng(c.seed + shard.index);
  const outcomes = await Promise.all(
    mine.map(async (i): Promise<MachineOutcome> => {
      await sleep(rng.float() * c.rampMs);
      const startMs = Date.now();
      const counters = { reconnects: 0, retransmits: 0, tftpOtherSource: 0 };
      try {
        await bootMachine(f, i, counters);
        return { startMs, doneMs: Date.now(), error: null, ...counters };
      } catch (err) {
        return { startMs, doneMs: null, error: errorText(err), ...counters };
      }
    }),
  );
  const dhcpOtherServer = dhcp.repliesFromOtherServers;
  dhcp.close();
  const used = process.cpuUsage(cpu0);
  const result: ShardResult = {
    machines: outcomes,
    samples: f.samples,
    ranTwice: [...f.runs.values()].filter((n) => n > 1).length,
    actionsRun: [...f.runs.values()].reduce((a, b) => a + b, 0),
    refusedResults: f.refusedResults,
    dhcpOtherServer,
    cpuS: Math.round((used.user + used.system) / 1e5) / 10,
    loopDelayMaxMs: Math.round(loop.max / 1e6),
  };
  // A file rather than stdout: tens of thousands of samples, read once the process is done.
  const file = shardResultFile(c, shard.index);
  writeFileSync(file, JSON.stringify(result));
  say({ event: 'result', file });
}

/** Every workflow the cluster holds (of one machine, given `hardwareId`), each page of the list. */
export function workflowsOf(client: ClusterClient, hardwareId = ''): Promise<WorkflowRecord[]> {
  return allItems(
    (token) => client.control('workflowList', { local: false, hardwareId, continue: token }),
    (page) => page.workflows,
  );
}

/** What the cluster recorded: every storm workflow succeeded, each action on its first attempt. */
async function checkCluster(c: FleetConfig): Promise<FleetCheck> {
  const client = new ClusterClient(c.apiServers, { timeoutMs: 30_000 });
  const workflows = await workflowsOf(client).finally(() => client.close());
  const storm = workflows.filter((w) => w.hardwareId.startsWith('storm-'));
  return {
    workflows: storm.length,
    succeeded: storm.filter((w) => w.state === 'SUCCESS').length,
    notSucceeded: storm
      .filter((w) => w.state !== 'SUCCESS')
      .slice(0, 10)
      .map((w) => `${w.hardwareId} ${w.state} ${w.message}`),
    retriedActions: storm.reduce((n, w) => n + w.actions.filter((a) => a.attempt > 1).length, 0),
    lastFinishedMs: Math.max(0, ...storm.map((w) => w.finishedMs)),
  };
}

/** What the cluster recorded, as one line on stdout. */
async function check(c: FleetConfig): Promise<void> {
  say({ event: 'check', ...(await checkCluster(c)) });
}

const [mode, configFile, shardIndex = '0', shardCount = '1'] = process.argv.slice(2);
// Only when run as the storm's fleet, not when another benchmark imports its parts.
const entered = import.meta.url === pathToFileURL(process.argv[1] ?? '').href;
if (entered && (mode === 'setup' || mode === 'run' || mode === 'check') && configFile !== undefined) {
  const config = JSON.parse(readFileSync(configFile, 'utf8')) as FleetConfig;
  const shard = { index: Number(shardIndex), count: Number(shardCount) };
  const work = mode === 'setup' ? setup(config) : mode === 'check' ? check(config) : storm(config, shard);
  work.catch((err: unknown) => {
    process.stderr.write(
      `storm fleet ${mode}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = 1;
  });
}

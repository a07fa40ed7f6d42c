// The fleet benchmark's machines and operator (bench/fleet.ts starts this inside the lab's fleet
// namespace): N simulated machines Slipway has never been told about. Each boots as a real one
// does against the VIP — DHCP as a PXE ROM from the dynamic pool, the iPXE binary over TFTP, DHCP
// as iPXE, the iPXE script (which must boot it in inventory mode under `discovered-<mac>`), the
// boot OS stand-ins, DHCP as the boot OS — claims its inventory-boot credential from its own
// address and reports an inventory on a worker stream, as `slipway worker --inventory` does. Then,
// like the boot OS, it claims a workflow credential until one is given (backing off to 5 s) and
// runs its workflow; a machine of every `failEvery` fails its first action on purpose.
// Once every machine is enrolled, the operator accepts them all, labels them into one group per
// pool, and creates the pools; it then watches the pools until each has its size deployed.
//
//   node --import tsx bench/fleet-machines.ts run CONFIG
//
// Output lines (stdout): {"event":"enrolled","count":N} every 10 %, {"event":"discovered"},
// {"event":"pools"} once created, {"event":"midway"} once half of all pool slots are deployed
// (bench/fleet.ts then kills the leader), {"event":"result","file":F} at the end.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { credentials, Metadata } from '@grpc/grpc-js';
import { ClusterClient } from '../src/cli/index.js';
import { WorkerClient, type ConnectResponse } from '../src/gen/worker.js';
import type { Inventory } from '../src/model/inventory.js';
import { allItems } from '../src/platform/pages.js';
import { openingKey } from '../src/platform/sealed-box.js';
import { Prng } from '../src/platform/prng.js';
import { pool } from './control.js';
import { sleep } from './stats.js';
import {
  errorText,
  machineMac,
  registerWorkload,
  retried,
  say,
  waitApplied,
  workflowsOf,
} from './storm-fleet.js';
import { FleetDhcp, httpRequest, tftpRead } from './storm-protocols.js';
import { httpUntil, openClaim, runWorkflow, sample, type Sample, type WorkerFleet } from './storm-worker.js';

const run = promisify(execFile);

export interface FleetMachinesConfig {
  readonly machines: number;
  readonly actions: number;
  readonly holdMs: number;
  readonly rampMs: number;
  /** The run gives up at this moment (ms since the epoch); set when the run starts. */
  readonly deadlineMs: number;
  readonly apiServers: readonly string[];
  readonly subnetPrefix: number;
  readonly kernelFile: string;
  readonly initrdFile: string;
  /** SHA-256 of the iPXE binary stand-in (undionly.kpxe). */
  readonly binarySha256: string;
  readonly pools: number;
  readonly poolSize: number;
  readonly spares: number;
  /** Machine i fails its installation when i % failEvery === failEvery - 1 (0: none). */
  readonly failEvery: number;
  readonly seed: number;
  readonly resultFile: string;
}

export interface FleetMachinesResult {
  readonly event: 'result';
  readonly machines: number;
  readonly enrolled: number;
  readonly errors: readonly string[];
  readonly samples: readonly Sample[];
  readonly ranTwice: number;
  readonly actionsRun: number;
  readonly refusedResults: number;
  /** Moments (ms since the epoch) the phases ended. */
  readonly firstPowerOnMs: number;
  readonly discoveredMs: number;
  readonly acceptedMs: number;
  readonly poolsCreatedMs: number;
  readonly poolsFullMs: number | null;
  /** Per pool at the end: its standing as `pool get` shows it. */
  readonly pools: readonly PoolFigures[];
  readonly check: FleetCheck;
  readonly cpuS: number;
  readonly loopDelayMaxMs: number;
}

export interface PoolFigures {
  readonly name: string;
  readonly deployed: number;
  readonly provisioning: number;
  readonly sparesReady: number;
  readonly failed: number;
  /** Members and spares, with their lifecycle states. */
  readonly members: readonly { readonly id: string; readonly state: string; readonly spare: boolean }[];
}

export interface FleetCheck {
  /** Workflows the pools created (each one allocation decision). */
  readonly poolWorkflows: number;
  /** Machines that had two workflows running at once, or sat in two pools. */
  readonly allocatedTwice: readonly string[];
  /** Machines that fail on purpose; the pool workflows that failed (each such machine taken). */
  readonly failedOnPurpose: number;
  readonly failedWorkflows: number;
  /** Machines whose pool workflow failed yet count as provisioning or deployed in a pool. */
  readonly failedStillMembers: readonly string[];
  readonly poolsAtSize: number;
}

const template = 'fleet-install';
const group = (c: FleetMachinesConfig, i: number): string =>
  `g${String(Math.floor((i * c.pools) / c.machines))}`;
export const discoveredId = (i: number): string => `discovered-${machineMac(i).replaceAll(':', '')}`;
const failing = (c: FleetMachinesConfig, i: number): boolean =>
  c.failEvery > 0 && i % c.failEvery === c.failEvery - 1;

/** What machine i reports: one of four shapes, its identity its own. */
export function inventoryOf(i: number): Inventory {
  const shape = i % 4;
  const hex = i.toString(16).padStart(12, '0');
  return {
    cpu: { model: 'Bench Xeon', sockets: 1 + (shape % 2), cores: 16, threads: 32, arch: 'x86_64' },
    memory: { totalBytes: (64 << 20) * 1024 * (1 + shape), usableBytes: (63 << 20) * 1024 * (1 + shape) },
    disks: [
      { path: '/dev/sda', model: 'BENCH-SSD', serial: `BS${hex}`, sizeBytes: 960e9, rotational: false },
    ],
    nics: [{ name: 'eth0', mac: machineMac(i), driver: 'ixgbe', speedMbps: 10_000, linkUp: true }],
    firmware: 'bios',
    system: {
      vendor: 'Bench',
      product: `Sim-${String(shape)}`,
      serial: `SN${hex}`,
      uuid: `5e000000-0000-4000-8000-${hex}`,
    },
  };
}

// ------------------------------------------------------------------------------ machines

interface Fleet extends WorkerFleet {
  readonly c: FleetMachinesConfig;
  readonly dhcp: FleetDhcp;
  readonly addresses: AddressAdder;
  enrolled: number;
  /** Set once the pools are full: machines still waiting for a workflow stop. */
  stopping: boolean;
}

/**
 * Puts the addresses the machines lease on the fleet's link, many per `ip -batch`, as the
 * machines' own links would hold them (the claim is checked against the leased address).
 */
class AddressAdder {
  readonly #prefix: number;
  readonly #file: string;
  #queued: { address: string; done: () => void; failed: (e: Error) => void }[] = [];
  #running = false;

  constructor(prefix: number, file: string) {
    this.#prefix = prefix;
    this.#file = file;
  }

  add(address: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queued.push({ address, done: resolve, failed: reject });
      if (!this.#running) void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    this.#running = true;
    while (this.#queued.length > 0) {
      const batch = this.#queued;
      this.#queued = [];
      const lines = batch.map((b) => `address replace ${b.address}/${String(this.#prefix)} dev eth0`);
      writeFileSync(this.#file, `${lines.join('\n')}\n`);
      try {
        await run('ip', ['-batch', this.#file]);
        for (const b of batch) b.done();
      } catch (err) {
        for (const b of batch) b.failed(err instanceof Error ? err : new Error(String(err)));
      }
    }
    this.#running = false;
  }
}

/** Whether a claim answer means "not yet" (no workflow for the machine), worth asking again. */
function claimAgain(status: number): boolean {
  return status === 404 || status === 409 || status === 429 || status >= 500;
}

async function bootMachine(f: Fleet, i: number, outcome: { reconnects: number }): Promise<void> {
  const { c } = f;
  const mac = Buffer.from(
    machineMac(i)
      .split(':')
      .map((h) => Number.parseInt(h, 16)),
  );
  let t = Date.now();
  const pxe = await f.dhcp.lease(mac, 'pxe', 'bios', c.deadlineMs);
  await f.addresses.add(pxe.address);
  t = sample(f, 'dhcp_pxe', t);
  const binary = await tftpRead(pxe.address, pxe.nextServer, pxe.bootfile, c.deadlineMs);
  if (binary.sha256 !== c.binarySha256) throw new Error(`${pxe.bootfile}: not the iPXE binary`);
  t = sample(f, 'tftp', t);
  const ipxe = await f.dhcp.lease(mac, 'ipxe', 'bios', c.deadlineMs);
  t = sample(f, 'dhcp_ipxe', t);
  const script = (await httpUntil(f, ipxe.bootfile, ipxe.address, {})).toString('utf8');
  t = sample(f, 'script', t);
  const kernelLine = /^kernel (\S+) (.*)$/m.exec(script);
  const initrdLine = /^initrd (\S+)$/m.exec(script);
  if (kernelLine === null || initrdLine === null)
    throw new Error(`the iPXE script boots nothing:\n${script}`);
  const args = new Map(
    (kernelLine[2] ?? '').split(' ').map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]),
  );
  if (args.get('slipway.mode') !== 'inventory' || args.get('slipway.worker_id') !== discoveredId(i))
    throw new Error(`not an inventory boot as ${discoveredId(i)}: ${kernelLine[2] ?? ''}`);
  await httpUntil(f, kernelLine[1] ?? '', ipxe.address, {});
  await httpUntil(f, initrdLine[1] ?? '', ipxe.address, {});
  t = sample(f, 'artifacts', t);
  const bootos = await f.dhcp.lease(mac, 'bootos', 'bios', c.deadlineMs);
  if (bootos.address !== pxe.address) await f.addresses.add(bootos.address);
  t = sample(f, 'dhcp_bootos', t);
  const server = args.get('slipway.server') ?? '';
  const http = args.get('slipway.http') ?? '';
  const workerId = discoveredId(i);

  const inventoryKey = openingKey();
  const inventoryCredential = openClaim(
    inventoryKey,
    await httpUntil(f, `${http}/credential`, bootos.address, {
      method: 'POST',
      json: () => ({ workerId, mac: machineMac(i), publicKey: inventoryKey.publicKey, mode: 'inventory' }),
    }),
  );
  t = sample(f, 'claim', t);
  const hardwareId = await report(server, workerId, inventoryCredential, inventoryOf(i), c.deadlineMs);
  if (hardwareId !== workerId) throw new Error(`recorded as ${hardwareId}, not ${workerId}`);
  sample(f, 'inventory', t);
  f.enrolled++;
  if (f.enrolled % Math.max(1, Math.floor(c.machines / 10)) === 0)
    say({ event: 'enrolled', count: f.enrolled });

  // As the boot OS's worker: a workflow credential once the machine has a workflow.
  const key = openingKey();
  let credential: string | undefined;
  const rng = new Prng(c.seed + i);
  for (let failures = 0; credential === undefined; failures++) {
    if (f.stopping) return;
    if (Date.now() > c.deadlineMs) throw new Error('no workflow before the deadline');
    const answer = await httpRequest(`${http}/credential`, bootos.address, {
      method: 'POST',
      json: { workerId, mac: machineMac(i), publicKey: key.publicKey },
      timeoutMs: 5000,
    }).catch(() => undefined);
    if (answer !== undefined && answer.status >= 200 && answer.status < 300)
      credential = openClaim(key, answer.body);
    else if (answer !== undefined && !claimAgain(answer.status))
      throw new Error(`claim: HTTP ${String(answer.status)} ${answer.body.toString('utf8').slice(0, 200)}`);
    else await sleep(Math.min(5000, 500 * 2 ** Math.min(failures, 4)) * (0.75 + rng.float() / 2));
  }
  t = Date.now();
  await runWorkflow(f, i, workerId, server, credential, outcome, failing(c, i));
  sample(f, 'workflow', t);
}

/** The inventory report on a worker stream, as src/worker/inventory-report.ts sends it. */
async function report(
  server: string,
  workerId: string,
  credential: string,
  inventory: Inventory,
  deadlineMs: number,
): Promise<string> {
  const client = new WorkerClient(server, credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
  });
  try {
    for (;;) {
      if (Date.now() > deadlineMs) throw new Error('the inventory report was not answered in time');
      const answer = await new Promise<string | Error | undefined>((resolve) => {
        const md = new Metadata();
        md.set('x-worker-id', workerId);
        md.set('authorization', `Bearer ${credential}`);
        // 30 s, as the agent waits (src/worker/inventory-report.ts).
        const stream = client.connect(md, { deadline: Date.now() + 30_000 });
        let done = false;
        const finish = (v: string | Error | undefined): void => {
          if (done) return;
          done = true;
          stream.cancel();
          resolve(v);
        };
        stream.on('data', (msg: ConnectResponse) => {
          if (msg.kind?.$case !== 'inventoryAck') return;
          const ack = msg.kind.value;
          finish(ack.accepted ? ack.hardwareId : new Error(`the report was refused: ${ack.message}`));
        });
        stream.on('error', () => finish(undefined));
        stream.on('end', () => finish(undefined));
        stream.write({
          kind: { $case: 'hello', value: { pendingResults: [], agentVersion: 'fleet-bench' } },
        });
        stream.write({ kind: { $case: 'inventory', value: { inventoryJson: JSON.stringify(inventory) } } });
      });
      if (typeof answer === 'string') return answer;
      if (answer instanceof Error) throw answer;
      await sleep(500);
    }
  } finally {
    client.close();
  }
}

// ------------------------------------------------------------------------------ the operator

async function setup(c: FleetMachinesConfig, client: ClusterClient): Promise<void> {
  await registerWorkload(client, { template, task: 'install', ...c });
  await waitApplied(c.apiServers);
}

/** Every machine accepted and labelled with its group, 16 at a time. */
async function acceptAll(c: FleetMachinesConfig, client: ClusterClient): Promise<void> {
  const ids = Array.from({ length: c.machines }, (_, i) => i);
  await pool(ids, 16, async (i) => {
    const id = discoveredId(i);
    await retried(() => client.control('hardwareLabel', { id, set: { group: group(c, i) }, remove: [] }));
    await retried(async () => {
      const got = await client.control('hardwareGet', { id, local: false });
      if ((JSON.parse(got.hardwareJson) as { lifecycle?: { state?: string } }).lifecycle?.state === 'ready')
        return;
      await client.control('hardwareTransition', {
        id,
        verb: 'accept',
        reason: 'fleet benchmark',
        now: false,
        timeoutS: 0,
      });
    });
  });
}

// ------------------------------------------------------------------------------ the run

async function fleetRun(c: FleetMachinesConfig): Promise<void> {
  const loop = monitorEventLoopDelay({ resolution: 20 });
  loop.enable();
  const cpu0 = process.cpuUsage();
  const client = new ClusterClient(c.apiServers, { timeoutMs: 30_000 });
  await setup(c, client);
  process.stderr.write('fleet machines: the template and the boot OS stand-ins are registered\n');
  // DHCP's limited broadcast needs a route: this namespace has no default one.
  await run('ip', ['route', 'replace', '255.255.255.255/32', 'dev', 'eth0']);
  const dhcp = await FleetDhcp.open(c.seed);
  const f: Fleet = {
    c,
    dhcp,
    addresses: new AddressAdder(c.subnetPrefix, `${c.resultFile}.addresses`),
    samples: [],
    runs: new Map(),
    refusedResults: 0,
    enrolled: 0,
    stopping: false,
  };
  const rng = new Prng(c.seed);
  const errors: string[] = [];
  const firstPowerOnMs = Date.now();
  let discoveredMs = 0;
  const enrolledAll = new Promise<void>((resolve) => {
    const check = setInterval(() => {
      if (f.enrolled + errors.length >= c.machines || Date.now() > c.deadlineMs) {
        clearInterval(check);
        resolve();
      }
    }, 100);
  });
  const machines = Promise.all(
    Array.from({ length: c.machines }, async (_, i) => {
      await sleep(rng.float() * c.rampMs);
      try {
        await bootMachine(f, i, { reconnects: 0 });
      } catch (err) {
        errors.push(`${discoveredId(i)}: ${errorText(err)}`);
      }
    }),
  );
  await enrolledAll;
  discoveredMs = Date.now();
  say({ event: 'discovered', enrolled: f.enrolled, errors: errors.length, first: errors.slice(0, 3) });
  await acceptAll(c, client);
  const acceptedMs = Date.now();
  await createPools(c, client);
  const poolsCreatedMs = Date.now();
  say({ event: 'pools' });
  const poolsFullMs = await watchPools(c, client);
  f.stopping = true;
  await machines;
  dhcp.close();
  const used = process.cpuUsage(cpu0);
  const result: FleetMachinesResult = {
    event: 'result',
    machines: c.machines,
    enrolled: f.enrolled,
    errors: errors.slice(0, 20),
    samples: f.samples,
    ranTwice: [...f.runs.values()].filter((n) => n > 1).length,
    actionsRun: [...f.runs.values()].reduce((a, b) => a + b, 0),
    refusedResults: f.refusedResults,
    firstPowerOnMs,
    discoveredMs,
    acceptedMs,
    poolsCreatedMs,
    poolsFullMs,
    pools: await poolFigures(c, client),
    check: await checkFleet(c, client),
    cpuS: Math.round((used.user + used.system) / 1e5) / 10,
    loopDelayMaxMs: Math.round(loop.max / 1e6),
  };
  client.close();
  writeFileSync(c.resultFile, JSON.stringify(result));
  say({ event: 'result', file: c.resultFile });
}

const poolName = (k: number): string => `pool-g${String(k)}`;

async function createPools(c: FleetMachinesConfig, client: ClusterClient): Promise<void> {
  for (let k = 0; k < c.pools; k++) {
    const name = poolName(k);
    await retried(async () => {
      // A create whose outcome a leader change left unknown: look before creating again.
      const exists = await client
        .control('poolGet', { name, local: false })
        .then(() => true)
        .catch(() => false);
      if (exists) return;
      await client.control('poolCreate', {
        name,
        selector: `group=g${String(k)}`,
        template,
        size: c.poolSize,
        spares: c.spares,
        spreadBy: '',
        releaseTemplate: '',
        image: '',
        onFailure: '',
      });
    });
  }
}

/** Until every pool has its size deployed; the moment it did, or null at the deadline. */
async function watchPools(c: FleetMachinesConfig, client: ClusterClient): Promise<number | null> {
  let saidMidway = false;
  for (;;) {
    const figures = await poolFigures(c, client).catch(() => undefined);
    if (figures !== undefined) {
      const deployed = figures.reduce((n, p) => n + Math.min(p.deployed, c.poolSize), 0);
      if (!saidMidway && deployed >= (c.pools * c.poolSize) / 2) {
        saidMidway = true;
        say({ event: 'midway' });
      }
      if (figures.every((p) => p.deployed >= c.poolSize)) return Date.now();
    }
    if (Date.now() > c.deadlineMs) return null;
    await sleep(500);
  }
}

async function poolFigures(c: FleetMachinesConfig, client: ClusterClient): Promise<PoolFigures[]> {
  const pools = await allItems(
    (token) => client.control('poolList', { local: false, continue: token }),
    (page) => page.pools,
  );
  const names = new Set(Array.from({ length: c.pools }, (_, k) => poolName(k)));
  return pools
    .filter((p) => names.has(p.name))
    .map((p) => ({
      name: p.name,
      deployed: p.deployed,
      provisioning: p.provisioning,
      sparesReady: p.sparesReady,
      failed: p.failed,
      members: p.members.map((m) => ({ id: m.id, state: m.state, spare: m.spare })),
    }));
}

/** What the cluster holds at the end: no machine allocated twice, every failed one replaced. */
async function checkFleet(c: FleetMachinesConfig, client: ClusterClient): Promise<FleetCheck> {
  const workflows = await workflowsOf(client);
  const pools = await poolFigures(c, client);
  const poolWorkflows = workflows.filter((w) => pools.some((p) => w.id.startsWith(`${p.name}-`)));
  const running = new Map<string, number>();
  for (const w of poolWorkflows)
    if (w.state === 'RUNNING' || w.state === 'PENDING' || w.state === 'SUCCESS')
      running.set(w.hardwareId, (running.get(w.hardwareId) ?? 0) + 1);
  const membership = new Map<string, number>();
  for (const p of pools) for (const m of p.members) membership.set(m.id, (membership.get(m.id) ?? 0) + 1);
  const twice = new Set([
    ...[...running].filter(([, n]) => n > 1).map(([id]) => id),
    ...[...membership].filter(([, n]) => n > 1).map(([id]) => id),
  ]);
  const failedMachines = new Set(poolWorkflows.filter((w) => w.state === 'FAILED').map((w) => w.hardwareId));
  const filling = (state: string): boolean => state === 'provisioning' || state === 'deployed';
  const failedStillMembers = pools.flatMap((p) =>
    p.members.filter((m) => failedMachines.has(m.id) && filling(m.state)).map((m) => m.id),
  );
  return {
    poolWorkflows: poolWorkflows.length,
    allocatedTwice: [...twice].sort(),
    failedOnPurpose: Array.from({ length: c.machines }, (_, i) => i).filter((i) => failing(c, i)).length,
    failedWorkflows: failedMachines.size,
    failedStillMembers,
    poolsAtSize: pools.filter((p) => p.deployed >= c.poolSize).length,
  };
}

const [mode, configFile] = process.argv.slice(2);
if (mode === 'run' && configFile !== undefined) {
  const config = JSON.parse(readFileSync(configFile, 'utf8')) as FleetMachinesConfig;
  fleetRun(config).catch((err: unknown) => {
    process.stderr.write(
      `fleet machines: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = 1;
  });
}

// `npm run bench -- linkcut [--rounds N] [--probe-ms P]`
// The provisioning link of the node holding the VIP is cut (its port on the provisioning bridge
// set down: a pulled cable) and restored, N times, then a follower's link once; the same with
// keepalived's track_interface in the same lab. Slipway: 3 nodes (the compiled build), raft and
// the API on a management segment, DHCP and the VIP on the provisioning segment; a machine on the
// provisioning segment broadcasts a DISCOVER every P ms (bench/dhcp-probe.ts) and hears who
// offers. keepalived 2.2 (Debian's; apt-get install keepalived): 3 VRRP routers on the same
// provisioning segment, track_interface on their link, advert_int 1 s, priorities 150/100/50.
// Prints one JSON line per cut: system, round, what was cut, the time from the cut to the VIP on
// another node (polled every 10 ms), and for Slipway the DHCP outage the machine saw (the cut to
// the first offer after it); then a summary line with the medians side by side.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { NetnsLab, type LabProcess } from '../cluster/netns-lab.js';
import { findExecutable } from '../src/platform/executable.js';
import { repoRoot } from './clusters.js';
import type { HeardOffer } from './dhcp-probe.js';
import { slipwayBuild } from './slipway-build.js';

const run = promisify(execFile);
const ids = ['n1', 'n2', 'n3'] as const;
const kaIds = ['k1', 'k2', 'k3'] as const;
const mgmtAddress = (i: number): string => `10.82.0.${String(11 + i)}`;
const provAddress = (i: number): string => `10.83.0.${String(11 + i)}`;
const kaAddress = (i: number): string => `10.83.0.${String(21 + i)}`;
const vip = '10.83.0.100';
const kaVip = '10.83.0.200';
const machine = { mac: '52:54:00:83:00:10', ip: '10.83.0.50', probe: '10.83.0.5' };
const moveTimeoutMs = 20_000;

interface Options {
  readonly rounds: number;
  readonly probeMs: number;
}

interface CutResult {
  readonly system: 'slipway' | 'keepalived';
  readonly round: number;
  readonly cut: 'leader' | 'follower';
  readonly vipMovedMs: number | null;
  readonly dhcpOutageMs?: number | null;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: { rounds: { type: 'string', default: '2' }, 'probe-ms': { type: 'string', default: '50' } },
  });
  return { rounds: Number(values.rounds), probeMs: Number(values['probe-ms']) };
}

/** Namespaces: lan (management), ops (the CLI), plan (provisioning), n1-n3, k1-k3, m1 (the machine). */
async function buildLab(lab: NetnsLab): Promise<Record<string, string>> {
  const ns: Record<string, string> = await lab.addLan({
    ...Object.fromEntries(ids.map((id, i) => [id, { addresses: [`${mgmtAddress(i)}/24`] }])),
    ops: { addresses: ['10.82.0.5/24'] },
  });
  ns['plan'] = await lab.addNamespace('plan');
  await lab.addBridge(ns['plan'], 'br0');
  const onPlan = async (name: string, ifname: string, addresses: string[], mac?: string): Promise<void> => {
    ns[name] ??= await lab.addNamespace(name);
    await lab.connect(
      { ns: ns['plan']!, ifname: `p-${name}`, bridge: 'br0' },
      { ns: ns[name], ifname, addresses, ...(mac === undefined ? {} : { mac }) },
    );
  };
  for (const [i, id] of ids.entries()) await onPlan(id, 'prov0', [`${provAddress(i)}/24`]);
  for (const [i, id] of kaIds.entries()) await onPlan(id, 'prov0', [`${kaAddress(i)}/24`]);
  await onPlan('m1', 'eth0', [`${machine.probe}/24`], machine.mac);
  return ns;
}

async function setLink(lab: NetnsLab, ns: Record<string, string>, who: string, up: boolean): Promise<void> {
  await lab.check(ns['plan']!, ['ip', 'link', 'set', `p-${who}`, up ? 'up' : 'down']);
}

async function holds(lab: NetnsLab, ns: string, address: string): Promise<boolean> {
  const r = await lab.run(ns, ['ip', '-4', '-o', 'addr', 'show', 'dev', 'prov0']);
  return r.stdout.includes(` ${address}/`);
}

/** Polls every 10 ms until one of `who` holds `address`; returns it, or undefined at the deadline. */
async function holderAmong(
  lab: NetnsLab,
  ns: Record<string, string>,
  who: readonly string[],
  address: string,
  timeoutMs: number,
): Promise<string | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const id of who) if (await holds(lab, ns[id]!, address)) return id;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return undefined;
}

function offersOf(probe: LabProcess): HeardOffer[] {
  return probe.output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as HeardOffer);
}

/**
 * The first offer heard after `t0` that `accept` takes (not one the cut node sent before its link
 * went down), waiting for it up to the deadline; its time, or null.
 */
async function firstOfferAfter(
  probe: LabProcess,
  t0: number,
  timeoutMs: number,
  accept: (offer: HeardOffer) => boolean = () => true,
): Promise<number | null> {
  const first = (): HeardOffer | undefined => offersOf(probe).find((o) => o.atMs > t0 && accept(o));
  try {
    await probe.waitForOutput(() => first() !== undefined, timeoutMs, 'an offer');
  } catch {
    return null;
  }
  return first()?.atMs ?? null;
}

function startSlipway(lab: NetnsLab, ns: Record<string, string>, dir: string): LabProcess[] {
  const { main } = slipwayBuild();
  const peers = ids.map((id, i) => `${id}=${mgmtAddress(i)}:7000`).join(',');
  return ids.map((id, i) =>
    lab.spawn(
      ns[id]!,
      [
        ...[process.execPath, main, 'server', '--id', id, '--data-dir', join(dir, `data-${id}`)],
        ...['--insecure', '--insecure-allow-network', '--peers', peers],
        ...['--raft-addr', `${mgmtAddress(i)}:7000`, '--api-addr', `${mgmtAddress(i)}:7001`],
        ...['--dhcp-interface', 'prov0', '--vip', vip, '--vip-interface', 'prov0'],
      ],
      { cwd: repoRoot },
    ),
  );
}

/** `slipway ARGS` from the management segment, against every node. */
async function slipway(lab: NetnsLab, ns: Record<string, string>, args: readonly string[]): Promise<string> {
  const servers = ids.map((_, i) => `${mgmtAddress(i)}:7001`).join(',');
  const argv = ['env', `SLIPWAY_SERVER=${servers}`, process.execPath, slipwayBuild().main, ...args];
  return lab.check(ns['ops']!, argv, 30_000);
}

async function allHealthy(lab: NetnsLab, ns: Record<string, string>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const out = await slipway(lab, ns, ['-o', 'json', 'cluster', 'status']).catch(() => '');
    const rows = out === '' ? [] : (JSON.parse(out) as { nodes: { health: string }[] }).nodes;
    if (rows.length === ids.length && rows.every((r) => r.health === 'ok')) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`the Slipway nodes were not all healthy within ${timeoutMs} ms`);
}

/** One cut of `who`'s link: the VIP's move (when it held it) and the first offer after the cut. */
async function slipwayCut(
  lab: NetnsLab,
  ns: Record<string, string>,
  probe: LabProcess,
  who: string,
  holder: string,
): Promise<{ vipMovedMs: number | null; dhcpOutageMs: number | null }> {
  const t0 = Date.now();
  await setLink(lab, ns, who, false);
  const others = ids.filter((id) => id !== who);
  const moved = who === holder ? await holderAmong(lab, ns, others, vip, moveTimeoutMs) : undefined;
  const vipMovedMs = moved === undefined ? null : Date.now() - t0;
  const cutAddress = provAddress(ids.indexOf(who as (typeof ids)[number]));
  const offered = await firstOfferAfter(probe, t0, moveTimeoutMs, (o) => o.from !== cutAddress);
  await setLink(lab, ns, who, true);
  return { vipMovedMs, dhcpOutageMs: offered === null ? null : offered - t0 };
}

async function slipwayRounds(lab: NetnsLab, ns: Record<string, string>, o: Options): Promise<CutResult[]> {
  const nodes = startSlipway(lab, ns, lab.dir);
  await Promise.all(
    nodes.map((n) => n.waitForOutput((t) => t.includes('"msg":"node serving"'), 60_000, 'serving')),
  );
  await holderAmong(lab, ns, ids, vip, moveTimeoutMs);
  await allHealthy(lab, ns, 30_000);
  await slipway(lab, ns, [
    'hardware',
    'create',
    '--id',
    'm1',
    '--mac',
    machine.mac,
    '--ip',
    `${machine.ip}/24`,
  ]);
  const probeArgs = [machine.probe, machine.mac, String(o.probeMs), String(10 * 60_000)];
  const probe = lab.spawn(
    ns['m1']!,
    [process.execPath, '--import', 'tsx', 'bench/dhcp-probe.ts', ...probeArgs],
    {
      cwd: repoRoot,
    },
  );
  if ((await firstOfferAfter(probe, 0, 30_000)) === null)
    throw new Error(`the machine heard no DHCP offer before any cut:\n${probe.output.slice(-2000)}`);
  const results: CutResult[] = [];
  for (let round = 1; round <= o.rounds + 1; round++) {
    const holder = (await holderAmong(lab, ns, ids, vip, moveTimeoutMs)) ?? 'n1';
    const cut = round <= o.rounds ? 'leader' : 'follower';
    const who = cut === 'leader' ? holder : ids.find((id) => id !== holder)!;
    const r = await slipwayCut(lab, ns, probe, who, holder);
    results.push({ system: 'slipway', round, cut, ...r });
    process.stdout.write(`${JSON.stringify(results.at(-1))}\n`);
    await allHealthy(lab, ns, 30_000);
  }
  for (const n of [probe, ...nodes]) await n.stop();
  return results;
}

function keepalivedConfig(id: string, priority: number): string {
  return [
    `global_defs { router_id ${id} }`,
    'vrrp_instance VI_1 {',
    '  state BACKUP',
    '  interface prov0',
    '  virtual_router_id 83',
    `  priority ${String(priority)}`,
    '  advert_int 1',
    '  track_interface { prov0 }',
    `  virtual_ipaddress { ${kaVip}/32 dev prov0 }`,
    '}',
    '',
  ].join('\n');
}

async function keepalivedRounds(lab: NetnsLab, ns: Record<string, string>, o: Options): Promise<CutResult[]> {
  const keepalived = findExecutable('keepalived', ['/usr/sbin/keepalived']);
  if (keepalived === undefined) throw new Error('keepalived is not installed: apt-get install keepalived');
  const procs = kaIds.map((id, i) => {
    const conf = join(lab.dir, `keepalived-${id}.conf`);
    writeFileSync(conf, keepalivedConfig(id, [150, 100, 50][i]!));
    const pid = (what: string): string => join(lab.dir, `keepalived-${id}-${what}.pid`);
    return lab.spawn(ns[id]!, [
      ...[keepalived, '-n', '-l', '-D', '-P', '-f', conf],
      ...['-p', pid('main'), '-r', pid('vrrp'), '-c', pid('checkers')],
    ]);
  });
  const results: CutResult[] = [];
  try {
    for (let round = 1; round <= o.rounds + 1; round++) {
      // keepalived preempts: the highest priority takes the VIP back once its link returns.
      const holder = await holderAmong(lab, ns, ['k1'], kaVip, moveTimeoutMs);
      if (holder === undefined) throw new Error('keepalived: k1 did not take the VIP');
      const cut = round <= o.rounds ? 'leader' : 'follower';
      const who = cut === 'leader' ? 'k1' : 'k3';
      const t0 = Date.now();
      await setLink(lab, ns, who, false);
      const others = kaIds.filter((id) => id !== who);
      const moved = cut === 'leader' ? await holderAmong(lab, ns, others, kaVip, moveTimeoutMs) : undefined;
      results.push({
        system: 'keepalived',
        round,
        cut,
        vipMovedMs: moved === undefined ? null : Date.now() - t0,
      });
      process.stdout.write(`${JSON.stringify(results.at(-1))}\n`);
      await setLink(lab, ns, who, true);
    }
  } finally {
    for (const p of procs) await p.stop();
  }
  return results;
}

function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? null;
}

export async function runLinkcutBench(argv: readonly string[]): Promise<void> {
  const o = parseOptions(argv);
  if (!Number.isInteger(o.rounds) || o.rounds < 1 || o.rounds > 20) throw new Error('--rounds must be 1-20');
  await run('ip', ['-V']);
  const lab = await NetnsLab.create();
  try {
    const ns = await buildLab(lab);
    const slipwayCuts = await slipwayRounds(lab, ns, o);
    const kaCuts = await keepalivedRounds(lab, ns, o);
    const leaderCuts = (rs: CutResult[], f: (r: CutResult) => number | null | undefined): number[] =>
      rs
        .filter((r) => r.cut === 'leader')
        .flatMap((r) => {
          const v = f(r);
          return v === null || v === undefined ? [] : [v];
        });
    process.stdout.write(
      `${JSON.stringify({
        summary: 'leader link cut',
        rounds: o.rounds,
        slipwayVipMovedMsMedian: median(leaderCuts(slipwayCuts, (r) => r.vipMovedMs)),
        slipwayDhcpOutageMsMedian: median(leaderCuts(slipwayCuts, (r) => r.dhcpOutageMs)),
        keepalivedVipMovedMsMedian: median(leaderCuts(kaCuts, (r) => r.vipMovedMs)),
        followerCutDhcpOutageMs: slipwayCuts.find((r) => r.cut === 'follower')?.dhcpOutageMs ?? null,
      })}\n`,
    );
  } finally {
    await lab.destroy();
  }
}

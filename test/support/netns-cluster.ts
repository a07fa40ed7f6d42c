// Real `slipway server` nodes inside the network-namespace lab, for end-to-end tests of the
// boot services over replicated state: each node runs in a namespace the test built (raft on
// ADDRESS:7000, the API on ADDRESS:7001), the CLI runs inside a namespace with `ip netns exec`,
// the leader is found with `slipway cluster status -o json`, and each node's log (pino JSON on
// stderr, kept in memory by the lab) is there to assert on. Processes are stopped by PID: by
// kill() here, and by the lab's destroy() for whatever is left.
//
// Run as a script, this file is also a DHCP offer probe (see collectOffers): Node cannot enter a
// namespace in-process, so the probe is started inside one.
import { randomInt } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { clientHardwareAddress, decodeDhcpPacket, encodeDhcpPacket } from '../../src/boot/dhcp/codec.js';
import { openDhcpSockets } from '../../src/boot/dhcp/socket-driver.js';
import type { LabProcess, NetnsLab, RunResult, VethEnd } from '../../cluster/netns-lab.js';
import { clientPacket } from './dhcp-packets.js';

export const slipwayBin = fileURLToPath(new URL('../../bin/slipway.js', import.meta.url));
const thisScript = fileURLToPath(import.meta.url);
const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

export const raftPort = 7000;
export const apiPort = 7001;

/** tsx compiles the server on first start; on a loaded 2-core machine that takes a while. */
const nodeReadyTimeoutMs = 60_000;
/** One CLI call: node startup under tsx plus the command's own --timeout. */
const cliTimeoutMs = 30_000;

/** The line of `workflow events` (table form) that says a workflow finished. */
export const workflowEndLine = / workflow\.(succeeded|failed|timeout|cancelled)\b/;
const leaderPollMs = 200;

export interface NetnsNodeSpec {
  readonly id: string;
  /** The namespace the node runs in; the test has configured `address` there. */
  readonly ns: string;
  readonly address: string;
  /** Further `slipway server` flags: the boot services, mostly. */
  readonly args: readonly string[];
}

/** One line of a node's pino log. */
export interface LogRecord {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}

export function raftAddrOf(spec: NetnsNodeSpec): string {
  return `${spec.address}:${raftPort}`;
}

export function apiAddrOf(spec: NetnsNodeSpec): string {
  return `${spec.address}:${apiPort}`;
}

/** A running (or SIGKILLed) `slipway server` in its namespace. */
export class NetnsNode {
  readonly spec: NetnsNodeSpec;
  /** The command line it was started with, for a restart on the same data directory. */
  readonly argv: readonly string[];
  /** The current process; a restart replaces it. */
  process: LabProcess;

  constructor(spec: NetnsNodeSpec, argv: readonly string[], process: LabProcess) {
    this.spec = spec;
    this.argv = argv;
    this.process = process;
  }

  get id(): string {
    return this.spec.id;
  }

  get address(): string {
    return this.spec.address;
  }

  get apiAddr(): string {
    return apiAddrOf(this.spec);
  }

  get running(): boolean {
    return this.process.running;
  }

  /** Every complete JSON log line so far. */
  logRecords(): LogRecord[] {
    const records: LogRecord[] = [];
    for (const line of this.process.output.split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const parsed = JSON.parse(line) as Partial<LogRecord>;
        if (typeof parsed.msg === 'string' && typeof parsed.level === 'number')
          records.push(parsed as LogRecord);
      } catch {
        // A line still being written; it is complete on the next read.
      }
    }
    return records;
  }

  /** Log records with message `msg` whose `mac` field is `mac` (DHCP and iPXE script logs carry one). */
  logsFor(msg: string, mac: string): LogRecord[] {
    return this.logRecords().filter((r) => r.msg === msg && r['mac'] === mac);
  }

  /**
   * logsFor once at least one such record has arrived: a node's log reaches the test through a
   * pipe, so a client may see the node's answer before the test sees the line that logs it.
   */
  async waitForLogs(msg: string, mac: string, timeoutMs: number): Promise<LogRecord[]> {
    await this.process.waitForOutput(
      () => this.logsFor(msg, mac).length > 0,
      timeoutMs,
      `${this.id}: "${msg}" for ${mac}`,
    );
    return this.logsFor(msg, mac);
  }
}

export interface ClusterStatusRow {
  readonly node: string;
  readonly api: string;
  readonly role: string;
  readonly leader: string;
  readonly term: number;
  /** One word: ok, degraded, no-leader, stopped, down or unreachable. */
  readonly health: string;
  /** What the word stands for ("" when ok). */
  readonly reason: string;
  /** Each configured boot service and its state ("dhcp serving, tftp waiting"), or "-". */
  readonly boot?: string;
}

/**
 * The lab's LAN with one namespace per node (eth0 at its address from `nodeAddresses`, on a
 * /`prefix`) and the `others` (ops, clients). Returns the namespaces by role, "lan" included.
 */
export function addNodeLan<N extends string, O extends string>(
  lab: NetnsLab,
  nodeAddresses: Readonly<Record<N, string>>,
  prefix: number,
  others: Readonly<Record<O, Omit<VethEnd, 'ns' | 'ifname' | 'bridge'>>>,
): Promise<Record<N | O | 'lan', string>> {
  const nodes = Object.fromEntries(
    Object.entries<string>(nodeAddresses).map(([id, address]) => [
      id,
      { addresses: [`${address}/${prefix}`] },
    ]),
  ) as Record<N, { addresses: string[] }>;
  return lab.addLan<N | O>({ ...nodes, ...others });
}

/**
 * A provisioning network apart from the management LAN, as a site with a boot VLAN has: namespace
 * "plan" holds bridge br0, each node's `prov0` at its address from `provAddresses` (a /24) joins it
 * through port p-ID, and the machine namespace c1 joins through p-c1 with `machine` (its MAC or
 * addresses). Cutting a node's port (`setProvisioningLink`) is cutting its boot link. Returns the
 * namespaces "plan" and "c1".
 */
export async function addProvisioningLan<N extends string>(
  lab: NetnsLab,
  ns: Readonly<Record<N, string>>,
  provAddresses: Readonly<Record<N, string>>,
  machine: Omit<VethEnd, 'ns' | 'ifname' | 'bridge'>,
): Promise<{ plan: string; c1: string }> {
  const plan = await lab.addNamespace('plan');
  await lab.addBridge(plan, 'br0');
  for (const [id, address] of Object.entries<string>(provAddresses)) {
    await lab.connect(
      { ns: plan, ifname: `p-${id}`, bridge: 'br0' },
      { ns: ns[id as N], ifname: 'prov0', addresses: [`${address}/24`] },
    );
  }
  const c1 = await lab.addNamespace('c1');
  await lab.connect({ ns: plan, ifname: 'p-c1', bridge: 'br0' }, { ns: c1, ifname: 'eth0', ...machine });
  return { plan, c1 };
}

/** Cuts (up false) or restores node `id`'s port on the provisioning bridge. */
export async function setProvisioningLink(
  lab: NetnsLab,
  plan: string,
  id: string,
  up: boolean,
): Promise<void> {
  await lab.check(plan, ['ip', 'link', 'set', `p-${id}`, up ? 'up' : 'down']);
}

export class NetnsCluster {
  readonly lab: NetnsLab;
  readonly nodes: readonly NetnsNode[];

  private constructor(lab: NetnsLab, nodes: readonly NetnsNode[]) {
    this.lab = lab;
    this.nodes = nodes;
  }

  /**
   * Starts one `slipway server` per spec, all members of one cluster, and resolves once every
   * node logs that it serves. Debug logging is on: the DHCP server logs each answer there.
   */
  static async start(lab: NetnsLab, specs: readonly NetnsNodeSpec[]): Promise<NetnsCluster> {
    const peers = specs.map((spec) => `${spec.id}=${raftAddrOf(spec)}`).join(',');
    const nodes = specs.map((spec) => {
      const dataDir = path.join(lab.dir, `data-${spec.id}`);
      const argv = [
        ...[process.execPath, slipwayBin, 'server', '--id', spec.id, '--data-dir', dataDir],
        ...['--raft-addr', raftAddrOf(spec), '--api-addr', apiAddrOf(spec), '--peers', peers],
        ...['--log-level', 'debug', '--insecure', '--insecure-allow-network', ...spec.args],
      ];
      return new NetnsNode(spec, argv, lab.spawn(spec.ns, argv, { cwd: repoRoot }));
    });
    await Promise.all(nodes.map((node) => serving(node)));
    return new NetnsCluster(lab, nodes);
  }

  /**
   * start() with one node per entry of `nodeAddresses` (ID: address), each in the namespace of
   * the same name in `namespaces` (as addNodeLan made them), with the flags `argsOf` gives it.
   */
  static startOnLan<N extends string>(
    lab: NetnsLab,
    namespaces: Readonly<Record<NoInfer<N>, string>>,
    nodeAddresses: Readonly<Record<N, string>>,
    argsOf: (id: N, address: string) => readonly string[],
  ): Promise<NetnsCluster> {
    const ids = Object.keys(nodeAddresses) as N[];
    return NetnsCluster.start(
      lab,
      ids.map((id) => ({
        id,
        ns: namespaces[id],
        address: nodeAddresses[id],
        args: argsOf(id, nodeAddresses[id]),
      })),
    );
  }

  /** Starts a stopped node again on its data directory and resolves once it serves. */
  async restart(node: NetnsNode): Promise<void> {
    if (node.running) throw new Error(`${node.id} is still running`);
    node.process = this.lab.spawn(node.spec.ns, node.argv, { cwd: repoRoot });
    await serving(node);
  }

  /** The API addresses of the nodes still running, as `--server` takes them. */
  servers(): string {
    return this.nodes
      .filter((n) => n.running)
      .map((n) => n.apiAddr)
      .join(',');
  }

  /** `slipway --server <live nodes> ARGS` inside `ns`. */
  slipway(ns: string, args: readonly string[]): Promise<RunResult> {
    return this.lab.run(ns, this.#slipwayArgv(args), cliTimeoutMs);
  }

  /**
   * `slipway --server <live nodes> ARGS` inside `ns`, left running: for a command that streams
   * (`workflow events --follow`), one process instead of a CLI run per poll, each of which costs
   * the CPU of a Node start that a QEMU machine on the same cores needs.
   */
  spawnSlipway(ns: string, args: readonly string[]): LabProcess {
    return this.lab.spawn(ns, this.#slipwayArgv(args));
  }

  #slipwayArgv(args: readonly string[]): string[] {
    return [process.execPath, slipwayBin, '--server', this.servers(), ...args];
  }

  /** Waits, through one `workflow events --follow` in `ns`, until workflow `id` has finished. */
  async waitForWorkflowEnd(ns: string, id: string, timeoutMs: number): Promise<void> {
    const events = this.spawnSlipway(ns, ['workflow', 'events', id, '--follow']);
    try {
      await events.waitForOutput((out) => workflowEndLine.test(out), timeoutMs, `workflow ${id} to finish`);
    } finally {
      if (events.running) events.child.kill('SIGTERM');
      await events.exited;
    }
  }

  /** Like slipway(), but throws with the output unless the command exits 0; returns stdout. */
  async slipwayOk(ns: string, args: readonly string[]): Promise<string> {
    const result = await this.slipway(ns, args);
    if (result.code !== 0) {
      throw new Error(`slipway ${args.join(' ')} exited ${result.code ?? result.signal}:\n${result.stderr}`);
    }
    return result.stdout;
  }

  /** `cluster status -o json` of the live nodes, asked from `ns`. */
  async status(ns: string): Promise<ClusterStatusRow[]> {
    // `cluster status` ignores --server in either position and reads only SLIPWAY_SERVER.
    const argv = ['env', `SLIPWAY_SERVER=${this.servers()}`, process.execPath, slipwayBin];
    const result = await this.lab.run(ns, [...argv, '-o', 'json', 'cluster', 'status'], cliTimeoutMs);
    const stdout = result.stdout;
    try {
      // The members none of the live nodes' addresses reached (the stopped ones), which a node
      // relays as unreachable, are not rows of live nodes.
      return (JSON.parse(stdout) as { nodes: ClusterStatusRow[] }).nodes.filter(
        (r) => r.health !== 'unreachable',
      );
    } catch {
      return [];
    }
  }

  /**
   * Waits until every live node names the same leader, a live node other than `excluding`, and
   * returns it. Polls `cluster status` from `ns` until the deadline.
   */
  async waitForLeader(ns: string, timeoutMs: number, excluding?: NetnsNode): Promise<NetnsNode> {
    const deadline = Date.now() + timeoutMs;
    let last: ClusterStatusRow[] = [];
    while (Date.now() < deadline) {
      last = await this.status(ns);
      const live = this.nodes.filter((n) => n.running);
      const leaders = new Set(last.map((row) => row.leader));
      const [leaderId] = leaders;
      const agreed = last.length === live.length && leaders.size === 1 && leaderId !== undefined;
      const leader = agreed ? this.nodes.find((n) => n.id === leaderId && n.running) : undefined;
      if (leader !== undefined && leader !== excluding) return leader;
      await new Promise((resolve) => setTimeout(resolve, leaderPollMs));
    }
    throw new Error(`no agreed leader within ${timeoutMs} ms; last status: ${JSON.stringify(last)}`);
  }

  /**
   * Waits until the cluster runs at state version `version`: its leader raises the version
   * within a round or two of every voter running this build, and until then the commands the
   * version gates (workflow create among them) are refused.
   */
  async waitForClusterVersion(ns: string, version: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      const r = await this.slipway(ns, ['-o', 'json', 'cluster', 'version']);
      last = r.stdout + r.stderr;
      if (
        r.code === 0 &&
        ((JSON.parse(r.stdout) as { clusterVersion?: number }).clusterVersion ?? 0) >= version
      )
        return;
      await new Promise((resolve) => setTimeout(resolve, leaderPollMs));
    }
    throw new Error(
      `the cluster did not reach version ${String(version)} within ${String(timeoutMs)} ms: ${last}`,
    );
  }

  /** SIGKILL `node` (no leadership hand-over; or SIGTERM, with one) and resolve once it has exited. */
  async kill(node: NetnsNode, signal: 'SIGKILL' | 'SIGTERM' = 'SIGKILL'): Promise<void> {
    if (!node.running) return;
    node.process.child.kill(signal);
    await node.process.exited;
  }

  /** The live nodes other than `leader`. */
  followersOf(leader: NetnsNode): NetnsNode[] {
    return this.nodes.filter((n) => n.running && n !== leader);
  }
}

function serving(node: NetnsNode): Promise<string> {
  return node.process.waitForOutput(
    (output) => output.includes('"msg":"node serving"'),
    nodeReadyTimeoutMs,
    `node ${node.id} serving`,
  );
}

// ---------------------------------------------------------------------------------------------
// The DHCP offer probe

/** One DHCPOFFER the probe heard. */
export interface HeardOffer {
  readonly serverId: string;
  readonly yiaddr: string;
  readonly from: string;
}

export interface OfferProbe {
  /** The probe's namespace, where nothing else listens on port 68. */
  readonly ns: string;
  /** The probe's interface there, with an IPv4 address on the segment. */
  readonly ifname: string;
  /** The chaddr of the DISCOVER. */
  readonly mac: string;
  /** How long to wait for a first offer. */
  readonly firstOfferTimeoutMs: number;
  /** After the first offer, how long to keep listening for more: offers from other servers. */
  readonly listenMs: number;
}

/**
 * Broadcasts one DHCPDISCOVER for `mac` (broadcast flag set, so every answer is broadcast too)
 * from `ns` and returns every DHCPOFFER with that transaction id heard until `listenMs` after
 * the first. A DHCP client accepts one offer and says nothing of the others; this counts them.
 */
export async function collectOffers(lab: NetnsLab, probe: OfferProbe): Promise<HeardOffer[]> {
  const argv = [process.execPath, '--import', 'tsx', thisScript, 'offers', probe.ifname, probe.mac];
  const timeoutMs = probe.firstOfferTimeoutMs + probe.listenMs + cliTimeoutMs;
  const result = await lab.run(
    probe.ns,
    [...argv, String(probe.firstOfferTimeoutMs), String(probe.listenMs)],
    timeoutMs,
  );
  if (result.code !== 0)
    throw new Error(`offer probe exited ${result.code ?? result.signal}: ${result.stderr}`);
  return result.stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as HeardOffer);
}

/** The probe itself, inside the namespace: prints one JSON line per offer heard. */
async function probeOffers(
  ifname: string,
  mac: string,
  firstOfferTimeoutMs: number,
  listenMs: number,
): Promise<void> {
  const xid = randomInt(1, 0x7fff_ffff);
  const discover = encodeDhcpPacket(
    clientPacket('DISCOVER', mac, { parameterRequestList: [1, 3, 6, 51, 54] }, { xid, flags: 0x8000 }),
  );
  // The server's socket pair serves a client as well: the wildcard socket hears broadcast
  // answers, the one on the interface's address sends the broadcast out of that interface.
  const sockets = await openDhcpSockets({ interfaceName: ifname, port: 68 });
  let firstAtMs: number | undefined;
  sockets.onMessage((message, from) => {
    let packet;
    try {
      packet = decodeDhcpPacket(message);
    } catch {
      return;
    }
    const ours = packet.op === 'reply' && packet.xid === xid && clientHardwareAddress(packet) === mac;
    if (!ours || packet.options.messageType !== 'OFFER') return;
    firstAtMs ??= Date.now();
    const offer: HeardOffer = {
      serverId: packet.options.serverId ?? '',
      yiaddr: packet.yiaddr,
      from: from.address,
    };
    process.stdout.write(`${JSON.stringify(offer)}\n`);
  });
  await new Promise<void>((resolve, reject) =>
    sockets.send(discover, { address: '255.255.255.255', port: 67 }, (error) =>
      error === null ? resolve() : reject(error),
    ),
  );
  const startMs = Date.now();
  // The window after the first offer is the point of the probe: proving no second server answers
  // takes listening for one, bounded.
  await new Promise<void>((resolve) => {
    const check = setInterval(() => {
      const now = Date.now();
      const done =
        firstAtMs === undefined ? now - startMs >= firstOfferTimeoutMs : now - firstAtMs >= listenMs;
      if (done) {
        clearInterval(check);
        resolve();
      }
    }, 50);
  });
  await sockets.close();
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [command, ifname, mac, firstOfferTimeoutMs, listenMs] = process.argv.slice(2);
  if (command !== 'offers' || ifname === undefined || mac === undefined) {
    console.error(
      'usage: node --import tsx test/support/netns-cluster.ts offers IFNAME MAC FIRST_MS LISTEN_MS',
    );
    process.exitCode = 2;
  } else {
    await probeOffers(ifname, mac, Number(firstOfferTimeoutMs ?? 5000), Number(listenMs ?? 2000));
  }
}

// The network-namespace lab: private Ethernet segments on this machine for boot services and
// real clients (udhcpc, dhclient, dhcrelay, perfdhcp, QEMU). Nothing in a lab can reach
// outside it: namespaces start with only a loopback, and the lab adds bridges, veth pairs and
// taps between its own namespaces.
//
// Every lab has a unique id ("slw-" and 6 random hex digits); its namespaces are named
// "<id>-<role>", so parallel runs never collide and a leftover lab can be removed by name
// (`node --import tsx cluster/netns-lab.ts down slw-xxxxxx`). destroy() ends the processes the
// lab started (by PID), then any other process still inside its namespaces (daemons that
// forked), then deletes the namespaces, which takes their interfaces with them.
//
// Needs root (CI and the development machines run as root) and iproute2; radvd for IPv6
// Router Advertisements, without which iPXE stalls ~15 s in IPv6 autoconf (seen under QEMU).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** Lab ids and namespace names start with this, so leftovers are recognisable. */
export const labPrefix = 'slw-';

/** A process gets this long to exit after SIGTERM before SIGKILL. */
const stopGraceMs = 3000;
/** Commands run by `run()` are killed after this unless told otherwise. */
const runTimeoutMsDefault = 30_000;
/** Output kept per process, so a chatty one cannot exhaust memory. */
const outputCharsMax = 1_000_000;

export interface RunResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** One end of a veth pair. */
export interface VethEnd {
  readonly ns: string;
  readonly ifname: string;
  readonly mac?: string;
  /** CIDR addresses, IPv4 or IPv6 ("10.77.1.2/24"). */
  readonly addresses?: readonly string[];
  /** Enslave this end to a bridge in its namespace instead of addressing it. */
  readonly bridge?: string;
}

export interface SpawnOptions {
  /** Extra environment variables. */
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

/** A process the lab started inside one of its namespaces. */
export class LabProcess {
  readonly name: string;
  readonly child: ChildProcess;
  /** Resolves when the process has exited. */
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>;
  #output = '';
  readonly #listeners = new Set<() => void>();

  constructor(name: string, child: ChildProcess) {
    this.name = name;
    this.child = child;
    const collect = (chunk: Buffer): void => {
      this.#output = (this.#output + chunk.toString('utf8')).slice(-outputCharsMax);
      for (const listener of this.#listeners) listener();
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    // A failed spawn ends in 'close' too; without a listener its 'error' would crash the runner.
    child.on('error', (error) => collect(Buffer.from(`\n${name}: ${error.message}\n`)));
    this.exited = new Promise((resolve) => {
      child.once('close', (code, signal) => {
        for (const listener of this.#listeners) listener();
        resolve({ code, signal });
      });
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Everything written to stdout and stderr so far (interleaved, the last megabyte). */
  get output(): string {
    return this.#output;
  }

  /**
   * Waits until `done(output)` holds, re-checking on every output chunk and on exit.
   * Rejects at the deadline, or when the process exits without satisfying it.
   */
  async waitForOutput(done: (output: string) => boolean, timeoutMs: number, what: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const finish = (error?: Error): void => {
        clearTimeout(timer);
        this.#listeners.delete(check);
        if (error === undefined) resolve(this.#output);
        else reject(error);
      };
      const check = (): void => {
        if (done(this.#output)) finish();
        else if (!this.running) finish(new Error(`${this.name} exited before ${what}\n${this.#tail()}`));
      };
      const timer = setTimeout(
        () => finish(new Error(`${this.name}: no ${what} within ${timeoutMs} ms\n${this.#tail()}`)),
        timeoutMs,
      );
      this.#listeners.add(check);
      check();
    });
  }

  /** SIGTERM, then SIGKILL after a grace period; resolves once the process is gone. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), stopGraceMs);
    await this.exited;
    clearTimeout(timer);
  }

  #tail(): string {
    return this.#output.slice(-4000);
  }
}

export class NetnsLab {
  /** "slw-" and 6 hex digits. */
  readonly id: string;
  /** A private temporary directory for configuration and logs; removed by destroy(). */
  readonly dir: string;
  readonly #namespaces: string[] = [];
  readonly #processes: LabProcess[] = [];
  #destroyed = false;

  private constructor(id: string, dir: string) {
    this.id = id;
    this.dir = dir;
  }

  /** A new, empty lab. Fails with a clear message when not root or without iproute2. */
  static async create(): Promise<NetnsLab> {
    if (process.getuid?.() !== 0) throw new Error('the netns lab needs root (ip netns, veth, tap)');
    const id = `${labPrefix}${randomBytes(3).toString('hex')}`;
    const dir = await mkdtemp(path.join(tmpdir(), `${id}-`));
    return new NetnsLab(id, dir);
  }

  get namespaces(): readonly string[] {
    return this.#namespaces;
  }

  /** Creates namespace "<id>-<role>" with its loopback up; returns its name. */
  async addNamespace(role: string): Promise<string> {
    if (!/^[a-z0-9]{1,12}$/.test(role)) throw new Error(`namespace role "${role}": 1-12 of [a-z0-9]`);
    const name = `${this.id}-${role}`;
    await ip(['netns', 'add', name]);
    this.#namespaces.push(name);
    await ip(['-n', name, 'link', 'set', 'lo', 'up']);
    // No duplicate address detection: addresses are usable at once, and the lab assigns them uniquely.
    await this.check(name, [
      'sysctl',
      '-q',
      '-w',
      'net.ipv6.conf.all.accept_dad=0',
      'net.ipv6.conf.default.accept_dad=0',
    ]);
    return name;
  }

  /**
   * A bridge in `ns`, up, with the given CIDR addresses. A spare veth pair on it keeps its
   * carrier up before any client attaches: without carrier the bridge has no IPv6 link-local
   * address and radvd stays silent, which a QEMU tap (no carrier until QEMU opens it) would
   * otherwise cause. (veth, not dummy: the CI kernel may lack the dummy driver.) The bridge
   * floods nothing to that port, or the spare end would hand every broadcast to this
   * namespace's sockets a second time.
   * The bridge's MAC is set, not left to the kernel: an unset one follows the lowest MAC among
   * its ports, so a tap joining later (a machine, random MAC) changed it, and every neighbour
   * that had the bridge's addresses cached sent its frames to the old MAC, which the bridge
   * drops as another host's, until the entry went stale and was probed out (up to a minute).
   * A BMC on the bridge's address stayed silent that long after the next machine's tap came.
   */
  async addBridge(ns: string, name: string, addresses: readonly string[] = []): Promise<void> {
    await ip(['-n', ns, 'link', 'add', name, 'address', bridgeMac(ns, name), 'type', 'bridge']);
    await this.#address(ns, name, addresses);
    await ip(['-n', ns, 'link', 'set', name, 'up']);
    const port = `${name.slice(0, 10)}-c0`;
    const spare = `${name.slice(0, 10)}-c1`;
    await ip(['-n', ns, 'link', 'add', port, 'type', 'veth', 'peer', 'name', spare]);
    await ip(['-n', ns, 'link', 'set', port, 'master', name]);
    await ip(['-n', ns, 'link', 'set', port, 'type', 'bridge_slave', 'learning', 'off', 'flood', 'off']);
    await ip([
      '-n',
      ns,
      'link',
      'set',
      port,
      'type',
      'bridge_slave',
      'mcast_flood',
      'off',
      'bcast_flood',
      'off',
    ]);
    await ip(['-n', ns, 'link', 'set', port, 'up']);
    await ip(['-n', ns, 'link', 'set', spare, 'up']);
  }

  /** A veth pair between two namespaces (or within one), both ends up. */
  async connect(a: VethEnd, b: VethEnd): Promise<void> {
    const end = (v: VethEnd): string[] => [
      v.ifname,
      'netns',
      v.ns,
      ...(v.mac === undefined ? [] : ['address', v.mac]),
    ];
    await ip(['link', 'add', ...end(a), 'type', 'veth', 'peer', 'name', ...end(b)]);
    for (const v of [a, b]) {
      if (v.bridge !== undefined) await ip(['-n', v.ns, 'link', 'set', v.ifname, 'master', v.bridge]);
      await this.#address(v.ns, v.ifname, v.addresses ?? []);
      await ip(['-n', v.ns, 'link', 'set', v.ifname, 'up']);
    }
  }

  /**
   * One LAN: namespace "lan" with bridge br0, and a namespace per role with a veth named eth0 on
   * br0 (its peer in lan is p-ROLE). Returns the namespaces by role, "lan" included.
   */
  async addLan<R extends string>(
    ends: Readonly<Record<R, Omit<VethEnd, 'ns' | 'ifname' | 'bridge'>>>,
  ): Promise<Record<R | 'lan', string>> {
    const lan = await this.addNamespace('lan');
    await this.addBridge(lan, 'br0');
    // Filled in below, one role at a time.
    const namespaces = { lan } as Record<R | 'lan', string>;
    for (const role of Object.keys(ends) as R[]) {
      const ns = await this.addNamespace(role);
      namespaces[role] = ns;
      await this.connect(
        { ns: lan, ifname: `p-${role}`, bridge: 'br0' },
        { ...ends[role], ns, ifname: 'eth0' },
      );
    }
    return namespaces;
  }

  /** A tap device on a bridge, for QEMU's `-netdev tap,ifname=NAME,script=no`. */
  async addTap(ns: string, name: string, bridge: string): Promise<void> {
    await ip(['-n', ns, 'tuntap', 'add', 'dev', name, 'mode', 'tap']);
    await ip(['-n', ns, 'link', 'set', name, 'master', bridge]);
    await ip(['-n', ns, 'link', 'set', name, 'up']);
  }

  async addRoute(ns: string, destination: string, via: string): Promise<void> {
    await ip(['-n', ns, 'route', 'add', destination, 'via', via]);
  }

  /**
   * IPv6 Router Advertisements for `prefix` (e.g. "fd77:1::/64") on `ifname`, from radvd. It
   * answers Router Solicitations at once, which is what lets iPXE finish IPv6 autoconf
   * instead of waiting it out. Resolves once radvd has started advertising.
   */
  async advertiseIpv6(ns: string, ifname: string, prefix: string): Promise<LabProcess> {
    // radvd only advertises on a router; forwarding is per namespace, so this touches nothing else.
    await this.run(ns, ['sysctl', '-q', '-w', 'net.ipv6.conf.all.forwarding=1']);
    const config = path.join(this.dir, `radvd-${ns}-${ifname}.conf`);
    await writeFile(
      config,
      [
        `interface ${ifname} {`,
        '  AdvSendAdvert on;',
        '  MinRtrAdvInterval 3;',
        '  MaxRtrAdvInterval 4;',
        `  prefix ${prefix} { AdvOnLink on; AdvAutonomous on; };`,
        '};',
        '',
      ].join('\n'),
    );
    const pidFile = path.join(this.dir, `radvd-${ns}-${ifname}.pid`);
    // Debug level 3 logs what radvd does. Debian 12's radvd (2.19) hears its own first
    // advertisement: proof that it is sending. Debian 13's (2.20) logs no such line, and sends
    // nothing while the interface has no carrier (a bridge whose only port is a VM's tap not yet
    // opened): it says so, and advertises within MaxRtrAdvInterval once the link is up; a ready
    // interface shows as its advertisement timer firing.
    const radvd = this.spawn(ns, [
      'radvd',
      '--nodaemon',
      '-C',
      config,
      '-p',
      pidFile,
      '-m',
      'stderr',
      '-d',
      '3',
    ]);
    await radvd.waitForOutput(
      (output) =>
        /received RA from: \S+ \(myself\)/.test(output) ||
        output.includes(`not sending RA for ${ifname}, interface is not ready`) ||
        output.includes(`timer_handler called for ${ifname}`),
      10_000,
      'a first RA, or radvd waiting for the link',
    );
    return radvd;
  }

  /** Starts `argv` inside `ns`; the lab stops it on destroy(). */
  spawn(ns: string, argv: readonly string[], options: SpawnOptions = {}): LabProcess {
    this.#checkOwn(ns);
    const [command, ...args] = argv;
    if (command === undefined) throw new Error('spawn needs a command');
    // `ip netns exec` execs the command in place, so the child's PID is the command's.
    const child = spawn('ip', ['netns', 'exec', ns, command, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...options.env },
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    });
    const started = new LabProcess(`${path.basename(command)}@${ns}`, child);
    this.#processes.push(started);
    return started;
  }

  /** Runs `argv` inside `ns` to completion (killed at the timeout) and returns its result. */
  async run(ns: string, argv: readonly string[], timeoutMs = runTimeoutMsDefault): Promise<RunResult> {
    const started = this.spawn(ns, argv);
    const timer = setTimeout(() => started.child.kill('SIGKILL'), timeoutMs);
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    started.child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
    started.child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
    const { code, signal } = await started.exited;
    clearTimeout(timer);
    return {
      code,
      signal,
      stdout: Buffer.concat(stdout).toString('utf8'),
      stderr: Buffer.concat(stderr).toString('utf8'),
    };
  }

  /** Like run(), but throws with the output when the command fails. */
  async check(ns: string, argv: readonly string[], timeoutMs = runTimeoutMsDefault): Promise<string> {
    const result = await this.run(ns, argv, timeoutMs);
    if (result.code !== 0) {
      throw new Error(
        `${argv.join(' ')} in ${ns} failed (${result.code ?? result.signal}):\n${result.stdout}${result.stderr}`,
      );
    }
    return result.stdout;
  }

  /** Stops every process, deletes every namespace and the lab's directory. Safe to call twice. */
  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    await Promise.all(this.#processes.map((started) => started.stop()));
    await removeNamespaces(this.#namespaces);
    await rm(this.dir, { recursive: true, force: true });
  }

  async #address(ns: string, ifname: string, addresses: readonly string[]): Promise<void> {
    for (const address of addresses) {
      const ipv6 = address.includes(':');
      await ip(['-n', ns, 'addr', 'add', address, 'dev', ifname, ...(ipv6 ? ['nodad'] : [])]);
    }
  }

  #checkOwn(ns: string): void {
    if (this.#destroyed) throw new Error(`lab ${this.id} is destroyed`);
    if (!this.#namespaces.includes(ns)) throw new Error(`${ns} is not a namespace of lab ${this.id}`);
  }
}

/** Kills whatever still runs inside the namespaces (all started by the lab), then deletes them. */
async function removeNamespaces(namespaces: readonly string[]): Promise<void> {
  for (const ns of namespaces) {
    const pids = (await ipMaybe(['netns', 'pids', ns])).split(/\s+/).filter((pid) => /^\d+$/.test(pid));
    for (const pid of pids) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    await ipMaybe(['netns', 'del', ns]);
  }
}

/** Removes what is left of the lab `id` (a run that was killed): its processes and namespaces. */
export async function removeLab(id: string): Promise<string[]> {
  const namespaces = await labNamespaces(id);
  await removeNamespaces(namespaces);
  return namespaces;
}

/** Namespaces of the lab `id` that exist now (for removing a lab left by a killed run). */
export async function labNamespaces(id: string): Promise<string[]> {
  if (!new RegExp(`^${labPrefix}[0-9a-f]{6}$`).test(id)) throw new Error(`"${id}" is not a lab id`);
  const listing = await ipMaybe(['netns', 'list']);
  return listing
    .split('\n')
    .map((line) => line.split(' ')[0] ?? '')
    .filter((name) => name.startsWith(`${id}-`));
}

function ip(args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('ip', args, { timeout: 10_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`ip ${args.join(' ')}: ${stderr.trim() || error.message}`));
      else resolve(stdout);
    });
  });
}

/** ip, with failures (already deleted, no such namespace) read as empty output. */
async function ipMaybe(args: readonly string[]): Promise<string> {
  try {
    return await ip(args);
  } catch {
    return '';
  }
}

async function main(argv: readonly string[]): Promise<void> {
  const [command, id] = argv;
  if (command === 'down' && id !== undefined) {
    const namespaces = await labNamespaces(id);
    await removeNamespaces(namespaces);
    console.log(namespaces.length === 0 ? `no namespaces of ${id}` : `removed ${namespaces.join(' ')}`);
    return;
  }
  console.error('usage: node --import tsx cluster/netns-lab.ts down slw-xxxxxx');
  process.exitCode = 2;
}

/** A locally administered unicast MAC, fixed by the bridge's namespace and name. */
function bridgeMac(ns: string, name: string): string {
  const bytes = createHash('sha256').update(`${ns}/${name}`).digest().subarray(0, 5);
  return ['02', ...[...bytes].map((b) => b.toString(16).padStart(2, '0'))].join(':');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main(process.argv.slice(2)).catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exitCode = 2;
  });
}

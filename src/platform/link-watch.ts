// The host's network interfaces as the kernel has them: name, ifindex, admin state, carrier and
// IPv4 addresses, for every interface, with or without carrier. os.networkInterfaces() (libuv)
// lists only interfaces that are up and RUNNING, so an interface whose link is down vanishes
// from it together with its addresses; a boot service waiting for its interface must see it.
//
// Event-driven: a child `ip -o monitor link address` (iproute2) prints a line on every link or
// address change, and each line (coalesced) triggers a re-read with `ip -j addr show`; a slow
// periodic re-read is the safety net should the monitor die or miss something. A listener is
// told the whole table after every change, so it never has to apply deltas.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { Socket } from 'node:net';
import type { Logger } from 'pino';
import { findExecutable } from './executable.js';

/** One IPv4 address on an interface; the primary address comes first. */
export interface LinkAddress {
  readonly address: string;
  readonly prefix: number;
}

/** One interface as last read. */
export interface LinkState {
  readonly name: string;
  /** The kernel's ifindex: a new one means the interface was deleted and created again. */
  readonly index: number;
  /** Set up by the administrator (`ip link set NAME up`). */
  readonly adminUp: boolean;
  /** The link has carrier (LOWER_UP): a cable, a peer, a port on a bridge that is up. */
  readonly carrier: boolean;
  readonly ipv4: readonly LinkAddress[];
}

/** Every interface by name. */
export type LinkTable = ReadonlyMap<string, LinkState>;

/**
 * This host's IPv4 addresses, for a server that binds one socket per local address (TFTP).
 * The listener is called at once with the current addresses, then after every change.
 */
export interface AddressFeed {
  subscribe(listener: (ipv4: readonly string[]) => void): () => void;
}

/** Where the link table comes from: the watcher, or a fixed table in a unit test. */
export interface LinkSource {
  /** Calls `listener` at once with the table, then after every change; returns the unsubscribe. */
  subscribe(listener: (links: LinkTable) => void): () => void;
}

export interface LinkWatchOptions {
  readonly logger?: Logger;
  /** Watch this network namespace (`ip -n NAME`) instead of the process's own. */
  readonly namespace?: string;
  /** The safety-net re-read; default 5 s. */
  readonly rereadMs?: number;
}

/** The safety-net re-read when no event comes. */
const rereadMsDefault = 5000;
const readTimeoutMs = 5000;
/** A monitor that died is started again after this, doubling up to the maximum. */
const monitorRestartMs = { first: 250, max: 10_000 };

/** Parses `ip -j addr show` into the table; entries it does not understand are skipped. */
export function parseLinkTable(json: string): Map<string, LinkState> {
  const parsed: unknown = JSON.parse(json);
  const table = new Map<string, LinkState>();
  if (!Array.isArray(parsed)) return table;
  for (const entry of parsed as unknown[]) {
    const link = linkOf(entry);
    if (link !== undefined) table.set(link.name, link);
  }
  return table;
}

function linkOf(entry: unknown): LinkState | undefined {
  if (typeof entry !== 'object' || entry === null) return undefined;
  const e = entry as Record<string, unknown>;
  const name = e['ifname'];
  const index = e['ifindex'];
  if (typeof name !== 'string' || typeof index !== 'number') return undefined;
  const flags = Array.isArray(e['flags']) ? (e['flags'] as unknown[]) : [];
  const infos = Array.isArray(e['addr_info']) ? (e['addr_info'] as unknown[]) : [];
  const ipv4: LinkAddress[] = [];
  for (const info of infos) {
    if (typeof info !== 'object' || info === null) continue;
    const a = info as Record<string, unknown>;
    if (a['family'] !== 'inet' || typeof a['local'] !== 'string' || typeof a['prefixlen'] !== 'number')
      continue;
    ipv4.push({ address: a['local'], prefix: a['prefixlen'] });
  }
  return { name, index, adminUp: flags.includes('UP'), carrier: flags.includes('LOWER_UP'), ipv4 };
}

/** Whether two tables say the same. */
export function sameLinks(a: LinkTable, b: LinkTable): boolean {
  if (a.size !== b.size) return false;
  for (const [name, x] of a) {
    const y = b.get(name);
    if (y === undefined || !sameLink(x, y)) return false;
  }
  return true;
}

function sameLink(x: LinkState, y: LinkState): boolean {
  return (
    x.index === y.index &&
    x.adminUp === y.adminUp &&
    x.carrier === y.carrier &&
    x.ipv4.length === y.ipv4.length &&
    x.ipv4.every((a, i) => a.address === y.ipv4[i]?.address && a.prefix === y.ipv4[i]?.prefix)
  );
}

/** Every IPv4 address in the table, sorted, each once. */
export function ipv4Addresses(table: LinkTable): string[] {
  const all = new Set<string>();
  for (const link of table.values()) for (const a of link.ipv4) all.add(a.address);
  return [...all].sort();
}

export class LinkWatcher implements LinkSource {
  readonly #ip: string;
  readonly #setpriv = findExecutable('setpriv', ['/usr/bin/setpriv', '/bin/setpriv']);
  readonly #nsArgs: readonly string[];
  readonly #logger: Logger | undefined;
  readonly #listeners = new Set<(links: LinkTable) => void>();
  #links: LinkTable = new Map();
  #monitor: ChildProcess | undefined;
  #monitorRestartMs = monitorRestartMs.first;
  #restartTimer: NodeJS.Timeout | undefined;
  #reread: NodeJS.Timeout | undefined;
  #reading: Promise<void> | undefined;
  #readAgain = false;
  /** The last read failure, logged once until a read succeeds. */
  #readFailure: string | undefined;
  #closed = false;

  private constructor(ip: string, o: LinkWatchOptions) {
    this.#ip = ip;
    this.#nsArgs = o.namespace === undefined ? [] : ['-n', o.namespace];
    this.#logger = o.logger?.child({ component: 'link-watch' });
  }

  /**
   * Starts watching; resolves once the first read is in. Throws when `ip` is missing or the
   * first read fails (no such namespace), since nothing could then be watched.
   */
  static async start(o: LinkWatchOptions = {}): Promise<LinkWatcher> {
    const ip = findExecutable('ip', ['/usr/sbin/ip', '/sbin/ip', '/usr/bin/ip', '/bin/ip']);
    if (ip === undefined)
      throw new Error('watching network interfaces needs the `ip` command (apt-get install iproute2)');
    const watcher = new LinkWatcher(ip, o);
    // The monitor first: a change between the first read and the monitor's start is not lost.
    watcher.#startMonitor();
    try {
      watcher.#links = await watcher.#readTable();
    } catch (err) {
      watcher.close();
      throw err;
    }
    watcher.#reread = setInterval(() => void watcher.refresh(), o.rereadMs ?? rereadMsDefault);
    watcher.#reread.unref();
    return watcher;
  }

  /** Every interface as last read. */
  get links(): LinkTable {
    return this.#links;
  }

  link(name: string): LinkState | undefined {
    return this.#links.get(name);
  }

  /** Calls `listener` at once with the table, then after every change; returns the unsubscribe. */
  subscribe(listener: (links: LinkTable) => void): () => void {
    this.#listeners.add(listener);
    listener(this.#links);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** Reads the table again now (coalesced with a read under way); resolves once it is in. */
  refresh(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (this.#reading !== undefined) {
      this.#readAgain = true;
      return this.#reading;
    }
    this.#reading = this.#readLoop().finally(() => {
      this.#reading = undefined;
    });
    return this.#reading;
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#reread);
    clearTimeout(this.#restartTimer);
    this.#monitor?.kill();
    this.#monitor = undefined;
    this.#listeners.clear();
  }

  async #readLoop(): Promise<void> {
    do {
      this.#readAgain = false;
      try {
        const table = await this.#readTable();
        if (this.#readFailure !== undefined) this.#logger?.info('interfaces readable again');
        this.#readFailure = undefined;
        if (!this.#closed && !sameLinks(table, this.#links)) {
          this.#links = table;
          for (const listener of [...this.#listeners]) listener(table);
        }
      } catch (err) {
        const message = (err as Error).message;
        if (this.#readFailure !== message)
          this.#logger?.warn({ err: message }, 'cannot read the network interfaces; keeping the last read');
        this.#readFailure = message;
      }
    } while (this.#readAgain && !this.#closed);
  }

  #readTable(): Promise<Map<string, LinkState>> {
    return new Promise((resolve, reject) => {
      execFile(
        this.#ip,
        [...this.#nsArgs, '-j', 'addr', 'show'],
        { timeout: readTimeoutMs, maxBuffer: 16 * 1024 * 1024 },
        (error, stdout, stderr) => {
          if (error !== null) {
            reject(new Error(`ip -j addr show: ${stderr.trim() || error.message}`));
            return;
          }
          try {
            resolve(parseLinkTable(stdout));
          } catch (err) {
            reject(new Error(`ip -j addr show printed what is not JSON: ${(err as Error).message}`));
          }
        },
      );
    });
  }

  /**
   * `ip -o monitor link address`: one line per change, each a cue to read the table again. Under
   * util-linux's setpriv, the kernel kills it when this process dies (even by SIGKILL), so no
   * monitor outlives its node.
   */
  #startMonitor(): void {
    const monitor = [this.#ip, ...this.#nsArgs, '-o', 'monitor', 'link', 'address'];
    const argv = this.#setpriv === undefined ? monitor : [this.#setpriv, '--pdeathsig', 'KILL', ...monitor];
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'ignore'] });
    this.#monitor = child;
    // The watcher's owner decides when the process ends, not the monitor.
    child.unref();
    const stdout: unknown = child.stdout;
    if (stdout instanceof Socket) stdout.unref();
    child.stdout.on('data', () => {
      this.#monitorRestartMs = monitorRestartMs.first;
      void this.refresh();
    });
    child.on('error', () => {
      // Reported through 'close' below.
    });
    child.on('close', (code, signal) => {
      if (this.#closed || this.#monitor !== child) return;
      this.#monitor = undefined;
      this.#logger?.warn(
        { code, signal, restartMs: this.#monitorRestartMs },
        'ip monitor ended; reading the interfaces periodically until it runs again',
      );
      this.#restartTimer = setTimeout(() => {
        this.#restartTimer = undefined;
        if (this.#closed) return;
        this.#startMonitor();
        void this.refresh();
      }, this.#monitorRestartMs);
      this.#restartTimer.unref();
      this.#monitorRestartMs = Math.min(this.#monitorRestartMs * 2, monitorRestartMs.max);
    });
  }
}

/** The watcher's IPv4 addresses as an AddressFeed: told again only when the set changes. */
export function addressFeedOf(watcher: LinkWatcher): AddressFeed {
  return {
    subscribe(listener) {
      let last: string | undefined;
      return watcher.subscribe((links) => {
        const ipv4 = ipv4Addresses(links);
        const key = ipv4.join(',');
        if (key === last) return;
        last = key;
        listener(ipv4);
      });
    },
  };
}

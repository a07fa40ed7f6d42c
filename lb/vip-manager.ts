// Holds the VIP on one interface while `shouldHold()` is true (the node is the leader with a live
// quorum): `ip addr add VIP/32 dev IFACE`, then gratuitous ARP with iputils' `arping -U`;
// `ip addr del` as soon as it is false, and when the node stops. Every round re-reads the
// interface, so an address removed or added behind the node's back is put right, and a VIP left
// behind by a node that was SIGKILLed is removed when it starts again as a follower.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import type { Logger } from 'pino';
import { findExecutable } from '../src/platform/executable.js';
import type { VipAction } from './vip-holder.js';
import { VipHolder } from './vip-holder.js';

const roundMsDefault = 100;
const commandTimeoutMs = 5000;
/** While the interface has no carrier, `ip` is asked at most this often. */
const ipQueryEveryMs = 1000;

export interface VipManagerOptions {
  readonly vip: string;
  readonly iface: string;
  readonly shouldHold: () => boolean;
  readonly logger: Logger;
  /** How often the interface is looked at; default 100 ms. */
  readonly roundMs?: number;
  readonly holder?: VipHolder;
}

/** The host cannot hold the VIP as configured: no such interface, or no `ip` command. */
export class VipError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VipError';
  }
}

export class VipManager {
  readonly vip: string;
  readonly iface: string;
  readonly #ip: string;
  readonly #arping: string | undefined;
  readonly #shouldHold: () => boolean;
  readonly #logger: Logger;
  readonly #roundMs: number;
  readonly #holder: VipHolder;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> = Promise.resolve();
  readonly #announcing = new Set<Promise<void>>();
  /** Failures in a row, logged once as a warning and then at debug until one succeeds. */
  #failures = 0;
  #stopped = false;
  /** The VIP as last seen on the interface (ADDRESS/PREFIX). */
  #cidr: string | undefined;
  /** When `ip` was last asked (the interface had no carrier), ms since the epoch. */
  #askedIpAt = 0;

  /** Checks the host (the interface, `ip`); throws VipError naming what is missing. Starts nothing. */
  constructor(o: VipManagerOptions) {
    if (!existsSync(`/sys/class/net/${o.iface}`))
      throw new VipError(`--vip-interface ${o.iface}: no such network interface (see \`ip link\`)`);
    const ip = findExecutable('ip', ['/usr/sbin/ip', '/sbin/ip', '/usr/bin/ip', '/bin/ip']);
    if (ip === undefined)
      throw new VipError('--vip-interface needs the `ip` command (apt-get install iproute2)');
    this.vip = o.vip;
    this.iface = o.iface;
    this.#ip = ip;
    this.#arping = findExecutable('arping', ['/usr/sbin/arping', '/usr/bin/arping']);
    this.#shouldHold = o.shouldHold;
    this.#logger = o.logger.child({ subsystem: 'vip', vip: o.vip, iface: o.iface });
    this.#roundMs = o.roundMs ?? roundMsDefault;
    this.#holder = o.holder ?? new VipHolder();
  }

  /** Whether the interface had the VIP when last looked at (every round). */
  get held(): boolean {
    return this.#cidr !== undefined;
  }

  start(): void {
    if (this.#arping === undefined) {
      this.#logger.warn(
        'arping is not installed (apt-get install iputils-arping): when the VIP moves here, neighbours ' +
          'learn it only as their ARP entries for it expire',
      );
    }
    let busy = false;
    const round = (): void => {
      // A slow `ip` (up to its 5 s timeout) must not queue up rounds behind it.
      if (busy) return;
      busy = true;
      this.#round = this.#reconcile()
        .catch((err: unknown) => this.#logger.error({ err }, 'VIP round failed'))
        .finally(() => {
          busy = false;
        });
    };
    round();
    this.#timer = setInterval(round, this.#roundMs);
  }

  /** Stops looking and lets the VIP go, whatever shouldHold says. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#round;
    await Promise.all(this.#announcing);
    if ((await this.#observe(true)) !== undefined) await this.#run('delete');
  }

  async #reconcile(): Promise<void> {
    if (this.#stopped) return;
    const present = (await this.#observe()) !== undefined;
    const actions = this.#holder.step(Date.now(), this.#shouldHold(), present);
    for (const action of actions) {
      const ok = await this.#run(action);
      if (!ok) {
        if (action === 'add') this.#holder.addFailed(Date.now());
        break;
      }
    }
  }

  /** Runs one action; resolves to whether it worked. An announcement runs in the background. */
  async #run(action: VipAction): Promise<boolean> {
    switch (action) {
      case 'add':
        return this.#ipAddr(
          ['add', `${this.vip}/32`, 'dev', this.iface],
          'took the VIP',
          /File exists|Address already assigned/,
        );
      case 'delete': {
        const cidr = this.#cidr ?? `${this.vip}/32`;
        const ok = await this.#ipAddr(
          ['del', cidr, 'dev', this.iface],
          'let the VIP go',
          /Cannot assign requested address/,
        );
        return ok;
      }
      case 'announce': {
        if (this.#arping === undefined) return true;
        const sent = this.#command(this.#arping, ['-U', '-c', '1', '-I', this.iface, this.vip]).then(
          () => this.#logger.debug('announced the VIP (gratuitous ARP)'),
          (err: unknown) => this.#logger.warn({ err }, 'gratuitous ARP for the VIP failed'),
        );
        this.#announcing.add(sent);
        void sent.finally(() => this.#announcing.delete(sent));
        return true;
      }
      default: {
        const unknown: never = action;
        throw new Error(`unknown VIP action ${String(unknown)}`);
      }
    }
  }

  /** `ip addr ...`; an error matching `alreadyDone` (the address is already there, or gone) is success. */
  async #ipAddr(args: readonly string[], done: string, alreadyDone: RegExp): Promise<boolean> {
    try {
      await this.#command(this.#ip, ['addr', ...args]);
    } catch (err) {
      if (!alreadyDone.test((err as Error).message)) {
        this.#failures++;
        const level = this.#failures === 1 ? 'warn' : 'debug';
        this.#logger[level]({ err, failures: this.#failures }, `ip addr ${args[0] ?? ''} for the VIP failed`);
        return false;
      }
    }
    this.#failures = 0;
    this.#logger.info(done);
    return true;
  }

  /** Runs a command; resolves to its standard output. */
  #command(file: string, args: readonly string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(file, args, { timeout: commandTimeoutMs }, (err, stdout, stderr) => {
        if (err === null) resolve(stdout);
        else reject(new Error(`${file} ${args.join(' ')}: ${stderr.trim() || err.message}`));
      });
    });
  }

  /**
   * Looks at the interface: the VIP as configured there (ADDRESS/PREFIX), or undefined. While
   * the interface is up and running os.networkInterfaces() lists all its addresses at no cost;
   * it leaves out an interface without carrier altogether (libuv skips it), and a leader cut off
   * by a dead link is exactly the one that must find and drop its VIP, so then `ip` is asked.
   */
  async #observe(force = false): Promise<string | undefined> {
    const listed = networkInterfaces()[this.iface];
    if (listed !== undefined) {
      this.#cidr = listed.find((a) => a.family === 'IPv4' && a.address === this.vip)?.cidr ?? undefined;
      return this.#cidr;
    }
    // Forking `ip` every round while a link stays down would cost a few percent of a core.
    const now = Date.now();
    if (!force && now - this.#askedIpAt < ipQueryEveryMs) return this.#cidr;
    this.#askedIpAt = now;
    try {
      const out = await this.#command(this.#ip, ['-j', '-4', 'addr', 'show', 'dev', this.iface]);
      this.#cidr = vipCidrIn(out, this.vip);
    } catch (err) {
      // The interface is gone: so is every address it had.
      this.#logger.debug({ err }, 'cannot list the interface addresses');
      this.#cidr = undefined;
    }
    return this.#cidr;
  }
}

/** The VIP's ADDRESS/PREFIX in `ip -j addr show` output, or undefined. */
export function vipCidrIn(ipJson: string, vip: string): string | undefined {
  const links = JSON.parse(ipJson) as { addr_info?: { local?: string; prefixlen?: number }[] }[];
  for (const link of links) {
    const found = link.addr_info?.find((a) => a.local === vip && typeof a.prefixlen === 'number');
    if (found !== undefined) return `${vip}/${String(found.prefixlen)}`;
  }
  return undefined;
}

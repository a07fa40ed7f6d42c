// Holds the VIP on one interface while `shouldHold()` is true (the node is the leader with a live
// quorum): `ip addr add VIP/32 dev IFACE`, then gratuitous ARP with iputils' `arping -U`;
// `ip addr del` as soon as it is false, and when the node stops. What the interface has comes from
// the link watcher (src/platform/link-watch.ts), the one view of the interfaces the boot services
// follow too: every change there (an address removed behind the node's back, the interface renamed,
// deleted and made again, its carrier lost or back) runs a round at once, and a round also runs
// every 100 ms for leadership's changes, which costs no fork. A VIP left behind by a node that was
// SIGKILLed is removed when it starts again as a follower. While the interface is absent nothing is
// tried; it is taken again the moment the interface returns.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Logger } from 'pino';
import { findExecutable } from '../src/platform/executable.js';
import type { LinkSource, LinkTable } from '../src/platform/link-watch.js';
import type { VipAction } from './vip-holder.js';
import { VipHolder } from './vip-holder.js';

const roundMsDefault = 100;
const commandTimeoutMs = 5000;

/** The interfaces as the link watcher has them, and a way to read them again now. */
export interface VipLinks extends LinkSource {
  /** Reads the interfaces again; resolves once the read is in (and listeners told). */
  refresh(): Promise<void>;
}

export interface VipManagerOptions {
  readonly vip: string;
  readonly iface: string;
  readonly shouldHold: () => boolean;
  readonly logger: Logger;
  /** How often shouldHold is asked when no interface changes; default 100 ms. */
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

/** What the link table says of the VIP's interface. */
interface IfaceView {
  /** The interface exists (by name). */
  readonly present: boolean;
  readonly carrier: boolean;
  /** The VIP as configured there (ADDRESS/PREFIX), or undefined. */
  readonly cidr: string | undefined;
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
  #links: VipLinks | undefined;
  #unsubscribe: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> = Promise.resolve();
  #busy = false;
  #again = false;
  readonly #announcing = new Set<Promise<void>>();
  /** Failures in a row, logged once as a warning and then at debug until one succeeds. */
  #failures = 0;
  #stopped = false;
  #view: IfaceView = { present: false, carrier: false, cidr: undefined };

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

  /** Whether the interface had the VIP when last read. */
  get held(): boolean {
    return this.#view.cidr !== undefined;
  }

  /** Follows `links` (the node's link watcher) from now on. */
  start(links: VipLinks): void {
    if (this.#arping === undefined) {
      this.#logger.warn(
        'arping is not installed (apt-get install iputils-arping): when the VIP moves here, neighbours ' +
          'learn it only as their ARP entries for it expire',
      );
    }
    this.#links = links;
    this.#unsubscribe = links.subscribe((table) => {
      this.#see(table);
      this.#kick();
    });
    this.#timer = setInterval(() => this.#kick(), this.#roundMs);
  }

  /** Stops looking and lets the VIP go, whatever shouldHold says. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#round;
    await Promise.all(this.#announcing);
    // As the interface is now, not as last read: a VIP left here would answer for a node gone.
    // Still subscribed, so the read reaches #see (a round it would start does nothing now).
    await this.#links?.refresh();
    this.#unsubscribe?.();
    if (this.#view.cidr !== undefined) await this.#run('delete');
  }

  /** Takes in a new read of the interfaces; a carrier that returns while holding is announced again. */
  #see(table: LinkTable): void {
    const link = table.get(this.iface);
    const found = link?.ipv4.find((a) => a.address === this.vip);
    const view: IfaceView = {
      present: link !== undefined,
      carrier: link?.carrier ?? false,
      cidr: found === undefined ? undefined : `${this.vip}/${String(found.prefix)}`,
    };
    const was = this.#view;
    if (was.present !== view.present)
      this.#logger.info(
        view.present ? 'the VIP interface is here' : 'the VIP interface is gone; waiting for it',
      );
    if (view.present && was.present && was.carrier !== view.carrier)
      this.#logger.info({ carrier: view.carrier }, 'the VIP interface carrier changed');
    if (view.cidr !== undefined && view.carrier && !was.carrier) this.#holder.linkBack(Date.now());
    this.#view = view;
  }

  /** A round now, or right after the one under way: a slow `ip` never queues rounds behind it. */
  #kick(): void {
    if (this.#stopped) return;
    if (this.#busy) {
      this.#again = true;
      return;
    }
    this.#busy = true;
    this.#round = (async () => {
      do {
        this.#again = false;
        await this.#reconcile().catch((err: unknown) => this.#logger.error({ err }, 'VIP round failed'));
      } while (this.#again && !this.#stopped);
    })().finally(() => {
      this.#busy = false;
    });
  }

  async #reconcile(): Promise<void> {
    if (this.#stopped || !this.#view.present) return;
    const actions = this.#holder.step(Date.now(), this.#shouldHold(), this.#view.cidr !== undefined);
    let changed = false;
    for (const action of actions) {
      const ok = await this.#run(action);
      if (!ok) {
        if (action === 'add') this.#holder.addFailed(Date.now());
        break;
      }
      changed ||= action !== 'announce';
    }
    // The next round must see what this one did, not the read from before it.
    if (changed) await this.#links?.refresh();
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
        const cidr = this.#view.cidr ?? `${this.vip}/32`;
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
}

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

  /** Whether the interface has the VIP now. */
  get held(): boolean {
    return this.#presentCidr() !== undefined;
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
    if (this.held) await this.#run('delete');
  }

  async #reconcile(): Promise<void> {
    if (this.#stopped) return;
    const actions = this.#holder.step(Date.now(), this.#shouldHold(), this.held);
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
        return this.#ipAddr(['add', `${this.vip}/32`, 'dev', this.iface], 'took the VIP', /File exists/);
      case 'delete': {
        const cidr = this.#presentCidr() ?? `${this.vip}/32`;
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

  #command(file: string, args: readonly string[]): Promise<void> {
    return new Promise((resolve, reject) => {
      execFile(file, args, { timeout: commandTimeoutMs }, (err, _stdout, stderr) => {
        if (err === null) resolve();
        else reject(new Error(`${file} ${args.join(' ')}: ${stderr.trim() || err.message}`));
      });
    });
  }

  /** The VIP as configured on the interface (ADDRESS/PREFIX), or undefined when it is not there. */
  #presentCidr(): string | undefined {
    const found = networkInterfaces()[this.iface]?.find((a) => a.family === 'IPv4' && a.address === this.vip);
    return found?.cidr ?? undefined;
  }
}

// A boot service that binds when what it needs exists on this host, and keeps it so: it follows
// the link table (src/platform/link-watch.ts), opens the service once `readiness` says the
// interface or address is there, closes it when it goes, opens it again when it comes back or
// changes (a new ifindex, another address), and retries a refused bind with a bounded back-off.
// The service's state (serving / waiting / failed, with the reason) is kept in a
// BootServiceState, which logs each change once.
import type { Logger } from 'pino';
import type { LinkSource, LinkTable } from '../platform/link-watch.js';
import { Backoff, serving, type BootServiceState } from './service-state.js';

/** What readiness says about the table. */
export type Readiness<A> =
  /** Not possible yet: close what is open, wait. */
  | { readonly ready: false; readonly reason: string }
  /**
   * Possible with `arg`; a different `key` than the open service's means open it again. With
   * `degraded`, open (or keep open) but report waiting with that reason (no carrier).
   */
  | { readonly ready: true; readonly key: string; readonly arg: A; readonly degraded?: string };

export interface LinkBoundOptions<T, A> {
  readonly links: LinkSource;
  readonly state: BootServiceState;
  readonly readiness: (links: LinkTable) => Readiness<A>;
  readonly open: (arg: A) => Promise<T>;
  /** Brought in line with the table after each open and change (the DHCP server's VIP socket). */
  readonly sync?: (service: T, links: LinkTable) => Promise<void>;
  readonly logger: Logger;
  readonly backoff?: Backoff;
}

interface Closable {
  close(): Promise<void>;
}

/** EADDRNOTAVAIL: the address is not (yet, or any more) on this host; a wait, not a failure. */
function addressNotHere(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === 'EADDRNOTAVAIL';
}

export class LinkBoundService<T extends Closable, A> {
  readonly #o: LinkBoundOptions<T, A>;
  readonly #backoff: Backoff;
  #links: LinkTable = new Map();
  #service: T | undefined;
  #openKey: string | undefined;
  #unsubscribe: (() => void) | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(o: LinkBoundOptions<T, A>) {
    this.#o = o;
    this.#backoff = o.backoff ?? new Backoff();
  }

  /** The open service, if any. */
  get current(): T | undefined {
    return this.#service;
  }

  /** Follows the table from now on; resolves once the first attempt is done (open or waiting). */
  start(): Promise<void> {
    this.#unsubscribe = this.#o.links.subscribe((links) => {
      this.#links = links;
      this.#kick();
    });
    return this.#running ?? Promise.resolve();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#unsubscribe?.();
    clearTimeout(this.#retry);
    await this.#running;
    const service = this.#service;
    this.#service = undefined;
    await service?.close();
  }

  /** Runs #reconcile, once at a time; a change during a run runs it again after. */
  #kick(): void {
    if (this.#closed) return;
    if (this.#running !== undefined) {
      this.#again = true;
      return;
    }
    this.#running = (async () => {
      do {
        this.#again = false;
        await this.#reconcile();
      } while (this.#again && !this.#closed);
    })().finally(() => {
      this.#running = undefined;
    });
  }

  async #reconcile(): Promise<void> {
    const readiness = this.#o.readiness(this.#links);
    if (!readiness.ready) {
      await this.#closeService();
      this.#o.state.set({ state: 'waiting', reason: readiness.reason });
      return;
    }
    if (this.#service !== undefined && this.#openKey !== readiness.key) await this.#closeService();
    if (this.#service === undefined && !(await this.#open(readiness.key, readiness.arg))) return;
    const service = this.#service;
    if (service !== undefined) await this.#o.sync?.(service, this.#links);
    this.#o.state.set(
      readiness.degraded === undefined ? serving : { state: 'waiting', reason: readiness.degraded },
    );
  }

  /** Opens the service; on a refusal reports why and tries again after the back-off. */
  async #open(key: string, arg: A): Promise<boolean> {
    clearTimeout(this.#retry);
    try {
      const service = await this.#o.open(arg);
      if (this.#closed) {
        await service.close();
        return false;
      }
      this.#service = service;
      this.#openKey = key;
      this.#backoff.reset();
      return true;
    } catch (err) {
      const reason = (err as Error).message;
      this.#o.state.set(addressNotHere(err) ? { state: 'waiting', reason } : { state: 'failed', reason });
      const retryMs = this.#backoff.next();
      this.#o.logger.debug({ service: this.#o.state.name, retryMs, reason }, 'boot service will try again');
      this.#retry = setTimeout(() => this.#kick(), retryMs);
      this.#retry.unref();
      return false;
    }
  }

  async #closeService(): Promise<void> {
    const service = this.#service;
    this.#service = undefined;
    this.#openKey = undefined;
    if (service === undefined) return;
    try {
      await service.close();
    } catch (err) {
      this.#o.logger.warn({ service: this.#o.state.name, err }, 'closing a boot service failed');
    }
  }
}
